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
 * - 2 (instances started since): a `~v` is attached to the pointer segment of the task it
 *   applies to, and the other markers are appended as before: `/do/0/outer~1/do/0/ping` and
 *   `/do/0/outer/do/0/ping~1`. A document that revisits nothing has the same keys under both.
 *
 * Why the appended markers tell executions apart (and where they do not): given the task, its
 * enclosing tasks are known from its pointer, and each appends its markers in order, outermost
 * first. `[i]` and `{i}` are always present (every execution of a body under a `for`, a listen's
 * `foreach` or a `fork` carries its iteration or branch), so they map one to one onto the
 * enclosing loops and forks, and they never read as another marker (each kind has its own
 * brackets). The markers that may be absent are `~v` (a first visit) and `(n)` (a first
 * attempt): one of them cannot be told from the same kind of marker of a neighbouring level
 * unless a marker of another kind stands between them. Under scheme 2 no `~v` is appended, so
 * a `~v` never meets another. `(n)` still can: a `try` directly in another `try`'s body (no
 * loop or fork between them) gives the same `(2)` to a task in the inner try's first attempt
 * within the outer's second attempt and to the same task in the inner try's second attempt
 * within the outer's first. A `(n)` cannot collide with a `~v` (distinct brackets, and under
 * scheme 2 a `~v` is no longer appended), nor with `[i]` or `{i}`.
 *
 * A `~` after a pointer segment is always a revisit marker: the pointer escapes a `~` in a task
 * name as `~0` and a `/` as `~1` inside the segment, and the segment itself is known from the
 * task's reference (`ref`), which every fact of a task execution records next to its key.
 */
import { AssertionFailure } from '../../contract/errors.js';

/** 1: every marker after the pointer (logs written before schemes were recorded); 2: `~v` on the segment it applies to. */
export type KeyScheme = 1 | 2;

/** The scheme instances are started with. */
export const keyScheme = 2 satisfies KeyScheme;

/** The scheme an instance's start records (absent: 1). */
export const schemeOf = (started: { readonly keys?: number }): KeyScheme => (started.keys === 2 ? 2 : 1);

/**
 * The task execution whose body a frame runs in (scheme 2): its pointer, and its key's pointer
 * part with the revisit markers of it and its enclosing tasks (`marked`).
 */
export interface KeyScope {
  readonly pointer: string;
  readonly marked: string;
}

/** What a frame holds of the keys of the executions run in it. */
export interface KeyFrame {
  /** The markers appended after the pointer, outermost first. */
  readonly suffix: string;
  /** Scheme 2: the execution enclosing the frame (none: the workflow's own `do`). */
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

/** A key's two parts: the pointer with its revisit markers (scheme 1: the pointer), and the markers after it. */
export function splitKey(scheme: KeyScheme, ref: string, at: string): { marked: string; suffix: string } {
  if (scheme === 1) return { marked: ref, suffix: at.slice(ref.length) };
  let index = 0;
  for (const segment of ref.split('/').slice(1)) {
    const piece = `/${segment}`;
    if (!at.startsWith(piece, index)) throw new AssertionFailure(`key ${at} is not a key of task ${ref}`);
    index += piece.length;
    revisitMarker.lastIndex = index;
    if (revisitMarker.test(at)) index = revisitMarker.lastIndex;
  }
  return { marked: at.slice(0, index), suffix: at.slice(index) };
}

const revisitMarker = /~[1-9][0-9]*/y;

/** One task execution: its task's pointer and its key. */
export interface Execution {
  pointer: string;
  at: string;
}

/**
 * Whether the execution `at` of the task at `ref` ran inside `execution`: its task is the
 * execution's task or one nested in it, and its key extends the execution's (in the same
 * revisits of the same tasks, the same iterations, branches and attempts).
 */
export function ranInside(scheme: KeyScheme, execution: Execution, ref: string, at: string): boolean {
  if (ref !== execution.pointer && !ref.startsWith(`${execution.pointer}/`)) return false;
  const outer = splitKey(scheme, execution.pointer, execution.at);
  const inner = splitKey(scheme, ref, at);
  return (inner.marked === outer.marked || inner.marked.startsWith(`${outer.marked}/`)) && inner.suffix.startsWith(outer.suffix);
}
