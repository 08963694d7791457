/**
 * The peer SDK: what a service embeds to take part in contract invocations. It receives requests
 * on its own subjects, runs the handler through the fenced effect sink while renewing its claim,
 * publishes its terminal result on its peer-bearing result subject and only then acknowledges the
 * request. On redelivery it returns the result it already has instead of repeating the effect. It
 * answers cancel requests for the attempt it runs: stopped, already-completed or unknown.
 */
import { nestingProblem, parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { checkCancelRequest, parseRequestMessage } from '../events/wire-schemas.js';
import { encodeWire, type CancelOutcome, type CancelRequest, type ClaimMessage, type RequestMessage, type ResultMessage } from '../events/wire.js';
import { parseSubject, subjectFor, type SubjectKind } from '../adapters/transport/subjects.js';
import type { InboundMessage, PublishReceipt, Subscription, Transport } from '../adapters/transport/types.js';
import type { DeliveryReceipt } from '../events/types.js';
import { SystemClock, type Clock, type TimerHandle } from '../contract/clock.js';
import { BoundedMap } from '../contract/bounded-map.js';
import { MemoryEffectSink, type EffectSink } from './effect-sink.js';
import { limits } from '../contract/limits.js';
import { invalidInput, type AdapterError } from '../contract/errors.js';

export interface HandlerContext {
  request: RequestMessage;
  /** Aborted when the coordinator cancels this attempt; cooperative handlers stop on it. */
  signal: AbortSignal;
  /** Commits a business effect under this request's operation/branch key and fence. */
  effect(apply: () => JsonValue | Promise<JsonValue>): Promise<JsonValue>;
}

export type Handler = (input: JsonValue, context: HandlerContext) => JsonValue | Promise<JsonValue>;

export interface PeerOptions {
  transport: Transport;
  namespace: string;
  peerId: string;
  handlers: Record<string, Handler>;
  sink?: EffectSink;
  clock?: Clock;
  /** Use durable consumers (durable transports). */
  durable?: boolean;
  /** Renew claims while handlers run (default true). */
  renew?: boolean;
  /** How long a cancelled handler may take to stop before the answer is already-completed or unknown. */
  stopWaitMs?: number;
  /**
   * Told of a result the transport refuses for good: `invalid-input`, larger than the broker
   * carries (NATS: the server's max_payload, named with the result's size) or malformed (a subject
   * or header the NATS client refuses, named), or nested deeper than limits.jsonDepthMax (which the
   * coordinator could not read; never sent). No later attempt would deliver it, so its request is
   * acknowledged rather than taken again, and the coordinator sees the attempt's lease run out.
   * Keep results small (a reference to where large data is).
   */
  onUndeliverable?: (request: RequestMessage, error: AdapterError) => void;
}

export interface Peer {
  readonly peerId: string;
  readonly sink: EffectSink;
  readonly stats: {
    received: number;
    handled: number;
    replayed: number;
    failed: number;
    /** Requests whose handler stopped on close() (no cancel came): handed back (nak) for the next session, not failed. */
    handedBack: number;
    renewed: number;
    cancels: number;
    refused: Record<RefusalReason, number>;
    /** Results the transport refused for good (onUndeliverable): their requests acknowledged unanswered. */
    undeliverable: number;
  };
  /**
   * Stops receiving and aborts running handlers' signals; what they stop on is handed back for
   * redelivery, not acknowledged. On a durable transport it resolves once every delivery in hand
   * is settled (its result published and acknowledged, or handed back) or after `stopWaitMs` (on
   * the peer's clock), whichever comes first: the connection may be closed then without losing a
   * hand-back to the broker.
   */
  close(): Promise<void>;
}

/**
 * Why a request or cancel was refused unrun (acknowledged: redelivery cannot make it valid):
 * `malformed` (does not parse or fails its schema), `wrong-subject` (the subject it arrived on is
 * not this peer's own `<ns>.<interaction>.<operationId>.<kind>.<peer>` for the operation, branch
 * peer and interaction its payload names), `cancelled` (a request for an attempt whose cancel
 * this peer already received: delivered again after its run stopped or failed, or after its
 * cancel on the other consumer).
 */
export type RefusalReason = 'malformed' | 'wrong-subject' | 'cancelled';

interface Running {
  attempt: number;
  fence: number;
  /** The coordinator's cancel: created on first use (most handlers never look at their signal, and AbortController is not free). */
  abort: () => AbortController;
  /** Whether a cancel aborted it (close() aborts it too, but that is no cancel). */
  aborted: () => boolean;
  /** The peer closes: the signal aborts, and what stops is handed back, not acknowledged. */
  interrupt: () => AbortController;
  /** Whether close() interrupted it. */
  interrupted: () => boolean;
  done: Promise<'completed' | 'stopped'>;
}

/** What a peer remembers of one operation/branch: the newest fence it saw, and that attempt's result once it has one. */
interface BranchMemory {
  fence: number;
  attempt: number;
  /** Undefined until the attempt's handler returned (a JSON result is never undefined). */
  result: JsonValue | undefined;
  /** The answer given to a cancel of this attempt: a cancel delivered again gets the same answer. */
  cancelled?: CancelOutcome;
  /** The coordinator cancelled this attempt: from then on it is never started (again) here. */
  cancelSeen?: true;
}

class PeerRuntime implements Peer {
  readonly sink: EffectSink;
  readonly stats = {
    received: 0,
    handled: 0,
    replayed: 0,
    failed: 0,
    handedBack: 0,
    renewed: 0,
    cancels: 0,
    refused: { malformed: 0, 'wrong-subject': 0, cancelled: 0 },
    undeliverable: 0,
  };
  private readonly clock: Clock;
  /**
   * By operation/branch: the newest fence seen, and the result of that attempt, returned again on
   * redelivery instead of repeating work. Bounded: the oldest branches are forgotten (the
   * coordinator's fences and the effect sink remain the authority).
   */
  private readonly branches = new BoundedMap<string, BranchMemory>(limits.peerBranchesRememberedMax);
  /** What runs now, by operation/branch. */
  private readonly running = new Map<string, Running>();
  private readonly subscriptions: Subscription[] = [];
  /** Requests and cancels in hand, until acknowledged or handed back: close() waits for them. */
  private readonly deliveries = new Set<Promise<void>>();

  constructor(private readonly options: PeerOptions) {
    this.sink = options.sink ?? new MemoryEffectSink();
    this.clock = options.clock ?? new SystemClock();
  }

  get peerId(): string {
    return this.options.peerId;
  }

  async start(): Promise<void> {
    const { transport, namespace, peerId } = this.options;
    for (const interaction of Object.keys(this.options.handlers)) {
      const durable = (suffix: string) => (this.options.durable ? { durable: `peer-${peerId}-${interaction}-${suffix}` } : {});
      this.subscriptions.push(
        await transport.subscribe(
          subjectFor(namespace, interaction, '*', 'cancel', peerId),
          (m) => this.track(this.onCancel(interaction, m)),
          durable('cancel'),
        ),
      );
      this.subscriptions.push(
        await transport.subscribe(
          subjectFor(namespace, interaction, '*', 'request', peerId),
          (m) => this.track(this.onRequest(interaction, m)),
          durable('request'),
        ),
      );
    }
  }

  async close(): Promise<void> {
    for (const s of this.subscriptions) await s.close();
    // No cancel came: work stopped by a closing peer is handed back (nak) for this peer's next
    // session, never acknowledged as if it had been answered.
    for (const r of this.running.values()) r.interrupt().abort();
    // The hand-backs are sent only once the handlers have stopped. Returning before that, the
    // caller's next step (closing the connection) would lose them, and the broker would redeliver
    // only after ack_wait. Bounded: a handler that ignores its signal does not hold the close.
    // A best-effort transport redelivers nothing (its ack and nak do nothing): nothing to wait for.
    if (!this.options.transport.capabilities.durable || this.deliveries.size === 0) return;
    const stopWaitMs = this.options.stopWaitMs ?? 2000;
    let timer: TimerHandle | undefined;
    const timeout = new Promise<void>((resolve) => (timer = this.clock.at(this.clock.nowMs() + stopWaitMs, resolve)));
    await Promise.race([Promise.all(this.deliveries), timeout]);
    timer?.cancel();
  }

  /** Keeps a delivery in hand in `deliveries` until it is settled. */
  private track(handling: Promise<void>): Promise<void> {
    const settled = handling.then(
      () => undefined,
      () => undefined,
    );
    this.deliveries.add(settled);
    void settled.then(() => this.deliveries.delete(settled));
    return handling;
  }

  private async onRequest(interaction: string, inbound: InboundMessage): Promise<void> {
    this.stats.received++;
    const request = this.parse(inbound, (data) => parseRequestMessage(data, 'message'));
    const refusal = !request
      ? 'malformed'
      : request.interaction !== interaction
        ? 'wrong-subject'
        : this.misaddressed(inbound.subject, interaction, 'request', request);
    if (!request || refusal !== undefined) {
      this.stats.failed++;
      this.stats.refused[refusal ?? 'malformed']++;
      return inbound.ack(); // a malformed or misaddressed request can never become valid by redelivery
    }
    const branchKey = `${request.operationId}/${request.branchId}`;
    const known = this.branches.get(branchKey);
    if (known !== undefined && request.fence < known.fence) return inbound.ack(); // an older owner's request
    const same = known !== undefined && known.fence === request.fence && known.attempt === request.attempt;
    // This very attempt still runs (its process stalled past ack_wait, so the broker sent it again):
    // the running handler answers and acknowledges it; a second run would repeat its work.
    if (same && known.result === undefined && this.running.get(branchKey)?.attempt === request.attempt) return;
    // Its cancel came first (the two come on separate consumers), or it is delivered again after
    // its run stopped or failed: work the coordinator cancelled, and may have been told `stopped`
    // about, is not started. A result it already has is still answered below.
    if (same && known.result === undefined && known.cancelSeen === true) {
      this.stats.refused.cancelled++;
      return inbound.ack();
    }
    const memory = same ? known : { fence: request.fence, attempt: request.attempt, result: undefined };
    this.branches.set(branchKey, memory); // also makes it the newest: eviction goes by recency
    let result = memory.result;
    if (result !== undefined) this.stats.replayed++;
    else {
      const outcome = await this.run(interaction, request, branchKey, memory);
      if (outcome === undefined) return inbound.nak(1000);
      if (outcome === 'stopped') return inbound.ack();
      // Stopped by close(): handed back at once, for this peer's next session.
      if (outcome === 'handed-back') return inbound.nak();
      result = outcome.result;
    }
    // A result deeper than a value may be would be dropped unread by the coordinator: never sent.
    const tooDeep = nestingProblem(result, 'result');
    if (tooDeep !== undefined) return this.undeliverable(inbound, request, invalidInput(tooDeep));
    const published = await this.publishResult(interaction, request, result);
    if (published.refusal !== undefined) return this.undeliverable(inbound, request, published.refusal);
    // The request is acknowledged only once the result is stored (or sent, on best-effort transports).
    if (delivered(published.receipt)) await inbound.ack();
    else await inbound.nak(500);
  }

  /** A result no attempt delivers (too large for the broker): taking the request again would only meet the same refusal. */
  private async undeliverable(inbound: InboundMessage, request: RequestMessage, refusal: AdapterError): Promise<void> {
    this.stats.undeliverable++;
    await inbound.ack();
    this.options.onUndeliverable?.(request, refusal);
  }

  private async run(
    interaction: string,
    request: RequestMessage,
    branchKey: string,
    memory: BranchMemory,
  ): Promise<{ result: JsonValue } | 'stopped' | 'handed-back' | undefined> {
    let controller: AbortController | undefined;
    let cancelled = false;
    let interrupted = false;
    const abort = () => (controller ??= new AbortController());
    let settle!: (how: 'completed' | 'stopped') => void;
    const running: Running = {
      attempt: request.attempt,
      fence: request.fence,
      abort: () => ((cancelled = true), abort()),
      aborted: () => cancelled,
      interrupt: () => ((interrupted = true), abort()),
      interrupted: () => interrupted,
      done: new Promise((r) => (settle = r)),
    };
    this.running.set(branchKey, running);
    const renewal = this.options.renew === false ? undefined : this.renewEvery(interaction, request);
    try {
      // eslint-disable-next-line @typescript-eslint/no-non-null-assertion -- subscribed only for the interactions that have a handler
      const result = await this.options.handlers[interaction]!(request.input, new RequestContext(request, this.sink, abort));
      memory.result = result;
      this.stats.handled++;
      settle('completed');
      return { result };
    } catch {
      if (running.aborted()) {
        settle('stopped');
        return 'stopped';
      }
      if (running.interrupted()) {
        this.stats.handedBack++;
        settle('stopped');
        return 'handed-back';
      }
      this.stats.failed++;
      settle('completed');
      return undefined;
    } finally {
      renewal?.cancel();
      if (this.running.get(branchKey) === running) this.running.delete(branchKey);
    }
  }

  /** Renews the claim every renew interval while the handler works. */
  private renewEvery(interaction: string, request: RequestMessage): TimerHandle {
    let timer: TimerHandle;
    let cancelled = false;
    const tick = () => {
      if (cancelled) return;
      const claim: ClaimMessage = {
        kind: 'claim',
        action: 'renew',
        operationId: request.operationId,
        branchId: request.branchId,
        peerId: this.peerId,
        attempt: request.attempt,
        fence: request.fence,
      };
      void this.options.transport.publish(subjectFor(this.options.namespace, interaction, request.operationId, 'claim', this.peerId), encodeWire(claim)).then(
        () => this.stats.renewed++,
        () => {},
      );
      timer = this.clock.at(this.clock.nowMs() + request.renewIntervalMs, tick);
    };
    timer = this.clock.at(this.clock.nowMs() + request.renewIntervalMs, tick);
    return { cancel: () => ((cancelled = true), timer.cancel()) };
  }

  private async onCancel(interaction: string, inbound: InboundMessage): Promise<void> {
    const cancel = this.parse(inbound, (data) => checkCancelRequest(parseStrictBytes(data, 'message')));
    const refusal = !cancel ? 'malformed' : this.misaddressed(inbound.subject, interaction, 'cancel', cancel);
    if (!cancel || refusal !== undefined) {
      this.stats.refused[refusal ?? 'malformed']++;
      return inbound.ack();
    }
    this.stats.cancels++;
    const branchKey = `${cancel.operationId}/${cancel.branchId}`;
    // Stale fences are rejected: a cancel never reaches past the attempt it names.
    const known = this.branches.get(branchKey);
    if (known !== undefined && cancel.fence < known.fence) return inbound.ack();
    const current = known !== undefined && known.fence === cancel.fence && known.attempt === cancel.attempt ? known : undefined;
    // Remembered before anything is awaited: a request for this attempt handled meanwhile, or
    // delivered later, must find it cancelled. An attempt not seen yet is remembered from its cancel.
    const memory = current ?? { fence: cancel.fence, attempt: cancel.attempt, result: undefined };
    memory.cancelSeen = true;
    if (current === undefined) this.branches.set(branchKey, memory);
    const outcome = memory.cancelled ?? (await this.cancelOutcome(branchKey, known, cancel));
    memory.cancelled = outcome;
    const receipt = await this.publishCancelResult(interaction, cancel, outcome);
    // Acknowledged only once the answer is stored (or sent, on best-effort transports): otherwise
    // the cancel comes again and gets the same answer, as a request gets its stored result.
    if (delivered(receipt)) await inbound.ack();
    else await inbound.nak(500);
  }

  private async cancelOutcome(branchKey: string, known: BranchMemory | undefined, cancel: CancelRequest): Promise<CancelOutcome> {
    if (known !== undefined && known.fence === cancel.fence && known.attempt === cancel.attempt && known.result !== undefined) return 'already-completed';
    const running = this.running.get(branchKey);
    if (!running || running.fence !== cancel.fence) return 'unknown';
    running.abort().abort();
    const stopWaitMs = this.options.stopWaitMs ?? 2000;
    let timer: TimerHandle | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = this.clock.at(this.clock.nowMs() + stopWaitMs, () => resolve('timeout'))));
    const how = await Promise.race([running.done, timeout]);
    timer?.cancel();
    // Stopped asserts the assignment no longer runs; it does not assert that effects were reversed.
    return how === 'stopped' ? 'stopped' : how === 'completed' ? 'already-completed' : 'unknown';
  }

  private async publishResult(interaction: string, request: RequestMessage, result: JsonValue) {
    const message: ResultMessage = {
      kind: 'result',
      operationId: request.operationId,
      branchId: request.branchId,
      peerId: this.peerId,
      attempt: request.attempt,
      fence: request.fence,
      result,
    };
    const subject = subjectFor(this.options.namespace, interaction, request.operationId, 'result', this.peerId);
    return receiptOrUnknown(this.options.transport.publish(subject, encodeWire(message), { msgId: `${request.publicationId}.result` }));
  }

  private async publishCancelResult(interaction: string, cancel: CancelRequest, outcome: CancelOutcome) {
    const message = {
      kind: 'cancel-result' as const,
      operationId: cancel.operationId,
      branchId: cancel.branchId,
      peerId: this.peerId,
      attempt: cancel.attempt,
      fence: cancel.fence,
      outcome,
    };
    const subject = subjectFor(this.options.namespace, interaction, cancel.operationId, 'cancel-result', this.peerId);
    return receiptOf(this.options.transport.publish(subject, encodeWire(message)));
  }

  /**
   * A message is evidence only for the subject it arrived on: it must be exactly this peer's own
   * subject in its namespace, for the interaction it was subscribed for and the operation and peer
   * its payload names. Anything else (a request routed or republished onto another operation's
   * subject, or a payload naming another operation than its subject) is refused unrun: running it
   * would commit an effect under an operation/branch key the subject does not vouch for.
   */
  private misaddressed(subject: string, interaction: string, kind: SubjectKind, payload: { operationId: string; peerId: string }): RefusalReason | undefined {
    const parsed = parseSubject(subject, this.options.namespace, interaction);
    if (!parsed || parsed.kind !== kind || parsed.peerId !== this.peerId || payload.peerId !== this.peerId) return 'wrong-subject';
    return subject === subjectFor(this.options.namespace, interaction, payload.operationId, kind, this.peerId) ? undefined : 'wrong-subject';
  }

  private parse<T>(inbound: InboundMessage, read: (data: Uint8Array) => T): T | undefined {
    try {
      return read(inbound.data);
    } catch {
      return undefined;
    }
  }
}

