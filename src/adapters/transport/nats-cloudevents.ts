/**
 * CloudEvents on NATS, structured mode (the JSON event is the payload, `content-type:
 * application/cloudevents+json`), in two subject spaces:
 *
 * - `<prefix>.<type>`: events from outside. Their publishers are authorized per type by the broker
 *   (one subject each), and an event there reaches every principal's waiting listens.
 * - `<emitPrefix>.<principal>.<type>` (`emittedEventSubject`): events workflows emit. Only the
 *   coordinator may publish there, on behalf of the principal whose instance emitted the event; an
 *   event there reaches only that principal's instances, as POST /workflow-events reaches only the
 *   caller's. A workflow cannot pass an event to another principal's listens, nor for an outside
 *   publisher's type.
 *
 * - The sink publishes an emitted event: on core NATS (flushed: the server has it), or on
 *   JetStream with `Nats-Msg-Id` derived from the task execution that emitted it
 *   (`emittedMessageId`), so a republish after a crash is dropped by the stream's duplicate window
 *   and, past it, by any consumer that keys on the event's id. The stream captures only the
 *   emitted space, which nobody else can publish to: no one can take a message id in it first.
 *   Given the stream and each principal's share of it, the principal's events past its share are
 *   purged after its event is stored (EmittedStreamTrim): its own oldest, never another's.
 * - The intake subscriptions take events for waiting `listen` tasks on `<prefix>.>` and, when
 *   given, `<emitPrefix>.>`: an event is parsed strictly (I-JSON, as POST /workflow-events parses
 *   it) and checked (its subject must be its type's subject in its space: a publisher allowed one
 *   subject cannot pass for another type), handed to the intake, and answered — when the message
 *   has a reply subject and comes from outside — only after the intake's append committed:
 *   `{status: "accepted", count}` (how many instances took it: which ones
 *   are theirs to know, and they may be any principal's), `{status: "no-match"}` (nothing stored),
 *   or `{status: "rejected", error}`. Emitted events are never answered: their publisher is the
 *   coordinator, whose reply subject (a JetStream publish) awaits the stream's acknowledgment.
 * - At most limits.cloudEventsInFlightMax events are delivered at once, and at most
 *   limits.cloudEventsInFlightPerPrincipalMax of one principal's emitted ones (the subject names
 *   the principal, and only the coordinator publishes there): past either an emitted event waits
 *   for a slot (emittedRedelivery), an outside one is answered unavailable. An outside event's
 *   subject proves only that its publisher was one of those allowed its type — NATS does not say
 *   who sent a message, and a reply subject is the sender's to choose — so, given who may publish
 *   each type (ServeCloudEventsOptions.publishersOf), the outside events of the types one set of
 *   publishers may publish share limits.cloudEventsInFlightPerPublishersMax slots of their own: a
 *   publisher alone on its types floods only its own slots; publishers allowed one type share that
 *   type's. Without it, outside events meet the global bound alone.
 * - Between receipt and append an event is only in this host's memory (core NATS): a crash there
 *   loses it. A publisher that asked (a request) sees no answer and sends it again, taken once; one
 *   that published without a reply subject is told nothing, and its event is then lost, as it is
 *   when the intake would have answered it unavailable or rejected (docs/workflows-executor.md).
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  type JetStreamClient,
  type JetStreamManager,
  type StreamInfo,
} from '@nats-io/jetstream';
import {
  cloudEventProblem,
  cloudEventsMediaType,
  cloudEventSubject,
  emittedEventSubject,
  emittedMessageId,
  principalOfSubjectToken,
  type CloudEvent,
  type CloudEventIntake,
  type CloudEventSink,
  type EmitOrigin,
} from '../../contract/cloudevents.js';
import { AdapterError, AssertionFailure, assert, conflict, invalidInput, isAdapterError, unavailable } from '../../contract/errors.js';
import { PrincipalSlots } from '../../contract/principal-slots.js';
import { subjectSpacesOverlap } from '../../contract/ids.js';
import { parseStrictBytes } from '../../contract/ijson.js';
import { doublingDelayMs, SystemClock, type Clock, type TimerHandle } from '../../contract/clock.js';
import type { JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { EmittedStreamTrim, type EmittedStreamTrimOptions } from './emitted-stream-trim.js';
import { msToNanos } from './nats-codec.js';
import { deniedByNats } from './nats-startup.js';
import { classifyNatsError, messageBytes, pastMaxPayload, streamMessageTooLarge, toAdapterError } from './nats-errors.js';

/** Subject tokens: the prefix is one or more tokens without wildcards. */
const prefixPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

