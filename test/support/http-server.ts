/**
 * Starts `convoke serve --config FILE` as a child process and reads the URL it prints.
 *
 * Which CLI: tests compiled into dist/ spawn the compiled CLI (bin/convoke.js → dist/src/cli/main.js)
 * from the same build; tests run from source (node --import tsx) spawn the source CLI through tsx,
 * so a stale dist/ is never exercised by mistake. If the `serve` command is not wired into
 * the CLI yet, the entry falls back to calling serveCommand directly (see http-serve-entry.ts).
 *
 * Readiness is bounded; disposal always ends the child (SIGTERM, then SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Sends SIGTERM and resolves with the exit code (SIGKILL after killAfterMs). */
  stop(killAfterMs?: number): Promise<number | null>;
  /** Resolves when the process exits. */
  exited: Promise<number | null>;
}

const here = dirname(fileURLToPath(import.meta.url));
const runningFromSource = import.meta.url.endsWith('.ts');

export function repoRoot(): string {
  let dir = here;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('no package.json above test/support');
    dir = parent;
  }
  return dir;
}

function entryArgs(): string[] {
  const entry = join(here, runningFromSource ? 'http-serve-entry.ts' : 'http-serve-entry.js');
  return runningFromSource ? ['--import', 'tsx', entry] : [entry];
}

export async function startServe(
  configPath: string,
  options: {
    readyTimeoutMs?: number;
    env?: NodeJS.ProcessEnv;
    args?: string[];
    /** Standard error (the server's log) goes to this file, as a service manager would send it, instead of a pipe this process reads. */
    stderrFile?: string;
    /** Handed the child as soon as it is spawned (to watch its output before it is ready, or to end it). */
    onSpawn?: (child: ChildProcess) => void;
  } = {},
): Promise<ServeProcess> {
  const stderrFd = options.stderrFile === undefined ? undefined : openSync(options.stderrFile, 'a');
  const child = spawn(process.execPath, [...entryArgs(), 'serve', '--config', configPath, ...(options.args ?? [])], {
    cwd: repoRoot(),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', stderrFd ?? 'pipe'],
  });
  if (stderrFd !== undefined) closeSync(stderrFd);
  options.onSpawn?.(child);
  let out = '';
  let piped = '';
  const stderrFile = options.stderrFile;
  const err = stderrFile === undefined ? () => piped : () => readFileSync(stderrFile, 'utf8');
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (piped += s));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await readUrl(child, () => out, err, exited, options.readyTimeoutMs ?? 20_000);
  const stop = async (killAfterMs = 10_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  return { url, child, stdout: () => out, stderr: err, stop, exited };
}

async function readUrl(child: ChildProcess, out: () => string, err: () => string, exited: Promise<number | null>, timeoutMs: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  let onData: (() => void) | undefined;
  try {
    return await new Promise<string>((resolve, reject) => {
      onData = () => {
        const match = /listening on (http:\/\/\S+)/.exec(out());
        if (match) resolve(match[1]!);
      };
      child.stdout!.on('data', onData);
      onData();
      void exited.then((code) => reject(new Error(`convoke serve exited (${code}) before listening:\n${err()}`)));
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`convoke serve printed no URL within ${timeoutMs} ms:\n${out()}\n${err()}`));
      }, timeoutMs);
    });
  } finally {
    clearTimeout(timer);
    if (onData) child.stdout!.off('data', onData);
  }
}
