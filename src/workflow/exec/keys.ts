/**
 * Task execution keys. Every execution of a task has a key (`at`), and every fact recorded of it
 * is keyed by it: its start and end, its steps (`${at}>…`), its timers, its child operation and
 * child workflow bindings (whose invocation keys follow from the binding). Two executions that
 * share a key share their facts: the later one finds the earlier's completion and returns its
 * output without running — a call not made, a child not started. So no two executions may share
 * one.
 *
 * A key is the task's JSON Pointer in the document with markers for the contexts it runs in:
 *
 * - `~v`: the v-th revisit (v ≥ 1) of a task in its list, through a flow directive (`then:` back
 *   to it); absent on the first visit;
 * - `[i]`: the i-th iteration of an enclosing `for` (or of a listen's `foreach`);
 * - `{i}`: the i-th branch of an enclosing `fork`;
 * - `(n)`: the n-th attempt (n ≥ 2) of an enclosing `try`; absent on the first.
 *
 * The scheme (`keys` in the instance's start event; absent in logs written before it, = 1):
 *
 * - 1: every marker is appended, from the outermost context to the innermost, after the pointer:
 *   `/do/0/outer/do/0/ping~1`. A `~v` does not say which task it applies to: the second visit
 *   of ping inside outer's first execution and the first visit of ping inside outer's second
 *   execution (outer revisited, `~1`, passed on to what it runs) both get
 *   `/do/0/outer/do/0/ping~1`. Two executions, one key.
 * - 2: a `~v` is attached to the pointer segment of the task it applies to, and the other
 *   markers are appended as before: `/do/0/outer~1/do/0/ping` and `/do/0/outer/do/0/ping~1`.
 *   A `(n)` still does not say which `try` it applies to: with a `try` directly in another
 *   `try`'s list (no loop or fork between them), a task in the inner try's second attempt within
 *   the outer's first, and the same task in the inner's first attempt within the outer's second,
 *   both get `…/ping(2)`. Two executions, one key.
 * - 3 (instances started since): a `(n)` is attached, after its `~v` if any, to the pointer
 *   segment of the `try` whose attempt it is, in the keys of the tasks that attempt runs (the try
 *   task's own key has none): `/do/0/outer/try/0/inner(2)/try/0/ping` and
 *   `/do/0/outer(2)/try/0/inner/try/0/ping`. Only `[i]` and `{i}` are appended.
 *
 * Scheme 2 keys are scheme 1 keys with every `~v` moved onto its segment; scheme 3 keys are
 * scheme 2 keys with every `(n)` moved onto its segment. A document that revisits nothing and
 * retries nothing has the same keys under all three; each log keeps the scheme its start records.
 *
 * Why no two executions share a key under scheme 3. A key reads, with the document, as one
 * sequence: every pointer is `…/<list>/<index>/<name>` (a list: `do`, `try`, `catch/do`,
 * `fork/branches`, `foreach/do`), and the index names the one task at that position, so its
 * escaped name is known and read exactly; a `~` after it is a revisit marker (in the segment a
 * `~` is only ever `~0` or `~1`, and the segment is known), a `(` after it an attempt marker
 * (only a try's segment has one), then either `/` (the next level) or the suffix. The suffix has
 * one `[i]` per enclosing `for` or `foreach` and one `{i}` per enclosing fork, outermost first:
 * always present, so it maps one to one onto the enclosing loops and forks, which the pointer
 * names. So a key gives back: the task; for it and each enclosing task, its visit in its list;
 * for each enclosing `try`, its attempt; for each enclosing loop, its iteration; for each fork,
 * the branch (also in the pointer). Now follow an execution down from the root: one execution of
 * an enclosing task runs its list once per iteration (a loop), per attempt (a try; its `catch.do`
 * once, under the last attempt, a list of its own), or once (`do`, a fork branch); one run of a
 * list runs its task at an index once per visit. So each level's execution is the one the key
 * names at that level, and so is the task's: two executions with one key are one execution.
 * Step keys add `>phase` to a key, and a try's handling of attempt n's error
 * (`${at}(${n})>catch.when`, `…>retry`) adds `(n)>` to the try's key: again one execution, one
 * attempt. Under scheme 2 the argument breaks where an appended `(n)` cannot be told from the
 * `(n)` of a neighbouring try, which it can be when one try runs directly in another (a loop or
 * fork between them puts a `[i]` or `{i}` between the two markers); under scheme 1 likewise for
 * `~v`. test/workflow/task-keys-property.test.ts checks this over generated nestings.
 *
 * A `~` after a pointer segment is always a revisit marker and a `(` an attempt marker: the
 * pointer escapes a `~` in a task name as `~0` and a `/` as `~1` inside the segment, and the
 * segment itself is known from the task's reference (`ref`), which every fact of a task execution
 * records next to its key.
 */
