/**
 * The admission rate per principal (config `admissionRate`): a token bucket for each principal,
 * refilled at `perSecond` up to `burst`, on the injected clock. A new admission takes a token; a
 * principal with none left is refused `unavailable` before anything is planned or recorded, with
 * the wait until its next token in the description. Nothing is recorded of a refusal, so replay
 * never sees it: the bucket is process state, like the connection a request came in on.
 *
 * What it protects: the store's operation capacity (`operationsMax`, shared by every principal and
 * never freed by deleting key history), the peers' queues and the coordinator's memory, from one
 * principal admitting as fast as it can send. An invocation under a key that already names an
 * operation is answered whatever the bucket holds (admit.ts finds it on the refusal).
 *
 * Each coordinator keeps its own buckets: with N coordinators behind a balancer a principal may
 * admit up to N times the rate. Buckets are kept for the `admissionRatePrincipalsMax` principals seen last; a
 * principal forgotten starts again with a full bucket.
 */
import type { Clock } from '../contract/clock.js';
import { AdapterError } from '../contract/errors.js';
import { BoundedMap } from '../contract/bounded-map.js';

export interface AdmissionRateConfig {
  /** Tokens added per second (a fraction allowed: 0.5 is one admission every two seconds). */
  perSecond: number;
  /** The most tokens a bucket holds: the admissions a principal may make at once after a pause. */
  burst: number;
}

/** The config's bounds: at least one admission a minute, at most a million a second; a burst of 1 to a million. */
export const admissionRateBounds = { perSecondMin: 1 / 60, perSecondMax: 1_000_000, burstMin: 1, burstMax: 1_000_000 } as const;

/** A refusal by the rate: `unavailable`, with how long until the principal's next token (HTTP sends it as Retry-After). */
export class RateLimited extends AdapterError {
  constructor(
    description: string,
    readonly retryAfterMs: number,
  ) {
    super('unavailable', description);
  }
}

/** The principals whose buckets one AdmissionRate keeps (the ones seen last): one forgotten starts again with a full bucket. */
export const admissionRatePrincipalsMax = 100_000;

interface Bucket {
  tokens: number;
  atMs: number;
}

export class AdmissionRate {
  private readonly buckets: BoundedMap<string, Bucket>;

  /** `counted`: what a refusal says is counted ("principal "alice" admits at most 2 operations a second"). */
  constructor(
    private readonly config: AdmissionRateConfig,
    private readonly clock: Clock,
    private readonly counted: RateWords = operationWords,
    principalsMax = admissionRatePrincipalsMax,
  ) {
    this.buckets = new BoundedMap(principalsMax);
  }

  /** Takes a token of `principalId`'s bucket, or throws `unavailable` saying when the next one comes. */
  take(principalId: string): void {
    const nowMs = this.clock.nowMs();
    const { perSecond, burst } = this.config;
    const held = this.buckets.get(principalId);
    // A clock that went back adds nothing and takes nothing away: the bucket counts from the instant it
    // reads now (kept at a later one, a clock stepped back by an hour would refill nothing for that hour).
    const tokens = held === undefined ? burst : Math.min(burst, held.tokens + (Math.max(0, nowMs - held.atMs) * perSecond) / 1000);
    if (tokens < 1) {
      this.buckets.set(principalId, { tokens, atMs: nowMs });
      // (Less a hair: 0.998 tokens at 2 a second is 1 ms away, not the 2 a float's residue would round to.)
      const waitMs = Math.max(1, Math.ceil(((1 - tokens) * 1000) / perSecond - 1e-6));
      throw new RateLimited(
        `principal ${JSON.stringify(principalId)} ${this.counted.verb} at most ${rateText(perSecond, this.counted)} here (a burst of ${burst}); the next in ${waitMs} ms`,
        waitMs,
      );
    }
    this.buckets.set(principalId, { tokens: tokens - 1, atMs: nowMs });
  }

  /**
   * Gives back the token a take spent on what turned out not to be new (the key already named an
   * operation or an instance) or was refused for another bound: a client's retries and a refused
   * start do not use up what its new work needs.
   */
  refund(principalId: string): void {
    const held = this.buckets.get(principalId);
    if (held !== undefined) held.tokens = Math.min(this.config.burst, held.tokens + 1);
  }
}

/** How a refusal names what a bucket counts. */
export interface RateWords {
  verb: string;
  one: string;
  many: string;
}

export const operationWords: RateWords = { verb: 'admits', one: 'operation', many: 'operations' };
export const workflowStartWords: RateWords = { verb: 'starts', one: 'workflow instance', many: 'workflow instances' };

/** A rate as a person reads it: "2 operations a second", "one operation a second", "one operation every 2 s" (three significant digits at most). */
export function rateText(perSecond: number, words: RateWords): string {
  const short = (value: number) => String(Number(value.toPrecision(3)));
  if (perSecond === 1) return `one ${words.one} a second`;
  return perSecond > 1 ? `${short(perSecond)} ${words.many} a second` : `one ${words.one} every ${short(1 / perSecond)} s`;
}
