/**
 * The emit stream's per-principal bound (workflows.events.streamEventsPerPrincipal). The stream's
 * own bounds (max_age, max_bytes, discard old) are shared: past max_bytes the server drops the
 * oldest message of any principal. So the sink holds each principal to its share itself: after a
 * principal's event is acknowledged, the stream is purged of that principal's events but its
 * latest `eventsPerPrincipal` (a purge with `filter: <emitPrefix>.<P>.>` and `keep`). The filter
 * is the principal's whole space, every type its documents choose, and only its: a principal
 * emitting past its share loses its own oldest events, never another principal's, and is never
 * refused (no principal's flood stalls its own workflows, nor another's).
 *
 * A purge with a wildcard filter reads the stream's index of the whole stream on the server
 * (about 6 ms at 110 000 messages), so it does not follow every publish: a sink trims a principal
 * on its first event, then once every `trimEvery` of its events (a sixteenth of the share). What
 * a principal holds is thus at most its share, plus fewer than `trimEvery` per sink (serve
 * process) publishing its events, plus the publishes in flight, until its next trim. A failed
 * purge does not fail the emit (its event is in the stream); the principal is trimmed at its next
 * event, and `onTrimFailed` is told.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { principalSubjectToken } from '../../contract/cloudevents.js';
import { AssertionFailure, type AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import { toAdapterError } from './nats-errors.js';

export interface EmittedStreamTrimOptions {
  /** The stream capturing `<emitSubjectPrefix>.>`. */
  stream: string;
  emitSubjectPrefix: string;
  /** The events of one principal the stream keeps (its latest). */
  eventsPerPrincipal: number;
  /** Told when a purge failed (the principal is trimmed at its next event). */
  onTrimFailed?: (principalId: string, error: AdapterError) => void;
}

/** How many of a principal's events a sink publishes between two trims: a sixteenth of its share, at least one. */
export function trimEvery(eventsPerPrincipal: number): number {
  return Math.max(1, Math.ceil(eventsPerPrincipal / 16));
}

/** One principal's trims in this sink: events published since the last one, the one running, whether another must follow it. */
interface PrincipalTrim {
  since: number;
  running: Promise<void> | undefined;
  again: boolean;
}

export class EmittedStreamTrim {
  private readonly principals = new Map<string, PrincipalTrim>();
  private manager: Promise<JetStreamManager> | undefined;
  private readonly every: number;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: EmittedStreamTrimOptions,
  ) {
    const max = options.eventsPerPrincipal;
    if (!Number.isSafeInteger(max) || max < 1 || max > limits.emittedStreamEventsPerPrincipalMax)
      throw new AssertionFailure(`eventsPerPrincipal ${max} is outside 1..${limits.emittedStreamEventsPerPrincipalMax}`);
    this.every = trimEvery(max);
  }

  /**
   * Told after the stream acknowledged an event of the principal's; resolves once the principal's
   * events were trimmed, when a trim was due (one already running for it is followed by another,
   * which this awaits too). Never rejects: a failed trim is told, and due again.
   */
  published(principalId: string): Promise<void> {
    const trim = this.trimOf(principalId);
    trim.since++;
    if (trim.since < this.every) return Promise.resolve();
    if (trim.running) {
      trim.again = true;
      return trim.running;
    }
    trim.running = this.run(principalId, trim);
    return trim.running;
  }

  /**
   * A principal not seen yet is due at its first event (what the stream holds of it is unknown
   * here). Past trimPrincipalsMax principals the map starts again: each is due again at its next
   * event, which costs a trim, never a missed one.
   */
  private trimOf(principalId: string): PrincipalTrim {
    const known = this.principals.get(principalId);
    if (known) return known;
    if (this.principals.size >= limits.emittedStreamTrimPrincipalsMax) this.principals.clear();
    const trim: PrincipalTrim = { since: this.every - 1, running: undefined, again: false };
    this.principals.set(principalId, trim);
    return trim;
  }

  /** Purges until no event published during a purge asked for another; a failure leaves the principal due. */
  private async run(principalId: string, trim: PrincipalTrim): Promise<void> {
    try {
      do {
        trim.again = false;
        trim.since = 0;
        await this.purge(principalId);
      } while (trim.again);
    } catch (error) {
      trim.since = this.every;
      this.options.onTrimFailed?.(principalId, toAdapterError(error, `trimming ${principalId}'s events in stream ${this.options.stream}`));
    } finally {
      trim.running = undefined;
    }
  }

  private async purge(principalId: string): Promise<void> {
    this.manager ??= jetstreamManager(this.nc, { checkAPI: false });
    const filter = `${this.options.emitSubjectPrefix}.${principalSubjectToken(principalId)}.>`;
    await (await this.manager).streams.purge(this.options.stream, { filter, keep: this.options.eventsPerPrincipal });
  }
}
