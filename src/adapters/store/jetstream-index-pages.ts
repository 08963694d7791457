/**
 * The JetStream index's paged snapshot (docs/decisions/jetstream-paged-index.md): the view's rows
 * at one index stream sequence S cut into pages in list order (index-pages.ts), each page its own
 * message, and a directory naming every page with its key range and summary. A one-shot reader
 * (jetstream-index.ts `list` before any view runs) reads the directory, the rows stored after S,
 * and only the pages a page needs; a view starts from every page (jetstream-index-feed.ts).
 *
 * Stored in `<stream>_INDEX_SNAP` (last message per subject): each page, gzipped JSON in the
 * snapshot body's layout (jetstream-index-snapshot.ts: operations by column, or workflow
 * instances' rows), on `<prefix>.isnap.p.<page id>`; then the directory, gzipped JSON, on
 * `<prefix>.isnap.dir` — written last, so a directory names only pages already stored, and a
 * reader takes the newest directory. A page whose rows did not change since the writer's last
 * generation is named again, not written again. After the directory, every page named neither
 * by it nor by the directory it replaced is purged (so a reader that has just read the replaced
 * one still finds its pages), with the chunks of a version 2 snapshot. A page a reader misses
 * (purged meanwhile) or whose digest is wrong makes the reader fall back to a view.
 *
 * Several writers: a writer reuses its own pages only while the stored directory is its own,
 * and does not write while another writer's directory is less than tailMin rows behind. A
 * slower writer's older directory replacing a newer one is still exact (its tail is longer).
 */
import { createHash, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip as gunzipCb, gzip as gzipCb } from 'node:zlib';
import type { OperationIndexRow } from '../../events/operation-index.js';
import type { WorkflowIndexRow } from '../../events/workflow-index.js';
import { operationPages } from './index-view.js';
import { instancePages } from './workflow-index-view.js';
import { paginate, summarize, type PageKey, type PageSummary, type PagedKind } from './index-pages.js';
import { bodyOf, encodeBody, type IndexSnapshot, type SnapshotHost } from './jetstream-index-snapshot.js';
import type { RowShape } from './row-view.js';
import { inBatches } from './in-batches.js';

const gzip = promisify(gzipCb);
const gunzip = promisify(gunzipCb);

const directoryVersion = 3;
/** Rows per page by default. */
export const pageRowsDefault = 1000;
/** A directory (gzipped) larger than this is not written: it must fit nats-server's default max_payload of 1 MiB. */
const directoryBytesMax = 900 * 1024;
/** Page reads or writes in flight. */
const pagesInFlight = 8;

export type PageKind = 'operations' | 'workflows';

/** A page as the directory names it. */
export interface DirectoryPage extends PageSummary {
  id: string;
  sha256: string;
}

/** One generation of pages: the view at index stream sequence `seq`, pages in list order (newest first). */
export interface Directory {
  v: number;
  /** The index stream's creation instant, as its info reported it. */
  created: string;
  seq: number;
  generation: string;
  operations: DirectoryPage[];
  workflows: DirectoryPage[];
}

/** What a writer keeps of the generation it wrote or started from: each page's rows, oldest page first, to name unchanged pages again. */
export interface WrittenPages {
  generation: string;
  operations: { id: string; rows: OperationIndexRow[] }[];
  workflows: { id: string; rows: WorkflowIndexRow[] }[];
}

/** A page the directory names is gone (a newer generation's writer purged it) or is not what the directory says. */
export class PageGone extends Error {
  override readonly name = 'PageGone';
}

const directorySubject = (host: SnapshotHost) => `${host.subjectPrefix}dir`;
const pageSubject = (host: SnapshotHost, id: string) => `${host.subjectPrefix}p.${id}`;

/** The stored directory, whatever it is of (undefined when none, or not a directory of this version). */
async function storedDirectory(host: SnapshotHost): Promise<Directory | undefined> {
  const msg = await host.jsm.direct.getMessage(host.stream, { last_by_subj: directorySubject(host) });
  if (!msg) return undefined;
  return directoryOf(JSON.parse((await gunzip(msg.data)).toString('utf8')));
}

