/**
 * The public services the conformance kit calls (petstore.swagger.io, httpbin.org), as a stub
 * HTTP server on loopback, and a fetch that sends every request for a public host to it over a
 * real socket (the URL the workflow built stays what it recorded). The petstore also serves its
 * Swagger 2.0 document (the operations the kit's `call: openapi` scenarios use) at
 * /v2/swagger.json.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const pets: Record<string, { id: number; name: string; status: string }> = {
  '1': { id: 1, name: 'milou', status: 'available' },
  '2': { id: 2, name: 'rantanplan', status: 'pending' },
  '3': { id: 3, name: 'idefix', status: 'available' },
};

/** A small Swagger 2.0 petstore: the two operations the kit calls, as the public document declares them. */
export const petstoreSwagger = {
  swagger: '2.0',
  info: { title: 'Swagger Petstore', version: '1.0.7' },
  host: 'petstore.swagger.io',
  basePath: '/v2',
  schemes: ['https', 'http'],
  paths: {
    '/pet/findByStatus': {
      get: {
        operationId: 'findPetsByStatus',
        produces: ['application/json', 'application/xml'],
        parameters: [
          {
            name: 'status',
            in: 'query',
            required: true,
            type: 'array',
            items: { type: 'string', enum: ['available', 'pending', 'sold'], default: 'available' },
            collectionFormat: 'multi',
          },
        ],
        responses: { '200': { description: 'successful operation' }, '400': { description: 'Invalid status value' } },
      },
    },
    '/pet/{petId}': {
      get: {
        operationId: 'getPetById',
        produces: ['application/json', 'application/xml'],
        parameters: [{ name: 'petId', in: 'path', required: true, type: 'integer', format: 'int64' }],
        responses: { '200': { description: 'successful operation' }, '404': { description: 'Pet not found' } },
      },
    },
  },
};

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function route(req: IncomingMessage, res: ServerResponse): void {
  const host = req.headers['x-stubbed-host'];
  const url = new URL(req.url ?? '/', 'http://stub');
  const path = url.pathname;
  if (host === 'petstore.swagger.io' && path === '/v2/swagger.json') return json(res, 200, petstoreSwagger);
  if (host === 'petstore.swagger.io' && path === '/v2/pet/findByStatus') {
    return json(
      res,
      200,
      Object.values(pets).filter((pet) => pet.status === url.searchParams.get('status')),
    );
  }
  const pet = /^\/v2\/pet\/([^/]+)$/.exec(path);
  if (host === 'petstore.swagger.io' && pet) {
    const found = pets[decodeURIComponent(pet[1]!)];
    return found ? json(res, 200, found) : json(res, 404, { code: 1, type: 'error', message: 'Pet not found' });
  }
  const basic = /^\/basic-auth\/([^/]+)\/([^/]+)$/.exec(path);
  if (host === 'httpbin.org' && basic) {
    const expected = `Basic ${Buffer.from(`${decodeURIComponent(basic[1]!)}:${decodeURIComponent(basic[2]!)}`).toString('base64')}`;
    return req.headers.authorization === expected
      ? json(res, 200, { authenticated: true, user: decodeURIComponent(basic[1]!) })
      : json(res, 401, { authenticated: false });
  }
  json(res, 404, { message: `no stub for ${String(host)}${path}` });
}

export interface Stub {
  fetch: typeof fetch;
  requests: string[];
  close(): Promise<void>;
}

export async function startStub(): Promise<Stub> {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${String(req.headers['x-stubbed-host'])}${req.url}`);
    route(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const routed: typeof fetch = (input, init) => {
    const original = new URL(input instanceof Request ? input.url : String(input));
    const target = new URL(`${original.pathname}${original.search}`, `http://127.0.0.1:${port}`);
    const headers = new Headers(init?.headers);
    headers.set('x-stubbed-host', original.hostname);
    return fetch(target, { ...init, headers });
  };
  return {
    fetch: routed,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
