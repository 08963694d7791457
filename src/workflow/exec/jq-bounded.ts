/**
 * jq-wasm with bounds of its own, for the jq worker (jq-worker.ts). Two kinds of memory of a jq
 * evaluation are outside the worker's V8 heap, so its resourceLimits do not bound them:
 *
 * - jq's WebAssembly memory, where it parses the input and builds every value. jq-wasm grows it
 *   on demand up to the 256 MiB its build allows; here a growth past `memoryBytesMax` is refused,
 *   and jq, out of memory, aborts (a trap: the worker is spent). WebAssembly memory never shrinks,
 *   so this is also what a worker keeps after its largest evaluation. jq-wasm grows it by up to a
 *   fifth past what is needed, so it may hold up to 1.2 × the bound, never more than 256 MiB.
 * - jq-wasm's output buffers, which take every byte jq prints (each output, each `debug` or
 *   `stderr` message) in a growing byte array, at tens of MB a second until the deadline. Here
 *   jq's writes to stdout and stderr are taken instead: jq's text of the first output is kept up
 *   to jqTextBytesPerResultByte × `resultBytesMax` (the worker measures its recorded form against
 *   resultBytesMax; jq's later outputs are dropped as they are printed: only the first is
 *   answered), the first `errorBytesMax` bytes of its messages, and nothing else.
 *
 * Both are imports of the WebAssembly module (the C library's write and heap-growth calls), found
 * by their function names in jq-wasm's glue: jq-wasm is pinned (package.json), and a version
 * without them fails at load, before any evaluation.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { loadJq } from 'jq-wasm';

export interface JqBounds {
  /** The most jq's WebAssembly memory may need. */
  memoryBytesMax: number;
  /**
   * The most bytes of the first output's JSON as it is recorded (JSON.stringify of its value).
   * jq's own text of it may be longer (it prints DEL as `\u007f`, six bytes for one, and keeps a
   * number's literal as written): jqTextBytesPerResultByte times as much of it is kept, and the
   * worker measures the recorded form.
   */
  resultBytesMax: number;
  /** The most bytes of jq's messages kept (an error's description). */
  errorBytesMax: number;
}

/** What one run of jq printed and how it ended. */
export type JqOutcome =
  /** The first output's JSON text, undefined when there was none. */
  | { kind: 'output'; text: string | undefined }
  /** jq reported an error (compile or runtime): the evaluation fails, jq-wasm is as it was. */
  | { kind: 'error'; message: string }
  /** jq's text of the first output is longer than resultBytesMax × jqTextBytesPerResultByte. */
  | { kind: 'oversized' };

export interface BoundedJq {
  /**
   * Runs `query` on the JSON text `input`. Throws what jq-wasm throws on a trap (a stack overflow,
   * an abort): jq-wasm is unusable afterwards. `memoryExhausted` then says whether a growth of
   * its memory was refused during the run.
   */
  run(input: string, query: string, flags: string[]): JqOutcome;
  readonly memoryExhausted: boolean;
}

/**
 * How much longer jq's text of a value may be than its JSON.stringify: a string of DEL characters,
 * one byte each recorded and printed by jq as the six of `\u007f`.
 */
export const jqTextBytesPerResultByte = 6;

/** Bytes written to one stream: kept up to `bytesMax`, up to the first newline when `line`. */
class Capture {
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Nothing more is kept: the line ended, or the bound was reached. */
  private done = false;
  /** More was written than bytesMax (before the line's end, when `line`). */
  over = false;

  constructor(
    private readonly bytesMax: number,
    private readonly line: boolean,
  ) {}