/** The newest directory of the index stream created at `created` and holding up to `lastSeq`, or undefined. */
export async function readDirectory(host: SnapshotHost, created: string, lastSeq: number): Promise<Directory | undefined> {
  const directory = await storedDirectory(host);
  return directory && directory.created === created && directory.seq <= lastSeq ? directory : undefined;
}

/** A page's rows, oldest first, checked as stored rows are. Throws PageGone when it is missing or not the page named. */
export async function readPage(host: SnapshotHost, kind: 'operations', page: DirectoryPage): Promise<OperationIndexRow[]>;
export async function readPage(host: SnapshotHost, kind: 'workflows', page: DirectoryPage): Promise<WorkflowIndexRow[]>;
export async function readPage(host: SnapshotHost, kind: PageKind, page: DirectoryPage): Promise<OperationIndexRow[] | WorkflowIndexRow[]> {
  const msg = await host.jsm.direct.getMessage(host.stream, { last_by_subj: pageSubject(host, page.id) });
  if (!msg) throw new PageGone(`page ${page.id} is gone`);
  if (createHash('sha256').update(msg.data).digest('hex') !== page.sha256) throw new PageGone(`page ${page.id} is not the page named`);
  const body = bodyOf(0, (await gunzip(msg.data)).toString('utf8'));
  const rows = body?.[kind];
  if (!rows || rows.length !== page.rows) throw new PageGone(`page ${page.id} holds no rows of its kind`);
  return rows;
}

/** Every page of `directory`: the snapshot a view starts from, and the pages as its writer keeps them. Throws PageGone. */
export async function readAllPages(host: SnapshotHost, directory: Directory): Promise<{ snapshot: IndexSnapshot; written: WrittenPages }> {
  const oldestFirst = <T>(kind: PageKind, pages: DirectoryPage[]) =>
    inBatches([...pages].reverse(), pagesInFlight, async (page) => ({
      id: page.id,
      rows: (await readPage(host, kind as 'operations', page)) as unknown as T[],
    }));
  const operations = await oldestFirst<OperationIndexRow>('operations', directory.operations);
  const workflows = await oldestFirst<WorkflowIndexRow>('workflows', directory.workflows);
  return {
    snapshot: { seq: directory.seq, operations: operations.flatMap((p) => p.rows), workflows: workflows.flatMap((p) => p.rows) },
    written: { generation: directory.generation, operations, workflows },
  };
}

/**
 * Writes the view at `seq` (its rows oldest first) as a new generation: the pages that changed
 * since `previous` (this writer's last generation, while the stored directory is still it), then
 * the directory, then purges what no directory names. Undefined when it did not write: another
 * writer's directory is less than `tailMin` rows behind `seq` (unless `replace`). Throws what failed.
 */
