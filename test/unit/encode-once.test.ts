/**
 * What an append computes once and shares (docs/performance.md, memory mode): the log budget's
 * measurement of a transition is the body the store writes (codec.measureTransition), and the
 * index row's next due instant is the kernel's timer instant (takeNextDueMs). Sharing must never
 * hand one transition's body, or one record's instant, to another.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bodyBytes, encodeTransition, measureTransition } from '../../src/adapters/store/codec.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import type { Transition } from '../../src/events/types.js';
import { indexRow, nextDueMs, takeNextDueMs } from '../../src/projections/operation-index.js';
import { transitionBytes } from '../../src/runtime/log-budget.js';
import { scenario } from '../support/scenario.js';

const clock = new VirtualClock();
const transition = (tag: string): Transition =>
  ({
    events: [{ type: 'opaque', v: 1, tag }],
    timeGuard: { notBeforeMs: clock.nowMs() - 3_600_000, notAfterMs: clock.nowMs() + 3_600_000 },
    causation: { command: `test:${tag}` },
  }) as unknown as Transition;

test('a measured transition is the body its store encodes; another transition gets its own body', () => {
  const a = transition('a');
  const b = transition('bb');
  const measured = measureTransition(a);
  assert.equal(measured.body, JSON.stringify(a));
  assert.equal(measured.bytes, Buffer.byteLength(JSON.stringify(a)));
  assert.equal(encodeTransition(b), JSON.stringify(b), 'another transition is encoded, not handed the measured body');
  assert.equal(encodeTransition(a), JSON.stringify(a));
  // Taken once: a later encoding of the same object encodes it again.
  measureTransition(a);
  assert.equal(encodeTransition(a), JSON.stringify(a));
  (a.causation as { command: string }).command = 'test:changed';
  assert.equal(encodeTransition(a), JSON.stringify(a), 'the body is taken by the first encoding after the measurement');
});

test('transitionBytes measures what the store then writes, and sizes count UTF-8 bytes', async () => {
  const store = new MemoryEventStore({ clock });
  const measured = transition('é measured');
  const written = transition('written');
  assert.equal(transitionBytes(measured), Buffer.byteLength(JSON.stringify(measured), 'utf8'));
  assert.equal((await store.create('s1', written)).kind, 'ok');
  assert.equal((await store.create('s2', measured)).kind, 'ok');
  const [r1, r2] = [await store.read('s1'), await store.read('s2')];
  assert.ok(r1.kind === 'ok' && r2.kind === 'ok');
  assert.deepEqual(r1.transitions[0]?.transition, written);
  assert.deepEqual(r2.transitions[0]?.transition, measured);
  assert.equal(bodyBytes('é'), 2);
  assert.equal(bodyBytes('ab'), 2);
  assert.equal(bodyBytes('éé'), 4);
});

test("the kernel's next due instant is the index row's for that record only", async () => {
  const s = await scenario();
  const { result } = await s.invoke('k1');
  await s.settle();
  const record = await s.coordinator.record(result.operationId);
  assert.ok(record);
  const earlier = { ...record, deadlineMs: record.admittedAtMs + 1 };
  assert.notEqual(nextDueMs(earlier), nextDueMs(record));
  indexRow(record);
  assert.equal(takeNextDueMs(earlier), nextDueMs(earlier), 'another record computes its own');
  indexRow(record);
  assert.equal(takeNextDueMs(record), nextDueMs(record));
  indexRow(earlier);
  assert.equal(takeNextDueMs(earlier), earlier.admittedAtMs + 1);
  await s.close();
});
