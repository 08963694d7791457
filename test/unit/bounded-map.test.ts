import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BoundedMap } from '../../src/contract/bounded-map.js';

/** The reference: entries in the order they were last set; the oldest leave beyond the bound. */
class ModelMap {
  entries: [string, number][] = [];
  constructor(private readonly max: number) {}
  set(key: string, value: number): string | undefined {
    this.entries = this.entries.filter(([k]) => k !== key);
    this.entries.push([key, value]);
    return this.entries.length > this.max ? this.entries.shift()![0] : undefined;
  }
  delete(key: string): void {
    this.entries = this.entries.filter(([k]) => k !== key);
  }
  get(key: string): number | undefined {
    return this.entries.find(([k]) => k === key)?.[1];
  }
}

type Command = { op: 'set'; key: string; value: number } | { op: 'delete'; key: string } | { op: 'get'; key: string };

const key = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('set' as const), key, value: fc.integer() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('delete' as const), key }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('get' as const), key }) },
);

test('the bounded map keeps exactly the newest-set entries, in order, whatever the commands (fast-check against a model)', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 5 }), fc.array(command, { minLength: 100, maxLength: 400 }), (max, commands) => {
      const map = new BoundedMap<string, number>(max);
      const model = new ModelMap(max);
      for (const c of commands) {
        if (c.op === 'set') {
          assert.equal(map.set(c.key, c.value), model.set(c.key, c.value), 'the evicted key');
        } else if (c.op === 'delete') {
          map.delete(c.key);
          model.delete(c.key);
        } else {
          assert.equal(map.get(c.key), model.get(c.key));
          assert.equal(map.has(c.key), model.get(c.key) !== undefined);
        }
        assert.deepEqual(
          [...map.keysOldestFirst()],
          model.entries.map(([k]) => k),
        );
        assert.equal(map.size, model.entries.length);
        // The order slots stay within about twice the live entries, however many sets went by.
        const slots = (map as unknown as { keys: unknown[] }).keys.length;
        assert.ok(slots <= 2 * map.size + 32, `${slots} order slots for ${map.size} entries`);
      }
    }),
    { numRuns: 2_000 },
  );
});

test('a long run at the bound keeps the newest entries and nothing else', () => {
  const map = new BoundedMap<number, number>(1000);
  for (let i = 0; i < 100_000; i++) {
    map.set(i, i);
    if (i % 3 === 0) map.set(i - 1, -i); // setting again makes it the newest
  }
  assert.equal(map.size, 1000);
  assert.equal(map.get(99_999), 99_999);
  assert.equal(map.get(0), undefined);
  const keys = [...map.keysOldestFirst()];
  assert.equal(keys.length, 1000);
  assert.equal(new Set(keys).size, 1000);
});

test('churn on a few keys (set again, set and delete) keeps the order slots bounded', () => {
  const map = new BoundedMap<string, number>(4);
  for (let i = 0; i < 10_000; i++) {
    map.set('again', i);
    map.set('gone', i);
    map.delete('gone');
  }
  assert.deepEqual([...map.keysOldestFirst()], ['again']);
  assert.ok((map as unknown as { keys: unknown[] }).keys.length <= 2 * map.size + 32);
});

test('a bound must be a positive integer', () => {
  assert.throws(() => new BoundedMap(0));
  assert.throws(() => new BoundedMap(1.5));
});
