/**
 * Group commit: commands that arrive for one operation while its queue is busy are committed
 * together, as one transition where their guards allow it (decideTogether), on the kernel's
 * pipeline. Results that close nothing may wait a little for the ones that do (resultBatchMs),
 * so a quorum's early votes ride with the vote that closes it.
 */
import type { Clock } from '../contract/clock.js';
import { AssertionFailure } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
import type { Transition } from '../events/types.js';
import { decideTogether, resultGuardEndMs } from '../domain/decide.js';
import { storeError, type Kernel } from '../kernel/kernel.js';
import { couldClose } from '../projections/decision.js';
import type { OperationRecord } from '../projections/record.js';
import type { Arrival, Decider, OpEntry, SubmitOptions } from './host.js';

/** What a batch was found to append when it was probed: reusable while record and instant are unchanged. */
interface Probe {
  record: OperationRecord;
  atMs: number;
  transition: Transition;
}

export class GroupCommit {
  /** Transitions appended for more than one command: one the log has no room for is split (isTogether), not refused whole. */
  private readonly together = new WeakSet<Transition>();

  constructor(
    private readonly kernel: Kernel<OperationRecord, Transition, OpEntry>,
    private readonly clock: Clock,
    /** Counts (and logs) a rejection the committed batch decided. */
    private readonly onRejected: (reason: string, record: OperationRecord) => void,
    private readonly resultBatchMs: number,
  ) {}

