/**
 * NATS permission objects for convoke's principals. Pure functions: the deployment renders them
 * into its server config (test/support/nats-server.ts does that for tests). They are the broker
 * half of result verification (spec: "Identity, context and authorization"): a peer's user may
 * publish only subjects whose last token is its own peer id, so the received subject proves the
 * publisher — as long as nothing else can write those subjects (see the notes on streams below).
 *
 * What nats-server 2.9.10 lets us scope, and what it does not:
 *
 * - Subjects are scoped exactly: a peer publishes `<ns>.*.*.{result,cancel-result,claim}.<peer>`
 *   and subscribes `<ns>.*.*.{request,cancel}.<peer>`, nothing wider.
 * - Inboxes are per principal (`_INBOX.<role>.<id>.>`, see inboxPrefixFor): replies, PubAcks and
 *   pull deliveries for one principal are not readable by another. The connection must be opened
 *   with that inbox prefix (connectNats({inboxPrefix})).
 * - A coordinator answers commands by publishing into command clients' inboxes
 *   (`_INBOX.cmd.*.>`), and the command server answers a principal only inside its own inbox
 *   (CommandServerOptions.replyInbox). Not `allow_responses`: with it, nats-server 2.9 remembers
 *   every reply subject delivered to the user for two minutes and rescans that whole table at
 *   least once a second — every JetStream delivery and PubAck to a coordinator included. Under
 *   load that scan was half the server's CPU.
 * - JetStream API subjects carry the stream and consumer name, so a peer is limited to INFO,
 *   MSG.NEXT and ACK on its own two consumers. The ACK subject's remaining tokens (delivery
 *   count, sequences) cannot be scoped: a peer can ack, nak or term any message of its own
 *   consumer — which is only its own work.
 * - NOT scoped: request bodies. MSG.NEXT batch sizes and STREAM.MSG.GET sequence numbers are in
 *   the body, so MSG.GET is not granted to peers at all (it would read other peers' requests);
 *   a peer learns an exhausted message's subject from its own deliveries instead.
 * - NOT granted to peers: consumer creation. On 2.9.10 the server does not check a consumer's
 *   `deliver_subject` against the creator's publish permission; a peer allowed to create even its
 *   own consumer could make the server push stored messages onto another peer's result subject,
 *   where that peer's results stream captures them (they keep their original subject, but they
 *   consume the discard-new capacity of that peer's results). Coordinators provision peer consumers
 *   (peerConsumerName) and peers bind to them.
 * - Stream create/update is an administrative capability inside the attested publish boundary:
 *   a stream's `republish` (2.9) or sources can write stored content onto result subjects without
 *   the publisher's permission. coordinatorPermissions grants it only with manageStreams.
 */
import {
  assertNamespace,
  assertToken,
  commandReplyInboxes,
  eventReplyInboxes,
  coordinatorConsumerName,
  durableStreamNames,
  inboxPrefixFor,
  maxDeliveriesAdvisorySubject,
  peerConsumerName,
  streamAnchorSubject,
  type CoordinatorConsumerKind,
  type PeerConsumerKind,
} from './nats-names.js';

export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

const peerConsumerKinds: readonly PeerConsumerKind[] = ['request', 'cancel'];
const coordinatorConsumerKinds: readonly CoordinatorConsumerKind[] = ['result', 'cancel-result', 'claim'];

/** The JetStream API a principal needs to bind and pull an existing durable consumer. */
function bindConsumerPermissions(stream: string, consumer: string): NatsPermissions {
  return {
    publish: [`$JS.API.CONSUMER.INFO.${stream}.${consumer}`, `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`, `$JS.ACK.${stream}.${consumer}.>`],
    subscribe: [maxDeliveriesAdvisorySubject(stream, consumer)],
  };
}

/** A peer: receives its own requests and cancels, publishes only its own results, cancel results and claims. */
export function peerPermissions(namespace: string, peerId: string): NatsPermissions {
  assertNamespace(namespace);
  assertToken(peerId, 'peer id');
  const { requests } = durableStreamNames(namespace, peerId);
  const publish = [`${namespace}.*.*.result.${peerId}`, `${namespace}.*.*.cancel-result.${peerId}`, `${namespace}.*.*.claim.${peerId}`];
  const subscribe = [`${namespace}.*.*.request.${peerId}`, `${namespace}.*.*.cancel.${peerId}`, `${inboxPrefixFor('peer', peerId)}.>`];
  for (const kind of peerConsumerKinds) {
    const bind = bindConsumerPermissions(requests, peerConsumerName(peerId, kind));
    publish.push(...bind.publish);
    subscribe.push(...bind.subscribe);
  }
  return { publish, subscribe };
}

export interface CoordinatorPermissionOptions {
  /**
   * Create the peers' streams and store their anchors (NatsTransport.ensureStreams). Off by
   * default: stream config (republish, sources) can write onto result subjects, so whoever holds
   * it is part of the attested publish boundary. Give it to a deployment/admin step, not a
   * long-running process.
   */
  manageStreams?: boolean;
}

