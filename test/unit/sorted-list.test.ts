import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SortedList } from '../../src/contract/sorted-list.js';

type Command = { op: 'insert' | 'delete'; value: number } | { op: 'seek'; value: number };

const value = fc.integer({ min: 0, max: 60 });
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('insert' as const), value }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('delete' as const), value }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('seek' as const), value }) },
);

test('a sorted list holds its items sorted and unique, seeks (both ways) and counts like a sorted array (fast-check against a model)', () => {
  fc.assert(
    fc.property(fc.integer({ min: 4, max: 9 }), fc.array(command, { minLength: 50, maxLength: 500 }), (chunk, commands) => {
      // Small chunks: splits and merges happen within a few dozen items.
      const list = new SortedList<number>((a, b) => a - b, chunk);
      let model: number[] = [];
      for (const c of commands) {
        if (c.op === 'insert') {
          list.insert(c.value);
          if (!model.includes(c.value)) model = [...model, c.value].sort((a, b) => a - b);
        } else if (c.op === 'delete') {
          assert.equal(list.delete(c.value), model.includes(c.value), `delete ${c.value}`);
          model = model.filter((v) => v !== c.value);
        } else {
          const before = (v: number) => v < c.value;
          assert.deepEqual(
            [...list.from(before)],
            model.filter((v) => !before(v)),
            `from ${c.value}`,
          );
          assert.equal(list.countBefore(before), model.filter(before).length, `count before ${c.value}`);
          const after = (v: number) => v >= c.value;
          assert.deepEqual([...list.backFrom(after)], model.filter((v) => !after(v)).reverse(), `back from ${c.value}`);
        }
        assert.equal(list.size, model.length);
      }
      assert.deepEqual([...list], model);
    }),
    { numRuns: 200 },
  );
});

test('a list loaded at once from items in any order holds and updates them like one built by inserts (fast-check against a model)', () => {
  fc.assert(
    fc.property(fc.integer({ min: 4, max: 9 }), fc.uniqueArray(value), fc.array(command, { maxLength: 200 }), (chunk, items, commands) => {
      const list = new SortedList<number>((a, b) => a - b, chunk);
      list.load(items);
      let model = [...items].sort((a, b) => a - b);
      assert.deepEqual([...list], model);
      for (const c of commands) {
        if (c.op === 'insert') {
          list.insert(c.value);
          if (!model.includes(c.value)) model = [...model, c.value].sort((a, b) => a - b);
        } else if (c.op === 'delete') {
          assert.equal(list.delete(c.value), model.includes(c.value), `delete ${c.value}`);
          model = model.filter((v) => v !== c.value);
        }
        assert.equal(list.size, model.length);
        assert.equal(
          list.countBefore((v) => v < 30),
          model.filter((v) => v < 30).length,
        );
      }
      assert.deepEqual([...list], model);
      assert.deepEqual([...list.backFrom(() => false)], [...model].reverse());
    }),
    { numRuns: 200 },
  );
});

test('a tie replaces the item it ties with', () => {
  const list = new SortedList<{ key: number; label: string }>((a, b) => a.key - b.key);
  list.insert({ key: 1, label: 'first' });
  list.insert({ key: 1, label: 'second' });
  assert.equal(list.size, 1);
  assert.deepEqual([...list], [{ key: 1, label: 'second' }]);
});
