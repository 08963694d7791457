/** Scenario helpers: an embedded deployment on a virtual clock, raw peer traffic, and the replay-equality check. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import { createEmbedded, peerBusPermissions, type Embedded, type EmbeddedOptions } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { fold } from '../../src/projections/record.js';
import type { Handler } from '../../src/peer/peer.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import type { InboundMessage, PublishReceipt } from '../../src/adapters/transport/types.js';
import { encodeWire, type WireMessage } from '../../src/events/wire.js';
import { onPeerMessage } from '../../src/runtime/intake.js';
import type { DomainEvent, Transition } from '../../src/events/types.js';
import type { InvocationResult } from '../../src/projections/views.js';

export const namespace = 'demo.v1.lab';

export interface RawResult {
  operationId: string;
  branchId: string;
  peerId: string;
  attempt?: number;
  fence?: number;
  result: JsonValue;
}

export interface Scenario extends Embedded {
  clock: VirtualClock;
  invoke(key: string, input?: JsonValue, principalId?: string, senderPeerId?: string | null): ReturnType<Embedded['coordinator']['invoke']>;
  get(operationId: string, principalId?: string): Promise<InvocationResult>;
  /** Publishes a result as `asPeer` (with that peer's bus permissions) on the subject of `subjectPeer`. */
  send(asPeer: string, message: RawResult, subjectPeer?: string): Promise<PublishReceipt>;
  /** Lets queued deliveries and appends finish. */
  settle(): Promise<void>;
  events(operationId: string): Promise<DomainEvent[]>;
  /** Asserts the record rebuilt from the store's log equals the coordinator's live record. */
  assertReplayEquals(operationId: string): Promise<void>;
}

export interface ScenarioOptions {
  review?: JsonObject;
  peers?: number;
  groups?: Record<string, string[]>;
  embedded?: Partial<EmbeddedOptions>;
  /**
   * The operation store: `memory` (the default) is memory mode, one attempt per branch whatever
   * the contract says; `sqlite` (a temporary file, removed when the test ends) is durable, so
   * branches retry and are reassigned within the contract's budget.
   */
  store?: 'memory' | 'sqlite';
}

/** A SQLite store in a temporary directory; the directory goes when the current test ends. */
function temporarySqliteStore(clock: VirtualClock): { store: SqliteEventStore; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-scenario-'));
  const store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal' });
  return { store, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A result message's body as a peer sends it (attempt and fence 1 unless given). */
function resultBody(m: Parameters<Scenario['send']>[1]): Uint8Array {
  const body = {
    kind: 'result',
    operationId: m.operationId,
    branchId: m.branchId,
    peerId: m.peerId,
    attempt: m.attempt ?? 1,
    fence: m.fence ?? 1,
    result: m.result,
  };
  return new TextEncoder().encode(JSON.stringify(body));
}

export async function scenario(options: ScenarioOptions = {}): Promise<Scenario> {
  const clock = new VirtualClock();
  const groups = options.groups ?? { reviewers: peerIds(options.peers ?? 5) };
  // Each result is committed as soon as its turn comes (no batching window), unless a test asks:
  // on a virtual clock a held result would wait for the test to advance time.
  const sqlite = options.store === 'sqlite' ? temporarySqliteStore(clock) : undefined;
  const embedded = await createEmbedded({
    clock,
    bundle: reviewBundle(options.review),
    groups,
    resultBatchMs: 0,
    ...(sqlite ? { store: sqlite.store } : {}),
    ...options.embedded,
  });
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      try {
        await embedded.close();
      } finally {
        sqlite?.remove();
      }
    })());
  // A SQLite store polls for other writers' appends: it must be closed for the test to end.
  if (sqlite) after(close);
  const connections = new Map<string, ReturnType<Embedded['bus']['connect']>>();
  const connection = (peerId: string) => {
    let c = connections.get(peerId);
    if (!c) connections.set(peerId, (c = embedded.bus.connect(`raw:${peerId}`, peerBusPermissions(namespace, peerId))));
    return c;
  };
  const self: Scenario = {
    ...embedded,
    close,
    clock,
    invoke: (key, input = { document: 'hello' }, principalId = 'svc-a', senderPeerId = null) =>
      embedded.coordinator.invoke({ principalId, senderPeerId }, { contract: embedded.bundle.ref, interaction: 'review', invocationKey: key, input }),
    get: (operationId, principalId = 'svc-a') => embedded.coordinator.get(principalId, operationId),
    send: async (asPeer, m, subjectPeer = asPeer) => {
      const receipt = await connection(asPeer).publish(subjectFor(namespace, 'review', m.operationId, 'result', subjectPeer), resultBody(m));
      await flushMicrotasks();
      return receipt;
    },
    settle: () => flushMicrotasks(),
    events: async (operationId) => {
      const read = await embedded.store.read(operationId);
      assert.equal(read.kind, 'ok');
      return read.kind === 'ok' ? read.transitions.flatMap((t) => t.transition.events) : [];
    },
    assertReplayEquals: async (operationId) => {
      await flushMicrotasks();
      const live = await embedded.coordinator.record(operationId);
      const read = await embedded.store.read(operationId);
      assert.equal(read.kind, 'ok');
      if (read.kind !== 'ok') return;
      assert.deepEqual(fold(read.transitions), live);
    },
  };
  return self;
}

