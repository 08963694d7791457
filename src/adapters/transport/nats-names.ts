/**
 * Names shared by the NATS transport and the NATS permissions it runs under: the two durable
 * streams of each peer in a subject namespace, the durable consumer names of peers and coordinators, inbox
 * prefixes, and the advisory subject of max-delivery exhaustion. One module, so the subjects a
 * user is permitted and the subjects the transport uses cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { BoundedMap } from '../../contract/bounded-map.js';
import { assert } from '../../contract/errors.js';
import { namespacePattern, tokenPattern } from '../../contract/ids.js';
import { limits } from '../../contract/limits.js';

/** 48 bits of SHA-256: two (namespace, peer) pairs of one deployment colliding is not a practical concern. */
const hashHexChars = 12;

/** Peer, principal and coordinator ids become subject tokens and consumer names. */

export function assertToken(value: string, what: string): void {
  assert(tokenPattern.test(value), `${what} must be a NATS-token-safe id (${tokenPattern.source}), got ${JSON.stringify(value)}`);
}

export function assertNamespace(namespace: string): void {
  assert(namespacePattern.test(namespace), `subject namespace ${JSON.stringify(namespace)} is not token-safe`);
}

/**
 * The two durable streams of one peer in one namespace. Each has exactly one publishing role:
 * JetStream deduplicates Nats-Msg-Id per stream, so a stream shared by several publishers lets
 * one of them publish first under an id another's message will carry, and the real message is
 * then acknowledged as a duplicate and never stored (docs/design.md §10). Per-peer streams also make
 * every capacity limit per peer: a peer filling its own stream refuses only its own work.
 */
export interface DurableStreamNames {
  /** Requests and cancels to the peer: published by coordinators only. */
  requests: string;
  /** The peer's results, cancel results and claims: published by that peer only. */
  results: string;
}

/**
 * Stream names are deterministic and token-safe: readable parts (dots become `_`, truncated)
 * plus a hash of the exact namespace and peer id. The hash is what makes the mapping injective:
 * `a.b` and `a_b` read alike but get different streams, and the longest namespace and peer id
 * still give a name of at most 64 chars (a stream's store is a directory named after it).
 */
export function durableStreamNames(namespace: string, peerId: string): DurableStreamNames {
  const key = `${namespace}\n${peerId}`;
  let names = namesOf.get(key);
  if (names === undefined) namesOf.set(key, (names = streamNamesOf(namespace, peerId)));
  return names;
}

/** Asked for on every publish and durability check: each pair's names are hashed once (a deployment has few pairs). */
const namesOf = new BoundedMap<string, Readonly<DurableStreamNames>>(limits.streamNamesCachedMax);

function streamNamesOf(namespace: string, peerId: string): Readonly<DurableStreamNames> {
  assertNamespace(namespace);
  assertToken(peerId, 'peer id');
  const readable = `${namespace.replaceAll('.', '_').slice(0, limits.streamNameNamespaceCharsMax)}_${peerId.slice(0, limits.streamNamePeerCharsMax)}`;
  const hash = createHash('sha256').update(`${namespace}\n${peerId}`, 'utf8').digest('hex').slice(0, hashHexChars);
  return Object.freeze({ requests: `CONVOKE_REQ_${readable}_${hash}`, results: `CONVOKE_RES_${readable}_${hash}` });
}

/** The work subjects captured by a peer's two streams (docs/design.md §5); each stream also captures its anchor. */
export function durableStreamSubjects(namespace: string, peerId: string): { requests: string[]; results: string[] } {
  assertNamespace(namespace);
  assertToken(peerId, 'peer id');
  return {
    requests: [`${namespace}.*.*.request.${peerId}`, `${namespace}.*.*.cancel.${peerId}`],
    results: [`${namespace}.*.*.result.${peerId}`, `${namespace}.*.*.cancel-result.${peerId}`, `${namespace}.*.*.claim.${peerId}`],
  };
}

/**
 * The subject of a stream's anchor: one message stored right after the stream is created, on a
 * subject no consumer filters, so a work-queue stream never removes it. While it is there the
 * stream is the one that was created then and nothing before it was purged; a stream without it
 * was recreated, purged or truncated, and the work it held is lost (nats-streams.ts).
 */
export function streamAnchorSubject(stream: string): string {
  assert(/^[A-Za-z0-9_-]{1,64}$/.test(stream), `stream name ${JSON.stringify(stream)} is not token-safe`);
  return `convoke.anchor.${stream}`;
}

/** One stream's share of a subscription pattern: its consumer is filtered to `filter`. */
export interface DurableRoute {
  stream: string;
  filter: string;
  peerId: string;
}