function checkPrefix(prefix: string): void {
  if (!prefixPattern.test(prefix)) throw invalidInput(`CloudEvents subject prefix ${JSON.stringify(prefix)} is not a sequence of subject tokens`);
}

/** Neither space may contain the other: an outside publisher could otherwise publish into the emitted space, or the reverse. */
function checkSpaces(subjectPrefix: string, emitSubjectPrefix: string): void {
  if (subjectSpacesOverlap(subjectPrefix, emitSubjectPrefix))
    throw invalidInput(`CloudEvents subject prefixes ${JSON.stringify(subjectPrefix)} and ${JSON.stringify(emitSubjectPrefix)} overlap`);
}

export interface NatsCloudEventSinkOptions {
  /** Emitted events travel on `<emitSubjectPrefix>.<principal>.<type>`. */
  emitSubjectPrefix: string;
  /** Publish through JetStream (a stream must capture `<emitSubjectPrefix>.>`), with Nats-Msg-Id from the task execution. */
  jetstream?: boolean;
  /**
   * With jetstream: the stream capturing `<emitSubjectPrefix>.>`, and the events of one principal
   * it keeps (EmittedStreamTrim: past them the principal's oldest are purged). Without them, the
   * stream's shared bounds alone decide what it keeps.
   */
  stream?: string;
  eventsPerPrincipal?: number;
  /** Told when trimming a principal's events failed (EmittedStreamTrimOptions.onTrimFailed). */
  onTrimFailed?: EmittedStreamTrimOptions['onTrimFailed'];
}

export class NatsCloudEventSink implements CloudEventSink {
  private readonly js: JetStreamClient | undefined;
  private readonly trim: EmittedStreamTrim | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsCloudEventSinkOptions,
  ) {
    checkPrefix(options.emitSubjectPrefix);
    this.js = options.jetstream ? jetstream(nc) : undefined;
    const { stream, eventsPerPrincipal, onTrimFailed, emitSubjectPrefix } = options;
    if (this.js && stream !== undefined && eventsPerPrincipal !== undefined)
      this.trim = new EmittedStreamTrim(nc, { stream, emitSubjectPrefix, eventsPerPrincipal, ...(onTrimFailed ? { onTrimFailed } : {}) });
  }

  /** Past the server's max_payload (the message: the event's JSON and its headers), as the connection's server announced it. */
  refusal(event: CloudEvent, origin: EmitOrigin): string | undefined {
    return this.payloadRefusal(this.message(event, origin));
  }

  async publish(event: CloudEvent, origin: EmitOrigin): Promise<void> {
    const problem = cloudEventProblem(event);
    if (problem !== undefined) throw invalidInput(`not a publishable CloudEvent: ${problem}`);
    const message = this.message(event, origin);
    const { subject, data, headers } = message;
    const tooLarge = this.payloadRefusal(message);
    if (tooLarge !== undefined) throw invalidInput(`publishing ${subject}: ${tooLarge}`);
    try {
      if (this.js) await this.js.publish(subject, data, { msgID: emittedMessageId(origin), headers });
      else {
        this.nc.publish(subject, data, { headers });
        await this.nc.flush();
      }
    } catch (error) {
      const failure = classifyNatsError(error);
      if (failure.kind === 'permission') throw new AdapterError('denied', `publishing ${subject}: ${failure.detail}`, { cause: error });
      // Refusals that stay ones: the stream answered it stores no message this large; or the client refused it (malformed, or past a max_payload the server announced smaller since), sending nothing.
      if (failure.kind === 'api' && failure.code === streamMessageTooLarge)
        throw invalidInput(`publishing ${subject}: the stream capturing it takes no message this large (its max_msg_size): ${failure.detail}`, error);
      if (failure.kind === 'invalid') throw invalidInput(`publishing ${subject}: ${this.payloadRefusal(message) ?? failure.detail}`, error);
      throw new AdapterError('unavailable', `publishing ${subject}: ${failure.detail}`, { cause: error });
    }
    // The stream has the event: its principal's oldest past its share are purged now, when due (never failing the emit).
    await this.trim?.published(origin.principalId);
  }

  /** The NATS message an emitted event is: its subject, its JSON, its headers (with JetStream, the message id the client adds). */
  private message(event: CloudEvent, origin: EmitOrigin): EmittedMessage {
    const subject = emittedEventSubject(this.options.emitSubjectPrefix, origin.principalId, event.type);
    const data = new TextEncoder().encode(JSON.stringify(event));
    const headers = natsHeaders();
    headers.set('content-type', cloudEventsMediaType);
    if (this.js) headers.set('Nats-Msg-Id', emittedMessageId(origin));
    return { subject, data, headers };
  }

  /** Why the server never takes the message (larger than its max_payload, which counts the headers too), or undefined; undefined too before the server said its limit. */
  private payloadRefusal({ data, headers }: EmittedMessage): string | undefined {
    const past = pastMaxPayload(this.nc, messageBytes(data, headers));
    return past && `the event is ${past.bytes} bytes as a NATS message (its JSON and headers); the NATS server takes at most ${past.maxPayload} (max_payload)`;
  }
}

