/**
 * Operator tools over workflow instance streams (`wf…` ids): `convoke inspect wf…` (also
 * `convoke workflow inspect`) shows an instance's stored transitions and its record; `convoke
 * replay wf…` rebuilds it from its log and checks the record against the machines' own replay
 * (workflow/exec/replay.ts), and the store's workflow instances index row against the projection
 * of the log (workflow/exec/index-row.ts); `--fix-index` writes the row again. Exit 1 on any
 * difference (a row rewritten by --fix-index is not one), 9 when the instance is unknown, 6 when
 * it was pruned. `convoke replay` without an id does the same for every instance but the pruned
 * ones (replayInstances), and reports (with --fix-index removes) index rows of instances with no
 * live log.
 */
import { isDeepStrictEqual } from 'node:util';
import type { EventStore } from '../../adapters/store/types.js';
import { AdapterError, isAdapterError } from '../../contract/errors.js';
import { finishTombstone } from '../../runtime/retention.js';
import type { WorkflowIndexPosition } from '../../events/workflow-index.js';
import type { Stored } from '../../kernel/types.js';
import type { ValueRef, WorkflowEvent, WorkflowTransition } from '../../workflow/exec/events.js';
import { foldWorkflow, type WorkflowRecord } from '../../workflow/exec/record.js';
import type { WorkflowChildInstance } from '../../runtime/workflow-service.js';
import { OperationNotFound } from '../../runtime/errors.js';
import { replayWorkflowLog } from '../../workflow/exec/replay.js';
import { workflowIndexRowOfLog } from '../../workflow/exec/index-row.js';
import { workflowStreams } from '../../workflow/exec/streams.js';
import type { CliIo } from '../io.js';
import type { StoreAuth } from '../connection.js';
import { uniqueByPrefix } from '../typed-ids.js';
import { isWorkflowInstanceId } from '../../workflow/ids.js';
import { fitText, idLine, labelled, labelledId, renderTable, wholeId, widthOf } from '../table.js';
import { terminalText } from '../terminal-text.js';

/** The store an operator names and how it logs in (ops.ts StoreOptions: from a context or --creds). */
export interface StoreTarget {
  store: string;
  storeAuth?: StoreAuth;
}

/** Opens the store an operator names, logging in as it says (ops.ts withStore: an existing durable store, closed after). */
export type WithStore = <T>(target: StoreTarget, run: (store: EventStore) => Promise<T>) => Promise<T>;

/**
 * The instance a full id or a unique prefix of one names (typed-ids.ts) and its log; none, or a
 * log that holds nothing, is OperationNotFound (exit 9, its `{kind, description}` on stderr as
 * every error).
 */
async function foundInstance(store: EventStore, typed: string): Promise<{ instanceId: string; log: Stored<WorkflowTransition>[] }> {
  const instanceId = isWorkflowInstanceId(typed) ? typed : await uniqueByPrefix(store.workflowInstanceIds(), typed);
  const log = instanceId === undefined ? undefined : await readInstance(store, instanceId);
  if (instanceId !== undefined && log !== undefined) return { instanceId, log };
  throw new OperationNotFound(instanceId ?? typed, `no workflow instance ${instanceId ?? `${typed}…`} in this store`);
}

/**
 * The instance's log; undefined when it has none (not found, or no transitions). A pruned
 * (tombstoned) instance is AdapterError `expired`, as a pruned operation is (exit 6); a store
 * that cannot answer is `unavailable` (exit 4).
 */
async function readInstance(store: EventStore, instanceId: string): Promise<Stored<WorkflowTransition>[] | undefined> {
  const read = await workflowStreams(store).read(instanceId);
  if (read.kind === 'not-found') return undefined;
  if (read.kind === 'expired') throw new AdapterError('expired', `workflow instance ${instanceId} was pruned: its log is gone, its key is kept`);
  if (read.kind !== 'ok') throw new AdapterError('unavailable', `read ${instanceId}: ${read.description}`);
  return read.transitions.length === 0 ? undefined : read.transitions;
}

