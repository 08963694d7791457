/** WaitSlots: the waits one principal holds at once at a facade; past the bound a wait runs at once (waitMs 0). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WaitSlots } from '../../src/runtime/wait-slots.js';

test('a principal past its bound waits 0; another principal is not held by it; a slot comes back when its wait ends, thrown or not', async () => {
  const slots = new WaitSlots(2);
  const asked: [string, number][] = [];
  const gates: (() => void)[] = [];
  const held = (principalId: string, waitMs: number) =>
    slots.bounded(principalId, waitMs, (granted) => {
      asked.push([principalId, granted]);
      return granted === 0 ? Promise.resolve('now') : new Promise<string>((resolve) => gates.push(() => resolve('waited')));
    });
  const first = held('alice', 5000);
  const second = held('alice', 5000);
  assert.equal(await held('alice', 5000), 'now', 'the third runs at once');
  assert.equal(await held('alice', 0), 'now', 'a wait of 0 takes no slot');
  const bobs = held('bob', 3000);
  assert.deepEqual(asked, [
    ['alice', 5000],
    ['alice', 5000],
    ['alice', 0],
    ['alice', 0],
    ['bob', 3000],
  ]);
  assert.deepEqual([slots.holding('alice'), slots.holding('bob')], [2, 1]);
  for (const open of gates.splice(0)) open();
  assert.deepEqual(await Promise.all([first, second, bobs]), ['waited', 'waited', 'waited']);
  assert.deepEqual([slots.holding('alice'), slots.holding('bob')], [0, 0]);

  await assert.rejects(
    slots.bounded('alice', 100, () => Promise.reject(new Error('the wait failed'))),
    /the wait failed/,
  );
  assert.equal(slots.holding('alice'), 0, 'a wait that threw gave its slot back');
});

test('past the total of waits all principals hold at once, a wait runs at once whoever asks; one ended frees one', async () => {
  const slots = new WaitSlots(2, 3);
  const asked: [string, number][] = [];
  const gates: (() => void)[] = [];
  const held = (principalId: string) =>
    slots.bounded(principalId, 5000, (granted) => {
      asked.push([principalId, granted]);
      return granted === 0 ? Promise.resolve('now') : new Promise<string>((resolve) => gates.push(() => resolve('waited')));
    });
  const waiting = [held('alice'), held('alice'), held('bob')];
  assert.equal(await held('bob'), 'now', 'bob holds 1 of his 2, but the process holds 3 of 3');
  assert.equal(await held('carol'), 'now');
  assert.deepEqual(asked.slice(3), [
    ['bob', 0],
    ['carol', 0],
  ]);
  gates.shift()!();
  assert.equal(await waiting[0], 'waited');
  const carols = held('carol');
  assert.deepEqual(asked.at(-1), ['carol', 5000], 'the wait given back is carol’s to take');
  for (const open of gates.splice(0)) open();
  assert.deepEqual(await Promise.all([...waiting.slice(1), carols]), ['waited', 'waited', 'waited']);
});
