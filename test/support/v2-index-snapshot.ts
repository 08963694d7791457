/**
 * A version 2 snapshot of the JetStream index view, written as the build before paged snapshots
 * wrote it (its writeSnapshot, removed since; jetstream-index-snapshot.ts still reads it): the
 * body (encodeBody), gzipped JSON, cut into chunks of at most 512 KiB published on
 * `<prefix>.isnap.<generation>.<n>`, then the head on `<prefix>.isnap.head` naming the body's
 * version (2), the index stream's creation instant, the sequence, the generation, the number of
 * chunks and the SHA-256 of the gzipped body. The rows are a view's held rows (oldest first), as
 * that writer took them.
 */
import { createHash, randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { JetStreamIndexFeed } from '../../src/adapters/store/jetstream-index-feed.js';
import { encodeBody, type IndexSnapshot } from '../../src/adapters/store/jetstream-index-snapshot.js';

/** The earlier build's chunk size. */
export const v2ChunkBytes = 512 * 1024;

export interface V2Snapshot {
  generation: string;
  chunks: number;
  /** The chunks' subjects, in order. */
  chunkSubjects: string[];
  headSubject: string;
  /** The gzipped body the chunks hold. */
  packed: Buffer;
}

/**
 * The view of every row of the index stream `stream` (no snapshot read) at its last sequence, and
 * the stream's creation instant: what the earlier build's view held when it wrote a snapshot.
 * Nothing may write the index meanwhile.
 */
export async function viewOfEveryRow(
  nc: NatsConnection,
  options: { stream?: string; rowPrefix?: string; requestTimeoutMs?: number } = {},
): Promise<{ created: string; snapshot: IndexSnapshot }> {
  const stream = options.stream ?? 'CONVOKE_OPS_INDEX';
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  const feed = await JetStreamIndexFeed.start({
    js: jetstream(nc),
    jsm,
    stream,
    subjectPrefix: options.rowPrefix ?? 'convoke.idx.',
    requestTimeoutMs: options.requestTimeoutMs ?? 2_000,
  });
  try {
    await feed.current();
    const again = await jsm.streams.info(stream);
    if (again.state.last_seq !== info.state.last_seq) throw new Error('the index was written while its view was taken');
    return {
      created: info.created,
      snapshot: { seq: info.state.last_seq, operations: feed.view.heldRows(), workflows: feed.workflowView.heldRows() },
    };
  } finally {
    await feed.close();
  }
}

/** Publishes `snapshot` of the index stream created at `created` as a version 2 snapshot: its chunks, then its head. */
export async function writeV2Snapshot(
  nc: NatsConnection,
  created: string,
  snapshot: IndexSnapshot,
  options: { snapshotPrefix?: string; chunkBytes?: number } = {},
): Promise<V2Snapshot> {
  const prefix = options.snapshotPrefix ?? 'convoke.isnap.';
  const chunkBytes = options.chunkBytes ?? v2ChunkBytes;
  const js = jetstream(nc);
  const packed = gzipSync(Buffer.from(JSON.stringify(encodeBody(snapshot)), 'utf8'));
  const generation = randomUUID().replaceAll('-', '');
  const chunks = Math.max(1, Math.ceil(packed.length / chunkBytes));
  const chunkSubjects = Array.from({ length: chunks }, (_, n) => `${prefix}${generation}.${n}`);
  for (let n = 0; n < chunks; n++) await js.publish(chunkSubjects[n]!, packed.subarray(n * chunkBytes, (n + 1) * chunkBytes));
  const head = { v: 2, created, seq: snapshot.seq, generation, chunks, sha256: createHash('sha256').update(packed).digest('hex') };
  const headSubject = `${prefix}head`;
  await js.publish(headSubject, JSON.stringify(head));
  return { generation, chunks, chunkSubjects, headSubject, packed };
}