/** An instance's status from its log, for a child with no index row: null when it has none, `pruned` when it was. */
async function statusOfLog(store: EventStore, instanceId: string): Promise<WorkflowChildInstance['status']> {
  try {
    const log = await readInstance(store, instanceId);
    return (log && foldWorkflow(log)?.status) ?? null;
  } catch (error) {
    if (isAdapterError(error) && error.kind === 'expired') return 'pruned';
    throw error;
  }
}

const short = (value: unknown, max = 60): string => {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
};

/** A value written once and named by a later event (events.ts ValueRef). */
const referenceText = (ref: ValueRef): string =>
  'input' in ref
    ? "the workflow's input"
    : 'step' in ref
      ? `the result of ${ref.step}`
      : 'listen' in ref
        ? `the events taken by ${ref.listen}`
        : `the output of ${ref.task}`;

function describe(event: WorkflowEvent, originMs: number): string {
  switch (event.type) {
    case 'workflow-started':
      return `${event.workflowName} key ${JSON.stringify(event.invocationKey)} by ${event.principalId}, input ${short(event.input)}${event.parent ? `, child of ${event.parent.instanceId.slice(0, 14)}… at ${event.parent.at}` : ''}, keys ${event.keys ?? '1 (not recorded)'}, format ${event.format ?? 1}`;
    case 'workflow-cancelled-before-start':
      return `${event.workflowName} key ${JSON.stringify(event.invocationKey)} by ${event.principalId}, child of ${event.parent.instanceId.slice(0, 14)}… at ${event.parent.at}, never started: ${event.reason}`;
    case 'task-started':
      return `${event.at} (${event.name})`;
    case 'task-completed':
      return `${event.at} → ${event.outputFrom ? referenceText(event.outputFrom) : short(event.output)}`;
    case 'task-faulted':
      return `${event.at}: ${event.error.title ?? event.error.type} (${event.error.status})`;
    case 'task-cancelled':
      return `${event.at}: ${event.reason}`;
    case 'expression-evaluated':
    case 'call-answered':
      return `${event.at} → ${'ok' in event.result ? short(event.result.ok) : `error ${event.result.error.status} ${event.result.error.title ?? ''}`}`;
    case 'child-bound':
      return `${event.at}: operation ${event.operationId.slice(0, 12)}… key ${event.invocationKey.slice(0, 16)}… attempt ${event.attempt}`;
    case 'subworkflow-bound':
      return `${event.at}: workflow ${event.workflow} instance ${event.instanceId.slice(0, 14)}… attempt ${event.attempt}`;
    case 'subworkflow-disposed':
      return `${event.at}: workflow instance ${event.instanceId.slice(0, 14)}… ${event.disposition} (released by ${event.by})`;
    case 'timer-set':
      return `${event.at} ${event.purpose} due +${event.dueAtMs - originMs}`;
    case 'timer-fired':
    case 'call-started':
      return event.at;
    case 'fork-won':
      return `${event.at}: branch ${event.branch}`;
    case 'child-disposed':
      return `${event.at}: operation ${event.operationId.slice(0, 12)}… ${event.disposition} (released by ${event.fork})`;
    case 'listen-started':
      return `${event.at}: waits (${event.read}) for ${short(event.to)}`;
    case 'listen-event-received':
      return `${event.at}: took ${short(event.event)} (${event.group} filter ${event.filter})`;
    case 'lease-acquired':
      return `${event.worker} epoch ${event.epoch} until +${event.untilMs - originMs}`;
    case 'lease-renewed':
      return `epoch ${event.epoch} until +${event.untilMs - originMs}`;
    case 'lease-released':
      return `epoch ${event.epoch}`;
    case 'workflow-completed':
      return event.outputFrom ? referenceText(event.outputFrom) : short(event.output);
    case 'workflow-faulted':
      return `${event.error.title ?? event.error.type} (${event.error.status}) at ${event.error.instance ?? '/'}`;
    case 'workflow-cancelled':
      return event.reason;
  }
}

