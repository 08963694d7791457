/**
 * README.md's "Workflows" section, run as written: every shell block of the section command by
 * command with the real CLI (bin/convoke.js in place of `npx convoke`) in a temp dir holding a
 * copy of examples/, `convoke serve` started from the section's config on a free loopback port
 * (in place of 8080) with a token of this test's choosing (in place of `my-token`, its SHA-256 in
 * place of `HASH`), and each command's output held to the block the README shows after it:
 *
 * - a `text` block: the output exactly;
 * - a `yaml` block: an excerpt, its runs between `# …` comment lines found in the output in order
 *   (and the output, the lowered document, byte for byte the golden file the README links);
 * - a `json` block: the output's JSON, structurally;
 * - an `http` block: `curl -si`'s status line, the headers shown, and the body's JSON.
 *
 * Shown JSON may be abbreviated with `…`: as a member, "and other members"; as an array's last
 * element, "and more elements"; as a value, "any value"; at the end of a string, "a string that
 * starts so". Without a `…`, an object has exactly the members shown and an array the elements.
 * The section's first `yaml` block, before any command, is an excerpt of the example bundle and
 * is held to that file the same way.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fencedBlocks, shellCommands, type FencedBlock } from '../support/markdown.js';
import { freePort } from '../support/ports.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const stepTimeoutMs = 60_000;
/** How long a read that shows a running instance is asked again before its shown state counts as missing. */
const settleMs = 30_000;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The text of README.md's `## Workflows` section, up to the next `## ` heading. */
function workflowsSection(readme: string): string {
  const start = readme.indexOf('\n## Workflows\n');
  assert.ok(start >= 0, 'README.md has a "## Workflows" section');
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/**
 * Shown JSON with `…` abbreviations made parseable: a `…` outside a string becomes the string "…"
 * where a value or an element stands, and the member `"…": "…"` where a member stands.
 */
function parseShownJson(text: string): Json {
  let out = '';
  let inString = false;
  let expectValue = false;
  const open: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      out += ch;
      if (ch === '\\') out += text[++i] ?? '';
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') {
      open.push(ch);
      expectValue = false;
    } else if (ch === '}' || ch === ']') open.pop();
    else if (ch === ':') expectValue = true;
    else if (ch === ',') expectValue = false;
    else if (ch === '…') {
      out += expectValue || open.at(-1) === '[' ? '"…"' : '"…": "…"';
      continue;
    }
    out += ch;
  }
  return JSON.parse(out) as Json;
}

/** Asserts that `actual` is what `shown` shows (see the file's comment for `…`). */
function assertShown(actual: unknown, shown: Json, path = ''): void {
  const at = path || '/';
  if (shown === '…') return;
  if (typeof shown === 'string' && shown.endsWith('…')) {
    assert.equal(typeof actual, 'string', `${at}: a string`);
    assert.ok((actual as string).startsWith(shown.slice(0, -1)), `${at}: ${JSON.stringify(actual)} starts with ${JSON.stringify(shown.slice(0, -1))}`);
    return;
  }
  if (Array.isArray(shown)) {
    assert.ok(Array.isArray(actual), `${at}: an array, not ${JSON.stringify(actual)}`);
    const more = shown.at(-1) === '…';
    const items = more ? shown.slice(0, -1) : shown;
    assert.ok(!items.includes('…'), `${at}: "…" only as an array's last element`);
    if (more) assert.ok(actual.length >= items.length, `${at}: at least ${items.length} elements, not ${actual.length}`);
    else assert.equal(actual.length, items.length, `${at}: ${items.length} elements`);
    items.forEach((item, i) => assertShown(actual[i], item, `${path}/${i}`));
    return;
  }
  if (shown !== null && typeof shown === 'object') {
    assert.ok(actual !== null && typeof actual === 'object' && !Array.isArray(actual), `${at}: an object, not ${JSON.stringify(actual)}`);
    const members = actual as Record<string, unknown>;
    const keys = Object.keys(shown).filter((key) => key !== '…');
    if (!('…' in shown)) assert.deepEqual(Object.keys(members).sort(), [...keys].sort(), `${at}: exactly the members shown`);
    for (const key of keys) {
      assert.ok(key in members, `${at}: has ${key}`);
      assertShown(members[key], shown[key]!, `${path}/${key}`);
    }
    return;
  }
  assert.deepEqual(actual, shown, at);
}

