/**
 * Runs test/support/crash-child.ts as a separate process the crash test can SIGKILL: from the
 * compiled .js when the test itself runs compiled (dist/), under `node --import tsx` from the .ts
 * otherwise. Parses its JSON-line stdout and keeps the tail of stderr for diagnostics.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ChildEvent {
  event: string;
  t: number;
  [field: string]: unknown;
}

const compiled = import.meta.url.endsWith('.js');
const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (`--import tsx` resolves from here); dist/test/support is one level deeper. */
const root = compiled ? join(here, '..', '..', '..') : join(here, '..', '..');
const stderrKeepBytes = 8192;

export class CrashChild {
  readonly events: ChildEvent[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stderr = '';
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly child: ChildProcess) {
    let partial = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.take(line);
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-stderrKeepBytes);
    });
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => (this.notify(), resolve({ code, signal }))));
  }

  /** Runs `name` (a module of test/support, by default crash-child) with args. */
  static start(args: string[], name = 'crash-child'): CrashChild {
    const entry = join(here, compiled ? `${name}.js` : `${name}.ts`);
    const execArgv = compiled ? [] : ['--import', 'tsx'];
    return new CrashChild(spawn(process.execPath, [...execArgv, entry, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last event of a kind (e.g. the last `progress`). */
  last(kind: string): ChildEvent | undefined {
    return this.events.findLast((e) => e.event === kind);
  }

  /** Resolves with the first event of `kind` (already seen or future); rejects on exit or after timeoutMs. */
  waitFor(kind: string, timeoutMs: number): Promise<ChildEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.find((e) => e.event === kind);
        if (found) return finish(() => resolve(found));
        if (!this.running) finish(() => reject(new Error(`crash child exited before "${kind}"\n${this.diagnostics()}`)));
      };
      const timer = setTimeout(
        () => finish(() => reject(new Error(`no "${kind}" from the crash child within ${timeoutMs} ms\n${this.diagnostics()}`))),
        timeoutMs,
      );
      const finish = (then: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        then();
      };
      this.listeners.add(check);
      check();
    });
  }

  /** SIGKILL: no handler runs, nothing is flushed or closed. */
  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited;
  }

  diagnostics(): string {
    const tail = this.events.slice(-5).map((e) => JSON.stringify(e));
    return `pid ${this.child.pid} exit ${this.child.exitCode ?? this.child.signalCode}\nlast events:\n${tail.join('\n')}\nstderr:\n${this.stderr}`;
  }

  private take(line: string): void {
    if (line.trim() === '') return;
    try {
      this.events.push(JSON.parse(line) as ChildEvent);
    } catch {
      this.stderr = (this.stderr + `[stdout] ${line}\n`).slice(-stderrKeepBytes);
    }
    this.notify();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
