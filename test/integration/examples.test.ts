/**
 * The documented steps, run as written: the shell block of examples/README.md command by command
 * (its own nats-server, `convoke serve`, two `convoke peer`s, three invokes and the curl), on
 * free ports and a temp dir instead of 14222, 8080 and /tmp/convoke-example; then the README's
 * "Writing a peer" snippet, type-checked and run as alfa in place of `convoke peer`. The
 * passwords are the README's generator with `openssl rand -hex 16` answering a value that starts
 * with digits (`05e4b…`), which nats-server reads as a number unless the password starts with a
 * letter. Also: every file docker-compose.yml names exists.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shellCommands } from '../support/markdown.js';
import { strictTscArgs } from '../support/typecheck.js';
import { freePort } from '../support/ports.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const stepTimeoutMs = 60_000;
/**
 * tsc over the snippet checks Node's and convoke's types too: seconds of CPU alone, a minute and
 * more on a loaded 2-core machine. A generous bound, not a rule (as the packed package's tsc has).
 */
const typecheckTimeoutMs = 240_000;

/** A fenced block of a Markdown file: the first of `language` after `after` (a heading, or the start). */
function fencedBlock(markdown: string, language: string, after = ''): string {
  const from = markdown.indexOf(after);
  assert.ok(from >= 0, `the document has ${after}`);
  const open = markdown.indexOf('```' + language + '\n', from);
  assert.ok(open >= 0, `a \`\`\`${language} block after ${after || 'the start'}`);
  const start = open + language.length + 4;
  return markdown.slice(start, markdown.indexOf('\n```', start) + 1);
}

interface Background {
  command: string;
  child: ChildProcess;
  output(): string;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadlineMs) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const tcpOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