interface EmittedMessage {
  subject: string;
  data: Uint8Array;
  headers: ReturnType<typeof natsHeaders>;
}

export interface CloudEventSubscription {
  /** The subjects subscribed: `<prefix>.>`, and `<emitPrefix>.>` when the emitted space is taken too. */
  readonly subjects: readonly string[];
  /**
   * Resolves once the server has taken every subscription; rejects (`denied` naming the subject
   * and the fix, where this NATS user may not subscribe to it) when it closed one instead: an
   * intake that subscribed to nothing would take no event and say nothing.
   */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface ServeCloudEventsOptions {
  /**
   * Also take the events workflows emit, on `<emitSubjectPrefix>.<principal>.<type>`: each
   * reaches only that principal's instances.
   */
  emitSubjectPrefix?: string;
  /** A queue group: each event goes to one subscriber of the group (several hosts take it once). */
  queue?: string;
  /**
   * Whether an answer may go to this reply subject for an event received on `subject` (outside
   * events only); refused ones are delivered but not answered (the default answers any).
   */
  answers?: (subject: string, reply: string) => boolean;
  /**
   * Who may publish an outside event on this subject, as a key naming that set of publishers (the
   * broker's permissions decide it: `workflows.events.publishers`). Outside events whose subjects
   * give one key share limits.cloudEventsInFlightPerPublishersMax slots; absent, outside events
   * meet the global bound alone.
   */
  publishersOf?: (subject: string) => string;
  /** Told of an emitted event given up on (emittedRedelivery), or refused by the intake for good: its subject, the reason, and what happened. */
  onEmittedDropped?: (subject: string, reason: EmittedDropReason, detail: string) => void;
  /** The clock of an emitted event's backoff and window (emittedRedelivery): the host's; the system clock when absent. */
  clock?: Clock;
  /**
   * Told when the server closes a subscription after ready (its permission withdrawn, say): no
   * event reaches this intake on that subject any more, which nothing else would show.
   */
  onSubscriptionLost?: (subject: string, error: AdapterError) => void;
}

/**
 * Why an emitted event was dropped, a closed set (a metric's label): `refused` by the intake for
 * good (invalid-input, denied…: no attempt would deliver it), not delivered within its `window`,
 * `backlog-full` (emittedRedelivery.heldMax wait already, and its principal holds the most of
 * them), or `intake-closed` while it waited.
 */
export const emittedDropReasons = ['refused', 'window', 'backlog-full', 'intake-closed'] as const;
export type EmittedDropReason = (typeof emittedDropReasons)[number];

/**
 * An emitted event is never answered, so its publisher never sends it again: one this host could
 * not deliver for now — the in-flight bound reached, an `until` verdict still pending, the store
 * unavailable — is kept and delivered again here, after `firstDelayMs` doubling up to `delayMaxMs`,
 * for `windowMs` after it arrived, both on the host's clock (ServeCloudEventsOptions.clock). At
 * most `heldMax` wait at once (for a slot or a retry), every principal's together; past that one is
 * dropped (`backlog-full`) — the arriving one when its principal holds as many waiting as any other,
 * or else the last to arrive of the principal holding the most (EmittedBacklog.room), so one
 * principal's flood costs its own events, never another's — and past the window it is dropped too,
 * `onEmittedDropped` told each time; so is one the intake refuses for good (invalid-input,
 * denied…), which no attempt would deliver. An outside event is answered `unavailable` instead,
 * and its publisher retries.
 */
export const emittedRedelivery = { firstDelayMs: 100, delayMaxMs: 2_000, windowMs: 60_000, heldMax: 1_024 } as const;

/** Where an event received on a subject goes: every principal's instances (outside), or one principal's (emitted). */
interface Space {
  kind: 'outside' | 'emitted';
  prefix: string;
}

/** Subscribes `<prefix>.>` (and `<emitPrefix>.>`) and delivers each event to the intake; answers outside events after the append. */
export function serveCloudEvents(
  nc: NatsConnection,
  subjectPrefix: string,
  intake: CloudEventIntake,
  options: ServeCloudEventsOptions = {},
): CloudEventSubscription {
  checkPrefix(subjectPrefix);
  const spaces: Space[] = [{ kind: 'outside', prefix: subjectPrefix }];
  if (options.emitSubjectPrefix !== undefined) {
    checkPrefix(options.emitSubjectPrefix);
    checkSpaces(subjectPrefix, options.emitSubjectPrefix);
    spaces.push({ kind: 'emitted', prefix: options.emitSubjectPrefix });
  }
  const inFlight = new InFlight(options.publishersOf);
  const pending = new Set<Promise<void>>();
  const clock = options.clock ?? new SystemClock();
  const backlog = new EmittedBacklog(clock, options.onEmittedDropped, () => next());
  const answer = (space: Space, msg: Msg, reply: JsonValue) => {
    if (space.kind === 'outside' && msg.reply && (options.answers?.(msg.subject, msg.reply) ?? true))
      msg.respond(new TextEncoder().encode(JSON.stringify(reply)));
  };
  const run = (space: Space, msg: Msg, held?: Emitted): void => {
    const giveBack = inFlight.take(space, msg.subject);
    // Its window runs from its arrival, however long this attempt takes to be answered.
    const arrivedMs = held?.arrivedMs ?? clock.nowMs();
    const work = receive(msg, space, intake)
      .then(({ reply, unavailable, refused }) => {
        if (space.kind === 'outside') return answer(space, msg, reply);
        if (unavailable !== undefined) backlog.retry(held ?? { msg, space, arrivedMs, attempt: 0 }, unavailable);
        // Nobody is answered, and another attempt is refused again: told, or the event would be lost unseen.
        else if (refused !== undefined) options.onEmittedDropped?.(msg.subject, 'refused', refused);
      })
      .finally(() => {
        giveBack();
        pending.delete(work);
        next();
      });
    pending.add(work);
  };
  /** Emitted events waiting for a slot take the ones freed, oldest first among the principals below their bound. */
  const next = (): void => {
    while (inFlight.count < limits.cloudEventsInFlightMax) {
      const held = backlog.take((waiting) => inFlight.busy(waiting.space, waiting.msg.subject) === undefined);
      if (held === undefined) return;
      run(held.space, held.msg, held);
    }
  };
  const subscriptions: Subscription[] = spaces.map((space) =>
    nc.subscribe(`${space.prefix}.>`, {
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      callback: (error, msg) => {
        if (error) return options.onSubscriptionLost?.(`${space.prefix}.>`, lostSubscription(error, `${space.prefix}.>`));
        const busy = inFlight.busy(space, msg.subject);
        if (busy === undefined) return run(space, msg);
        if (space.kind === 'emitted') return backlog.hold({ msg, space, arrivedMs: clock.nowMs(), attempt: 0 }, busy);
        return answer(space, msg, rejected(new AdapterError('unavailable', `${busy}; publish again`)));
      },
    }),
  );
  return {
    subjects: spaces.map((space) => `${space.prefix}.>`),
    ready: () => taken(nc, subscriptions, spaces),
    close: async () => {
      for (const subscription of subscriptions) subscription.unsubscribe();
      backlog.close();
      await Promise.allSettled([...pending]);
    },
  };
}

/** Resolves once the server has taken every subscription; rejects with the first it closed instead (CloudEventSubscription.ready). */
async function taken(nc: NatsConnection, subscriptions: readonly Subscription[], spaces: readonly Space[]): Promise<void> {
  await nc.flush();
  for (const [index, subscription] of subscriptions.entries())
    if (subscription.isClosed()) throw lostSubscription(await subscription.closed, `${spaces[index]?.prefix}.>`);
}

/** A subscription the server closed (or would not take), as an AdapterError: `denied` naming the subject where it refused this user. */
function lostSubscription(error: unknown, subject: string): AdapterError {
  return (
    deniedByNats(error, `the workflow event intake on ${subject}`) ?? toAdapterError(error ?? new Error('closed'), `the workflow event intake on ${subject}`)
  );
}

/**
 * The emitted events this host keeps for another attempt (emittedRedelivery): those waiting for a
 * slot (`take` hands them out, oldest first) and those waiting for their next attempt's instant.
 * It is shared by every principal, up to heldMax in all; when it is full, the event given up on is
 * one of the principal holding the most in it (`room`), so a principal whose workflows emit faster
 * than their events are delivered loses its own, never another's.
 */
class EmittedBacklog {
  private readonly ready: Emitted[] = [];
  private readonly retries = new Map<Emitted, TimerHandle>();
  /** Each principal's events in the backlog (ready or waiting for their retry), in the order they entered it. */
  private readonly principals = new Map<string, Set<Emitted>>();
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly onDropped: ServeCloudEventsOptions['onEmittedDropped'],
    /** Told when an event is ready again (its retry instant came). */
    private readonly readied: () => void,
  ) {}