/**
 * A coordinator: sends requests and cancels to any peer, receives results, serves commands.
 * It cannot publish results, so it cannot impersonate a peer. It provisions peers' consumers and
 * its own (consumer create is scoped to the stream, not to a name: see the module comment), and
 * deletes a message that exhausted its deliveries once it has recorded that (a work queue would
 * otherwise keep it, holding a slot of the peer's capacity for good). It deletes and recreates the
 * consumers it provisioned when they are ahead of their stream or starved (nats-consumer-health.ts).
 * JetStream API subjects name streams whole (no wildcard inside a token), so every peer's streams
 * are listed.
 */
export function coordinatorPermissions(
  namespace: string,
  coordinatorId: string,
  peers: readonly string[],
  options: CoordinatorPermissionOptions = {},
): NatsPermissions {
  assertNamespace(namespace);
  assertToken(coordinatorId, 'coordinator id');
  const publish = [`${namespace}.*.*.request.*`, `${namespace}.*.*.cancel.*`];
  const subscribe = [
    `${namespace}.*.*.result.*`,
    `${namespace}.*.*.cancel-result.*`,
    `${namespace}.*.*.claim.*`,
    'convoke.cmd.*.>',
    `${inboxPrefixFor('coord', coordinatorId)}.>`,
  ];
  for (const peerId of peers) {
    const { requests, results } = durableStreamNames(namespace, peerId);
    for (const s of [requests, results]) {
      // CONSUMER.DELETE: the durability check recreates a provisioned consumer it finds ahead of its stream or starved.
      publish.push(
        `$JS.API.STREAM.INFO.${s}`,
        `$JS.API.STREAM.MSG.GET.${s}`,
        `$JS.API.STREAM.MSG.DELETE.${s}`,
        `$JS.API.CONSUMER.CREATE.${s}.*.>`,
        `$JS.API.CONSUMER.INFO.${s}.*`,
        `$JS.API.CONSUMER.DELETE.${s}.*`,
      );
      if (options.manageStreams) publish.push(`$JS.API.STREAM.CREATE.${s}`, streamAnchorSubject(s));
    }
    publish.push(`$JS.API.CONSUMER.MSG.NEXT.${results}.*`, `$JS.ACK.${results}.>`);
    subscribe.push(
      maxDeliveriesAdvisorySubject(requests, '*'),
      ...coordinatorConsumerKinds.map((kind) => maxDeliveriesAdvisorySubject(results, coordinatorConsumerName(coordinatorId, kind))),
    );
  }
  publish.push(commandReplyInboxes);
  return { publish, subscribe };
}

/**
 * A command client (a service calling convoke over NATS): its principal is proven by the subject
 * it may publish, like a result publisher's peer id. Replies arrive on its own inbox prefix.
 */
export function commandClientPermissions(principalId: string): NatsPermissions {
  assertToken(principalId, 'principal id');
  return { publish: [`convoke.cmd.${principalId}.>`], subscribe: [`${inboxPrefixFor('cmd', principalId)}.>`] };
}

/**
 * An event publisher: publishes CloudEvents of the listed types only (`<prefix>.<type>`, one
 * subject each: the broker is what proves a publisher may send a type), and reads the answers to
 * the events it sends as requests in its own inbox (`_INBOX.evt.<principal>`), nothing else —
 * never the emitted events' space, which the config keeps apart from `<prefix>`.
 */
export function eventPublisherPermissions(principalId: string, subjects: readonly string[]): NatsPermissions {
  assertToken(principalId, 'principal id');
  return { publish: [...subjects], subscribe: [`${inboxPrefixFor('evt', principalId)}.>`] };
}

/**
 * What a workflow host adds to its coordinator's user for `workflows.events`: publish on the
 * emitted events' space (`<emitSubjectPrefix>.>`, where no other user may publish) when it emits
 * (JetStream: the stream's info and purge, and its creation and update with manageStreams), subscribe to
 * both spaces when it listens, and answer event requests inside event publishers' inboxes. It
 * never publishes on the outside events' space: an emitted event cannot pass for a publisher's.
 */
export function workflowEventHostPermissions(options: {
  subjectPrefix: string;
  emitSubjectPrefix: string;
  emit: 'none' | 'nats' | 'jetstream';
  stream: string;
  listen: boolean;
  manageStreams?: boolean;
}): NatsPermissions {
  const emitted = `${options.emitSubjectPrefix}.>`;
  const publish: string[] = [];
  const subscribe: string[] = [];
  if (options.emit !== 'none') publish.push(emitted);
  if (options.emit === 'jetstream') {
    // Purge: each principal is held to its share of the stream (emitted-stream-trim.ts).
    publish.push(`$JS.API.STREAM.INFO.${options.stream}`, `$JS.API.STREAM.PURGE.${options.stream}`);
    if (options.manageStreams) publish.push(`$JS.API.STREAM.CREATE.${options.stream}`, `$JS.API.STREAM.UPDATE.${options.stream}`);
  }
  if (options.listen) {
    subscribe.push(`${options.subjectPrefix}.>`, emitted);
    publish.push(eventReplyInboxes);
  }
  return { publish, subscribe };
}
