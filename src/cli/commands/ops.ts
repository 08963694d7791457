/**
 * Operator tools over any store: `inspect` (one operation's transitions and projected record),
 * `tail` (new transitions as they are appended) and `replay` (rebuild every record from its log
 * through the XState machines themselves and compare with the runtime's projection, and every
 * operations index row with the row its log folds to; `--fix-index` writes differing rows again).
 */
import { isDeepStrictEqual } from 'node:util';
import { AdapterError, invalidInput } from '../../contract/errors.js';
import { isOperationId } from '../../contract/ids.js';
import { appliedFlags } from '../../projections/inspection.js';
import { openStore, redactStoreUrl } from '../../adapters/store/open.js';
import type { EventStore } from '../../adapters/store/types.js';
import type { StoredTransition } from '../../events/types.js';
import { transitionProblem } from '../../events/schemas.js';
import { branchOf, fold, machineSteps, type OperationRecord } from '../../projections/record.js';
import { branchViews, decisionView, settlementView } from '../../projections/views.js';
import { indexRowOfLog } from '../../projections/operation-index.js';
import type { OperationIndexRow } from '../../events/operation-index.js';
import { SystemClock } from '../../contract/clock.js';
import { OperationNotFound } from '../../runtime/errors.js';
import { finishTombstone } from '../../runtime/retention.js';
import type { CliIo } from '../io.js';
import { storeLogin, type StoreAuth } from '../connection.js';
import { describeEvent } from '../describe.js';
import { fitText, heading, idLine, renderTable, wholeId, widthOf, type Cell } from '../table.js';
import { isIdPrefix, prefixHexMin, typedInstanceId, typedText, uniqueByPrefix } from '../typed-ids.js';
import type { InstanceReplay } from './workflow-ops.js';

/** A store command's store: its URL and, from a context or --creds, how it logs in. */
export interface StoreOptions {
  store: string;
  storeAuth?: StoreAuth;
  /** Where the store tells what does not stop it (a jetstream: store's index snapshots off), once. */
  notice?: (line: string) => void;
}

/**
 * Opens an existing store for an operator tool: a missing SQLite file is an error (never
 * created), and memory: is refused with the reason — it lives in one process, so a new process
 * would only ever see it empty.
 */
export async function withStore<T>(target: string | StoreOptions, run: (store: EventStore) => Promise<T>): Promise<T> {
  const { store: url, storeAuth: auth, notice } = typeof target === 'string' ? { store: target, storeAuth: undefined, notice: undefined } : target;
  if (/^memory:/i.test(url))
    throw invalidInput(
      'a memory: store lives inside the process that holds it; another process sees it empty. Point --store at the store a deployment writes (sqlite:PATH, jetstream:nats://HOST:PORT, esdb://…)',
    );
  const credentials = await storeLogin(url, auth);
  const store = await openStore(url, { clock: new SystemClock(), mustExist: true, ...(credentials ? { credentials } : {}), ...(notice ? { notice } : {}) });
  try {
    return await run(store);
  } finally {
    await store.close();
  }
}

/**
 * An operation id from what a person typed: the full id, the short form `tail` and `list` print
 * (`op0123456789ab…`), or any unique prefix of op + hex (the `op` may be left out). A prefix that
 * matches nothing is not found; one that matches several is an error listing them.
 */
export async function resolveOperationId(store: EventStore, text: string): Promise<string> {
  const typed = parseTypedId(text);
  if (typed.kind === 'full') return typed.operationId;
  const match = await uniqueByPrefix(store.operationIds(), typed.prefix);
  if (match === undefined) throw notInStore(typed.prefix, 'prefix');
  return match;
}

/**
 * No operation in the store a command reads (exit 9, as the coordinator's 404), said in the
 * store's terms: an operator reading a store sees every principal's, so none is hidden from it.
 */
export function notInStore(typed: string, as: 'id' | 'prefix' = 'id'): OperationNotFound {
  return new OperationNotFound(typed, `no operation ${typed}${as === 'prefix' ? '…' : ''} in this store`);
}