  /** Keeps `held` until a slot frees, unless the intake closed or the backlog is full and its principal holds the most. */
  hold(held: Emitted, reason: string): void {
    if (this.closed) return this.drop(held, 'intake-closed', `${reason}; the intake closed`);
    if (!this.room(held, reason)) return;
    this.ready.push(held);
    this.keep(held);
  }

  /** Keeps `held` for another attempt after its backoff, within its window from arrival. */
  retry(held: Emitted, reason: string): void {
    const delayMs = doublingDelayMs(emittedRedelivery.firstDelayMs, emittedRedelivery.delayMaxMs, held.attempt);
    if (this.closed) return this.drop(held, 'intake-closed', `${reason}; the intake closed`);
    const atMs = this.clock.nowMs() + delayMs;
    if (atMs - held.arrivedMs > emittedRedelivery.windowMs)
      return this.drop(held, 'window', `${reason}; not delivered within ${emittedRedelivery.windowMs} ms`);
    if (!this.room(held, reason)) return;
    held.attempt++;
    const timer = this.clock.at(atMs, () => {
      // Still in the backlog (counted for its principal), now waiting for a slot; close cancels the timer.
      if (this.closed) return;
      this.retries.delete(held);
      this.ready.push(held);
      this.readied();
    });
    this.retries.set(held, timer);
    this.keep(held);
  }