export async function writePages(
  host: SnapshotHost,
  created: string,
  view: IndexSnapshot,
  previous: WrittenPages | undefined,
  /** `replace`: write even over a recent directory of another writer (its pages are found gone). */
  options: { pageRows: number; tailMin: number; replace?: boolean },
): Promise<WrittenPages | undefined> {
  const stored = await storedDirectory(host).catch(() => undefined);
  const own = stored !== undefined && previous !== undefined && stored.generation === previous.generation;
  if (stored && !own && !options.replace && stored.created === created && view.seq - stored.seq < options.tailMin) return undefined;
  const generation = randomUUID().replaceAll('-', '');
  const named = new Map((own ? [...stored.operations, ...stored.workflows] : []).map((page) => [page.id, page]));
  const cutKind = async <Row, Q, P>(which: PageKind, kind: PagedKind<Row, Q & { limit: number }, P>, rows: Row[], earlier: { id: string; rows: Row[] }[]) => {
    const cut = paginate(kind.shape as unknown as RowShape<Row, never, unknown>, rows, own ? earlier : [], options.pageRows);
    return inBatches(cut, pagesInFlight, async ({ rows: pageRows, same }) => {
      const again = same === undefined ? undefined : named.get(same);
      if (again) return { id: again.id, rows: pageRows, entry: again };
      const id = randomUUID().replaceAll('-', '');
      const body = which === 'operations' ? { seq: 0, operations: pageRows, workflows: [] } : { seq: 0, operations: [], workflows: pageRows };
      const packed = await gzip(Buffer.from(JSON.stringify(encodeBody(body as IndexSnapshot)), 'utf8'));
      await host.js.publish(pageSubject(host, id), packed, { timeout: host.requestTimeoutMs });
      const entry: DirectoryPage = { id, sha256: createHash('sha256').update(packed).digest('hex'), ...summarize(kind, pageRows) };
      return { id, rows: pageRows, entry };
    });
  };
  const operations = await cutKind('operations', operationPages, view.operations, previous?.operations ?? []);
  const workflows = await cutKind('workflows', instancePages, view.workflows, previous?.workflows ?? []);
  const directory: Directory = {
    v: directoryVersion,
    created,
    seq: view.seq,
    generation,
    operations: operations.map((p) => p.entry).reverse(),
    workflows: workflows.map((p) => p.entry).reverse(),
  };
  const packed = await gzip(Buffer.from(JSON.stringify(directory), 'utf8'));
  if (packed.length > directoryBytesMax) throw new Error(`the index directory would take ${packed.length} bytes (at most ${directoryBytesMax})`);
  await host.js.publish(directorySubject(host), packed, { timeout: host.requestTimeoutMs });
  await purgeUnnamed(host, directory, stored);
  return {
    generation,
    operations: operations.map(({ id, rows }) => ({ id, rows })),
    workflows: workflows.map(({ id, rows }) => ({ id, rows })),
  };
}

/**
 * Purges every page neither directory names, and a version 2 snapshot: its chunks
 * (`<generation>.<n>`) and its head (`head`), which would otherwise send every view start that
 * finds no usable directory to read chunks that are gone.
 */
async function purgeUnnamed(host: SnapshotHost, directory: Directory, replaced: Directory | undefined): Promise<void> {
  const keep = new Set([directory, ...(replaced ? [replaced] : [])].flatMap((d) => [...d.operations, ...d.workflows].map((p) => pageSubject(host, p.id))));
  keep.add(directorySubject(host));
  const info = await host.jsm.streams.info(host.stream, { subjects_filter: `${host.subjectPrefix}>` });
  const filters = new Set<string>();
  for (const subject of Object.keys(info.state.subjects ?? {})) {
    if (keep.has(subject)) continue;
    const [first] = subject.slice(host.subjectPrefix.length).split('.');
    filters.add(first === 'p' || first === 'head' ? subject : `${host.subjectPrefix}${first}.*`);
  }
  await inBatches([...filters], pagesInFlight, (filter) => host.jsm.streams.purge(host.stream, { filter }));
}

const isKey = (value: unknown): value is PageKey =>
  Array.isArray(value) && value.length === 2 && Number.isSafeInteger(value[0]) && typeof value[1] === 'string';
const isCounts = (value: unknown): value is Record<string, number> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((n) => Number.isSafeInteger(n) && (n as number) >= 0);

function pageOf(value: unknown): value is DirectoryPage {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  return (
    typeof p.id === 'string' &&
    /^[0-9a-f]{32}$/.test(p.id) &&
    typeof p.sha256 === 'string' &&
    Number.isSafeInteger(p.rows) &&
    (p.rows as number) > 0 &&
    isKey(p.first) &&
    isKey(p.last) &&
    isCounts(p.keys) &&
    Array.isArray(p.many) &&
    p.many.every((k) => typeof k === 'string') &&
    typeof p.earliest === 'object' &&
    p.earliest !== null &&
    Object.values(p.earliest).every((n) => typeof n === 'number' && Number.isFinite(n))
  );
}

/** A directory of this version, or undefined. */
function directoryOf(value: unknown): Directory | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const d = value as Record<string, unknown>;
  const ok =
    d.v === directoryVersion &&
    typeof d.created === 'string' &&
    Number.isSafeInteger(d.seq) &&
    (d.seq as number) >= 0 &&
    typeof d.generation === 'string' &&
    Array.isArray(d.operations) &&
    d.operations.every(pageOf) &&
    Array.isArray(d.workflows) &&
    d.workflows.every(pageOf);
  return ok ? (d as unknown as Directory) : undefined;
}
