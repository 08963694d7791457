/**
 * What hostile parties put in a store reaches an operator's terminal shown, never acted on: a
 * peer's result, a workflow document's task names and the error it raises, read back by `inspect`,
 * `get`, `workflow list` and `workflow run`, and the error lines main.ts prints, come out with no
 * control or bidi character (each as its `\uXXXX` escape), while `--json` carries the exact string.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/io.js';
import { captureIo } from '../support/cli-io.js';
import { settledNotedReview } from '../support/noted-review.js';

/** Sets the window title, clears the screen, draws a hyperlink, then reverses what follows. */
const hostile = '\u001b]0;pwned\u0007\u001b[2J\u001b]8;;https://evil.example\u001b\\click\u001b]8;;\u001b\\\u009b31m\u202eevil\u2066';
/** How terminalText shows `hostile`'s first characters. */
const escaped = '\\u001b]0;pwned\\u0007\\u001b[2J';

/** The control, DEL, C1 and bidi characters in `text` (a newline is none), as code points. */
function refusedIn(text: string): number[] {
  const bidi = [0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069];
  return [...text].map((c) => c.codePointAt(0) ?? 0).filter((code) => (code < 0x20 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f) || bidi.includes(code));
}

let dir = '';
let store = '';
let operationId = '';
let instanceId = '';
let runIo: ReturnType<typeof captureIo>;