import { AssertionFailure } from '../../contract/errors.js';
import { escapePointer } from './expressions.js';
import type { WorkflowRecord } from './record.js';

/**
 * 1: every marker after the pointer (logs written before schemes were recorded); 2: `~v` on the
 * segment it applies to; 3: `~v` and `(n)` on the segment they apply to.
 */
export type KeyScheme = 1 | 2 | 3;

/** The scheme instances are started with. */
export const keyScheme = 3 satisfies KeyScheme;

/** The scheme an instance's start records (absent: 1). */
export const schemeOf = (started: { readonly keys?: number }): KeyScheme => (started.keys === 3 ? 3 : started.keys === 2 ? 2 : 1);

/**
 * The task execution whose body a frame runs in (schemes 2 and 3): its pointer, and its key's
 * pointer part with the markers on the segments of it and its enclosing tasks (`marked`; scheme
 * 3: with the attempt of a try whose attempt the frame runs).
 */
export interface KeyScope {
  readonly pointer: string;
  readonly marked: string;
}

/** What a frame holds of the keys of the executions run in it. */
export interface KeyFrame {
  /** The markers appended after the pointer, outermost first. */
  readonly suffix: string;
  /** Schemes 2 and 3: the execution enclosing the frame (none: the workflow's own `do`). */
  readonly scope?: KeyScope;
}

const root: KeyScope = { pointer: '', marked: '' };

/**
 * The key of an execution of the task at `pointer` (its `visit`-th revisit in its list, 0 for the
 * first visit) in `frame`, and the frame its body runs in (what its tasks inherit).
 */
export function taskKey<F extends KeyFrame>(scheme: KeyScheme, pointer: string, frame: F, visit: number): { at: string; frame: F } {
  const revisit = visit === 0 ? '' : `~${visit}`;
  if (scheme === 1) {
    const inner = visit === 0 ? frame : { ...frame, suffix: frame.suffix + revisit };
    return { at: pointer + inner.suffix, frame: inner };
  }
  const scope = frame.scope ?? root;
  if (!pointer.startsWith(`${scope.pointer}/`)) throw new AssertionFailure(`task ${pointer} runs outside the task ${scope.pointer || '/'} whose frame it has`);
  const marked = scope.marked + pointer.slice(scope.pointer.length) + revisit;
  return { at: marked + frame.suffix, frame: { ...frame, scope: { pointer, marked } } };
}

/** The frame of the `index`-th iteration of a loop (`for`, a listen's `foreach`) whose execution's body frame is `frame`. */
export const iterationFrame = <F extends KeyFrame>(frame: F, index: number): F => ({ ...frame, suffix: `${frame.suffix}[${index}]` });

/** The frame of the `index`-th branch of a fork whose execution's body frame is `frame`. */
export const branchFrame = <F extends KeyFrame>(frame: F, index: number): F => ({ ...frame, suffix: `${frame.suffix}{${index}}` });

/**
 * The frame of the `attempt`-th attempt (1: the first) of a try whose execution's body frame is
 * `frame` (as taskKey answered it): schemes 1 and 2 append `(n)`, scheme 3 puts it on the try's
 * segment.
 */
export function attemptFrame<F extends KeyFrame>(scheme: KeyScheme, frame: F, attempt: number): F {
  if (attempt === 1) return frame;
  if (scheme !== 3) return { ...frame, suffix: `${frame.suffix}(${attempt})` };
  if (frame.scope === undefined) throw new AssertionFailure('a try attempt runs outside the try execution whose frame it has');
  return { ...frame, scope: { pointer: frame.scope.pointer, marked: `${frame.scope.marked}(${attempt})` } };
}

/**
 * The key the steps of a try's handling of its `attempt`-th attempt's error are recorded under
 * (`…>catch.when`, `…>retry.when`): `at` is the try's key and `frame` the attempt's frame.
 * Schemes 1 and 2 as they always were (the try's key and the frame's suffix); scheme 3 the try's
 * key and `(n)`, as the retry timer after attempt n (`${at}(${n})>retry`) always was.
 */
export const attemptStepKey = (scheme: KeyScheme, at: string, frame: KeyFrame, attempt: number): string =>
  scheme === 3 ? `${at}(${attempt})` : `${at}${frame.suffix}`;

