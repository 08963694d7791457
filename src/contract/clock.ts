/**
 * The injected clock. Runtime code never calls Date.now(): it asks a Clock, so tests and
 * fault simulations advance time explicitly and replay is deterministic.
 */
/**
 * A retry's wait that doubles: `firstMs` after the first failure (`doublings` 0), twice that after
 * the next, and so on, never more than `maxMs`. The kernel's due and reload retries, a running
 * workflow's drives the store refused, an ended workflow's disposals, the emitted-event
 * redelivery, a workflow's contract calls over HTTP and the NATS start-up wait all back off by it.
 */
export function doublingDelayMs(firstMs: number, maxMs: number, doublings: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(doublings, 30));
}

/**
 * Whether the `inARow`th failure in a row is told (logged, counted): the 1st, 2nd, 4th, 8th…, so a
 * retry that keeps failing for an hour tells a dozen lines, not one per try. The kernel's due
 * retries and an ended workflow's disposals tell so.
 */
export function toldInARow(inARow: number): boolean {
  return (inARow & (inARow - 1)) === 0;
}

/**
 * Resolves `ms` from now on the clock, or at once when `signal` aborts (or has aborted): a retry's
 * wait that a stop ends (the peer's effect-sink retries, a workflow's contract calls over HTTP).
 */
export function pause(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.at(clock.nowMs() + ms, done);
    if (signal?.aborted) done();
    else signal?.addEventListener('abort', done, { once: true });
  });
}

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  nowMs(): number;
  /** Runs fn once the clock reaches atMs (immediately-ish if it already has). */
  at(atMs: number, fn: () => void): TimerHandle;
}

export class SystemClock implements Clock {
  nowMs(): number {
    return Date.now();
  }

  at(atMs: number, fn: () => void): TimerHandle {
    // setTimeout's delay is a signed 32-bit int; long waits re-arm. A platform fact, not a policy
    // bound, so it stays here rather than in limits.ts.
    const delayMsMax = 2 ** 31 - 1;
    let timer: NodeJS.Timeout;
    const arm = () => {
      const delayMs = Math.max(0, atMs - Date.now());
      // Not unref'd: a pending deadline or retry is work the process must stay alive for; close() cancels.
      timer = setTimeout(delayMs > delayMsMax ? arm : fn, Math.min(delayMs, delayMsMax));
    };
    arm();
    return { cancel: () => clearTimeout(timer) };
  }
}

interface PendingTimer {
  atMs: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A clock tests move by hand. Timers fire in (time, creation) order during advance(). */
export class VirtualClock implements Clock {
  private currentMs: number;
  private seq = 0;
  private timers: PendingTimer[] = [];

  constructor(startMs = 1_700_000_000_000) {
    this.currentMs = startMs;
  }

  nowMs(): number {
    return this.currentMs;
  }

  at(atMs: number, fn: () => void): TimerHandle {
    const timer: PendingTimer = { atMs, seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }

  /** Sets the time directly, backwards too (clock-rollback tests). Fires nothing. */
  set(ms: number): void {
    this.currentMs = ms;
  }

  /** Moves time forward by deltaMs, firing due timers in order; returns after all fired callbacks ran. */
  async advance(deltaMs: number): Promise<void> {
    const targetMs = this.currentMs + deltaMs;
    for (;;) {
      await flushMicrotasks();
      const next = this.nextDue(targetMs);
      if (next === undefined) break;
      next.cancelled = true;
      this.currentMs = Math.max(this.currentMs, next.atMs);
      next.fn();
    }
    this.currentMs = Math.max(this.currentMs, targetMs);
    await flushMicrotasks();
  }

  pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  private nextDue(limitMs: number): PendingTimer | undefined {
    this.timers = this.timers.filter((t) => !t.cancelled);
    let best: PendingTimer | undefined;
    for (const t of this.timers) {
      if (t.atMs > limitMs) continue;
      if (!best || t.atMs < best.atMs || (t.atMs === best.atMs && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Lets queued promise continuations (appends in flight, deliveries) run to quiescence. */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
