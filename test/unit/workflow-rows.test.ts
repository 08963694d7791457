/**
 * The store's copy of a workflow index row (copyOfRow, field by field) against the JSON round trip
 * it replaces: for every row workflowIndexRowOf accepts, the same value, with nothing shared.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { copyOfRow, detachedRow, workflowIndexRowOf } from '../../src/adapters/store/workflow-rows.js';
import { workflowStatuses, type WorkflowIndexRow } from '../../src/events/workflow-index.js';

const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/);
const instant = fc.integer({ min: -1, max: 2 ** 45 });
const text = fc.string({ maxLength: 12, unit: 'binary' });
const error = fc.record(
  { type: text, status: fc.integer({ min: 100, max: 599 }), title: fc.option(text, { nil: undefined }), detail: text, instance: text },
  { requiredKeys: ['type', 'status'] },
);

const row: fc.Arbitrary<WorkflowIndexRow> = fc.record({
  instanceId: hex64.map((h) => `wf${h}`),
  principalId: text.filter((t) => t.length > 0),
  workflowName: text,
  bundleDigest: text,
  invocationKey: text,
  status: fc.constantFrom(...workflowStatuses),
  startedAtMs: instant,
  endedAtMs: fc.option(instant, { nil: null }),
  deadlineMs: fc.option(instant, { nil: null }),
  currentTask: fc.option(fc.record({ at: text.filter((t) => t.length > 0), name: text }), { nil: null }),
  nextDueMs: fc.option(instant, { nil: null }),
  lease: fc.option(fc.record({ worker: text, epoch: fc.nat(), untilMs: instant }), { nil: null }),
  lastError: fc.option(error, { nil: null }),
  childOperationIds: fc.array(
    hex64.map((h) => `op${h}`),
    { maxLength: 3 },
  ),
  childOperations: fc.integer({ min: 3, max: 9 }),
  parent: fc.option(fc.record({ instanceId: hex64.map((h) => `wf${h}`), at: text.filter((t) => t.length > 0) }), { nil: null }),
  revision: fc.nat().map(String),
}) as fc.Arbitrary<WorkflowIndexRow>;

test('property: copyOfRow of a row workflowIndexRowOf accepts is its JSON round trip, sharing nothing with it', () => {
  fc.assert(
    fc.property(row, (given) => {
      assert.ok(workflowIndexRowOf(given), 'the generated row is one');
      const copy = copyOfRow(given);
      assert.deepEqual(copy, detachedRow(given));
      assert.equal(JSON.stringify(copy), JSON.stringify(given), 'the same fields in the same order');
      assert.ok(workflowIndexRowOf(copy), 'the copy is a row');
      for (const key of ['currentTask', 'lease', 'lastError', 'childOperationIds', 'parent'] as const)
        if (given[key] !== null) assert.notEqual(copy[key], given[key], `${key} is copied, not shared`);
    }),
    { numRuns: 500, seed: 20261205 },
  );
});

test("an error's absent fields are left out of the copy, as JSON leaves them out", () => {
  const given = fc.sample(row, { numRuns: 1, seed: 7 })[0] as WorkflowIndexRow;
  const withHoles = { ...given, lastError: { type: 't', status: 500, title: undefined, detail: 'd' } };
  assert.ok(workflowIndexRowOf(withHoles));
  assert.deepEqual(Object.keys(copyOfRow(withHoles).lastError ?? {}), ['type', 'status', 'detail']);
});

test('a row written before parent existed is read with parent null; a parent that is not one, or a row missing another field, is refused', () => {
  const given = fc.sample(row, { numRuns: 1, seed: 11 })[0] as WorkflowIndexRow;
  const { parent: _parent, ...older } = given;
  assert.deepEqual(workflowIndexRowOf(older), { ...older, parent: null });
  const stored = JSON.parse(JSON.stringify(older)) as object;
  assert.deepEqual(workflowIndexRowOf(stored), { ...stored, parent: null }, 'as stored JSON too');
  const { revision: _revision, ...missing } = given;
  assert.equal(workflowIndexRowOf(missing), undefined, 'only parent may be absent');
  assert.equal(workflowIndexRowOf({ ...given, parent: { instanceId: 'op1', at: '/do/0/x' } }), undefined);
  assert.equal(workflowIndexRowOf({ ...given, parent: { instanceId: `wf${'a'.repeat(64)}`, at: '' } }), undefined);
  assert.equal(workflowIndexRowOf({ ...given, parent: { instanceId: `wf${'a'.repeat(64)}`, at: '/x', depth: 1 } }), undefined);
});