  /** The oldest event waiting for a slot that `may` run, taken out of the backlog. */
  take(may: (held: Emitted) => boolean): Emitted | undefined {
    if (this.closed) return undefined;
    const at = this.ready.findIndex(may);
    if (at < 0) return undefined;
    const [held] = this.ready.splice(at, 1);
    if (held !== undefined) this.release(held);
    return held;
  }

  /** Drops every event kept (each told), and keeps none from now on. */
  close(): void {
    this.closed = true;
    for (const [held, timer] of this.retries) {
      timer.cancel();
      this.drop(held, 'intake-closed', 'the intake closed before it was delivered');
    }
    this.retries.clear();
    for (const held of this.ready.splice(0)) this.drop(held, 'intake-closed', 'the intake closed before it was delivered');
    this.principals.clear();
  }

  /**
   * Whether `held` may enter the backlog. Below heldMax it may. At heldMax one event is given up
   * on (`backlog-full`): `held` itself when its principal holds as many as any other, or else the
   * last to arrive of the principal holding the most, which makes room for `held`. A principal
   * thus loses an event to this bound only while it holds at least as many as every other: never
   * while it holds fewer than an equal share (heldMax divided among the principals holding any).
   */
  private room(held: Emitted, reason: string): boolean {
    if (this.ready.length + this.retries.size < emittedRedelivery.heldMax) return true;
    const own = this.principals.get(owner(held))?.size ?? 0;
    let most: Set<Emitted> | undefined;
    for (const [principal, kept] of this.principals) if (principal !== owner(held) && kept.size > (most?.size ?? own)) most = kept;
    const full = `${emittedRedelivery.heldMax} emitted events wait already`;
    const evicted = most && lastArrived(most);
    if (most === undefined || evicted === undefined) {
      this.drop(held, 'backlog-full', `${reason}; ${full}, ${own} of them its principal's, as many as any other principal's`);
      return false;
    }
    const index = this.ready.indexOf(evicted);
    if (index >= 0) this.ready.splice(index, 1);
    this.retries.get(evicted)?.cancel();
    this.retries.delete(evicted);
    const count = most.size;
    this.release(evicted);
    this.drop(evicted, 'backlog-full', `${full}, ${count} of them its principal's, which holds the most: dropped for another principal's`);
    return true;
  }

