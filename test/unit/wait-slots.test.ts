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