/** A key's two parts: the pointer with the markers on its segments (scheme 1: the pointer), and the markers after it. */
export function splitKey(scheme: KeyScheme, ref: string, at: string): { marked: string; suffix: string } {
  if (scheme === 1) return { marked: ref, suffix: at.slice(ref.length) };
  const marker = scheme === 2 ? revisitMarker : segmentMarkers;
  let index = 0;
  for (const segment of ref.split('/').slice(1)) {
    const piece = `/${segment}`;
    if (!at.startsWith(piece, index)) throw new AssertionFailure(`key ${at} is not a key of task ${ref}`);
    index += piece.length;
    marker.lastIndex = index;
    if (marker.test(at)) index = marker.lastIndex;
  }
  return { marked: at.slice(0, index), suffix: at.slice(index) };
}

const revisitMarker = /~[1-9][0-9]*/y;
const segmentMarkers = /(?:~[1-9][0-9]*)?(?:\([1-9][0-9]*\))?/y;

/** One task execution: its task's pointer and its key. */
export interface Execution {
  pointer: string;
  at: string;
}

/**
 * Whether the execution `at` of the task at `ref` ran inside `execution`: its task is the
 * execution's task or one nested in it, and its key extends the execution's (in the same
 * revisits of the same tasks, the same iterations, branches and attempts; scheme 3: in any
 * attempt of the execution when it is a try's).
 */
export function ranInside(scheme: KeyScheme, execution: Execution, ref: string, at: string): boolean {
  if (ref !== execution.pointer && !ref.startsWith(`${execution.pointer}/`)) return false;
  const outer = splitKey(scheme, execution.pointer, execution.at);
  const inner = splitKey(scheme, ref, at);
  if (!inner.marked.startsWith(outer.marked) || !inner.suffix.startsWith(outer.suffix)) return false;
  return nestedRest.test(inner.marked.slice(outer.marked.length));
}

/** The competing fork whose recorded win the execution `at` of the task at `ref` lost (it ran inside a branch other than the winner), if any. */
export function lostFork(record: WorkflowRecord, scheme: KeyScheme, ref: string, at: string): string | undefined {
  for (const [forkAt, winner] of Object.entries(record.winners)) {
    const fork = record.tasks[forkAt];
    const branches = `${fork?.ref}/fork/branches/`;
    if (fork === undefined || !ref.startsWith(branches) || !ranInside(scheme, { pointer: fork.ref, at: forkAt }, ref, at)) continue;
    if (Number.parseInt(ref.slice(branches.length), 10) !== winner) return forkAt;
  }
  return undefined;
}

/** What follows an execution's marked pointer in the marked pointer of one inside it: nothing, or its attempt (scheme 3) and the next level. */
const nestedRest = /^(?:$|(?:\([1-9][0-9]*\))?\/)/;

/** What may follow a pointer token in a key: the next level, a marker, a step's phase, or the end. */
const afterToken = /^(?:$|[/>([{]|~[1-9])/;
const listIndex = /\/(0|[1-9][0-9]*)/y;

/**
 * The JSON Pointer of the task a key names — a task execution key or a step key (`${at}>phase`) —
 * read with the document, as the header above says a key reads: each pointer token is one the
 * document has at that place (an index in a task list, the one name of its entry, a keyword of a
 * task), so a task name holding `~`, `/`, `(`, `[`, `{` or `>` is read whole, and the markers on
 * a task's segment (schemes 2 and 3) are skipped. Answers the innermost task read (a task: the
 * one value of a task list's entry); undefined when the key names none of the document's tasks.
 */
export function pointerOfKey(scheme: KeyScheme, document: unknown, key: string): string | undefined {
  const markers = scheme === 1 ? undefined : scheme === 2 ? revisitMarker : segmentMarkers;
  let value: unknown = document;
  let index = 0;
  let pointer = '';
  let task: string | undefined;
  let entry = false;
  while (key.startsWith('/', index)) {
    if (Array.isArray(value)) {
      listIndex.lastIndex = index;
      const found = listIndex.exec(key);
      const at = found ? Number(found[1]) : value.length;
      if (!found || at >= value.length) break;
      pointer += found[0];
      index = listIndex.lastIndex;
      value = value[at];
      entry = true;
      continue;
    }
    if (typeof value !== 'object' || value === null) break;
    // The longest of the object's keys whose token is read here and ends where a token may end.
    let name: string | undefined;
    let token = '';
    for (const candidate of Object.keys(value)) {
      const read = `/${escapePointer(candidate)}`;
      if (key.startsWith(read, index) && afterToken.test(key.slice(index + read.length)) && (name === undefined || candidate.length > name.length)) {
        name = candidate;
        token = read;
      }
    }
    if (name === undefined) break;
    pointer += token;
    index += token.length;
    value = (value as Record<string, unknown>)[name];
    if (entry) {
      task = pointer;
      if (markers) {
        markers.lastIndex = index;
        if (markers.test(key)) index = markers.lastIndex;
      }
    }
    entry = false;
  }
  return task;
}
