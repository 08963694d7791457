/**
 * What a live inspection stream builds its updates from: the tail of a log after what was sent
 * (readTail), through the store's readAfter or, without it, from the whole log checked to continue
 * what was sent; and the changes between two projections (projections/delta.ts): changed fields
 * whole, keyed lists as their new and changed entries, map entries a fold replaced.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReadOutcome, Stored, TailOutcome } from '../../src/kernel/types.js';
import { changedEntries, changedFields, replacedKeys } from '../../src/projections/delta.js';
import { readTail, type LogSource } from '../../src/runtime/live-inspection.js';

const stored = (revision: string, transition: string): Stored<string> => ({ revision, committedAtMs: 0, transition });

/** A log read whole only (no readAfter). */
function wholeOnly(log: Stored<string>[]): LogSource<string> & { reads: number } {
  const source = {
    reads: 0,
    read: async (): Promise<ReadOutcome<string>> => {
      source.reads++;
      return { kind: 'ok', revision: log.at(-1)?.revision ?? '0', transitions: [...log] };
    },
  };
  return source;
}

test('without readAfter, the tail is what the whole log holds after what was sent; a log that no longer holds it there is diverged', async () => {
  const log = [stored('a', 'one'), stored('b', 'two'), stored('c', 'three')];
  const store = wholeOnly(log);
  assert.deepEqual(await readTail(store, 's', { revision: 'b', length: 2 }), { kind: 'ok', transitions: [stored('c', 'three')] });
  assert.deepEqual(await readTail(store, 's', { revision: 'c', length: 3 }), { kind: 'ok', transitions: [] });
  // Rewritten (a store that lost writes and took others): the revision sent is not where it was.
  log.splice(1, 2, stored('x', 'other'));
  assert.equal((await readTail(store, 's', { revision: 'b', length: 2 })).kind, 'diverged');
  assert.equal((await readTail(store, 's', { revision: 'c', length: 3 })).kind, 'diverged');
});

test('with readAfter, only the tail is read: the whole log never is', async () => {
  const asked: string[] = [];
  const store = {
    read: async (): Promise<ReadOutcome<string>> => assert.fail('the whole log is not read where the store reads tails'),
    readAfter: async (_id: string, revision: string): Promise<TailOutcome<string>> => {
      asked.push(revision);
      return { kind: 'ok', revision: 'c', transitions: [stored('c', 'three')] };
    },
  };
  assert.deepEqual(await readTail(store, 's', { revision: 'b', length: 2 }), { kind: 'ok', revision: 'c', transitions: [stored('c', 'three')] });
  assert.deepEqual(asked, ['b']);
});

test('changedFields: a changed field whole, a keyed list as its new and changed entries (left out when none), nothing unchanged', () => {
  const output = { big: 'x'.repeat(100) };
  const before = {
    status: 'running',
    output: null as unknown,
    stages: [
      { at: '/a', state: 'open' },
      { at: '/b', state: 'open' },
    ],
    startedAtMs: 1,
  };
  const after = {
    status: 'completed',
    output,
    stages: [
      { at: '/a', state: 'open' },
      { at: '/b', state: 'done' },
      { at: '/c', state: 'open' },
    ],
    startedAtMs: 1,
  };
  assert.deepEqual(changedFields(before, after, { stages: (s) => s.at }), {
    status: 'completed',
    output,
    stages: [
      { at: '/b', state: 'done' },
      { at: '/c', state: 'open' },
    ],
  });
  assert.deepEqual(changedFields(after, structuredClone(after), { stages: (s) => s.at }), {});
  assert.deepEqual(
    changedEntries(
      [{ id: 'p', n: 1 }],
      [
        { id: 'p', n: 1 },
        { id: 'q', n: 1 },
      ],
      (e) => e.id,
    ),
    [{ id: 'q', n: 1 }],
  );
});

test('replacedKeys: the entries a fold added or replaced, by reference; an own key only ("constructor" is no entry of every map)', () => {
  const kept = { n: 1 };
  const before = { a: kept, b: { n: 1 } };
  const after = { a: kept, b: { n: 1 }, c: { n: 2 }, constructor: { n: 3 } };
  assert.deepEqual(replacedKeys(before, after), ['b', 'c', 'constructor']);
  assert.deepEqual(replacedKeys(after, after), []);
});
