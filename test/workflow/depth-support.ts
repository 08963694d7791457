/**
 * What the tests of value depth share: values of a given depth, a value's depth, and an embedded
 * deployment whose one reviewer answers a result as deep as its input asks.
 */
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';

/** A value `levels` deep: objects in objects, the innermost empty (`{}` is 1 level). */
export function nested(levels: number): JsonObject {
  let value: JsonObject = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

/** How many levels `value` nests (a scalar is 0, `{}` 1). */
export function levelsOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const [item, depth] = entry;
    if (typeof item !== 'object' || item === null) continue;
    deepest = Math.max(deepest, depth + 1);
    for (const member of Object.values(item)) stack.push([member, depth + 1]);
  }
  return deepest;
}

/**
 * One reviewer answering a result `input.levels` deep (its `note`), collected into the output: a
 * contract call's answer holds it 4 levels down (output.outcomes[i].result).
 */
export async function deepReviewDeployment(clock: SystemClock): Promise<Embedded> {
  const peers = peerIds(1);
  const embedded = await createEmbedded({
    clock,
    store: new MemoryEventStore({ clock }),
    bundle: reviewBundle({
      input: { type: 'object', required: ['document'] },
      result: { type: 'object', required: ['verdict'] },
      output: { type: 'object' },
      aggregate: { kind: 'collect' },
      completion: { mode: 'quorum', count: 1 },
      timeoutMs: 1000,
    }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers)
    await embedded.addPeer(peerId, {
      review: async (input) => {
        const levels = (input as { levels?: number }).levels;
        const result: JsonObject = { verdict: 'approve' };
        if (typeof levels === 'number') result.note = nested(levels - 1);
        return result;
      },
    });
  return embedded;
}