  take(data: Uint8Array): void {
    if (this.done) return;
    let end = data.length;
    const newline = this.line ? data.indexOf(10) : -1;
    if (newline !== -1) {
      end = newline;
      this.done = true;
    }
    if (end > this.bytesMax - this.bytes) {
      end = this.bytesMax - this.bytes;
      this.over = true;
      this.done = true;
    }
    if (end > 0) this.chunks.push(Buffer.from(data.subarray(0, end)));
    this.bytes += end;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

type Import = (...args: number[]) => number | boolean;
type Imports = Record<string, Record<string, unknown>>;

/** The parts of the WebAssembly API used here (the type libraries in use declare none). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
interface WasmInstance {
  readonly exports: Record<string, unknown>;
}
const wasm = (
  globalThis as unknown as {
    WebAssembly: {
      compile(bytes: Uint8Array): Promise<object>;
      instantiate(module: object, imports: Imports): Promise<WasmInstance>;
      Memory: abstract new (...args: never[]) => WasmMemory;
    };
  }
).WebAssembly;

/** The import whose glue function is named `name` (its key is minified). */
function importNamed(imports: Imports, name: string): [Record<string, unknown>, string, Import] {
  for (const module of Object.values(imports))
    for (const [key, value] of Object.entries(module)) if (typeof value === 'function' && value.name === name) return [module, key, value as Import];
  throw new Error(`jq-wasm has no import ${name}: its bounds cannot be set (is jq-wasm the pinned version?)`);
}

let compiled: Promise<object> | undefined;
const wasmModule = (): Promise<object> =>
  (compiled ??= readFile(createRequire(import.meta.url).resolve('jq-wasm/jq.wasm')).then((bytes) => wasm.compile(bytes)));

export async function loadBoundedJq(bounds: JqBounds): Promise<BoundedJq> {
  const module = await wasmModule();
  let memory: WasmMemory | undefined;
  const stdoutBytesMax = bounds.resultBytesMax * jqTextBytesPerResultByte;
  let stdout = new Capture(stdoutBytesMax, true);
  let stderr = new Capture(bounds.errorBytesMax, false);
  let exhausted = false;
  let instantiationFailed: (error: unknown) => void = () => undefined;
  const failure = new Promise<never>((_, reject) => (instantiationFailed = reject));
  const loading = loadJq({
    instantiateWasm(imports: Imports, onSuccess: (instance: WasmInstance, module: object) => void) {
      const [heapImports, heapKey, resize] = importNamed(imports, '_emscripten_resize_heap');
      heapImports[heapKey] = (requestedBytes: number) => {
        if (requestedBytes >>> 0 > bounds.memoryBytesMax) return ((exhausted = true), false);
        return resize(requestedBytes);
      };
      const [writeImports, writeKey, write] = importNamed(imports, '_fd_write');
      writeImports[writeKey] = (fd: number, iov: number, iovCount: number, writtenAt: number) => {
        const capture = fd === 1 ? stdout : fd === 2 ? stderr : undefined;
        if (capture === undefined || memory === undefined) return write(fd, iov, iovCount, writtenAt);
        // A writev: iovCount (pointer, length) pairs, and the count written stored at writtenAt.
        const view = new DataView(memory.buffer);
        let written = 0;
        for (let i = 0; i < iovCount; i++) {
          const at = view.getUint32(iov + 8 * i, true);
          const length = view.getUint32(iov + 8 * i + 4, true);
          capture.take(new Uint8Array(memory.buffer, at, length));
          written += length;
        }
        view.setUint32(writtenAt, written, true);
        return 0;
      };
      wasm.instantiate(module, imports).then((instance) => {
        memory = Object.values(instance.exports).find((value): value is WasmMemory => value instanceof wasm.Memory);
        onSuccess(instance, module);
      }, instantiationFailed);
    },
  });
  // jq-wasm settles only through onSuccess: a failed instantiation is raced in.
  const jq = await Promise.race([loading, failure]);
  if (memory === undefined) throw new Error('jq-wasm exports no memory: its bounds cannot be set');
  return {
    get memoryExhausted() {
      return exhausted;
    },
    run(input, query, flags) {
      stdout = new Capture(stdoutBytesMax, true);
      stderr = new Capture(bounds.errorBytesMax, false);
      exhausted = false;
      // jq-wasm's own buffers get nothing (its stdout and stderr are empty): its exit code tells how jq ended.
      const { exitCode } = jq.raw(input, query, ['-c', ...flags]);
      const message = stderr.text().trim() + (stderr.over ? ' …' : '');
      // As jq-wasm's json(): an exit with a message is an error, whatever was printed before it.
      if (exitCode !== 0 && message !== '') return { kind: 'error', message };
      if (stdout.over) return { kind: 'oversized' };
      const text = stdout.text();
      return { kind: 'output', text: text === '' ? undefined : text };
    },
  };
}