/** Checks what was typed before any store is opened: a full id, or a prefix long enough to mean one. */
export function parseTypedId(text: string): { kind: 'full'; operationId: string } | { kind: 'prefix'; prefix: string } {
  const typed = typedText(text);
  if (isOperationId(typed)) return { kind: 'full', operationId: typed };
  const prefix = typed.startsWith('op') ? typed : `op${typed}`;
  if (!isIdPrefix(prefix, 'op')) {
    throw invalidInput(`${JSON.stringify(text)} is not an operation id (op + 64 hex) nor a prefix of one (op + ${prefixHexMin}..63 hex)`);
  }
  return { kind: 'prefix', prefix };
}

export async function readLog(store: EventStore, operationId: string): Promise<StoredTransition[]> {
  if (!isOperationId(operationId)) throw new AdapterError('invalid-input', `"${operationId}" is not an operation id (op + 64 hex)`);
  const read = await store.read(operationId);
  if (read.kind === 'ok') return read.transitions;
  if (read.kind === 'unavailable') throw new AdapterError('unavailable', read.description);
  if (read.kind === 'not-found') throw notInStore(operationId);
  throw new AdapterError('expired', read.description);
}

/** The log of an operation that exists: an id with no transitions is not found. */
async function readExistingLog(store: EventStore, operationId: string): Promise<StoredTransition[]> {
  const transitions = await readLog(store, operationId);
  if (transitions.length === 0) throw notInStore(operationId);
  return transitions;
}

export async function inspectCommand(typedId: string, options: StoreOptions & { json: boolean }, io: CliIo): Promise<number> {
  const instance = typedInstanceId(typedId);
  if (instance !== undefined) return (await import('./workflow-ops.js')).workflowInspectCommand(instance, options, io, withStore);
  parseTypedId(typedId);
  return withStore(options, async (store) => {
    const operationId = await resolveOperationId(store, typedId);
    const transitions = await readExistingLog(store, operationId);
    const record = fold(transitions);
    const applied = appliedFlags(transitions);
    if (options.json) {
      io.stdout.write(JSON.stringify({ operationId, transitions: transitions.map((t, i) => ({ ...t, applied: applied[i] })), record }, null, 2) + '\n');
      return 0;
    }
    const originMs = record?.admittedAtMs ?? transitions[0]?.committedAtMs ?? 0;
    const guard = (t: StoredTransition) =>
      `[${t.transition.timeGuard.notBeforeMs - originMs}, ${t.transition.timeGuard.notAfterMs >= Number.MAX_SAFE_INTEGER ? '∞' : t.transition.timeGuard.notAfterMs - originMs})`;
    const rows = transitions.flatMap((t, i) =>
      t.transition.events.map((e, j) =>
        j === 0
          ? [
              t.revision,
              new Date(t.committedAtMs).toISOString(),
              `+${t.committedAtMs - originMs}`,
              guard(t),
              applied[i] ? 'applied' : 'void',
              e.type,
              describeEvent(e, originMs),
            ]
          : ['', '', '', '', '', e.type, describeEvent(e, originMs)],
      ),
    );
    // The id on a line of its own, whole where the line holds it, and the count under it: the two
    // on one line outgrew 80 columns and wrapped mid-phrase, and at 60 cut the id across two lines.
    io.stdout.write(`${idLine('operation ', operationId, widthOf(io))}\n`);
    io.stdout.write(fitText(`${transitions.length} transitions (guard relative to admission, ms)`, widthOf(io)));
    io.stdout.write(renderTable(['rev', 'committed at', '+ms', 'guard', 'state', 'event', 'detail'], rows, widthOf(io), { proseLast: true }));
    if (record) io.stdout.write(renderRecord(record, widthOf(io)));
    return 0;
  });
}

