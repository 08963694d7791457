/**
 * A free loopback TCP port, for a server a test starts under a port of its own choosing (a config
 * file written before the server runs). The port is free when asked; a test that loses the race
 * to another process sees its server fail to start, never a shared server.
 */
import { createServer } from 'node:net';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
