/**
 * Names shared by the NATS transport and the NATS permissions it runs under: the two durable
 * streams of a subject namespace, the durable consumer names of peers and coordinators, inbox
 * prefixes, and the advisory subject of max-delivery exhaustion. One module, so the subjects a
 * user is permitted and the subjects the transport uses cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { assert } from '../../contract/errors.js';
import { namespacePattern, tokenPattern } from '../../contract/ids.js';

/** The chars of a namespace (or a stream name) kept readable; everything is also hashed. */
const readableCharsMax = 32;
/** 48 bits of SHA-256: two namespaces of one deployment colliding is not a practical concern. */
const hashHexChars = 12;

/** Peer, principal and coordinator ids become subject tokens and consumer names. */

export function assertToken(value: string, what: string): void {
  assert(tokenPattern.test(value), `${what} must be a NATS-token-safe id (${tokenPattern.source}), got ${JSON.stringify(value)}`);
}

export function assertNamespace(namespace: string): void {
  assert(namespacePattern.test(namespace), `subject namespace ${JSON.stringify(namespace)} is not token-safe`);
}

export interface DurableStreamNames {
  /** Requests and cancels: what coordinators send to peers. */
  requests: string;
  /** Results, cancel results and claims: what peers send back. */
  results: string;
}

/**
 * Stream names are deterministic and token-safe: a readable part (dots become `_`, truncated)
 * plus a hash of the exact namespace. The hash is what makes the mapping injective: `a.b` and
 * `a_b` read alike but get different streams, and a 519-char namespace still gives a name that
 * fits a file-system directory (a stream's store is a directory named after it).
 */
export function durableStreamNames(namespace: string): DurableStreamNames {
  assertNamespace(namespace);
  const readable = namespace.replaceAll('.', '_').slice(0, readableCharsMax);
  const hash = createHash('sha256').update(namespace, 'utf8').digest('hex').slice(0, hashHexChars);
  return { requests: `CONVOKE_REQ_${readable}_${hash}`, results: `CONVOKE_RES_${readable}_${hash}` };
}

/** Subjects captured by each stream (DESIGN.md §5). */
export function durableStreamSubjects(namespace: string): { requests: string[]; results: string[] } {
  assertNamespace(namespace);
  return {
    requests: [`${namespace}.*.*.request.*`, `${namespace}.*.*.cancel.*`],
    results: [`${namespace}.*.*.result.*`, `${namespace}.*.*.cancel-result.*`, `${namespace}.*.*.claim.*`],
  };
}

/** A namespace's streams, their subjects, and which stream captures a subject: computed once per transport. */
export interface DurableLayout {
  names: DurableStreamNames;
  subjects: { requests: string[]; results: string[] };
  /**
   * The stream that captures a subject or a subscription pattern, or undefined. A pattern belongs
   * to a stream only if every subject it can match is captured by that stream.
   */
  streamFor(subjectOrPattern: string): string | undefined;
}

export function durableLayout(namespace: string): DurableLayout {
  const names = durableStreamNames(namespace);
  const subjects = durableStreamSubjects(namespace);
  const covered = (candidate: string, patterns: string[]) => patterns.some((p) => patternWithin(candidate, p));
  // Every stream subject is `<ns>.*.*.<kind>.*`: a concrete subject (every publish) is placed by
  // its kind token alone, without matching it against each pattern.
  const streamOfKind = new Map<string, string>([
    ['request', names.requests],
    ['cancel', names.requests],
    ['result', names.results],
    ['cancel-result', names.results],
    ['claim', names.results],
  ]);
  const nsPrefix = `${namespace}.`;
  return {
    names,
    subjects,
    streamFor: (candidate) => {
      if (!candidate.includes('*') && !candidate.includes('>')) {
        if (!candidate.startsWith(nsPrefix)) return undefined;
        // `<interaction>.<operation>.<kind>.<peer>` after the namespace: exactly three more dots.
        const first = candidate.indexOf('.', nsPrefix.length);
        const second = first < 0 ? -1 : candidate.indexOf('.', first + 1);
        const third = second < 0 ? -1 : candidate.indexOf('.', second + 1);
        if (third < 0 || candidate.includes('.', third + 1)) return undefined;
        return streamOfKind.get(candidate.slice(second + 1, third));
      }
      return covered(candidate, subjects.requests) ? names.requests : covered(candidate, subjects.results) ? names.results : undefined;
    },
  };
}

export function streamForSubject(namespace: string, subjectOrPattern: string): string | undefined {
  return durableLayout(namespace).streamFor(subjectOrPattern);
}

/** True when every subject matched by `inner` is matched by `outer` (no `>` in outer here). */
function patternWithin(inner: string, outer: string): boolean {
  const a = inner.split('.');
  const b = outer.split('.');
  if (a.length !== b.length || a.includes('>')) return false;
  return a.every((token, i) => b[i] === '*' || (token !== '*' && token === b[i]));
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

export type InboxRole = 'peer' | 'coord' | 'cmd';

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

/** Published by the server when a message reaches max_deliver on a consumer. */
export function maxDeliveriesAdvisorySubject(stream: string, consumer: string): string {
  return `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${stream}.${consumer}`;
}