  private keep(held: Emitted): void {
    const principal = owner(held);
    const kept = this.principals.get(principal);
    if (kept) kept.add(held);
    else this.principals.set(principal, new Set([held]));
  }

  private release(held: Emitted): void {
    const principal = owner(held);
    const kept = this.principals.get(principal);
    kept?.delete(held);
    if (kept?.size === 0) this.principals.delete(principal);
  }

  private drop(held: Emitted, reason: EmittedDropReason, detail: string): void {
    this.onDropped?.(held.msg.subject, reason, detail);
  }
}

/** The principal an emitted event's subject names (the key of its in-flight bound). */
function owner(held: Emitted): string {
  return principalKey(held.space, held.msg.subject) ?? '';
}

/** The event of a principal's in the backlog that arrived last (of those arriving at once, the last to enter it). */
function lastArrived(kept: Set<Emitted>): Emitted | undefined {
  let last: Emitted | undefined;
  for (const held of kept) if (last === undefined || held.arrivedMs >= last.arrivedMs) last = held;
  return last;
}

/** An emitted event kept for another attempt (emittedRedelivery). */
interface Emitted {
  msg: Msg;
  space: Space;
  arrivedMs: number;
  attempt: number;
}

/**
 * The events in flight (limits.cloudEventsInFlightMax); the emitted ones by the principal their
 * subject names (limits.cloudEventsInFlightPerPrincipalMax): the token after the emitted prefix,
 * one per principal (principalSubjectToken; a subject that names none is refused on delivery,
 * addressee); and, given publishersOf, the outside ones by the publishers that may have sent them
 * (limits.cloudEventsInFlightPerPublishersMax).
 */
class InFlight {
  count = 0;
  private readonly principals = new PrincipalSlots(limits.cloudEventsInFlightPerPrincipalMax);
  private readonly publishers = new PrincipalSlots(limits.cloudEventsInFlightPerPublishersMax);

  constructor(private readonly publishersOf: ((subject: string) => string) | undefined) {}

  /** Why an event on the subject waits (or is answered unavailable) rather than being delivered now; undefined when it may be. */
  busy(space: Space, subject: string): string | undefined {
    if (this.count >= limits.cloudEventsInFlightMax) return 'too many events in flight';
    const { slots, key } = this.slotsOf(space, subject);
    if (key === undefined || slots.full(key) === undefined) return undefined;
    return space.kind === 'emitted'
      ? `its principal has ${slots.perPrincipal} emitted events in flight`
      : `the publishers allowed its type have ${slots.perPrincipal} events in flight`;
  }

  /** Counts one more in flight (for its principal or its publishers too; `busy` said it may run); the function returned gives it back. */
  take(space: Space, subject: string): () => void {
    const { slots, key } = this.slotsOf(space, subject);
    const release = key === undefined ? undefined : slots.take(key);
    if (key !== undefined && release === undefined) throw new AssertionFailure(`an event on ${subject} was run past the in-flight bound of ${key}`);
    this.count++;
    return () => {
      this.count--;
      release?.();
    };
  }