/** The child workflow instances of a record (`run: workflow`) in the order their tasks started, each with its status in the store now (null: never started). */
async function childInstancesOf(store: EventStore, record: WorkflowRecord): Promise<WorkflowChildInstance[]> {
  const order = (at: string) => record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;
  const children = Object.entries(record.subworkflows).sort(([a], [b]) => order(a) - order(b));
  return Promise.all(
    children.map(async ([at, child]) => {
      const row = await store.workflowIndex.get(child.instanceId);
      const status = row ? row.status : await statusOfLog(store, child.instanceId);
      return { at, instanceId: child.instanceId, workflow: child.workflow, status, disposition: child.disposition?.disposition ?? null };
    }),
  );
}

/** The record's status, output or error, lease and relations, each a labelled line wrapped to `widthMax` under its label. */
function renderSummary(record: WorkflowRecord, childInstances: readonly WorkflowChildInstance[], widthMax: number): string {
  const parent = record.started.parent;
  const lines: [string, string][] = [
    ['status', `${record.status}${record.endedAtMs !== null ? ` after ${record.endedAtMs - record.startedAtMs} ms` : ''}`],
    ...(record.status === 'completed' ? [['output', short(record.output, 200)] as [string, string]] : []),
    ...(record.status !== 'completed' && record.error ? [['error', short(record.error, 200)] as [string, string]] : []),
    ...(record.cancelReason !== null ? [['reason', record.cancelReason] as [string, string]] : []),
    ['lease', record.lease ? `${record.lease.worker} epoch ${record.lease.epoch}` : `free (last epoch ${record.leaseEpoch})`],
    // Ids whole where a line holds them, else a prefix inspect resolves: never cut across two lines.
    ...(parent ? [['parent', `${labelledId('parent ', parent.instanceId, widthMax)} at ${parent.at}`] as [string, string]] : []),
    ...Object.entries(record.children).map(([at, child]): [string, string] => [
      'child',
      `${at}: operation ${labelledId('child ', child.operationId, widthMax)}`,
    ]),
    ...childInstances.map((child): [string, string] => [
      'child',
      `${child.at}: workflow instance ${labelledId('child ', child.instanceId, widthMax)} (${child.workflow}) ${child.status ?? 'not started'}${child.disposition ? `, released by its parent: ${child.disposition}` : ''}`,
    ]),
  ];
  // Its names, reasons and errors are the document's and the store's: labelled shows them escaped.
  return `\n${lines.map(([label, text]) => labelled(`${label} `, text, widthMax)).join('\n')}\n`;
}

