/**
 * A client of GET /contract-invocations/{id}/events and GET /workflow-instances/{id}/events, as
 * docs/reference.md "The web console" tells one to be: it holds the last `snapshot` and applies
 * each `update` to it — a field present replaces the one held, a keyed list's entries replace the
 * entry with the same key or are added, the timeline's are appended; then tasks are ordered by
 * startedSeq, and children, stages and child instances by the startedSeq of their task. An update
 * that carries anything the client holds unchanged fails an assertion: updates hold only what
 * changed. Written
 * from that text alone (not from the server's code), so a test comparing what it rebuilds with a
 * fresh read checks the documented rule.
 */
import assert from 'node:assert/strict';
import type { OperationInspection } from '../../src/projections/inspection.js';
import type { WorkflowInspection } from '../../src/runtime/workflow-service.js';

type Entry = Record<string, unknown>;

/** `held` with each of `changed`'s entries put in place of the one with the same key, or added at the end. */
function upsert<E>(held: readonly E[], changed: readonly E[] | undefined, keyOf: (entry: E) => string): E[] {
  const next = [...held];
  for (const entry of changed ?? []) {
    const at = next.findIndex((e) => keyOf(e) === keyOf(entry));
    // An update carries only what changed: never an entry the client holds as it is.
    if (at >= 0) assert.notDeepStrictEqual(entry, next[at], `an update re-sends ${keyOf(entry)} unchanged`);
    if (at >= 0) next[at] = entry;
    else next.push(entry);
  }
  return next;
}

/** `held` with the fields of `changed`, each whole but for the keyed lists, whose entries are upserted. */
function applyFields<T extends object>(held: T, changed: Partial<T> | undefined, lists: Record<string, (entry: Entry) => string>): T {
  const next = { ...held } as Record<string, unknown>;
  for (const [field, value] of Object.entries(changed ?? {})) {
    const keyOf = lists[field];
    if (!keyOf) assert.notDeepStrictEqual(value, next[field], `an update re-sends ${field} unchanged`);
    next[field] = keyOf ? upsert(next[field] as Entry[], value as Entry[], keyOf) : value;
  }
  return next as T;
}

/** The stream's state: the last snapshot with every update since applied, and the seq the next update must carry. */
export interface Followed<S> {
  state: S;
  nextSeq: number;
}

/** The state after one event of the stream; an update out of sequence or whose timeline does not continue is an assertion failure. */
function step<S extends { timeline: { index: number }[] }>(
  followed: Followed<S> | undefined,
  event: string,
  data: Entry,
  apply: (state: S, update: Entry) => S,
): Followed<S> {
  if (event === 'snapshot') return { state: data as unknown as S, nextSeq: 1 };
  assert.equal(event, 'update', `an event of a live inspection is a snapshot or an update, not ${event}`);
  assert.ok(followed, 'an update comes after a snapshot');
  assert.equal(data.seq, followed.nextSeq, 'updates are numbered one after the other');
  const timeline = data.timeline as { index: number }[];
  assert.equal(timeline[0]?.index ?? followed.state.timeline.length, followed.state.timeline.length, 'the timeline continues where it was');
  return { state: apply(followed.state, data), nextSeq: followed.nextSeq + 1 };
}

const at = (entry: Entry) => entry.at as string;

export function followWorkflow(followed: Followed<WorkflowInspection> | undefined, event: string, data: Entry): Followed<WorkflowInspection> {
  return step(followed, event, data, (held, update) => {
    const next = applyFields(held, { tasks: update.tasks, timers: update.timers, children: update.children } as Partial<WorkflowInspection>, {
      tasks: at,
      timers: (entry) => entry.key as string,
      children: at,
    });
    if ('lease' in update) {
      assert.notDeepStrictEqual(update.lease, held.lease, 'an update re-sends the lease unchanged');
      next.lease = update.lease as WorkflowInspection['lease'];
    }
    next.instance = applyFields(next.instance, update.instance as Partial<WorkflowInspection['instance']>, { stages: at, childInstances: at });
    next.timeline = [...held.timeline, ...(update.timeline as WorkflowInspection['timeline'])];
    const order = (entry: { at: string }) => next.tasks.find((t) => t.at === entry.at)?.startedSeq ?? Number.MAX_SAFE_INTEGER;
    next.tasks.sort((a, b) => a.startedSeq - b.startedSeq);
    next.children.sort((a, b) => order(a) - order(b));
    next.instance.stages.sort((a, b) => order(a) - order(b));
    next.instance.childInstances.sort((a, b) => order(a) - order(b));
    return next;
  });
}

export function followOperation(followed: Followed<OperationInspection> | undefined, event: string, data: Entry): Followed<OperationInspection> {
  return step(followed, event, data, (held, update) => {
    const branchId = (entry: Entry) => entry.branchId as string;
    const { result, timeline, seq: _seq, revision: _revision, ...rest } = update;
    const next = applyFields(held, rest as Partial<OperationInspection>, { branches: branchId });
    next.result = applyFields(held.result, result as Partial<OperationInspection['result']>, { branches: branchId });
    next.timeline = [...held.timeline, ...(timeline as OperationInspection['timeline'])];
    return next;
  });
}
