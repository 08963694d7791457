/**
 * The JetStream store's open set (src/adapters/store/jetstream-open-set.ts) when the broker loses
 * acknowledged writes to it (nats-server 2.9 after a SIGKILL, reproduced by restoring an older copy
 * of the stream's messages while the server is stopped, test/support/lost-writes.ts): a marker is
 * gone while the admission it preceded survived. The store that published the lost marker sees
 * the stream's sequence go back at its next marker, takes the set's completeness record away, and
 * the next listing reads the history again: the admission is still listed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { startNatsServer } from '../support/nats-server.js';
import { restoreStreamPart, snapshotStreamPart, type StoreSnapshot } from '../support/lost-writes.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { expectOk, newOperationId } from '../conformance/store.js';
import { admission } from '../conformance/index.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

async function admit(store: JetStreamEventStore, label: string): Promise<string> {
  const id = newOperationId(label);
  // Right after a broker restart the store's connection may still be coming back.
  let outcome = await store.create(id, admission(id, guard));
  for (let tries = 0; outcome.kind === 'unavailable' && tries < 40; tries++) {
    await new Promise((r) => setTimeout(r, 250));
    outcome = await store.create(id, admission(id, guard));
  }
  expectOk(outcome, `create ${label}`);
  return id;
}

async function listed(store: JetStreamEventStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of store.index.openOperationIds()) ids.push(id);
  return ids.sort();
}

/** A store and the broker under it, once the broker has lost an acknowledged marker (lostMarker). */
interface LostMarker {
  store: JetStreamEventStore;
  servers: string;
  /** Admitted before the snapshot: its marker survives. */
  kept: string;
  /** Admitted after it: its admission survives, its marker is lost. */
  lost: string;
}

/**
 * Runs `fn` once the broker (in a store directory `prefix`-named) has lost the open-set marker of
 * one admission: `kept` is admitted, the open set is copied while the server is stopped, `lost` is
 * admitted, and the copy is put back while it is stopped again. The store that admitted both is
 * reachable again when `fn` runs; everything is closed and removed after it.
 */
async function lostMarker(prefix: string, fn: (at: LostMarker) => Promise<void>): Promise<void> {
  const storeDir = await mkdtemp(join(tmpdir(), prefix));
  let server = await startNatsServer({ jetstream: true, storeDir });
  const port = server.port;
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  let snapshot: StoreSnapshot | undefined;
  try {
    const kept = await admit(store, 'kept');
    // The open set as it is now (the record, kept's marker) is what the broker will come back with.
    await server.stop();
    snapshot = await snapshotStreamPart(storeDir, 'CONVOKE_OPS_OPEN', 'msgs');
    server = await startNatsServer({ jetstream: true, storeDir, port });
    // This store remembers the sequence lost's marker was stored at; the broker then loses it.
    const lost = await admit(store, 'lost-marker');
    // The broker loses lost's marker; its admission (in the operations stream) survives.
    await server.stop();
    await restoreStreamPart(storeDir, 'CONVOKE_OPS_OPEN', snapshot);
    server = await startNatsServer({ jetstream: true, storeDir, port });
    await eventually(async () => (await store.read(lost)).kind === 'ok', 'the store reachable again', 30_000);
    await fn({ store, servers: server.url, kept, lost });
  } finally {
    await store.close();
    await snapshot?.dispose();
    await server.dispose();
    await rm(storeDir, { recursive: true, force: true });
  }
}

test('jetstream: an admission whose open-set marker the broker lost is still listed for recovery', { timeout: 120_000 }, () =>
  lostMarker('convoke-lost-marker-', async ({ store, servers, kept, lost }) => {
    // The next admission's marker is stored at a sequence the store saw before: the loss shows.
    const later = await admit(store, 'later');
    const restarted = await JetStreamEventStore.open({ servers, requestTimeoutMs: 2000 });
    try {
      assert.deepEqual(await listed(restarted), [kept, later, lost].sort());
      assert.deepEqual(await listed(restarted), [kept, later, lost].sort(), 'and from the markers the history listing wrote');
    } finally {
      await restarted.close();
    }
  }),
);

test(
  'jetstream: after the broker lost a marker, its sequence given to another marker is not deleted by the store that remembers it',
  { timeout: 120_000 },
  () =>
    lostMarker('convoke-reused-seq-', async ({ store, servers, kept, lost }) => {
      // Another store's marker is stored at the sequence lost's marker had.
      const other = await JetStreamEventStore.open({ servers, requestTimeoutMs: 2000 });
      try {
        const reused = await admit(other, 'reused-seq');
        // lost is tombstoned by the store that remembers its marker's sequence, before it marks anything again.
        expectOk(await store.tombstone(lost), 'tombstone lost');
        assert.deepEqual(await listed(other), [kept, reused].sort());
      } finally {
        await other.close();
      }
    }),
);
