/**
 * What each NATS principal of a deployment needs, and the nats-server config that grants exactly
 * that.
 */
import type { CompiledBundle } from '../../contract/bundle.js';
import { invalidInput } from '../../contract/errors.js';
import { inboxPrefixFor } from '../../adapters/transport/nats-names.js';
import { tombStreamName } from '../../adapters/store/jetstream.js';
import { indexStreamName } from '../../adapters/store/jetstream-index.js';
import { snapshotStreamName } from '../../adapters/store/jetstream-index-snapshot.js';
import { openSetStreamName } from '../../adapters/store/jetstream-open-set.js';
import {
  commandClientPermissions,
  coordinatorPermissions,
  eventPublisherPermissions,
  peerPermissions,
  workflowEventHostPermissions,
  type NatsPermissions,
} from '../../adapters/transport/nats-permissions.js';
import { cloudEventSubject } from '../../contract/cloudevents.js';
import { subjectSpacesOverlap } from '../../contract/ids.js';
import { workflowEventsDefaults, type WorkflowEventsConfig } from '../../runtime/workflow-service.js';
import type { DeploymentConfig } from '../types.js';
import { checkNatsTransport, peersByNamespace, safeUrl } from './settings.js';

export interface JetStreamStoreNames {
  /** Default CONVOKE_OPS (the store's tombstones live in the stream tombStreamName names). */
  stream?: string;
  /** Default convoke. */
  prefix?: string;
}

/**
 * What a coordinator's user additionally needs to run a `jetstream:` store over its own
 * credentials (openDeploymentStore). Stream create only with manageStreams: a stream's config
 * (republish, sources) can write onto result subjects, so it is inside the attested boundary.
 */