/** A publication's receipt; a publish that threw proved nothing, so it is unknown. */
/** The publish's receipt; `unknown` when the publish threw (nothing says whether it reached the broker). */
const receiptOrUnknown = (publishing: Promise<PublishReceipt>): Promise<PublishReceipt> => publishing.catch((): PublishReceipt => ({ receipt: 'unknown' }));

async function receiptOf(publishing: Promise<PublishReceipt>): Promise<DeliveryReceipt> {
  return (await receiptOrUnknown(publishing)).receipt;
}

/** Whether an answer reached the broker's keeping (or was sent, on best-effort transports): the message that asked for it may then be acknowledged. */
const delivered = (receipt: DeliveryReceipt) => receipt === 'stored' || receipt === 'already-stored' || receipt === 'sent';

/**
 * What a handler is given. A class, not an object literal: a literal with a getter is built by
 * the engine's slow generic path, about a microsecond per request.
 */
class RequestContext implements HandlerContext {
  /** An own function, not a method: handlers may take it apart (`{ effect }`) as before. */
  readonly effect: HandlerContext['effect'];

  constructor(
    readonly request: RequestMessage,
    sink: EffectSink,
    private readonly controller: () => AbortController,
  ) {
    this.effect = async (apply) =>
      (await sink.commit({ operationId: request.operationId, branchId: request.branchId }, request.fence, request.attempt, apply)).value;
  }

  get signal(): AbortSignal {
    return this.controller().signal;
  }
}

export async function createPeer(options: PeerOptions): Promise<Peer> {
  const peer = new PeerRuntime(options);
  await peer.start();
  return peer;
}
