/** PrincipalSlots: what each principal holds of something bounded per principal, and (optionally) of all principals together. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PrincipalSlots } from '../../src/contract/principal-slots.js';

test('past its own bound a principal is refused; another principal is not; a slot given back twice counts once', () => {
  const slots = new PrincipalSlots(2);
  const alices = [slots.take('alice'), slots.take('alice')];
  assert.ok(alices.every((release) => release !== undefined));
  assert.equal(slots.take('alice'), undefined, 'the third of alice is refused');
  assert.deepEqual([slots.full('alice'), slots.full('bob')], ['principal', undefined], 'by her own bound');
  const bobs = slots.take('bob');
  assert.ok(bobs, 'bob is not held by alice’s bound');
  alices[0]!();
  alices[0]!();
  assert.deepEqual([slots.holding('alice'), slots.holding('bob'), slots.holdingTotal()], [1, 1, 2]);
  assert.ok(slots.take('alice'), 'a slot given back is taken again');
  assert.equal(slots.take('alice'), undefined, 'given back twice, it freed one slot');
});

test('with a total of N, the N+1th slot is refused whoever holds the N, each principal under its own bound; a slot given back frees one, for any principal', () => {
  const slots = new PrincipalSlots(3, 4);
  const alices = [slots.take('alice'), slots.take('alice')];
  const bobs = [slots.take('bob'), slots.take('bob')];
  assert.ok([...alices, ...bobs].every((release) => release !== undefined));
  assert.equal(slots.holdingTotal(), 4);
  assert.equal(slots.take('alice'), undefined, 'alice holds 2 of her 3, but all principals hold the total');
  assert.equal(slots.take('bob'), undefined, 'so does bob');
  assert.equal(slots.take('carol'), undefined, 'and a principal holding none');
  assert.deepEqual([slots.full('alice'), slots.full('carol')], ['total', 'total'], 'refused by the total, not by their own bounds');
  assert.deepEqual([slots.holding('alice'), slots.holding('bob'), slots.holding('carol'), slots.holdingTotal()], [2, 2, 0, 4]);

  bobs[0]!();
  bobs[0]!();
  assert.equal(slots.holdingTotal(), 3, 'a slot given back twice frees one');
  const carols = slots.take('carol');
  assert.ok(carols, 'the freed slot goes to whoever asks first, not only to bob');
  assert.equal(slots.take('alice'), undefined, 'and only one was freed');
  for (const release of [...alices, bobs[1]!, carols]) release!();
  assert.equal(slots.holdingTotal(), 0);
  assert.deepEqual([slots.holding('alice'), slots.holding('bob'), slots.holding('carol')], [0, 0, 0]);
});

test('a total below the per-principal bound bounds one principal too', () => {
  const slots = new PrincipalSlots(5, 2);
  assert.ok(slots.take('alice'));
  assert.ok(slots.take('alice'));
  assert.equal(slots.take('alice'), undefined);
  assert.equal(slots.full('alice'), 'total');
});
