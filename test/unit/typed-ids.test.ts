/** Ids typed into store commands (src/cli/typed-ids.ts): the short form a table shows, and prefixes that name one id, none, or several. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdapterError } from '../../src/contract/errors.js';
import { isIdPrefix, typedText, uniqueByPrefix } from '../../src/cli/typed-ids.js';

async function* listed(ids: string[]): AsyncIterable<string> {
  yield* ids;
}

test('a prefix names the one id it starts, none, or is refused listing the several it starts', async () => {
  const ids = ['wfab12cd', 'wfab12ef', 'wf9999aa'];
  assert.equal(await uniqueByPrefix(listed(ids), 'wf9999'), 'wf9999aa');
  assert.equal(await uniqueByPrefix(listed(ids), 'wfab12c'), 'wfab12cd');
  assert.equal(await uniqueByPrefix(listed(ids), 'wf0000'), undefined);
  await assert.rejects(
    uniqueByPrefix(listed(ids), 'wfab12'),
    (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input' && /wfab12cd, wfab12ef; type more/.test(error.message),
  );
  // At most ten candidates are listed, then "and more".
  const many = Array.from({ length: 12 }, (_, i) => `op1234${i.toString(16).padStart(2, '0')}`);
  await assert.rejects(uniqueByPrefix(listed(many), 'op1234'), /op123409 and more; type more/);
});

test("what is typed loses a table's ellipsis and its case; a prefix is the kind and 4 to 63 hex", () => {
  assert.equal(typedText('  WFab12CD…  '), 'wfab12cd');
  assert.equal(typedText('opab12...'), 'opab12');
  assert.equal(isIdPrefix('wfab12', 'wf'), true);
  assert.equal(isIdPrefix('wfab1', 'wf'), false);
  assert.equal(isIdPrefix(`wf${'a'.repeat(63)}`, 'wf'), true);
  assert.equal(isIdPrefix(`wf${'a'.repeat(64)}`, 'wf'), false);
  assert.equal(isIdPrefix('opab12', 'wf'), false);
  assert.equal(isIdPrefix('wfab1g', 'wf'), false);
});