  submit(entry: OpEntry, prepare: () => Promise<Decider>, weightBytes: number, options: SubmitOptions = {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const arrival: Arrival = {
        prepare,
        weightBytes,
        done: (error) => (error === undefined ? resolve() : reject(error)),
        batchable: options.batchable === true,
      };
      if (options.batchable && this.resultBatchMs > 0) arrival.holdUntilMs = this.clock.nowMs() + this.resultBatchMs;
      entry.arrivals.push(arrival);
      if (options.lingerMs === undefined) return this.queueDrain(entry);
      arrival.holdUntilMs = this.clock.nowMs() + options.lingerMs;
      this.clock.at(arrival.holdUntilMs, () => {
        if (entry.arrivals.includes(arrival)) this.queueDrain(entry);
      });
    });
  }

  private queueDrain(entry: OpEntry): void {
    if (entry.drainQueued) return;
    entry.drainQueued = true;
    void this.kernel.enqueue(entry, () => this.drain(entry));
  }

  /**
   * Holds a batch back (puts it back and answers 'held') while every command in it may still
   * wait, the operation is undecided and together they close nothing: a quorum's early votes then
   * ride with the vote that closes it. Holding never takes a batch to the end of its guard: one
   * whose guard ends within a hold window of its release is committed now. A batch that is not
   * held answers what probing it found, for the commit to reuse; its rejections are counted then.
   * A held batch is prepared again by the drain that takes it: publisher verification and the
   * authorization recheck run for the drain that commits, exactly as for a batch never held.
   */
  private probe(entry: OpEntry, ready: { arrival: Arrival; decide: Decider }[]): Probe | 'held' | undefined {
    const untilMs = this.holdWindowEnd(
      entry,
      ready.map((r) => r.arrival),
    );
    if (untilMs === undefined) return undefined;
    const record = entry.record;
    const atMs = this.clock.nowMs();
    const rejected: string[] = [];
    const transition = decideTogether(
      record,
      ready.map((r) => (current) => r.decide(current, false, rejected)),
      atMs,
    );
    if (transition === undefined || transition === 'disjoint') return undefined;
    if (transition.events.some((e) => e.type === 'decision-closed') || untilMs + this.resultBatchMs > transition.timeGuard.notAfterMs) {
      for (const reason of rejected) this.onRejected(reason, record);
      return { record, atMs, transition };
    }
    this.holdBack(
      entry,
      ready.map((r) => r.arrival),
      untilMs,
    );
    return 'held';
  }

  /**
   * Holds a batch back without preparing or deciding it when no such batch can close the rule
   * (couldClose: too few results to reach the threshold, to make it impossible or to end the
   * collection) and the earliest guard any of its results could have — the deadline or the
   * earliest open lease — ends later than a hold window after its release. Most early votes are
   * held here; the vote that could close takes the probe.
   */
  private heldUndecided(entry: OpEntry, batch: Arrival[]): boolean {
    const untilMs = this.holdWindowEnd(entry, batch);
    if (untilMs === undefined) return false;
    const record = entry.record;
    const results = batch.filter((arrival) => arrival.batchable).length;
    if (results === 0 || couldClose(record, results)) return false;
    if (untilMs + this.resultBatchMs > resultGuardEndMs(record)) return false;
    this.holdBack(entry, batch, untilMs);
    return true;
  }

  /**
   * When the batch's hold window ends (its oldest command's), or undefined when it may not wait:
   * the operation is decided, a command in it may not wait, or the window has ended.
   */
  private holdWindowEnd(entry: OpEntry, batch: Arrival[]): number | undefined {
    if (entry.record.decision !== null) return undefined;
    let untilMs = Number.POSITIVE_INFINITY;
    for (const arrival of batch) {
      if (arrival.holdUntilMs === undefined) return undefined;
      untilMs = Math.min(untilMs, arrival.holdUntilMs);
    }
    return this.clock.nowMs() < untilMs ? untilMs : undefined;
  }

  /** Puts a batch back at the front and drains again when its window ends. */
  private holdBack(entry: OpEntry, batch: Arrival[], untilMs: number): void {
    entry.arrivals.unshift(...batch);
    this.clock.at(untilMs, () => {
      if (batch.some((arrival) => entry.arrivals.includes(arrival))) this.queueDrain(entry);
    });
  }

  /**
   * Before a command that decides on its own (a due instant, a cancellation, lost durability):
   * commits the results held back for company, which arrived first and must count first. A held
   * batch was a whole batch and is back at the front, so one drain takes it.
   */
  async releaseHeld(entry: OpEntry): Promise<void> {
    if (entry.arrivals.length > 0) await this.drain(entry, false);
  }

  /** Commits what has arrived, as one transition where the commands allow it; the rest waits for the next drain. */
  private async drain(entry: OpEntry, mayHold = true): Promise<void> {
    entry.drainQueued = false;
    let bytes = 0;
    let taken = 0;
    for (const arrival of entry.arrivals) {
      if (taken === limits.commandsPerTransitionMax || (taken > 0 && bytes + arrival.weightBytes > limits.groupCommitBatchBytesMax)) break;
      bytes += arrival.weightBytes;
      taken++;
    }
    const batch = entry.arrivals.splice(0, taken);
    const rest = entry.arrivals.length > 0;
    if (rest) this.queueDrain(entry);
    if (!rest && mayHold && this.heldUndecided(entry, batch)) return;
    const prepared = await Promise.all(
      batch.map((a) =>
        a.prepare().then(
          (decide) => ({ arrival: a, decide }),
          (error: unknown) => (a.done(error ?? new Error('prepare failed')), undefined),
        ),
      ),
    );
    const ready = prepared.filter((p): p is { arrival: Arrival; decide: Decider } => p !== undefined);
    if (ready.length === 0) return;
    const probe = rest || !mayHold ? undefined : this.probe(entry, ready);
    if (probe === 'held') return;
    try {
      const errors = await this.commitTogether(
        entry,
        ready.map((r) => r.decide),
        probe,
      );
      ready.forEach((r, i) => r.arrival.done(errors[i]));
    } catch (error) {
      for (const r of ready) r.arrival.done(error ?? new Error('commit failed'));
    }
  }

  /**
   * Whether `transition` was decided for several commands together: the log-budget check answers
   * one the log has no room for as a refusal to split (invalid-input, nothing written, nothing
   * closed), so each command is then checked on its own (commitEach). The earlier results of a
   * batch may fit where all of them together do not; refused whole, every one of them was
   * answered with the budget's refusal and the operation closed for its budget before any was
   * taken.
   */
  isTogether(transition: Transition): boolean {
    return this.together.has(transition);
  }

  /**
   * One transition for several commands (decideTogether), with the kernel's CAS retry. When the
   * store answers that the shared guard did not hold or the transition is too large, or the log
   * has no room for it (isTogether), each command is committed on its own instead, with its own
   * guard and late handling (commitEach). Answers each command's own failure, by position (none
   * when the batch was committed).
   */
  private async commitTogether(entry: OpEntry, deciders: Decider[], probe?: Probe): Promise<unknown[]> {
    const [only] = deciders;
    if (deciders.length === 1 && only !== undefined && probe === undefined) return this.kernel.commit(entry, only).then(() => []);
    for (let tries = 0; tries < limits.conflictRetriesMax; tries++) {
      // A probe of this very record at this very instant is what deciding again would answer.
      const transition =
        tries === 0 && probe !== undefined && probe.record === entry.record && probe.atMs === this.clock.nowMs()
          ? probe.transition
          : decideTogether(
              entry.record,
              deciders.map((decide) => (record) => decide(record, false)),
              this.clock.nowMs(),
            );
      if (transition === undefined) return [];
      if (transition === 'disjoint') break;
      if (deciders.length > 1) this.together.add(transition);
      const outcome = await this.kernel.append(entry, transition);
      if (outcome.kind === 'ok') return [];
      if (outcome.kind === 'conflict') continue;
      if (outcome.kind === 'expired') {
        // Guard-on-fold stores still stored a void transition: the revision moved.
        await this.kernel.reload(entry);
        break;
      }
      if (outcome.kind === 'invalid-input') break;
      throw storeError(outcome, transition.causation.command);
    }
    return this.commitEach(entry, deciders);
  }

  /**
   * Each command on its own, each answered for itself: one the store refuses (or the log has no
   * room for) costs the commands after it nothing. Before, the first failure ended the loop and
   * every command of the batch was answered with it: results the store would have taken were
   * acknowledged as refused and recorded nowhere.
   */
  private async commitEach(entry: OpEntry, deciders: Decider[]): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (const decide of deciders) {
      try {
        await this.kernel.commit(entry, decide);
        errors.push(undefined);
      } catch (error) {
        if (error instanceof AssertionFailure) throw error;
        errors.push(error ?? new Error('commit failed'));
      }
    }
    return errors;
  }
}