/** `typed`: a workflow instance id or a unique prefix of one (wf + hex). */
export async function workflowInspectCommand(typed: string, options: StoreTarget & { json: boolean }, io: CliIo, withStore: WithStore): Promise<number> {
  return withStore(options, async (store) => {
    const { instanceId, log } = await foundInstance(store, typed);
    const { record, applied, problem } = replayWorkflowLog(log);
    const childInstances = record ? await childInstancesOf(store, record) : [];
    if (options.json) {
      const parent = record?.started.parent ? { instanceId: record.started.parent.instanceId, at: record.started.parent.at } : null;
      const transitions = log.map((t, i) => ({ ...t, applied: applied[i] }));
      io.stdout.write(JSON.stringify({ instanceId, transitions, record, parent, childInstances, problem }, null, 2) + '\n');
      return problem === null ? 0 : 1;
    }
    const originMs = log[0]?.committedAtMs ?? 0;
    const guard = (t: Stored<WorkflowTransition>) =>
      `[${t.transition.timeGuard.notBeforeMs <= Number.MIN_SAFE_INTEGER ? '-∞' : t.transition.timeGuard.notBeforeMs - originMs}, ${t.transition.timeGuard.notAfterMs >= Number.MAX_SAFE_INTEGER ? '∞' : t.transition.timeGuard.notAfterMs - originMs})`;
    const rows = log.flatMap((t, i) =>
      t.transition.events.map((e, j) => [
        ...(j === 0
          ? [t.revision, `+${t.committedAtMs - originMs}`, t.transition.causation.command, guard(t), applied[i] ? 'applied' : 'void']
          : ['', '', '', '', '']),
        e.type,
        describe(e, originMs),
      ]),
    );
    // As inspect's operation: the id on a line of its own, whole where the line holds it, the count under it.
    io.stdout.write(`${idLine('workflow instance ', instanceId, widthOf(io))}\n`);
    io.stdout.write(fitText(`${log.length} transitions (instants relative to its start, ms)`, widthOf(io)) + '\n');
    io.stdout.write(renderTable(['rev', '+ms', 'command', 'guard', 'state', 'event', 'detail'], rows, widthOf(io), { proseLast: true }));
    if (record) io.stdout.write(renderSummary(record, childInstances, widthOf(io)));
    if (problem !== null) io.stdout.write(`\n${labelled('problem: ', problem, widthOf(io))}\n`);
    return problem === null ? 0 : 1;
  });
}

/** One instance replayed (a row of `convoke replay`'s report). */
export interface InstanceReplay {
  instanceId: string;
  transitions: number;
  status: string;
  problem: string | null;
  /** The problem was the instance's index row, written again from its log (--fix-index). */
  repaired: boolean;
}

/**
 * The instance's workflow index row against the row its log projects to: no problem when they
 * agree; with `fix`, a differing row is written again.
 */
async function checkWorkflowIndexRow(
  store: EventStore,
  instanceId: string,
  log: readonly Stored<WorkflowTransition>[],
  fix: boolean,
): Promise<{ problem: string | null; repaired: boolean }> {
  const expected = workflowIndexRowOfLog(log);
  const stored = await store.workflowIndex.get(instanceId);
  if (isDeepStrictEqual(stored, expected)) return { problem: null, repaired: false };
  const differs = `the workflow index row ${stored ? `(revision ${stored.revision})` : '(missing)'} differs from its log's`;
  if (!fix) return { problem: `${differs}; --fix-index writes it again`, repaired: false };
  await store.workflowIndex.put(instanceId, expected);
  return { problem: `${differs} (rebuilt)`, repaired: true };
}

/** The row of an instance that could not be replayed. */
const unreplayed = (instanceId: string, problem: string): InstanceReplay => ({ instanceId, transitions: 0, status: '-', problem, repaired: false });

/** Rebuilds one instance from its log through the machines, then checks (with `fixIndex`, repairs) its index row. */
export async function replayInstance(store: EventStore, instanceId: string, fixIndex = false, read?: Stored<WorkflowTransition>[]): Promise<InstanceReplay> {
  try {
    // `read`: the log, when the caller holds it already.
    const log = read ?? (await readInstance(store, instanceId));
    if (!log) return unreplayed(instanceId, 'no transitions stored');
    const { record, problem } = replayWorkflowLog(log);
    const index = problem === null ? await checkWorkflowIndexRow(store, instanceId, log, fixIndex) : { problem, repaired: false };
    return { instanceId, transitions: log.length, status: record?.status ?? '-', ...index };
  } catch (error) {
    return unreplayed(instanceId, `replay failed: ${(error as Error).message}`);
  }
}

/**
 * An instance a whole store's replay reaches: `pruned` when its key answers `expired` (a pruned
 * instance is not replayed, as a pruned operation is not), `absent` when it holds no transitions,
 * else its row (a read that failed is one too).
 */