  /** The slots an event on the subject takes beside the global count, and its key in them (none: the global bound alone). */
  private slotsOf(space: Space, subject: string): { slots: PrincipalSlots; key: string | undefined } {
    if (space.kind === 'emitted') return { slots: this.principals, key: principalKey(space, subject) };
    return { slots: this.publishers, key: this.publishersOf?.(subject) };
  }
}

function principalKey(space: Space, subject: string): string | undefined {
  return space.kind === 'emitted' ? (subject.slice(space.prefix.length + 1).split('.', 1)[0] ?? '') : undefined;
}

function rejected(error: unknown): JsonValue {
  const kind = isAdapterError(error) ? error.kind : 'unavailable';
  const message = error instanceof Error ? error.message : String(error);
  return { status: 'rejected', error: { kind, message: message.slice(0, 2048) } };
}

/**
 * Whose instances an event on this subject may reach (null: every principal's), once its subject
 * is its type's subject in its space; an emitted event names its principal in its subject.
 */
function addressee(space: Space, subject: string, type: string): string | null {
  if (space.kind === 'outside') {
    const expected = cloudEventSubject(space.prefix, type);
    if (subject !== expected) throw invalidInput(`an event of type ${type} belongs on ${expected}, not ${subject}`);
    return null;
  }
  const [token = ''] = subject.slice(space.prefix.length + 1).split('.', 1);
  const principalId = principalOfSubjectToken(token);
  if (principalId === undefined) throw invalidInput(`${subject} does not name a principal after ${space.prefix}`);
  const expected = emittedEventSubject(space.prefix, principalId, type);
  if (subject !== expected) throw invalidInput(`an emitted event of type ${type} belongs on ${expected}, not ${subject}`);
  return principalId;
}

/**
 * What a received event is answered, and why it could not be delivered for now (`unavailable`:
 * another attempt may take it) or for good (`refused`: the intake's refusal, which another attempt
 * meets again — an event past what a listen records, one on another type's subject).
 */
interface Received {
  reply: JsonValue;
  unavailable?: string;
  refused?: string;
}