export function jetstreamStorePermissions(names: JetStreamStoreNames = {}, options: { manageStreams?: boolean } = {}): NatsPermissions {
  const stream = names.stream ?? 'CONVOKE_OPS';
  const prefix = names.prefix ?? 'convoke';
  const publish = [
    `${prefix}.op.>`,
    `${prefix}.wf.>`,
    `${prefix}.tomb.>`,
    `${prefix}.idx.>`,
    `${prefix}.open.>`,
    `${prefix}.openset`,
    `${prefix}.isnap.>`,
    '$JS.API.INFO',
  ];
  // The operations stream, its tombstones, its operations index (jetstream-index.ts), the index view's snapshots
  // (jetstream-index-snapshot.ts) and its open set (jetstream-open-set.ts).
  // A marker of the open set is deleted by its sequence (STREAM.MSG.DELETE; a filtered purge costs the server more).
  publish.push(`$JS.API.STREAM.MSG.DELETE.${openSetStreamName(stream)}`);
  for (const s of [stream, tombStreamName(stream), indexStreamName(stream), snapshotStreamName(stream), openSetStreamName(stream)]) {
    publish.push(
      `$JS.API.STREAM.INFO.${s}`,
      `$JS.API.STREAM.MSG.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}.>`,
      `$JS.API.STREAM.PURGE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.DELETE.${s}.>`,
      `$JS.API.CONSUMER.INFO.${s}.>`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.>`,
      `$JS.ACK.${s}.>`,
      // Flow-control replies of the stamp feed (an ordered push consumer). Refused, the server
      // stalls the feed at its first flow-control window and every append falls back to a read.
      `$JS.FC.${s}.>`,
    );
    if (options.manageStreams) publish.push(`$JS.API.STREAM.CREATE.${s}`, `$JS.API.STREAM.UPDATE.${s}`);
  }
  return { publish, subscribe: [] };
}

export function mergePermissions(...blocks: NatsPermissions[]): NatsPermissions {
  return { publish: [...new Set(blocks.flatMap((b) => b.publish))], subscribe: [...new Set(blocks.flatMap((b) => b.subscribe))] };
}

export interface NatsPrincipalPlan {
  user: string;
  role: 'coordinator' | 'peer' | 'command' | 'events';
  permissions: NatsPermissions;
  /** The inbox prefix the principal's connections must use (its subscribe permission allows only that). */
  inboxPrefix: string;
}

export interface NatsPlanOptions {
  namespaces: string[];
  coordinator: { user: string; coordinatorId: string; manageStreams?: boolean; jetstreamStore?: JetStreamStoreNames };
  /** peer id -> the namespaces it serves. */
  peers: Map<string, string[]> | Record<string, string[]>;
  commandClients: string[];
  /** The serve config's workflows.events: the coordinator's event permissions, and one user per event publisher. */
  events?: WorkflowEventsConfig;
}

/**
 * Every NATS user a deployment needs, each with exactly its permissions: the coordinator (all
 * namespaces, plus its jetstream store when it uses one), one user per peer (peerPermissions of
 * each namespace it serves), one per command principal (commandClientPermissions).
 */
export function natsPrincipalPlan(options: NatsPlanOptions): NatsPrincipalPlan[] {
  const c = options.coordinator;
  const peers = options.peers instanceof Map ? options.peers : new Map(Object.entries(options.peers));
  const peersOf = (ns: string) =>
    [...peers]
      .filter(([, namespaces]) => namespaces.includes(ns))
      .map(([peerId]) => peerId)
      .sort();
  const coordinatorBlocks = options.namespaces.map((ns) =>
    coordinatorPermissions(ns, c.coordinatorId, peersOf(ns), { manageStreams: c.manageStreams ?? false }),
  );
  if (c.jetstreamStore) coordinatorBlocks.push(jetstreamStorePermissions(c.jetstreamStore, { manageStreams: c.manageStreams ?? false }));
  const events = options.events;
  const subjectPrefix = events?.subjectPrefix ?? workflowEventsDefaults.subjectPrefix;
  const emitSubjectPrefix = events?.emitSubjectPrefix ?? workflowEventsDefaults.emitSubjectPrefix;
  // An event publisher allowed a type whose subject lies in the emitted space could pass for a principal's workflow.
  if (events && subjectSpacesOverlap(subjectPrefix, emitSubjectPrefix))
    throw invalidInput(`workflows.events: subjectPrefix "${subjectPrefix}" and emitSubjectPrefix "${emitSubjectPrefix}" overlap`);
  if (events)
    coordinatorBlocks.push(
      workflowEventHostPermissions({
        subjectPrefix,
        emitSubjectPrefix,
        emit: events.emit ?? 'none',
        stream: events.stream ?? workflowEventsDefaults.stream,
        listen: events.listen !== undefined,
        manageStreams: c.manageStreams ?? false,
      }),
    );
  const plan: NatsPrincipalPlan[] = [
    { user: c.user, role: 'coordinator', permissions: mergePermissions(...coordinatorBlocks), inboxPrefix: inboxPrefixFor('coord', c.coordinatorId) },
  ];
  for (const [peerId, namespaces] of [...peers].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    plan.push({
      user: peerId,
      role: 'peer',
      permissions: mergePermissions(...namespaces.map((ns) => peerPermissions(ns, peerId))),
      inboxPrefix: inboxPrefixFor('peer', peerId),
    });
  }
  for (const principal of options.commandClients) {
    plan.push({ user: principal, role: 'command', permissions: commandClientPermissions(principal), inboxPrefix: inboxPrefixFor('cmd', principal) });
  }
  for (const [principal, types] of Object.entries(events?.publishers ?? {})) {
    const subjects = types.map((type) => cloudEventSubject(subjectPrefix, type));
    plan.push({ user: principal, role: 'events', permissions: eventPublisherPermissions(principal, subjects), inboxPrefix: inboxPrefixFor('evt', principal) });
  }
  return plan;
}

/** peer id -> namespaces, from peersByNamespace. */
export function namespacesByPeer(byNamespace: Map<string, string[]>): Map<string, string[]> {
  const result = new Map<string, string[]>();
  for (const [ns, peers] of byNamespace) for (const p of peers) result.set(p, [...(result.get(p) ?? []), ns]);
  return result;
}

/**
 * The `authorization { users: [...] }` block of a nats-server config. Passwords are written as
 * `$NAME` references, which nats-server resolves from its environment: no secret in the file.
 */
export function renderNatsAuthorization(plan: NatsPrincipalPlan[], passwordVariable: (user: string) => string): string {
  const quote = (s: string) => JSON.stringify(s);
  const list = (items: string[]) => `[\n${items.map((i) => `          ${quote(i)}`).join(',\n')}\n        ]`;
  const users = plan.map((p) => {
    const lines = [
      `    # ${p.role}; connect with inbox prefix ${p.inboxPrefix}`,
      '    {',
      `      user: ${quote(p.user)}`,
      `      password: $${passwordVariable(p.user)}`,
      '      permissions: {',
    ];
    lines.push(`        publish: { allow: ${list(p.permissions.publish)} }`);
    lines.push(`        subscribe: { allow: ${list(p.permissions.subscribe)} }`);
    lines.push('      }', '    }');
    return lines.join('\n');
  });
  return `authorization {\n  users: [\n${users.join('\n')}\n  ]\n}\n`;
}

