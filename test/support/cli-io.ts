/** A CliIo that keeps what a command writes, for tests that run commands in-process. */
import type { CliIo } from '../../src/cli/io.js';

export function captureIo(extra: Partial<CliIo> = {}): CliIo & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    readStdin: async () => new Uint8Array(),
    out: () => out,
    err: () => err,
    ...extra,
  };
}
