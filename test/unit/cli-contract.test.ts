import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { canonicalizeCommand } from '../../src/cli/commands/canonicalize.js';
import { idOperationCommand, idPublicationCommand } from '../../src/cli/commands/id.js';
import { bundleCheckCommand } from '../../src/cli/commands/bundle.js';
import { buildProgram } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/io.js';
import { repoRoot } from '../support/assertions.js';

const vectorsDir = join(repoRoot(), 'test', 'vectors');
const idVectors = JSON.parse(readFileSync(join(vectorsDir, 'ids.json'), 'utf8')) as {
  operation: { principalId: string; contractDigest: string; invocationKey: string; operationId: string }[];
  publication: { contractDigest: string; operationId: string; branchId: string; attempt: number; publicationId: string }[];
};

interface MemoryIo extends CliIo {
  out: string;
  err: string;
}

function memoryIo(stdin: string | Uint8Array = ''): MemoryIo {
  const io: MemoryIo = {
    out: '',
    err: '',
    stdout: { write: (text: string) => (io.out += text) },
    stderr: { write: (text: string) => (io.err += text) },
    readStdin: async () => (typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin),
  };
  return io;
}

/** stderr must be exactly one AdapterError body as JSON, then a newline. */
function errorBody(io: MemoryIo): { kind: string; description?: string } {
  assert.ok(io.err.endsWith('\n'), 'stderr ends with a newline');
  assert.equal(io.err.indexOf('\n'), io.err.length - 1, 'one line on stderr');
  return JSON.parse(io.err) as { kind: string; description?: string };
}

const scratch = mkdtempSync(join(tmpdir(), 'convoke-cli-contract-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('canonicalize prints the RFC 8785 form of a file, with no newline added', async () => {
  const io = memoryIo();
  const code = await canonicalizeCommand(join(vectorsDir, 'rfc8785', 'weird.input.json'), io);
  assert.equal(code, 0);
  assert.equal(io.out, readFileSync(join(vectorsDir, 'rfc8785', 'weird.expected.json'), 'utf8'));
  assert.equal(io.err, '');
});

test('canonicalize reads all of stdin when no file is given', async () => {
  const io = memoryIo('{ "b": 1E30, "a": [-0, 4.50] }\n');
  assert.equal(await canonicalizeCommand(undefined, io), 0);
  assert.equal(io.out, '{"a":[0,4.5],"b":1e+30}');
});

test('canonicalize: duplicate keys are invalid-input, exit 2, AdapterError JSON on stderr', async () => {
  const io = memoryIo('{"items":[{"a":1,"a":2}]}');
  assert.equal(await canonicalizeCommand(undefined, io), 2);
  assert.equal(io.out, '');
  assert.deepEqual(errorBody(io), { kind: 'invalid-input', description: 'stdin: duplicate key "a" at /items/0 (offset 17)' });
});

test('canonicalize: invalid UTF-8 in a file is invalid-input, exit 2', async () => {
  const file = join(scratch, 'bad-utf8.json');
  writeFileSync(file, Uint8Array.from([0x22, 0xff, 0x22]));
  const io = memoryIo();
  assert.equal(await canonicalizeCommand(file, io), 2);
  assert.deepEqual(errorBody(io), { kind: 'invalid-input', description: `${file}: not valid UTF-8` });
});

test('canonicalize: an unreadable file is invalid-input, exit 2', async () => {
  const file = join(scratch, 'missing.json');
  const io = memoryIo();
  assert.equal(await canonicalizeCommand(file, io), 2);
  assert.deepEqual(errorBody(io), { kind: 'invalid-input', description: `cannot read ${file} (ENOENT)` });
  const dirIo = memoryIo();
  assert.equal(await canonicalizeCommand(scratch, dirIo), 2);
  assert.equal(errorBody(dirIo).kind, 'invalid-input');
});

test('id operation prints the operation id of the vectors and a newline', () => {
  for (const v of idVectors.operation) {
    const io = memoryIo();
    assert.equal(idOperationCommand({ principal: v.principalId, contractDigest: v.contractDigest, key: v.invocationKey }, io), 0);
    assert.equal(io.out, v.operationId + '\n');
    assert.equal(io.err, '');
  }
});

test('id publication prints the publication id of the vectors and a newline', () => {
  for (const v of idVectors.publication) {
    const io = memoryIo();
    const opts = { contractDigest: v.contractDigest, operation: v.operationId, branch: v.branchId, attempt: String(v.attempt) };
    assert.equal(idPublicationCommand(opts, io), 0);
    assert.equal(io.out, v.publicationId + '\n');
  }
});

test('id operation: bad arguments are invalid-input, exit 2', () => {
  const v = idVectors.operation[0];
  assert.ok(v !== undefined);
  const cases = [
    { principal: v.principalId, contractDigest: 'sha256:XYZ', key: 'k' },
    { principal: v.principalId, contractDigest: v.contractDigest.toUpperCase(), key: 'k' },
    { principal: '', contractDigest: v.contractDigest, key: 'k' },
    { principal: 'p'.repeat(257), contractDigest: v.contractDigest, key: 'k' },
    { principal: v.principalId, contractDigest: v.contractDigest, key: 'k'.repeat(257) },
    { principal: v.principalId, contractDigest: v.contractDigest, key: 'k\ud800' },
  ];
  for (const opts of cases) {
    const io = memoryIo();
    assert.equal(idOperationCommand(opts, io), 2, JSON.stringify(opts).slice(0, 80));
    assert.equal(io.out, '');
    assert.equal(errorBody(io).kind, 'invalid-input');
  }
});

test('id publication: bad arguments (attempt outside 1..16, bad operation, non-token branch) are invalid-input, exit 2', () => {
  const v = idVectors.publication[0];
  assert.ok(v !== undefined);
  const good = { contractDigest: v.contractDigest, operation: v.operationId, branch: v.branchId, attempt: '1' };
  const cases = [
    ...['0', '17', '-1', '1.5', '01', '0x1', '1e1', ' 1', '', 'one'].map((attempt) => ({ ...good, attempt })),
    { ...good, operation: v.operationId.slice(2) },
    { ...good, operation: v.operationId.toUpperCase() },
    { ...good, branch: 'a.b' },
    { ...good, branch: '' },
    { ...good, contractDigest: 'sha1:abc' },
  ];
  for (const opts of cases) {
    const io = memoryIo();
    assert.equal(idPublicationCommand(opts, io), 2, JSON.stringify(opts));
    assert.equal(io.out, '');
    assert.equal(errorBody(io).kind, 'invalid-input');
  }
});

test('bundle check --help says what the command reads and prints: a JSON or YAML bundle; its digest, subjects and interactions', async () => {
  const io = memoryIo();
  assert.equal(await bundleCheckCommand(join(repoRoot(), 'examples', 'review-publish.bundle.yaml'), { json: false }, io), 0, io.err);
  const check = buildProgram(memoryIo(), () => {})
    .commands.find((command) => command.name() === 'bundle')
    ?.commands.find((command) => command.name() === 'check');
  assert.ok(check, 'convoke bundle check is registered');
  for (const heading of ['digest', 'subjects']) {
    assert.match(io.out, new RegExp(`^${heading} `, 'm'), `the output has a ${heading} line`);
    assert.match(check.description(), new RegExp(`\\b${heading}\\b`), `--help names the ${heading} it prints`);
  }
  assert.match(check.description(), /\binteractions\b/);
  assert.match(check.registeredArguments[0]?.description ?? '', /YAML/, 'the file argument says a YAML bundle is read too');
});