/** A conventional variable name for a user's password: CONVOKE_NATS_PASSWORD_<USER>. */
export function passwordVariableOf(user: string): string {
  return `CONVOKE_NATS_PASSWORD_${user.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`;
}

/**
 * The principal plan of a deployment config: its coordinator (with the jetstream store's
 * permissions when the store borrows the transport's credentials), every peer its bundles can
 * address, and the given command principals.
 */
export function natsPlanFor(config: DeploymentConfig, compiled: CompiledBundle[], commandClients: string[]): NatsPrincipalPlan[] {
  if (config.transport.kind !== 'nats') throw invalidInput('the deployment does not use a nats transport');
  const settings = checkNatsTransport(config.transport, compiled);
  const storeUrl = /^jetstream:(.*)$/i.exec(config.store)?.[1];
  const parsed = storeUrl === undefined ? undefined : safeUrl(storeUrl);
  const borrowsCredentials = parsed !== undefined && parsed.username === '' && !parsed.searchParams.has('user') && !parsed.searchParams.has('pass');
  const jetstreamStore = borrowsCredentials
    ? { stream: parsed.searchParams.get('stream') ?? undefined, prefix: parsed.searchParams.get('prefix') ?? undefined }
    : undefined;
  return natsPrincipalPlan({
    namespaces: [...new Set(compiled.map((b) => b.bundle.subjectNamespace))],
    coordinator: {
      user: settings.user,
      coordinatorId: settings.coordinatorId,
      manageStreams: settings.manageStreams,
      ...(jetstreamStore ? { jetstreamStore } : {}),
    },
    peers: namespacesByPeer(peersByNamespace(compiled, config.directory.groups)),
    commandClients,
    ...(config.workflows?.events ? { events: config.workflows.events } : {}),
  });
}

/** A whole nats-server config: loopback listener, JetStream on a file store, the plan's users. */
export function renderNatsServerConfig(plan: NatsPrincipalPlan[], options: { host: string; port: number; storeDir: string }): string {
  return [
    '# Generated from src/adapters/transport/nats-permissions.ts (natsPrincipalPlan); passwords come',
    '# from the environment variables named below, never from this file.',
    '# nats-server 2.10+: add `sync_interval: always` to the jetstream block (fsync before every ack).',
    `host: ${JSON.stringify(options.host)}`,
    `port: ${options.port}`,
    `jetstream { store_dir: ${JSON.stringify(options.storeDir)} }`,
    renderNatsAuthorization(plan, passwordVariableOf),
  ].join('\n');
}
