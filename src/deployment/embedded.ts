/**
 * The embedded deployment: one process, the in-process bus with NATS-style permissions, a store
 * (memory by default), a static directory and policy, and the coordinator. Used by `convoke demo`,
 * by tests and by benchmarks; the same coordinator runs unchanged over NATS and durable stores.
 */
import type { AdmissionRateConfig } from '../runtime/admission-rate.js';
import type { Logger } from '../runtime/operation-log.js';
import type { BudgetOverrides } from '../runtime/log-budget.js';
import { BundleRegistry, loadBundle, type CompiledBundle } from '../contract/bundle.js';
import type { JsonValue } from '../contract/json.js';
import { MemoryBus } from '../adapters/transport/memory.js';
import { MemoryEventStore } from '../adapters/store/memory.js';
import type { EventStore } from '../adapters/store/types.js';
import { StaticDirectory } from '../adapters/directory/static.js';
import { StaticPolicy, type PolicyRule } from '../adapters/policy/static.js';
import { SubjectNamespaceVerifier } from '../adapters/verification/subject.js';
import { StaticManifestSource } from '../adapters/manifest/static.js';
import type { ManifestBranch } from '../events/types.js';
import { createPeer, type Handler, type Peer } from '../peer/peer.js';
import type { EffectSink } from '../peer/effect-sink.js';
import type { Clock } from '../contract/clock.js';
import { Coordinator } from '../runtime/coordinator.js';

export interface EmbeddedOptions {
  clock: Clock;
  bundle: JsonValue;
  groups?: Record<string, string[]>;
  rules?: PolicyRule[];
  store?: EventStore;
  policyTtlMs?: number;
  /** Gather manifests, keyed `<contract id>/<interaction>`. */
  manifests?: Record<string, ManifestBranch[]>;
  /** CoordinatorDeps.resultBatchMs. */
  resultBatchMs?: number;
  /** CoordinatorDeps.budgets. */
  budgets?: BudgetOverrides;
  /** CoordinatorDeps.logger: where the operation lifecycle is logged. */
  logger?: Logger;
  /** CoordinatorDeps.admissionRate: new admissions per principal. */
  admissionRate?: AdmissionRateConfig;
}

export interface Embedded {
  bus: MemoryBus;
  store: EventStore;
  bundle: CompiledBundle;
  directory: StaticDirectory;
  policy: StaticPolicy;
  coordinator: Coordinator;
  peers: Map<string, Peer>;
  /** Starts an in-process peer whose bus connection may publish only its own peer-bearing subjects. */
  addPeer(peerId: string, handlers: Record<string, Handler>, options?: { sink?: EffectSink; renew?: boolean; stopWaitMs?: number }): Promise<Peer>;
  close(): Promise<void>;
}

/** The permissions a peer's connection gets: its own requests in, its own results out. */
export function peerBusPermissions(namespace: string, peerId: string) {
  return {
    publish: [`${namespace}.*.*.result.${peerId}`, `${namespace}.*.*.cancel-result.${peerId}`, `${namespace}.*.*.claim.${peerId}`],
    subscribe: [`${namespace}.*.*.request.${peerId}`, `${namespace}.*.*.cancel.${peerId}`],
  };
}

/** The permissions the coordinator's connection gets: requests and cancels out, everything peers send in. */
export function coordinatorBusPermissions(namespaces: readonly string[]) {
  return {
    publish: namespaces.flatMap((ns) => [`${ns}.*.*.request.*`, `${ns}.*.*.cancel.*`]),
    subscribe: namespaces.flatMap((ns) => [`${ns}.*.*.result.*`, `${ns}.*.*.cancel-result.*`, `${ns}.*.*.claim.*`]),
  };
}

export async function createEmbedded(options: EmbeddedOptions): Promise<Embedded> {
  const bundle = loadBundle(options.bundle);
  const bundles = new BundleRegistry();
  bundles.add(bundle);
  const namespace = bundle.bundle.subjectNamespace;
  const bus = new MemoryBus();
  const store = options.store ?? new MemoryEventStore({ clock: options.clock });
  const directory = new StaticDirectory({ groups: options.groups ?? {} });
  const policy = new StaticPolicy({ rules: options.rules ?? [{ effect: 'allow' }], ttlMs: options.policyTtlMs ?? 60_000 }, options.clock);
  const peers = new Map<string, Peer>();
  const coordinatorConnection = bus.connect('coordinator', coordinatorBusPermissions([namespace]));
  const coordinator = new Coordinator({
    store,
    transport: coordinatorConnection,
    directory,
    policy,
    verifier: new SubjectNamespaceVerifier([{ namespace, exclusivePeerPublishers: true }]),
    clock: options.clock,
    bundles,
    deployment: { account: 'local', system: 'convoke', domain: 'embedded' },
    // In-process peers commit effects through their sinks: fenced while every sink advertises it.
    effectFencing: () => [...peers.values()].every((peer) => peer.sink.capabilities.effectFencing),
    ...(options.manifests ? { manifests: new StaticManifestSource(options.manifests) } : {}),
    ...(options.resultBatchMs === undefined ? {} : { resultBatchMs: options.resultBatchMs }),
    ...(options.budgets === undefined ? {} : { budgets: options.budgets }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.admissionRate === undefined ? {} : { admissionRate: options.admissionRate }),
  });
  // A store handed in may be shared (tests run several coordinators over one): follow the others'
  // appends. A store made here has no other client, and nothing to follow.
  if (options.store) await coordinator.watchStore();
  return {
    bus,
    store,
    bundle,
    directory,
    policy,
    coordinator,
    peers,
    addPeer: async (peerId, handlers, peerOptions = {}) => {
      const transport = bus.connect(`peer:${peerId}`, peerBusPermissions(namespace, peerId));
      const peer = await createPeer({ transport, namespace, peerId, handlers, clock: options.clock, ...peerOptions });
      peers.set(peerId, peer);
      return peer;
    },
    close: async () => {
      await coordinator.close();
      for (const peer of peers.values()) await peer.close();
      await store.close();
    },
  };
}