/** A handler that answers a fixed verdict. */
export const answers =
  (verdict: string): Handler =>
  () => ({ verdict });

/** A handler that never answers (the request stays unanswered). */
export const silent: Handler = () => new Promise(() => {});

export const types = (events: DomainEvent[]) => events.map((e) => e.type);

/**
 * An ordinary transition of `op` as an earlier writer could have appended it straight to the
 * store, to fill its log: one `result-rejected` (malformed, on alfa's review result subject)
 * carrying `detail`.
 */
export function fillerTransition(op: string, detail: string): Transition {
  return {
    events: [
      {
        type: 'result-rejected',
        v: 1,
        reason: 'malformed',
        subject: `${namespace}.review.${op}.result.alfa`,
        branchId: null,
        peerId: null,
        attempt: null,
        fence: null,
        detail,
      },
    ],
    timeGuard: { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER },
    causation: { command: 'admit-result' },
  };
}

/**
 * `target` with some of its members answered otherwise (a test's fault or count injected); every
 * other member is the target's own, its methods bound to it. The overrides see the real target.
 */
export function storeWith<T extends object>(target: T, overrides: (real: T) => Partial<Record<keyof T, unknown>>): T {
  const replaced = overrides(target) as Record<PropertyKey, unknown>;
  return new Proxy(target, {
    get: (real, key) => {
      if (Object.hasOwn(replaced, key)) return replaced[key];
      const value: unknown = Reflect.get(real, key, real);
      return typeof value === 'function' ? value.bind(real) : value;
    },
  });
}

/** The store as another process opens it: a deployment of its own whose close leaves the store open for the test's. */
export const sharedStore = <T extends { close(): Promise<void> }>(store: T): T =>
  storeWith(store, () => ({ close: async () => {} }) as Partial<Record<keyof T, unknown>>);

/** What a peer sends the coordinator on an operation's subjects. */
export type PeerMessageKind = 'result' | 'claim' | 'cancel-result';

/**
 * One peer message straight to the coordinator's intake, as its subscription hands it over (on
 * the operation's subject for `kind` and `peer`, or `subject`); answers its acknowledgements.
 */
export async function deliverToIntake(
  s: Scenario,
  kind: PeerMessageKind,
  op: string,
  peer: string,
  body: object | Uint8Array,
  subject?: string,
): Promise<string[]> {
  const answered: string[] = [];
  const inbound: InboundMessage = {
    subject: subject ?? subjectFor(namespace, 'review', op, kind, peer),
    data: body instanceof Uint8Array ? body : encodeWire(body as WireMessage),
    headers: {},
    redelivered: false,
    ack: async () => void answered.push('ack'),
    nak: async () => void answered.push('nak'),
  };
  await onPeerMessage(s.coordinator, namespace, 'review', kind, inbound);
  return answered;
}
