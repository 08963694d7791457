/**
 * The CLI's exit codes, one table (README "Exit codes"): 0 success; one code per AdapterError
 * kind; one for an operation not found (or not visible to the principal); one for a result still
 * pending at the end of the wait; one for a decision that is not success when the caller asked
 * for that to fail (--fail-on-outcome). 13 is left alone (Node's own code for an unsettled
 * top-level await) and so is 130 (interrupted).
 */
import { isAdapterError, type AdapterErrorKind } from '../contract/errors.js';
import { isNotFound } from '../runtime/errors.js';

export const exitCodes = {
  ok: 0,
  /** A bug or an unexpected failure; `replay` also exits 1 when a log does not replay to its record. */
  failure: 1,
  /** Bad usage or invalid input (AdapterError invalid-input). */
  invalidInput: 2,
  denied: 3,
  unavailable: 4,
  conflict: 5,
  expired: 6,
  unsupported: 7,
  protocolConflict: 8,
  notFound: 9,
  /** The operation had not reached its boundary when the wait ended: look it up later. */
  pending: 10,
  /** Decided, but not success, and --fail-on-outcome was given. */
  outcomeNotSuccess: 11,
} as const;

const byKind: Record<AdapterErrorKind, number> = {
  'invalid-input': exitCodes.invalidInput,
  denied: exitCodes.denied,
  unavailable: exitCodes.unavailable,
  conflict: exitCodes.conflict,
  expired: exitCodes.expired,
  unsupported: exitCodes.unsupported,
  'protocol-conflict': exitCodes.protocolConflict,
};

export function exitCodeOfKind(kind: AdapterErrorKind): number {
  return byKind[kind];
}

/** The exit code of a thrown error: its AdapterError kind, not found, or a failure (a bug). */
export function exitCodeOfError(error: unknown): number {
  if (isNotFound(error)) return exitCodes.notFound;
  if (isAdapterError(error)) return exitCodeOfKind(error.kind);
  return exitCodes.failure;
}

/** The exit code of a command reply that carries an error (HTTP statuses, as NATS commands answer). */
export function exitCodeOfReplyError(status: number, kind: AdapterErrorKind): number {
  return status === 404 ? exitCodes.notFound : exitCodeOfKind(kind);
}