function renderRecord(record: OperationRecord, widthMax: number): string {
  const d = decisionView(record);
  const settlement = settlementView(record);
  let out = heading(
    `Record: phase ${record.phase}, principal ${record.principalId}, contract ${record.contract.id}@${record.contract.version}, interaction ${record.interaction}`,
    widthMax,
  );
  out += renderTable(
    ['outcome', 'reason', 'votes', 'threshold', 'units', 'settlement'],
    [[d?.outcome ?? 'open', d?.reason, d?.successVotes, record.manifest.threshold, record.manifest.units, settlement.status]],
    widthMax,
  );
  out += heading('Branches');
  out += renderTable(
    ['branch', 'peer', 'status', 'attempt', 'fence', 'lease until (+ms)', 'disposition', 'cancel'],
    branchViews(record).map((b) => {
      const branch = branchOf(record, b.branchId);
      return [b.branchId, b.peerId, b.status, b.attempt, b.fence, branch.leaseUntilMs - record.admittedAtMs, branch.disposition, branch.cancelOutcome];
    }),
    widthMax,
  );
  return out;
}

export async function tailCommand(options: StoreOptions & { json: boolean }, io: CliIo, stop: Promise<void>): Promise<number> {
  return withStore(options, async (store) => {
    io.stderr.write(`following ${redactStoreUrl(options.store)} (Ctrl-C to stop)\n`);
    const subscription = await store.follow((operationId, stored) => {
      if (options.json) return void io.stdout.write(JSON.stringify({ operationId, ...stored }) + '\n');
      const events = stored.transition.events.map((e) => `${e.type}: ${describeEvent(e)}`).join('; ');
      // The short id is what get, inspect and replay take; a long line wraps (--json keeps one object per line).
      io.stdout.write(fitText(`${new Date(stored.committedAtMs).toISOString()}  ${operationId.slice(0, 14)}…  rev ${stored.revision}  ${events}`, widthOf(io)));
    });
    await stop;
    await subscription.close();
    return 0;
  });
}

interface ReplayRow {
  operationId: string;
  transitions: number;
  phase: string;
  outcome: string;
  problem: string | null;
  /** The problem was an index row, written again from the log (--fix-index). */
  repaired: boolean;
}

/**
 * A row of `convoke replay`'s report, named for its kind: an operation (its phase and outcome) or
 * a workflow instance (its status, the fields `replay wf…` prints), so a store holding both reads
 * each under its own columns.
 */
type ReplayReport = ({ kind: 'operation' } & ReplayRow) | ({ kind: 'workflow-instance' } & InstanceReplay);

/** The rows shown: one table of operations, one of workflow instances, each only when it has rows. */
function renderReplayTables(rows: readonly ReplayReport[], widthMax: number): string {
  const operations: Cell[][] = [];
  const instances: Cell[][] = [];
  // Ids whole where the width allows (what inspect and replay are given next), else shortened to a prefix they take.
  for (const r of rows) {
    if (r.kind === 'operation') operations.push([wholeId(r.operationId), r.transitions, r.phase, r.outcome, r.problem ?? 'ok']);
    else instances.push([wholeId(r.instanceId), r.transitions, r.status, r.problem ?? 'ok']);
  }
  const tables: string[] = [];
  if (operations.length > 0) tables.push(renderTable(['operation', 'transitions', 'phase', 'outcome', 'result'], operations, widthMax));
  if (instances.length > 0) tables.push(renderTable(['workflow instance', 'transitions', 'status', 'result'], instances, widthMax));
  return tables.join('\n');
}

/**
 * The operation's index row against the row its log folds to: undefined when they agree, else
 * what differs. With `fix`, a differing row is written again from the log.
 */
