/**
 * Snapshots of the JetStream index view (jetstream-index-feed.ts), so that a new view starts from
 * one stored object plus the rows stored after it instead of reading every row of the index
 * stream (docs/decisions/jetstream-list-view.md, "Snapshots").
 *
 * A snapshot is the view at one index stream sequence S: every operation's and workflow
 * instance's row as the stream held them once the messages up to S were applied. The index
 * stream keeps one message per subject, so applying, in sequence order, every message after S to
 * that state gives the view the whole stream gives: a row superseded after S is delivered again
 * in the tail, a tombstone's removal marker too. A snapshot of another incarnation of the stream
 * (its creation instant differs) or past its last sequence (the server lost writes) is not used.
 *
 * Snapshots are now written as pages (jetstream-index-pages.ts), in this module's body layout
 * (encodeBody, bodyOf). This module still creates the stream and reads a version 2 snapshot an
 * earlier build wrote, so that the first view after an upgrade need not read every row: the body,
 * gzipped JSON, in chunks on `<prefix>.isnap.<generation>.<n>`, and a head on
 * `<prefix>.isnap.head` naming the generation, the sequence, the chunks and the body's SHA-256. A
 * chunk missing or a digest wrong (a newer snapshot replaced it meanwhile) starts the view
 * without it; the first generation of pages purges the chunks and the head. Every failure here is quiet:
 * without a snapshot a view reads every row.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip as gunzipCb } from 'node:zlib';
import { DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { OperationIndexRow } from '../../events/operation-index.js';
import type { WorkflowIndexRow } from '../../events/workflow-index.js';
import { indexRowFieldsOf } from './index-row.js';
import { addedMeanwhile } from './jetstream-stream-limits.js';
import { workflowIndexRowOf } from './workflow-rows.js';

const gunzip = promisify(gunzipCb);

/** Chunk reads in flight while a snapshot is read. */
const chunkReadsInFlight = 8;
/**
 * The body's layout; a head of another version is not read (a view then reads every row and
 * writes a snapshot of this version). 2: the operations' rows by column (`operations[field][n]`
 * is row n's field), their texts (principal, contract, version, interaction, phase, outcome,
 * settlement) as indexes into one table of the distinct texts: a third of the bytes of one
 * object per row, no object or array per row to parse, and each distinct text one string in
 * memory. Workflow instances' rows are kept as they are (there are few).
 */
const snapshotVersion = 2;

const tabled = ['principalId', 'contractId', 'contractVersion', 'interaction', 'phase', 'outcome', 'settlement'] as const;
const plain = [
  'operationId',
  'admittedAtMs',
  'decidedAtMs',
  'settledAtMs',
  'deadlineMs',
  'nextDueMs',
  'openBranches',
  'lastRejection',
  'leaseExpiresAtMs',
  'outboxPendingSinceMs',
  'revision',
] as const satisfies readonly (keyof OperationIndexRow)[];
type Columns = Record<(typeof tabled)[number] | (typeof plain)[number], unknown[]>;

export interface SnapshotHost {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The snapshot stream (`<stream>_INDEX_SNAP`). */
  stream: string;
  /** Subjects are `<subjectPrefix>head` and `<subjectPrefix><generation>.<n>` (`<prefix>.isnap.`). */
  subjectPrefix: string;
  requestTimeoutMs: number;
  /**
   * Told when reading or writing a snapshot failed for another reason than there being none (a
   * user whose permissions do not include the snapshot stream, a server that refuses): the view
   * goes on without it.
   */
  onFailure?: (doing: 'reading' | 'writing', error: unknown) => void;
}

/** The view at index stream sequence `seq`. */
export interface IndexSnapshot {
  seq: number;
  operations: OperationIndexRow[];
  workflows: WorkflowIndexRow[];
}

interface Head {
  v: number;
  /** The index stream's creation instant, as its info reported it. */
  created: string;
  seq: number;
  generation: string;
  chunks: number;
  sha256: string;
}

const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The stream of the index view's snapshots beside operations stream `streamName`. */
export function snapshotStreamName(streamName: string): string {
  return `${streamName}_INDEX_SNAP`;
}

/**
 * Creates the snapshot stream unless it exists. Undefined when it is there; else why it cannot be
 * had (no permission to read or create it — the generated permissions of a deployment from before
 * snapshots — or a server that refuses): the store then runs without snapshots.
 */
