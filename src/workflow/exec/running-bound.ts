/**
 * The bound on the running workflow instances one principal holds (limits.ts
 * workflowRunningPerPrincipalDefault, config workflows.runningInstancesPerPrincipal): every start
 * — HTTP and NATS through the facade, `run: workflow` children, `convoke workflow run` — asks
 * it before anything is recorded (WorkflowExecutor.start). Children count against the principal
 * of the instance that started them, which is their root's.
 *
 * - The count is the store's workflow instances index (WorkflowStore.runningOf): every worker
 *   sharing the store writes an instance's row with its start and with its end, so it holds the
 *   other workers' instances, and a worker just started that has not resumed every running
 *   instance yet counts them all. The executor's memory would miss both (another worker's start
 *   is resumed here only at the next `resume`). One count per start (WorkflowIndexStore.countRunning):
 *   the size of a list in the views; on SQLite a walk of at most the bound's entries of an index.
 * - The index does not hold a start still under way (counted, not stored yet). This worker's are
 *   counted here: a count may miss every start of the principal under way when it began, or
 *   admitted while it ran, so the start is admitted when the index's running instances plus those
 *   leave room for it. When they do not, and some were under way, it waits for them to be stored
 *   and counts again (one that was in the index is then not counted twice). So one worker never
 *   takes a principal past the bound; starts checked on two workers at once each see the index
 *   without the other's, and may both pass: the excess is at most the starts the other workers
 *   had under way for that principal at that moment.
 * - At the bound, a start whose instance exists already (the same key: an idempotent re-start, a
 *   child found again on recovery) is answered with it, since it creates nothing.
 */
import { AdapterError } from '../../contract/errors.js';

/** Refused: the principal holds as many running instances as its bound allows (an `unavailable`: retry after one ends). */
export class RunningBoundReached extends AdapterError {
  constructor(
    readonly principalId: string,
    readonly held: number,
    readonly most: number,
    setting: string,
  ) {
    super(
      'unavailable',
      `principal ${JSON.stringify(principalId.slice(0, 80))} holds ${held} running workflow instances, its bound ` +
        `(${most}, ${setting}): nothing was started; start it again after one of them ends`,
    );
  }
}

/** An admitted start: released once its create is answered (stored or not). */
export interface Admission {
  release(): void;
}

/** One principal's starts on this worker: those under way, how many were ever admitted, and the counts running. */
interface Starts {
  live: Set<Promise<void>>;
  admitted: number;
  counting: number;
}

/** How many times a start counts again after waiting for this worker's starts under way, before it is refused. */
const recountsMax = 8;

export class RunningBound {
  private readonly principals = new Map<string, Starts>();

  constructor(
    private readonly count: (principalId: string, atMost: number) => Promise<number>,
    readonly most: number,
    /** What sets the bound, named in a refusal (serve's config setting, or `convoke workflow run --running-bound`). */
    private readonly setting: string,
  ) {}

  /**
   * Admits one start of the principal's, or answers undefined when the bound is reached and
   * `exists` says the instance is stored already (the start answers it); throws
   * RunningBoundReached when it is reached and the instance does not exist.
   */
  async admit(principalId: string, exists: () => Promise<boolean>): Promise<Admission | undefined> {
    for (let round = 0; ; round++) {
      const starts = this.startsOf(principalId);
      const live = starts.live.size;
      const mark = starts.admitted;
      starts.counting++;
      let running: number;
      try {
        running = await this.count(principalId, this.most);
      } finally {
        starts.counting--;
        this.forget(principalId, starts);
      }
      // Starts under way when the count began, or admitted while it ran: stored or not, the count may lack each.
      const underWay = live + (starts.admitted - mark);
      if (running + underWay < this.most) return this.take(principalId);
      if (await exists()) return undefined;
      if (underWay === 0 || round >= recountsMax) throw new RunningBoundReached(principalId, Math.min(running + underWay, this.most), this.most, this.setting);
      // Some may be counted twice: once stored, they are in the index alone.
      await Promise.all(starts.live);
    }
  }

  private take(principalId: string): Admission {
    const starts = this.startsOf(principalId);
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    starts.live.add(done);
    starts.admitted++;
    return {
      release: () => {
        starts.live.delete(done);
        release();
        this.forget(principalId, starts);
      },
    };
  }

  private startsOf(principalId: string): Starts {
    let starts = this.principals.get(principalId);
    if (!starts) this.principals.set(principalId, (starts = { live: new Set(), admitted: 0, counting: 0 }));
    return starts;
  }

  /** Drops a principal's entry once nothing of it is under way (a map entry per principal that ever started would grow without end). */
  private forget(principalId: string, starts: Starts): void {
    if (starts.live.size === 0 && starts.counting === 0 && this.principals.get(principalId) === starts) this.principals.delete(principalId);
  }
}
