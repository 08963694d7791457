/**
 * An ended parent's record of what became of its children (executor.ts settle): a disposal the
 * store refuses is tried again with a wait that doubles from a second to a minute, not every
 * second for ever, and the failures are told at the 1st, 2nd, 4th, 8th… in a row; once the store
 * takes it again, it is recorded within that minute.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { disposeRetryMaxMs } from '../../src/workflow/exec/executor.js';
import { faultsDocument, harness, slowDocument, workflowsAmong } from './support.js';
import { storeWith } from '../support/scenario.js';

test('a disposal the store keeps refusing is tried again less and less often, then recorded within a minute of the store taking it', async () => {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  let refuse = true;
  const tries: number[] = [];
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) => {
      if (!args[2].events.some((event) => (event.type as string) === 'subworkflow-disposed')) return real.append(...args);
      tries.push(clock.nowMs());
      return refuse ? { kind: 'invalid-input', description: 'the log takes no more' } : real.append(...args);
    },
  }));
  const h = harness({ store, clock, workflows: workflowsAmong([slowDocument]) });
  try {
    const told = h.executor.failures.length;
    const { instanceId: parent } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: faultsDocument, input: {} });
    await clock.advance(0);
    assert.equal((await h.executor.get(parent))?.status, 'faulted');
    const hour = 3_600_000;
    for (let elapsed = 0; elapsed < hour; elapsed += 1000) await clock.advance(1000);

    const gaps = tries.slice(1).map((at, i) => at - tries[i]!);
    assert.ok(tries.length >= 10 && tries.length < 100, `${tries.length} tries in an hour (first gaps ${gaps.slice(0, 12).join(', ')})`);
    assert.deepEqual(gaps.slice(0, 5), [1000, 2000, 4000, 8000, 16_000], 'the wait doubles from a second');
    assert.ok(Math.max(...gaps) <= disposeRetryMaxMs, `no wait past ${disposeRetryMaxMs} ms: ${gaps.join(', ')}`);
    assert.equal(gaps.at(-1), disposeRetryMaxMs, 'it ends at the cap');
    // Told at the 1st, 2nd, 4th, 8th… failure in a row, not at each.
    const failures = tries.length;
    const expected = Math.floor(Math.log2(failures)) + 1;
    assert.equal(h.executor.failures.length - told, expected, `${failures} failures told ${h.executor.failures.length - told} times`);

    refuse = false;
    await clock.advance(disposeRetryMaxMs);
    assert.equal(Object.values((await h.executor.get(parent))!.subworkflows)[0]!.disposition?.disposition, 'cancelled');
  } finally {
    await h.close();
    await memory.close();
  }
});
