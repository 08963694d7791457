/**
 * The one encoding every store adapter uses for a Transition, and the structural check run
 * before an append and again after a read (STYLE.md §8: validate before append and after read).
 * The check is deliberately shallow — the XState machines are the legality authority for the
 * events themselves; the store only refuses shapes it could not round-trip or fold.
 */
import type { StoredTransition, Transition } from '../../events/types.js';
import type { AppendListener, RevisionListener, StoreFailure } from './types.js';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Why `value` is not a storable Transition, or undefined when it is. */
export function transitionShapeProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return 'transition must be an object';
  if (!Array.isArray(value.events)) return 'transition.events must be an array';
  for (const [index, event] of value.events.entries()) {
    if (!isRecord(event) || typeof event.type !== 'string' || typeof event.v !== 'number') {
      return `transition.events[${index}] must be an object with a string type and a numeric v`;
    }
  }
  const guard = value.timeGuard;
  if (!isRecord(guard) || typeof guard.notBeforeMs !== 'number' || typeof guard.notAfterMs !== 'number') {
    return 'transition.timeGuard must be {notBeforeMs, notAfterMs}';
  }
  if (!isRecord(value.causation) || typeof value.causation.command !== 'string') {
    return 'transition.causation.command must be a string';
  }
  return undefined;
}

/** Why `value` is not a StoredTransition as a store returns it, or undefined when it is. */
export function storedTransitionProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return 'stored transition must be an object';
  if (typeof value.revision !== 'string' || value.revision.length === 0) return 'stored revision must be a non-empty string';
  if (!Number.isSafeInteger(value.committedAtMs)) return 'stored committedAtMs must be a safe integer';
  return transitionShapeProblem(value.transition);
}

export function checkTransitionShape(transition: Transition): StoreFailure | undefined {
  const problem = transitionShapeProblem(transition);
  return problem === undefined ? undefined : { kind: 'invalid-input', description: problem };
}

/**
 * The body of the transition last measured for a size check ahead of its store (the log budget,
 * runtime/log-budget.ts), until a store encodes that transition: the commit pipeline measures a
 * transition and hands it to the store in the same turn, so it is serialized once, not twice. A
 * transition is never changed once decided; the slot is taken by the first encoding of the same
 * object and holds at most one body.
 */
let measured: { transition: Transition; body: string } | undefined;

/** The stored body of `transition` and its size in bytes, kept for the store's encoding of the same transition. */
export function measureTransition(transition: Transition): { body: string; bytes: number } {
  const body = JSON.stringify(transition);
  measured = { transition, body };
  return { body, bytes: bodyBytes(body) };
}

/** The stored body: exactly the bytes the size budget is checked against. */
export function encodeTransition(transition: Transition): string {
  const held = measured;
  if (held !== undefined && held.transition === transition) {
    measured = undefined;
    return held.body;
  }
  return JSON.stringify(transition);
}

/** The last body measured: a store asks the size of the body the budget check just measured. */
let sized: { body: string; bytes: number } = { body: '', bytes: 0 };

export function bodyBytes(body: string): number {
  if (sized.body === body) return sized.bytes;
  const bytes = Buffer.byteLength(body, 'utf8');
  sized = { body, bytes };
  return bytes;
}

export function sizeFailure(bytes: number, bytesMax: number): StoreFailure {
  return { kind: 'invalid-input', description: `transition is ${bytes} bytes; the limit is ${bytesMax}` };
}

/** An append past the transitions a store reads back is refused: the log would become unreadable. */
export function logFullFailure(operationId: string, transitions: number, transitionsMax: number): StoreFailure {
  return {
    kind: 'invalid-input',
    description: `operation ${operationId} holds ${transitions} transitions, the most this store accepts and reads back (${transitionsMax})`,
  };
}

/**
 * Decodes a body read back from a store. A body that does not parse or has the wrong shape is
 * corruption the adapter cannot vouch for: the caller answers `unavailable`, never a guess.
 */
export function decodeStored(revision: string, committedAtMs: number, body: string): StoredTransition | StoreFailure {
  let transition: unknown;
  try {
    transition = JSON.parse(body);
  } catch (error) {
    return { kind: 'unavailable', description: `stored transition at revision ${revision} is not JSON: ${String(error)}` };
  }
  const stored = { revision, committedAtMs, transition };
  const problem = storedTransitionProblem(stored);
  if (problem !== undefined) return { kind: 'unavailable', description: `stored transition at revision ${revision} is corrupt: ${problem}` };
  return stored as StoredTransition;
}

export function isStoreFailure(value: unknown): value is StoreFailure {
  return isRecord(value) && typeof value.kind === 'string' && typeof value.description === 'string' && !('transition' in value);
}

/** Canonical positive decimal revision (no sign, no leading zero); undefined otherwise. */
export function parseRevision(revision: string): number | undefined {
  if (!/^[1-9][0-9]{0,15}$/.test(revision)) return undefined;
  const value = Number(revision);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** Runs listeners so that one that throws cannot fail the write it is told about. */
/** A follow listener that tells `listener` only the revision: `watch` for stores that have nothing cheaper than follow. */
export function revisionsOnly(listener: RevisionListener): AppendListener {
  return (operationId, stored) => listener(operationId, stored.revision);
}

export function notifyAll<T extends unknown[]>(listeners: Iterable<(...args: T) => void>, ...args: T): void {
  for (const listener of listeners) {
    try {
      listener(...args);
    } catch {
      // A follower's failure is its own: the append it observes is already committed.
    }
  }
}