describe('examples/README.md, run as documented', { timeout: 600_000 }, () => {
  let dir: string;
  let work: string;
  let natsPort: number;
  let httpPort: number;
  let env: NodeJS.ProcessEnv;
  const background: Background[] = [];
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(join(repoRoot, 'bin', 'convoke.js'))}`;

  /** The examples' fixed ports and paths, moved to this run's. */
  const localize = (text: string) =>
    text.replaceAll('14222', String(natsPort)).replaceAll('8080', String(httpPort)).replaceAll('/tmp/convoke-example', join(dir, 'state'));

  const startBackground = (command: string) => {
    const child = spawn('bash', ['-c', `exec ${command}`], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
    const entry = { command, child, output: () => out };
    background.push(entry);
    return entry;
  };

  /** Runs one foreground command in bash; assignments and exports carry over to the next (set -a). */
  const runForeground = async (command: string) => {
    const envFile = join(dir, 'env.out');
    const script = `set -a\n${command}\nstatus=$?\nenv -0 > ${JSON.stringify(envFile)}\nexit $status\n`;
    const run = spawnSync('bash', ['-c', script], { cwd: work, env, encoding: 'utf8', timeout: stepTimeoutMs });
    if (existsSync(envFile)) {
      const text = await readFile(envFile, 'utf8');
      env = Object.fromEntries(
        text
          .split('\0')
          .filter(Boolean)
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
      );
      await rm(envFile);
    }
    return { status: run.status, stdout: run.stdout ?? '', stderr: run.stderr ?? '' };
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'convoke-examples-'));
    work = join(dir, 'work');
    [natsPort, httpPort] = [await freePort(), await freePort()];
    await mkdir(join(work, 'examples'), { recursive: true });
    for (const name of await readdir(join(repoRoot, 'examples'))) {
      await writeFile(join(work, 'examples', name), localize(await readFile(join(repoRoot, 'examples', name), 'utf8')));
    }
    await symlink(join(repoRoot, 'dist'), join(work, 'dist'), 'dir');
    // The application's node_modules: the repository's packages, plus convoke itself (for the snippet's `convoke/peer`).
    const modules = await realpath(join(repoRoot, 'node_modules'));
    await mkdir(join(work, 'node_modules'));
    for (const name of await readdir(modules)) await symlink(join(modules, name), join(work, 'node_modules', name));
    await symlink(repoRoot, join(work, 'node_modules', 'convoke'), 'dir');
    env = { ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/sbin:/usr/local/sbin` };
  });

  after(async () => {
    for (const b of background) if (b.child.exitCode === null && b.child.signalCode === null) b.child.kill('SIGTERM');
    await Promise.all(
      background.map(
        (b) =>
          new Promise<void>((resolve) => {
            if (b.child.exitCode !== null || b.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => b.child.kill('SIGKILL'), 5_000);
            b.child.once('exit', () => (clearTimeout(timer), resolve()));
          }),
      ),
    );
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('every step of the shell block works, with passwords that start with digits from the generator', async () => {
    const readme = localize(await readFile(join(repoRoot, 'examples', 'README.md'), 'utf8'));
    let generated = 0;
    const commands = shellCommands(fencedBlock(readme, 'sh'))
      .filter((command) => !/^npm (install|ci)\b/.test(command))
      .map((command) => command.replaceAll('npx convoke', cli))
      // The worst case the generator can give: hex starting with digits that look like a number.
      .map((command) => command.replace(/openssl rand -hex 16/g, () => `printf 05e4b7c1d2e3f4a5b6c7d8e9f0a1b2c${generated++}`));
    assert.ok(generated >= 4, 'the block generates the four passwords');
    const outputs: string[] = [];
    for (const command of commands) {
      if (/[^&]&$/.test(command)) {
        const started = startBackground(command.slice(0, -1).trim());
        if (/^nats-server /.test(started.command)) await waitFor(`nats-server:\n${started.output()}`, () => tcpOpen(natsPort));
        if (/ serve /.test(started.command))
          await waitFor(`convoke serve:\n${started.output()}`, async () => (await fetch(`http://127.0.0.1:${httpPort}/healthz`)).ok);
        continue;
      }
      const run = await runForeground(command);
      const died = background.filter((b) => b.child.exitCode !== null).map((b) => `${b.command}:\n${b.output()}`);
      assert.equal(run.status, 0, `${command}\n${run.stdout}\n${run.stderr}\n${died.join('\n')}`);
      outputs.push(run.stdout);
    }
    const text = outputs.join('\n');
    assert.match(text, /decision\s+success \(threshold\)/, 'doc-1 is approved by both');
    assert.match(text, /decision\s+failed \(impossible\)/, 'doc-2 has a typo: bravo rejects it');
    assert.match(text, /"disposition": "cancel-requested"[\s\S]*"outcome": "stopped"/, 'doc-3: quick cancels bravo');
    const curl = JSON.parse(outputs.at(-1)!) as { operationId: string; decision: { outcome: string } | null };
    assert.match(curl.operationId, /^op[0-9a-f]{64}$/);
  });

  it("the README's peer snippet type-checks and, run as alfa instead of `convoke peer`, answers", async () => {
    const readme = localize(await readFile(join(repoRoot, 'README.md'), 'utf8'));
    await writeFile(join(work, 'readme-peer.mts'), fencedBlock(readme, 'ts', '### Writing a peer'));
    const checked = spawnSync(process.execPath, await strictTscArgs(repoRoot, 'readme-peer.mts'), {
      cwd: work,
      encoding: 'utf8',
      timeout: typecheckTimeoutMs,
    });
    assert.equal(checked.status, 0, `${checked.error?.message ?? ''}\n${checked.stdout}${checked.stderr}`);

    const alfa = background.find((b) => b.command.includes('peer.alfa.json'));
    assert.ok(alfa, 'the block started alfa');
    alfa.child.kill('SIGTERM');
    await new Promise((resolve) => (alfa.child.exitCode !== null ? resolve(null) : alfa.child.once('exit', resolve)));
    const sdkPeer = startBackground(`${JSON.stringify(process.execPath)} --import tsx readme-peer.mts`);
    const invoke = await runForeground(
      `${cli} invoke --nats nats://127.0.0.1:${natsPort} --user billing --password-env CONVOKE_NATS_PASSWORD_BILLING --contract examples/review.bundle.json --interaction review --key doc-sdk --input '{"document":"RFC: peers in TypeScript"}' --wait-ms 20000 --json`,
    );
    assert.equal(invoke.status, 0, `${invoke.stdout}\n${invoke.stderr}\n${sdkPeer.output()}`);
    const reply = JSON.parse(invoke.stdout) as { result: { branches: { peerId: string; result?: { note?: string } }[] } };
    assert.equal(reply.result.branches.find((b) => b.peerId === 'alfa')?.result?.note, 'read by the SDK peer', sdkPeer.output());
  });

  it('docker-compose.yml names only files that exist', async () => {
    const compose = await readFile(join(repoRoot, 'docker-compose.yml'), 'utf8');
    const named = [...compose.matchAll(/(?:\.\/)?(examples\/[A-Za-z0-9._-]+)/g)].map((m) => m[1]!);
    assert.ok(named.includes('examples/nats-server.conf') && named.includes('examples/serve.nats-durable.json'), named.join(', '));
    for (const path of named) assert.ok(existsSync(join(repoRoot, path)), `${path} exists`);
  });
});