/** Asserts that the runs of an excerpt between its `# …` comment lines occur in `text`, in order. */
function assertExcerpt(text: string, excerpt: string, what: string): void {
  const runs: string[][] = [[]];
  for (const line of excerpt.trimEnd().split('\n')) {
    if (/^\s*# …/.test(line)) {
      if (runs.at(-1)!.length > 0) runs.push([]);
    } else runs.at(-1)!.push(line);
  }
  let from = 0;
  for (const run of runs.filter((r) => r.length > 0)) {
    const found = text.indexOf(run.join('\n') + '\n', from);
    assert.ok(found >= 0, `${what} has, after offset ${from}:\n${run.join('\n')}`);
    from = found + run.join('\n').length;
  }
}

/** Asserts that `curl -si`'s output is what an `http` block shows: the status line, the headers shown, the body. */
function assertHttp(output: string, shown: string): void {
  const [head = '', ...rest] = output.split('\r\n\r\n');
  const [statusLine, ...headerLines] = head.split('\r\n');
  const headers = new Map(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const blank = shown.indexOf('\n\n');
  assert.ok(blank > 0, 'an http block: the status line and headers, a blank line, the body');
  const [shownStatus, ...shownHeaders] = shown.slice(0, blank).split('\n');
  assert.equal(statusLine, shownStatus);
  const moreHeaders = shownHeaders.includes('…');
  const named = shownHeaders.filter((line) => line !== '…');
  for (const line of named) {
    const name = line.slice(0, line.indexOf(':')).toLowerCase();
    assertShown(headers.get(name), line.slice(line.indexOf(':') + 1).trim(), `header ${name}`);
  }
  if (!moreHeaders) assert.equal(headers.size, named.length, 'exactly the headers shown');
  assertShown(JSON.parse(rest.join('\r\n\r\n')), parseShownJson(shown.slice(blank + 2)), '');
}

interface Run {
  command: string;
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A temp dir with a copy of examples/, where the section's commands run; background processes end with it. */
class Workspace {
  private readonly background: { command: string; child: ChildProcess; output(): string }[] = [];

  constructor(
    readonly dir: string,
    readonly httpPort: number,
  ) {}

  static async create(): Promise<Workspace> {
    const workspace = new Workspace(await mkdtemp(join(tmpdir(), 'convoke-readme-workflows-')), await freePort());
    await mkdir(join(workspace.dir, 'examples'));
    for (const name of await readdir(join(repoRoot, 'examples'))) {
      await writeFile(join(workspace.dir, 'examples', name), await readFile(join(repoRoot, 'examples', name)));
    }
    return workspace;
  }

  run(command: string): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn('bash', ['-c', command], { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
      child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const timer = setTimeout(() => child.kill('SIGKILL'), stepTimeoutMs);
      child.once('error', reject);
      child.once('close', (status) => (clearTimeout(timer), resolve({ command, status, stdout, stderr })));
    });
  }

  /** Runs a foreground command, which must succeed. */
  async succeed(command: string): Promise<Run> {
    const done = await this.run(command);
    const died = this.background.filter((b) => b.child.exitCode !== null).map((b) => `${b.command}:\n${b.output()}`);
    assert.equal(done.status, 0, `${command}\n${done.stdout}\n${done.stderr}\n${died.join('\n')}`);
    return done;
  }

  /** Starts `convoke serve` and waits until it answers /healthz. */
  async serve(command: string): Promise<void> {
    const child = spawn('bash', ['-c', `exec ${command}`], { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
    this.background.push({ command, child, output: () => out });
    const deadlineMs = Date.now() + 30_000;
    while (
      !(await fetch(`http://127.0.0.1:${this.httpPort}/healthz`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      assert.ok(child.exitCode === null && Date.now() < deadlineMs, `${command} is not serving:\n${out}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    await Promise.all(
      this.background.map(
        (b) =>
          new Promise<void>((resolve) => {
            if (b.child.exitCode !== null || b.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => b.child.kill('SIGKILL'), 5_000);
            b.child.once('exit', () => (clearTimeout(timer), resolve()));
            b.child.kill('SIGTERM');
          }),
      ),
    );
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Holds a command's output to the block shown after it; a read that shows an instance still on its way is asked again. */
async function checkOutput(workspace: Workspace, last: Run, block: FencedBlock): Promise<void> {
  switch (block.language) {
    case 'text':
      assert.equal(last.stdout, block.text, last.command);
      return;
    case 'yaml': {
      const golden = await readFile(join(repoRoot, 'examples', 'review-then-publish.lowered.yaml'), 'utf8');
      assert.equal(last.stdout, golden, `${last.command} prints examples/review-then-publish.lowered.yaml`);
      assertExcerpt(last.stdout, block.text, last.command);
      return;
    }
    case 'json':
      assertShown(JSON.parse(last.stdout), parseShownJson(block.text));
      return;
    case 'http': {
      // A read may run before the instance reached the state shown (a busy machine): it is read again, as a user would.
      const reads = !/\s-(d|X)\s/.test(last.command);
      const deadlineMs = Date.now() + settleMs;
      for (let current = last; ; current = await workspace.run(last.command)) {
        try {
          return assertHttp(current.stdout, block.text);
        } catch (error) {
          if (!reads || Date.now() > deadlineMs) throw new assert.AssertionError({ message: `${last.command}\n${current.stdout}\n${String(error)}` });
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    default:
      assert.fail(`an output block of an unknown kind: ${block.language}`);
  }
}

describe("README.md's Workflows section, run as documented", { timeout: 600_000 }, () => {
  let workspace: Workspace | undefined;
  const token = `readme-${randomBytes(12).toString('hex')}`;
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(join(repoRoot, 'bin', 'convoke.js'))}`;

  /** The section with this run's port, token and CLI. */
  const localize = (text: string, port: number) =>
    text
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('"port": 8080', `"port": ${port}`)
      .replaceAll('my-token', token)
      .replaceAll('"HASH"', JSON.stringify(createHash('sha256').update(token).digest('hex')))
      .replaceAll('npx convoke', cli);

  before(async () => {
    workspace = await Workspace.create();
  });

  after(async () => {
    await workspace?.close();
  });

  it('every command prints what the section shows after it; the HTTP calls answer the statuses and fields shown', async () => {
    const ws = workspace!;
    const section = localize(workflowsSection(await readFile(join(repoRoot, 'README.md'), 'utf8')), ws.httpPort);
    const checked: string[] = [];
    let last: Run | undefined;
    let commands = 0;
    for (const [index, block] of fencedBlocks(section).entries()) {
      if (block.language === 'sh') {
        for (const command of shellCommands(block.text)) {
          if (/ serve --config /.test(command)) await ws.serve(command);
          else {
            last = await ws.succeed(command);
            commands++;
          }
        }
      } else if (block.language === 'json' && block.text.includes('"tokenSha256"')) {
        assert.match(section, /write `serve\.workflows\.json`/, 'the section names the config file');
        await writeFile(join(ws.dir, 'serve.workflows.json'), block.text);
      } else if (index === 0 && block.language === 'yaml') {
        assertExcerpt(await readFile(join(repoRoot, 'examples', 'review-publish.bundle.yaml'), 'utf8'), block.text, 'examples/review-publish.bundle.yaml');
        checked.push('bundle');
      } else {
        assert.ok(last, `a ${block.language} block with no command before it:\n${block.text}`);
        await checkOutput(ws, last, block);
        checked.push(block.language);
        last = undefined;
      }
    }
    assert.equal(last, undefined, `the last command's output is shown: ${last?.command}`);
    // The section's shape: what is checked here is what a reader sees.
    assert.deepEqual(checked, ['bundle', 'text', 'yaml', 'json', 'http', 'http', 'http', 'http', 'json']);
    assert.equal(commands, 8);
  });
});