/** A namespace's streams, their subjects, and which stream captures a subject: computed once per transport. */
export interface DurableLayout {
  namespace: string;
  /** The peers whose streams a pattern with `*` in the peer position spans. */
  peers: readonly string[];
  /** Whether a subject or pattern lies inside the namespace's durable subjects (any peer). */
  captures(subjectOrPattern: string): boolean;
  /** The one stream that captures a subject, or a pattern naming its peer; else undefined. */
  streamFor(subjectOrPattern: string): string | undefined;
  /** Every stream a pattern spans (one per known peer for `*`), each with its own narrowed filter; [] if none. */
  routesFor(pattern: string): DurableRoute[];
}

type StreamRole = keyof DurableStreamNames;

const roleOfKind = new Map<string, StreamRole>([
  ['request', 'requests'],
  ['cancel', 'requests'],
  ['result', 'results'],
  ['cancel-result', 'results'],
  ['claim', 'results'],
]);

/**
 * Every stream subject is `<ns>.*.*.<kind>.<peer>`. A subject or pattern belongs to the streams
 * only if it has exactly that shape, no `>`, and a concrete kind token; its peer token is either
 * concrete (one stream) or `*` (every known peer's).
 */
function parseDurable(namespace: string, candidate: string): { role: StreamRole; kind: string; peer: string; tokens: string[] } | undefined {
  if (!candidate.startsWith(`${namespace}.`) || candidate.includes('>')) return undefined;
  const tokens = candidate.slice(namespace.length + 1).split('.');
  if (tokens.length !== 4) return undefined;
  const [, , kind, peer] = tokens as [string, string, string, string];
  const role = roleOfKind.get(kind);
  if (role === undefined || (peer !== '*' && !tokenPattern.test(peer))) return undefined;
  return { role, kind, peer, tokens };
}

export function durableLayout(namespace: string, peers: readonly string[]): DurableLayout {
  assertNamespace(namespace);
  for (const p of peers) assertToken(p, 'peer id');
  const names = new Map<string, DurableStreamNames>();
  const namesOf = (peer: string) => {
    let n = names.get(peer);
    if (n === undefined) names.set(peer, (n = durableStreamNames(namespace, peer)));
    return n;
  };
  return {
    namespace,
    peers: [...peers],
    captures: (candidate) => parseDurable(namespace, candidate) !== undefined,
    streamFor: (candidate) => {
      const parsed = parseDurable(namespace, candidate);
      return parsed === undefined || parsed.peer === '*' ? undefined : namesOf(parsed.peer)[parsed.role];
    },
    routesFor: (pattern) => {
      const parsed = parseDurable(namespace, pattern);
      if (parsed === undefined) return [];
      const prefix = `${namespace}.${parsed.tokens.slice(0, 3).join('.')}`;
      const targets = parsed.peer === '*' ? peers : [parsed.peer];
      return targets.map((peerId) => ({ stream: namesOf(peerId)[parsed.role], filter: `${prefix}.${peerId}`, peerId }));
    },
  };
}

export type PeerConsumerKind = 'request' | 'cancel';
export type CoordinatorConsumerKind = 'result' | 'cancel-result' | 'claim';

/** The durable pull consumer a coordinator provisions for a peer; the peer only binds to it. */
export function peerConsumerName(peerId: string, kind: PeerConsumerKind): string {
  assertToken(peerId, 'peer id');
  return `convoke-peer-${peerId}-${kind}`;
}

/** The filter of a peer's consumer: its own requests (or cancels), every interaction and operation. */
export function peerConsumerFilter(namespace: string, peerId: string, kind: PeerConsumerKind): string {
  assertNamespace(namespace);
  assertToken(peerId, 'peer id');
  return `${namespace}.*.*.${kind}.${peerId}`;
}

export function coordinatorConsumerName(coordinatorId: string, kind: CoordinatorConsumerKind): string {
  assertToken(coordinatorId, 'coordinator id');
  return `convoke-coord-${coordinatorId}-${kind}`;
}

export type InboxRole = 'peer' | 'coord' | 'cmd' | 'evt';

/**
 * Each principal gets its own inbox prefix (`_INBOX.<role>.<id>`), so its subscribe permission
 * can be `_INBOX.<role>.<id>.>` instead of `_INBOX.>`: replies, PubAcks and pull deliveries meant
 * for one principal cannot be read by another (spec: exclusive receiving ownership).
 */
export function inboxPrefixFor(role: InboxRole, id: string): string {
  assertToken(id, `${role} id`);
  return `_INBOX.${role}.${id}`;
}

/** Every command client's inbox: where a coordinator publishes command replies. */
export const commandReplyInboxes = '_INBOX.cmd.*.>';

/** Every event publisher's inbox: where a workflow host answers an event sent as a request. */
export const eventReplyInboxes = '_INBOX.evt.*.>';

/** Published by the server when a message reaches max_deliver on a consumer. */
export function maxDeliveriesAdvisorySubject(stream: string, consumer: string): string {
  return `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${stream}.${consumer}`;
}
