/** Workflow and bundle text: JSON strictly, YAML under the core schema, both ending as plain I-JSON. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isAdapterError } from '../../src/contract/errors.js';
import { formatOf, parseDocumentBytes, parseDocumentText } from '../../src/workflow/dsl/text.js';

const refused = (run: () => unknown, says: RegExp) =>
  assert.throws(run, (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && says.test(e.description ?? ''), says.source);

test('the format follows the file name, else the first character', () => {
  assert.equal(formatOf('a: 1', 'x.json'), 'json');
  assert.equal(formatOf('{"a": 1}', 'x.yml'), 'yaml');
  assert.equal(formatOf('  {"a": 1}'), 'json');
  assert.equal(formatOf('document:\n  dsl: 1.0.3\n'), 'yaml');
});

test('YAML 1.2 core: versions stay strings, no timestamps, the same JSON as its twin', () => {
  assert.deepEqual(parseDocumentText('dsl: 1.0.3\nversion: 0.1.0\nwhen: 2001-12-14\nn: 3\nok: true\nnone: null\n', 'w'), {
    dsl: '1.0.3',
    version: '0.1.0',
    when: '2001-12-14',
    n: 3,
    ok: true,
    none: null,
  });
  assert.deepEqual(parseDocumentText('{"a": [1, "x"]}', 'w'), { a: [1, 'x'] });
});

test('a YAML error names the line and column it is at, for a bundle and a workflow file alike', () => {
  refused(() => parseDocumentText('a: 1\nb: 2\na: 3\n', 'w'), /^w: not valid YAML at line 3, column 1: /);
  refused(() => parseDocumentText('document: {dsl: 1.0.3, name: y\ndo:\n  - a: {set: {x: 1}}\n', 'w'), /^w: not valid YAML at line \d+, column \d+: /);
  refused(() => parseDocumentBytes(Buffer.from('do:\n  - a:\n      set: [1, 2\n'), 'f.yaml', 'f.yaml'), /^f\.yaml: not valid YAML at line \d+, column \d+: /);
});

test('hostile YAML is invalid-input: duplicate keys, bad syntax, alias floods, non-JSON numbers, invalid UTF-8', () => {
  refused(() => parseDocumentText('a: 1\na: 2\n', 'w'), /^w: not valid YAML/);
  refused(() => parseDocumentText('a: [1, 2\n', 'w'), /^w: not valid YAML/);
  // Twelve levels of ten aliases each: 10^12 nodes if expanded.
  const name = (i: number) => String.fromCharCode(97 + i);
  const levels = Array.from(
    { length: 12 },
    (_, i) =>
      `${name(i + 1)}: &${name(i + 1)} [${Array(10)
        .fill(`*${name(i)}`)
        .join(', ')}]`,
  );
  refused(() => parseDocumentText(['a: &a [x, x, x, x, x, x, x, x, x, x]', ...levels].join('\n'), 'w'), /^w: Excessive alias count/);
  refused(() => parseDocumentText('n: .inf\n', 'w'), /non-finite number/);
  refused(() => parseDocumentText('n: 9007199254740993\n', 'w'), /beyond/);
  refused(() => parseDocumentBytes(new Uint8Array([0x61, 0x3a, 0x20, 0xff]), 'w', 'w.yaml'), /not valid UTF-8/);
  refused(() => parseDocumentText('{"a": 1, "a": 2}', 'w'), /duplicate/i);
});