async function convoke(columns: number | undefined, ...args: string[]) {
  const io = captureIo(columns === undefined ? {} : { columns });
  const code = await main(['node', 'convoke', ...args], io);
  return { code, out: io.out(), err: io.err() };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-terminal-text-'));
  process.env.XDG_CONFIG_HOME = join(dir, 'config');
  store = `sqlite:${join(dir, 'ops.db')}`;
  // An operation whose peers answer a result carrying the hostile text.
  operationId = await settledNotedReview(join(dir, 'ops.db'), 'svc-a', hostile);
  // A workflow instance whose task is named with it and that raises an error titled with it.
  const document = {
    document: { dsl: '1.0.3', namespace: 'test', name: 'hostile', version: '1.0.0' },
    do: [
      { [`note${hostile}`]: { set: { said: hostile } } },
      { fail: { raise: { error: { type: 'https://example.com/hostile', status: 400, title: hostile } } } },
    ],
  };
  const file = join(dir, 'hostile.json');
  await writeFile(file, JSON.stringify(document));
  runIo = captureIo();
  assert.equal(await main(['node', 'convoke', 'workflow', 'run', file, '--store', store, '--key', 'k'], runIo), exitCodes.outcomeNotSuccess, runIo.err());
  instanceId = (JSON.parse(runIo.err()) as { instanceId: string }).instanceId;
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("inspect and get of an operation show a peer's hostile result escaped; --json carries it exactly", async () => {
  for (const args of [
    ['inspect', operationId, '--store', store],
    ['get', operationId, '--store', store],
  ]) {
    const { code, out } = await convoke(undefined, ...args);
    assert.equal(code, 0, args.join(' '));
    assert.deepEqual(refusedIn(out), [], `${args.join(' ')}:\n${out}`);
    assert.match(out, /\\u009b31m\\u202eevil\\u2066/, out);
    // Fitted to a width, the escaped text wraps like any other.
    const narrow = await convoke(100, ...args);
    assert.deepEqual(refusedIn(narrow.out), [], `${args.join(' ')}:\n${narrow.out}`);
    for (const line of narrow.out.split('\n')) assert.ok(line.length <= 100, `${args.join(' ')}: ${line}`);
  }
  const json = await convoke(100, 'get', operationId, '--store', store, '--json');
  const result = (JSON.parse(json.out) as { result: { branches: { result: { note: string } }[] } }).result;
  for (const branch of result.branches) assert.equal(branch.result.note, hostile);
  // Byte for byte: the string as JSON.stringify writes it (C1 and bidi characters raw).
  assert.ok(json.out.includes(JSON.stringify(hostile)), json.out);
});

test("inspect and workflow inspect of an instance show a document's hostile task name and error escaped; --json carries them exactly", async () => {
  for (const args of [
    ['inspect', instanceId, '--store', store],
    ['workflow', 'inspect', instanceId, '--store', store],
  ]) {
    const { code, out } = await convoke(undefined, ...args);
    assert.equal(code, 0, args.join(' '));
    assert.ok(!out.includes('\u001b'), `${args.join(' ')} wrote a raw ESC`);
    assert.deepEqual(refusedIn(out), [], `${args.join(' ')}:\n${out}`);
    assert.ok(out.includes(`(note${escaped}`), out);
  }
  const json = await convoke(undefined, 'inspect', instanceId, '--store', store, '--json');
  const shown = JSON.parse(json.out) as { record: { error: { title: string }; tasks: Record<string, { name: string }> } };
  assert.equal(shown.record.error.title, hostile);
  assert.ok(Object.values(shown.record.tasks).some((task) => task.name === `note${hostile}`));
  assert.ok(json.out.includes(JSON.stringify(hostile)), json.out);
});

test('workflow list shows the raised title escaped, fitting 80 columns; --json carries it exactly', async () => {
  const { code, out } = await convoke(80, 'workflow', 'list', '--store', store);
  assert.equal(code, 0);
  assert.ok(!out.includes('\u001b'), 'workflow list wrote a raw ESC');
  assert.deepEqual(refusedIn(out), [], out);
  assert.ok(out.includes('\\u001b]0;pwned'), out);
  for (const line of out.split('\n')) assert.ok(line.length <= 80, `${line.length}: ${line}`);
  const json = await convoke(80, 'workflow', 'list', '--store', store, '--json');
  assert.equal((JSON.parse(json.out) as { instances: { lastError: { title: string } }[] }).instances[0]?.lastError.title, hostile);
});

test("workflow run's output, and its error line on stderr, are the same JSON values with their controls escaped; --json is exact", async () => {
  assert.deepEqual(refusedIn(runIo.err()), [], runIo.err());
  assert.equal((JSON.parse(runIo.err()) as { error: { title: string } }).error.title, hostile);
  const file = join(dir, 'completes.json');
  const document = { document: { dsl: '1.0.3', namespace: 'test', name: 'completes', version: '1.0.0' }, do: [{ say: { set: { said: hostile } } }] };
  await writeFile(file, JSON.stringify(document));
  const run = await convoke(undefined, 'workflow', 'run', file);
  assert.equal(run.code, exitCodes.ok, run.err);
  assert.deepEqual(refusedIn(run.out), [], run.out);
  assert.deepEqual(JSON.parse(run.out), { said: hostile });
  const json = await convoke(undefined, 'workflow', 'run', file, '--json');
  assert.deepEqual((JSON.parse(json.out) as { output: unknown }).output, { said: hostile });
  assert.ok(json.out.includes(JSON.stringify(hostile)), json.out);
});

test("main's error lines show an error's controls escaped: the AdapterError's JSON (the same value) and any other error's stack", async () => {
  const typed = `op\u202e\u009b${hostile}`;
  const refusal = await convoke(undefined, 'inspect', typed, '--store', store);
  assert.equal(refusal.code, exitCodes.invalidInput);
  assert.deepEqual(refusedIn(refusal.err), [], refusal.err);
  assert.ok((JSON.parse(refusal.err) as { description: string }).description.includes(JSON.stringify(typed)), refusal.err);

  // An unexpected error (here the output stream's own) is printed with its stack, escaped.
  let err = '';
  const failing: CliIo = {
    stdout: {
      write: () => {
        throw new Error(`stdout failed: ${hostile}`);
      },
    },
    stderr: { write: (s: string) => (err += s) },
    readStdin: async () => new Uint8Array(),
  };
  const args = ['id', 'operation', '--principal', 'p', '--contract-digest', `sha256:${'0'.repeat(64)}`, '--key', 'k'];
  assert.equal(await main(['node', 'convoke', ...args], failing), exitCodes.failure);
  assert.match(err, /^convoke: Error: stdout failed: \\u001b\]0;pwned/);
  assert.ok(err.split('\n').length > 2, 'the stack keeps its lines');
  assert.deepEqual(refusedIn(err), [], err);
});

test('a usage error quoting what was given (an unknown option, an option value that is no integer) shows its controls escaped', async () => {
  for (const args of [
    ['get', 'op1234', '--wait-ms', `1${hostile}`],
    ['list', '--store', store, `--x${hostile}`],
    ['inspect', `-${hostile}`, '--store', store],
  ]) {
    const { code, err } = await convoke(undefined, ...args);
    assert.equal(code, exitCodes.invalidInput, err);
    assert.match(err, /^error: /, err);
    assert.ok(err.includes(escaped), err);
    assert.deepEqual(refusedIn(err), [], err);
  }
});
