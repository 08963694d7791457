/** Scenario helpers: an embedded deployment on a virtual clock, and the replay-equality check. */
import assert from 'node:assert/strict';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { VirtualClock } from '../../src/runtime/clock.js';
import { createEmbedded, type Embedded } from '../../src/runtime/embedded.js';
import { peerIds, reviewBundle } from '../../src/runtime/examples.js';
import { fold } from '../../src/projections/record.js';
import type { Handler } from '../../src/peer/peer.js';

export interface Scenario extends Embedded {
  clock: VirtualClock;
  invoke(key: string, input?: JsonValue, principalId?: string): ReturnType<Embedded['coordinator']['invoke']>;
  /** Asserts the record rebuilt from the store's log equals the coordinator's live record. */
  assertReplayEquals(operationId: string): Promise<void>;
}

export async function scenario(options: { review?: JsonObject; peers?: number; groups?: Record<string, string[]> } = {}): Promise<Scenario> {
  const clock = new VirtualClock();
  const groups = options.groups ?? { reviewers: peerIds(options.peers ?? 5) };
  const embedded = await createEmbedded({ clock, bundle: reviewBundle(options.review), groups });
  return {
    ...embedded,
    clock,
    invoke: (key, input = { document: 'hello' }, principalId = 'svc-a') =>
      embedded.coordinator.invoke({ principalId, senderPeerId: null }, { contract: embedded.bundle.ref, interaction: 'review', invocationKey: key, input }),
    assertReplayEquals: async (operationId) => {
      const live = await embedded.coordinator.record(operationId);
      const read = await embedded.store.read(operationId);
      assert.equal(read.kind, 'ok');
      if (read.kind !== 'ok') return;
      assert.deepEqual(fold(read.transitions), live);
    },
  };
}

/** A handler that answers a fixed verdict. */
export const answers = (verdict: string): Handler => () => ({ verdict });

/** A handler that never answers (the request stays unanswered). */
export const silent: Handler = () => new Promise(() => {});