async function receive(msg: Msg, space: Space, intake: CloudEventIntake): Promise<Received> {
  try {
    if (msg.data.length > limits.cloudEventBytesMax) throw invalidInput(`the event is ${msg.data.length} bytes; at most ${limits.cloudEventBytesMax}`);
    // The strict I-JSON parser, as POST /workflow-events: JSON.parse would keep the last of two
    // duplicate keys, read 1e400 as Infinity (stored as null) and round unsafe integers, so the
    // log would hold another event than the one taken, and a deep enough nesting would exhaust a
    // recursive reader later and be answered "unavailable" instead of refused.
    const event = parseStrictBytes(msg.data, 'CloudEvent');
    const problem = cloudEventProblem(event);
    if (problem !== undefined) throw invalidInput(`not a CloudEvent: ${problem}`);
    const typed = event as CloudEvent;
    const delivery = await intake.deliver(typed, addressee(space, msg.subject, typed.type));
    // How many instances took it, never which: they are any principal's, and an outside publisher is none of them.
    return { reply: delivery.matched.length === 0 ? { status: 'no-match' } : { status: 'accepted', count: delivery.matched.length } };
  } catch (error) {
    const reply = rejected(error);
    // Anything but an AdapterError of another kind (a refusal that stays one) may pass on another attempt.
    if (isAdapterError(error) && error.kind !== 'unavailable') return { reply, refused: `refused (${error.kind}): ${error.description ?? error.message}` };
    return { reply, unavailable: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The bounds of the stream convoke makes for emitted events: it holds them for their consumers
 * for a day at most, within a gibibyte, the oldest dropped first (discard old: an emit is never
 * refused for a full stream, so no principal's flood stalls another's workflows). They are
 * shared; each principal's share is held by the sink (EmittedStreamTrim).
 */
export const emittedStreamBounds = { maxAgeMs: 24 * 60 * 60 * 1000, maxBytes: 1024 ** 3 } as const;

assert(
  limits.emittedStreamEventsPerPrincipalDefault * limits.cloudEventBytesMax <= emittedStreamBounds.maxBytes / 4,
  'one principal at its default share of the emit stream, in the largest events, holds at most a quarter of the stream convoke makes',
);

export interface EmittedStreamOptions {
  stream: string;
  emitSubjectPrefix: string;
  /** The outside events' prefix: a stream capturing `<subjectPrefix>.>` alone is one convoke made before emitted events had their own space, and is moved. */
  subjectPrefix: string;
}

/**
 * Makes sure the stream emit jetstream publishes to captures `<emitSubjectPrefix>.>` alone, with
 * bounded retention. Missing, it is made (`emittedStreamBounds`). One capturing
 * `<subjectPrefix>.>` alone — what convoke made before — is moved to the emitted space, and a
 * stream without an age or a byte bound gets ours (bounds already set are kept). Either needs
 * the stream create/update permission (transport.manageStreams); without it, or for a stream
 * capturing anything else, this refuses and says why: its messages would otherwise share a
 * duplicate window with subjects others may publish to.
 */
export async function ensureEmittedEventStream(jsm: JetStreamManager, options: EmittedStreamOptions): Promise<void> {
  checkPrefix(options.emitSubjectPrefix);
  const wanted = `${options.emitSubjectPrefix}.>`;
  const bounds = { max_age: msToNanos(emittedStreamBounds.maxAgeMs), max_bytes: emittedStreamBounds.maxBytes };
  let info: StreamInfo;
  try {
    info = await jsm.streams.info(options.stream);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound))
      throw toAdapterError(error, `reading stream ${options.stream}`);
    try {
      await jsm.streams.add({
        name: options.stream,
        subjects: [wanted],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        ...bounds,
      });
      return;
    } catch (cause) {
      throw unavailable(
        `workflows.events: stream ${options.stream} for ${wanted} is missing and could not be created (transport.manageStreams grants it): ${classifyNatsError(cause).detail}`,
        cause,
      );
    }
  }
  const subjects = info.config.subjects ?? [];
  const captures = (subject: string) => subjects.length === 1 && subjects[0] === subject;
  if (!captures(wanted) && !captures(`${options.subjectPrefix}.>`))
    throw conflict(
      `workflows.events: stream ${options.stream} captures ${JSON.stringify(subjects)}, not ${wanted} alone: emitted events must not share a stream ` +
        'with subjects anyone else may publish to (its message ids would be theirs to take); name another workflows.events.stream, or change its subjects',
    );
  const bounded = info.config.max_age > 0 && info.config.max_bytes > 0;
  if (captures(wanted) && bounded) return;
  try {
    await jsm.streams.update(options.stream, {
      ...info.config,
      subjects: [wanted],
      ...(info.config.max_age > 0 ? {} : { max_age: bounds.max_age }),
      ...(info.config.max_bytes > 0 ? {} : { max_bytes: bounds.max_bytes }),
    });
  } catch (cause) {
    throw unavailable(
      `workflows.events: stream ${options.stream} must capture ${wanted} alone, with an age and a byte bound (it captures ${JSON.stringify(subjects)}, ` +
        `max_age ${info.config.max_age} ns, max_bytes ${info.config.max_bytes}), and could not be updated (transport.manageStreams grants it): ${classifyNatsError(cause).detail}`,
      cause,
    );
  }
}

/**
 * Whether this NATS user may purge the emit stream, which holding each principal to its share
 * needs (EmittedStreamTrim): asked at start with a purge of `<emitSubjectPrefix>._`, a subject no
 * emitted event is published on (`_` stands for no principal, and every emitted subject names a
 * type after its principal), so nothing is purged. Refused, `convoke serve` does not start: every
 * trim would fail, and one principal's events could evict every other's again.
 */
export async function checkEmittedStreamTrim(jsm: JetStreamManager, options: Pick<EmittedStreamOptions, 'stream' | 'emitSubjectPrefix'>): Promise<void> {
  checkPrefix(options.emitSubjectPrefix);
  try {
    await jsm.streams.purge(options.stream, { filter: `${options.emitSubjectPrefix}._` });
  } catch (error) {
    const doing = `workflows.events: purging stream ${options.stream} (each principal's events past workflows.events.streamEventsPerPrincipal)`;
    throw deniedByNats(error, doing) ?? toAdapterError(error, doing);
  }
}
