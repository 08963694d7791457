/**
 * What the interpreter asks of its instance: the current record, a proposal committed through the
 * kernel (decided on the record at its revision, appended with the CAS and the guard), and a wait
 * for the record to reach a condition (a timer fired, a task ended elsewhere).
 */
import type { JsonValue } from '../../contract/json.js';
import type { Proposal } from './decide.js';
import type { StepResult, WorkflowError } from './events.js';
import { WorkflowRaise } from './dsl-errors.js';
import type { WorkflowRecord } from './record.js';

export interface Journal {
  record(): WorkflowRecord;
  /**
   * Whether the instance's start is not committed yet: its first commit carries it (executor.ts
   * create), and until then the record's instants (startedAtMs) are not the store's.
   */
  pending(): boolean;
  /** Commits the start alone when it is still pending. */
  settle(): Promise<void>;
  propose(proposal: Proposal): Promise<WorkflowRecord>;
  /** Resolves when `until` holds for the record; rejects with Halted when the signal aborts first. */
  until(until: (record: WorkflowRecord) => boolean, signal: AbortSignal): Promise<WorkflowRecord>;
  nowMs(): number;
}

/**
 * The instance stopped (finished — completed, faulted by its timeout, cancelled — or this branch
 * lost its race): the interpreter unwinds without recording anything more.
 */
export class Halted extends Error {
  override readonly name = 'Halted';
}

/** The title of the runtime error (500) a proposal past the instance's running log budget is refused with (executor.ts journal). */
export const logBudgetExhausted = 'Log budget exhausted';

/** A recorded step's value, or its recorded error raised again. */
export function replayed(result: StepResult): JsonValue {
  if ('error' in result) throw new WorkflowRaise(result.error);
  return result.ok;
}

export function failure(error: WorkflowError): StepResult {
  return { error };
}
