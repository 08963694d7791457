/**
 * The admission budget (spec: "Admission has a fixed 10000 ms budget from the trusted
 * request-start clock; a hung resolver cannot admit work later"). Every call admission waits on
 * (directory, policy, manifest source) is raced against the budget's end on the injected clock,
 * so a call that never answers ends the admission at the budget instead of leaving it pending.
 *
 * The answer is `expired`, as for a call that answers at or after the budget: the admission's
 * window [request start, start + budget) has ended, exactly as a store time guard outside its
 * window answers expired. Which call was still pending is in the description; a late answer is
 * dropped and nothing is created from it.
 */
import { AdapterError } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
import type { Clock, TimerHandle } from '../contract/clock.js';

const budgetEnded = Symbol('admission budget ended');

export class AdmissionBudget {
  readonly endMs: number;
  private readonly ended: Promise<never>;
  private readonly timer: TimerHandle;

  constructor(
    private readonly clock: Clock,
    requestStartMs: number,
  ) {
    this.endMs = requestStartMs + limits.admissionBudgetMs;
    let fire!: () => void;
    this.ended = new Promise<never>((_, reject) => (fire = () => reject(budgetEnded)));
    this.ended.catch(() => undefined); // observed by whichever call is waiting, if any
    // One timer per admission, cancelled when the admission ends (end()).
    this.timer = clock.at(this.endMs, fire);
  }

  /** Throws expired once the budget has ended; `what` names the step that would have run. */
  check(what: string): void {
    if (this.clock.nowMs() >= this.endMs) throw this.expired(what);
  }

  /** The call's answer if it comes before the budget ends (and the clock is still inside it); otherwise expired. */
  async within<T>(call: Promise<T>, what: string): Promise<T> {
    this.check(what);
    let answer: T;
    try {
      answer = await Promise.race([call, this.ended]);
    } catch (error) {
      if (error === budgetEnded) throw this.expired(`${what} did not answer`);
      throw error;
    }
    this.check(`${what} answered too late`);
    return answer;
  }

  end(): void {
    this.timer.cancel();
  }

  private expired(what: string): AdapterError {
    return new AdapterError('expired', `admission did not complete within its ${limits.admissionBudgetMs} ms budget (${what})`);
  }
}