async function checkIndexRow(store: EventStore, operationId: string, transitions: readonly StoredTransition[], fix: boolean): Promise<string | undefined> {
  const expected = indexRowOfLog(transitions);
  const actual = await store.index.get(operationId);
  if (isDeepStrictEqual(actual, expected)) return undefined;
  const differs =
    expected === undefined
      ? 'an index row where the log has no operation'
      : actual === undefined
        ? 'no index row'
        : `index row differs from the log in ${differingFields(actual, expected).join(', ')}`;
  if (!fix) return differs;
  const rebuilt = await store.index.rebuild(operationId);
  return isDeepStrictEqual(rebuilt, expected) ? `${differs} (rebuilt)` : `${differs} (rebuild failed)`;
}

function differingFields(actual: OperationIndexRow, expected: OperationIndexRow): string[] {
  return (Object.keys(expected) as (keyof OperationIndexRow)[])
    .filter((k) => !isDeepStrictEqual(actual[k], expected[k]))
    .map((k) => `${k} (index ${JSON.stringify(actual[k])}, log ${JSON.stringify(expected[k])})`);
}

/** Rebuilds one operation: schema of every transition, table fold vs machine fold, its index row. */
async function replayOne(store: EventStore, operationId: string, fixIndex = false): Promise<ReplayRow> {
  const row = (transitions: number, record: OperationRecord | undefined, problem: string | null, repaired = false): ReplayRow => ({
    operationId,
    transitions,
    phase: record?.phase ?? '-',
    outcome: record?.decision?.outcome ?? (record ? 'open' : '-'),
    problem,
    repaired,
  });
  let transitions: StoredTransition[];
  try {
    transitions = await readLog(store, operationId);
  } catch (error) {
    return row(0, undefined, (error as Error).message);
  }
  for (const t of transitions) {
    const problem = transitionProblem(t.transition);
    if (problem !== undefined) return row(transitions.length, undefined, `revision ${t.revision} fails its schema: ${problem}`);
  }
  try {
    const projected = fold(transitions);
    const reference = fold(transitions, machineSteps);
    if (!isDeepStrictEqual(projected, reference)) return row(transitions.length, projected, 'projection differs from the machine replay');
    if (!projected) return row(transitions.length, projected, 'no admission was ever applied');
    const index = await checkIndexRow(store, operationId, transitions, fixIndex);
    return row(transitions.length, projected, index ?? null, index?.endsWith('(rebuilt)') === true);
  } catch (error) {
    return row(transitions.length, undefined, `replay failed: ${(error as Error).message}`);
  }
}

/**
 * Index rows of operations with no live log (a row the log never said): each is a problem row.
 * With `fix`, the row of a pruned operation is taken as a tombstone that stopped before its last
 * step (JetStream's are several writes, and the index row goes last): the tombstone is finished —
 * its payload purged, then the row removed — as the next prune would have finished it had the row
 * stayed; any other such row is written again from the log, or removed.
 */
async function orphanIndexRows(store: EventStore, live: ReadonlySet<string>, fix: boolean): Promise<ReplayRow[]> {
  const rows: ReplayRow[] = [];
  let after: OperationIndexRow | undefined;
  for (;;) {
    const page = await store.index.list({ limit: 500, ...(after ? { after: { admittedAtMs: after.admittedAtMs, operationId: after.operationId } } : {}) });
    for (const r of page.rows) {
      if (live.has(r.operationId)) continue;
      // Its reads answer expired: a pruned operation (nothing else in this loop was read).
      const finished = fix && (await store.read(r.operationId)).kind === 'expired';
      if (finished) await finishTombstone(store, r.operationId);
      const rebuilt = fix && !finished ? await store.index.rebuild(r.operationId) : undefined;
      const repaired = finished ? ' (its tombstone finished)' : fix && rebuilt === undefined ? ' (removed)' : '';
      rows.push({
        operationId: r.operationId,
        transitions: 0,
        phase: r.phase,
        outcome: r.outcome ?? 'open',
        problem: `an index row without a live log${repaired}`,
        repaired: repaired !== '',
      });
    }
    after = page.rows.at(-1);
    if (!page.next || after === undefined) return rows;
  }
}

