/**
 * A review operation in a SQLite store, for the CLI's tests of what hostile parties put in a
 * store: two peers approve with `note` as their result's note, under `principalId`.
 */
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';

/** Decides and settles the operation (invocation key `k-1`) in the store at `path`; its id. */
export async function settledNotedReview(path: string, principalId: string, note: string): Promise<string> {
  const clock = new SystemClock();
  const embedded = await createEmbedded({
    clock,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 } }),
    groups: { reviewers: peerIds(2) },
    store: new SqliteEventStore({ path, clock }),
  });
  try {
    for (const peer of peerIds(2)) await embedded.addPeer(peer, { review: () => ({ verdict: 'approve', note }) });
    const { result } = await embedded.coordinator.invoke(
      { principalId, senderPeerId: null },
      { contract: embedded.bundle.ref, interaction: 'review', invocationKey: 'k-1', input: { document: 'doc' } },
    );
    await embedded.coordinator.wait(principalId, result.operationId, 'settled', 10_000);
    return result.operationId;
  } finally {
    await embedded.close();
  }
}