export async function ensureSnapshotStream(jsm: JetStreamManager, streamName: string, prefix: string): Promise<string | undefined> {
  const name = snapshotStreamName(streamName);
  try {
    await jsm.streams.info(name);
    return undefined;
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === 10059)) return `stream ${name} cannot be read (${describe(error)})`;
  }
  try {
    await jsm.streams.add({
      name,
      subjects: [`${prefix}.isnap.>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_msgs_per_subject: 1,
      allow_direct: true,
    });
    return undefined;
  } catch (error) {
    return (await addedMeanwhile(jsm, name, error)) ? undefined : `stream ${name} is missing and cannot be created (${describe(error)})`;
  }
}

/** The newest usable snapshot of the index stream created at `created` and holding up to `lastSeq`, or undefined. */
export async function readSnapshot(host: SnapshotHost, created: string, lastSeq: number): Promise<IndexSnapshot | undefined> {
  try {
    const headMsg = await host.jsm.streams.getMessage(host.stream, { last_by_subj: `${host.subjectPrefix}head` });
    const head = headMsg ? headOf(headMsg.json<unknown>()) : undefined;
    if (!head || head.created !== created || head.seq > lastSeq) return undefined;
    const chunks: Uint8Array[] = new Array<Uint8Array>(head.chunks);
    let gone = false;
    for (let at = 0; at < head.chunks && !gone; at += chunkReadsInFlight) {
      const reads = [];
      for (let n = at; n < Math.min(head.chunks, at + chunkReadsInFlight); n++)
        reads.push(
          // A direct get answers the raw bytes (the stream API's answer carries them in base64 JSON).
          host.jsm.direct.getMessage(host.stream, { last_by_subj: `${host.subjectPrefix}${head.generation}.${n}` }).then((m) => {
            if (m) chunks[n] = m.data;
            else gone = true;
          }),
        );
      await Promise.all(reads);
    }
    // A chunk gone: a newer snapshot replaced this one meanwhile.
    if (gone) return undefined;
    const packed = Buffer.concat(chunks);
    if (createHash('sha256').update(packed).digest('hex') !== head.sha256) return undefined;
    return bodyOf(head.seq, (await gunzip(packed)).toString('utf8'));
  } catch (error) {
    host.onFailure?.('reading', error);
    return undefined;
  }
}

function headOf(value: unknown): Head | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const h = value as Record<string, unknown>;
  const ok =
    h.v === snapshotVersion &&
    typeof h.created === 'string' &&
    Number.isSafeInteger(h.seq) &&
    (h.seq as number) >= 0 &&
    typeof h.generation === 'string' &&
    /^[0-9a-f]{32}$/.test(h.generation) &&
    Number.isSafeInteger(h.chunks) &&
    (h.chunks as number) > 0 &&
    typeof h.sha256 === 'string';
  return ok ? (h as unknown as Head) : undefined;
}

/** The body: the distinct texts, the operations' rows by column over them, the workflow instances' rows as they are. */
export function encodeBody(snapshot: IndexSnapshot): { texts: string[]; operations: Columns; workflows: WorkflowIndexRow[] } {
  const texts: string[] = [];
  const at = new Map<string, number>();
  const text = (value: string | null): number | null => {
    if (value === null) return null;
    let n = at.get(value);
    if (n === undefined) at.set(value, (n = texts.push(value) - 1));
    return n;
  };
  const rows = snapshot.operations;
  const operations = {} as Columns;
  for (const field of tabled) operations[field] = rows.map((row) => text(row[field]));
  for (const field of plain) operations[field] = rows.map((row) => row[field]);
  return { texts, operations, workflows: snapshot.workflows };
}

/** A tabled text's index, as its text (a number out of the table: a value no row has, so the row check refuses it). */
function tabledText(value: unknown, texts: readonly string[]): unknown {
  if (value === null) return null;
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) < texts.length ? texts[value as number] : undefined;
}

/**
 * The operations' rows from their columns, each checked as a stored row is (undefined when one
 * is not a row, or the columns differ in length). Each row is spelled out as one object literal
 * of exactly the row's fields: every row gets the same shape at once, and its fields need no
 * counting (indexRowFieldsOf).
 */
function rowsOfColumns(columns: unknown, texts: readonly string[]): OperationIndexRow[] | undefined {
  if (typeof columns !== 'object' || columns === null) return undefined;
  const c = columns as Partial<Columns>;
  const length = c.operationId?.length ?? 0;
  for (const field of [...tabled, ...plain]) if (!Array.isArray(c[field]) || c[field].length !== length) return undefined;
  const k = c as Columns;
  const rows: OperationIndexRow[] = new Array<OperationIndexRow>(length);
  for (let n = 0; n < length; n++) {
    const row = indexRowFieldsOf({
      operationId: k.operationId[n],
      principalId: tabledText(k.principalId[n], texts),
      contractId: tabledText(k.contractId[n], texts),
      contractVersion: tabledText(k.contractVersion[n], texts),
      interaction: tabledText(k.interaction[n], texts),
      phase: tabledText(k.phase[n], texts),
      outcome: tabledText(k.outcome[n], texts),
      settlement: tabledText(k.settlement[n], texts),
      admittedAtMs: k.admittedAtMs[n],
      decidedAtMs: k.decidedAtMs[n],
      settledAtMs: k.settledAtMs[n],
      deadlineMs: k.deadlineMs[n],
      nextDueMs: k.nextDueMs[n],
      openBranches: k.openBranches[n],
      lastRejection: k.lastRejection[n],
      leaseExpiresAtMs: k.leaseExpiresAtMs[n],
      outboxPendingSinceMs: k.outboxPendingSinceMs[n],
      revision: k.revision[n],
    });
    if (!row) return undefined;
    rows[n] = row;
  }
  return rows;
}

/** The snapshot's rows, each checked as a stored row is (a body with one row that is not one is no snapshot). */
export function bodyOf(seq: number, text: string): IndexSnapshot | undefined {
  const body = JSON.parse(text) as { texts?: unknown; operations?: unknown; workflows?: unknown };
  if (!Array.isArray(body.texts) || !body.texts.every((t) => typeof t === 'string')) return undefined;
  if (!Array.isArray(body.workflows)) return undefined;
  const operations = rowsOfColumns(body.operations, body.texts as string[]);
  if (!operations) return undefined;
  const workflows: WorkflowIndexRow[] = [];
  for (const value of body.workflows as unknown[]) {
    const row = workflowIndexRowOf(value);
    if (!row) return undefined;
    workflows.push(row);
  }
  return { seq, operations, workflows };
}