export async function replayCommand(
  operationId: string | undefined,
  options: StoreOptions & { json: boolean; fixIndex?: boolean },
  io: CliIo,
): Promise<number> {
  const instance = operationId === undefined ? undefined : typedInstanceId(operationId);
  if (instance !== undefined) return (await import('./workflow-ops.js')).workflowReplayCommand(instance, options, io, withStore);
  if (operationId !== undefined) parseTypedId(operationId);
  return withStore(options, async (store) => {
    const ids: string[] = [];
    if (operationId !== undefined) {
      const id = await resolveOperationId(store, operationId);
      // Named alone, a pruned operation is exit 6 (expired) and an id with no log exit 9 (not found), as to inspect,
      // never a log replayed with a difference; a whole store's replay lists neither (operationIds).
      const read = await store.read(id);
      if (read.kind === 'expired') throw new AdapterError('expired', `operation ${id} was pruned: its log is gone, its key is kept`);
      if (read.kind === 'not-found' || (read.kind === 'ok' && read.transitions.length === 0)) throw notInStore(id);
      ids.push(id);
    } else for await (const id of store.operationIds()) ids.push(id);
    // A progress bar redraws its line with \r: only a terminal shows that as intended.
    const progressShown = !options.json && io.stderrIsTerminal === true;
    const progress = progressShown && ids.length > 50;
    const operations: ReplayRow[] = [];
    const startedMs = Date.now();
    for (const [i, id] of ids.entries()) {
      operations.push(await replayOne(store, id, options.fixIndex === true));
      if (progress && (i % 100 === 0 || i === ids.length - 1)) io.stderr.write(`\r${progressBar(i + 1, ids.length)} ${i + 1}/${ids.length}`);
    }
    if (progress) io.stderr.write('\n');
    if (operationId === undefined) operations.push(...(await orphanIndexRows(store, new Set(ids), options.fixIndex === true)));
    const rows: ReplayReport[] = operations.map((r) => ({ kind: 'operation', ...r }));
    // A whole store's replay covers its workflow instances too: each rebuilt and checked through the machines.
    if (operationId === undefined) {
      const { replayInstances } = await import('./workflow-ops.js');
      let drawn = false;
      const shown = (done: number, total: number) => {
        drawn = true;
        if (done % 100 === 0 || done === total) io.stderr.write(`\r${progressBar(done, total)} ${done}/${total} workflow instances`);
      };
      const instances = await replayInstances(store, options.fixIndex === true, progressShown ? shown : undefined);
      if (drawn) io.stderr.write('\n');
      for (const r of instances) rows.push({ kind: 'workflow-instance', ...r });
    }
    const failed = rows.filter((r) => r.problem !== null && !r.repaired);
    const repaired = rows.filter((r) => r.repaired);
    if (options.json) io.stdout.write(JSON.stringify({ replayed: rows.length, differences: failed.length, repaired: repaired.length, rows }, null, 2) + '\n');
    else {
      const shown = failed.length + repaired.length > 0 ? [...failed, ...repaired] : rows.slice(0, 20);
      io.stdout.write(renderReplayTables(shown, widthOf(io)));
      if (failed.length === 0 && rows.length > shown.length) io.stdout.write(`… and ${rows.length - shown.length} more, all ok\n`);
      const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;
      // One operation's replay reads no workflow instance; a whole store's counts both kinds.
      const replayed =
        operationId === undefined
          ? `${counted(operations.length, 'operation')} and ${counted(rows.length - operations.length, 'workflow instance')}`
          : counted(operations.length, 'operation');
      io.stdout.write(
        heading(
          `replayed ${replayed} in ${Date.now() - startedMs} ms: ${rows.length - failed.length - repaired.length} ok, ${failed.length} with differences${repaired.length > 0 ? `, ${repaired.length} index rows rebuilt` : ''}`,
          widthOf(io),
        ),
      );
    }
    return failed.length === 0 ? 0 : 1;
  });
}

function progressBar(done: number, total: number, width = 30): string {
  const filled = Math.round((done / total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}