async function replayStored(store: EventStore, instanceId: string, fixIndex: boolean): Promise<InstanceReplay | 'pruned' | 'absent'> {
  let log: Stored<WorkflowTransition>[] | undefined;
  try {
    log = await readInstance(store, instanceId);
  } catch (error) {
    if (isAdapterError(error) && error.kind === 'expired') return 'pruned';
    return unreplayed(instanceId, `replay failed: ${(error as Error).message}`);
  }
  return log ? replayInstance(store, instanceId, fixIndex, log) : 'absent';
}

/**
 * Every workflow instance of the store replayed (its index row checked, with `fixIndex` written
 * again) but the pruned ones, then the index rows of instances with no live log (with `fixIndex`
 * removed). `progress` is told after each instance.
 */
export async function replayInstances(store: EventStore, fixIndex: boolean, progress?: (done: number, total: number) => void): Promise<InstanceReplay[]> {
  const ids: string[] = [];
  for await (const instanceId of store.workflowInstanceIds()) ids.push(instanceId);
  const rows: InstanceReplay[] = [];
  for (const [i, instanceId] of ids.entries()) {
    // Listed, then pruned before its read: skipped.
    const replayed = await replayStored(store, instanceId, fixIndex);
    if (replayed === 'absent') rows.push(unreplayed(instanceId, 'no transitions stored'));
    else if (replayed !== 'pruned') rows.push(replayed);
    progress?.(i + 1, ids.length);
  }
  const live = new Set(ids);
  let after: WorkflowIndexPosition | undefined;
  do {
    const page = await store.workflowIndex.list({ limit: 500, ...(after ? { after } : {}) });
    for (const row of page.rows) {
      if (live.has(row.instanceId)) continue;
      // Not listed, yet its log reads (a tombstone that stopped after its key record, before its
      // marker), or it could not be read: replayed or told, its row kept.
      const replayed = await replayStored(store, row.instanceId, fixIndex);
      if (typeof replayed === 'object') {
        rows.push(replayed);
        continue;
      }
      // A pruned instance's row (its read answered expired): its tombstone stopped before its last step (the row goes last), and is finished.
      const finished = fixIndex && replayed === 'pruned';
      if (finished) await finishTombstone(store, row.instanceId);
      if (fixIndex && !finished) await store.workflowIndex.put(row.instanceId, undefined);
      const problem = `a workflow index row without a live log${finished ? ' (its tombstone finished)' : fixIndex ? ' (removed)' : ''}`;
      rows.push({ instanceId: row.instanceId, transitions: 0, status: row.status, problem, repaired: fixIndex });
    }
    after = page.next;
  } while (after);
  return rows;
}

/** `typed`: a workflow instance id or a unique prefix of one (wf + hex). */
export async function workflowReplayCommand(
  typed: string,
  options: StoreTarget & { json: boolean; fixIndex?: boolean },
  io: CliIo,
  withStore: WithStore,
): Promise<number> {
  return withStore(options, async (store) => {
    const { instanceId, log } = await foundInstance(store, typed);
    const replayed = await replayInstance(store, instanceId, options.fixIndex === true, log);
    if (replayed.repaired) io.stderr.write(`workflow index row of ${terminalText(instanceId)} written again from its log\n`);
    const problem = replayed.repaired ? null : replayed.problem;
    const row = { kind: 'workflow-instance', instanceId, transitions: log.length, status: replayed.status, problem };
    if (options.json) io.stdout.write(JSON.stringify({ replayed: 1, differences: problem === null ? 0 : 1, rows: [row] }, null, 2) + '\n');
    else {
      io.stdout.write(
        renderTable(['workflow instance', 'transitions', 'status', 'result'], [[wholeId(instanceId), log.length, row.status, problem ?? 'ok']], widthOf(io)),
      );
      io.stdout.write(`\nreplayed 1 workflow instance: ${problem === null ? '1 ok' : '1 with differences'}\n`);
    }
    return problem === null ? 0 : 1;
  });
}
