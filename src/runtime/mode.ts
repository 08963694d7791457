/**
 * Memory mode (spec: "Memory mode keeps the same identities/completion rules but has one attempt
 * and no offline promise"). Which deployments are in it is decided here, once, from the
 * capabilities of the store and the transport the coordinator was given:
 *
 * - a store that is not durable (memory:): the operation log dies with the process, so nothing
 *   a later attempt was fenced against survives it;
 * - a transport that is neither durable nor in-process (core NATS): a request or result lost in
 *   flight is gone, and peers that are offline are never served later.
 *
 * The in-process bus alone is not memory mode: its messages are lost only with the process,
 * which also holds the coordinator and the peers, and a durable store's outbox republishes them
 * when the process starts again. So an embedded deployment on SQLite retries; on memory: it does
 * not.
 *
 * The budget is applied at admission and frozen in the manifest (attemptsMax), so replay, and
 * any coordinator that later loads the operation, agrees with the rule the operation was admitted
 * under.
 */
import { limits } from '../contract/limits.js';
import type { StoreCapabilities } from '../adapters/store/types.js';
import type { TransportCapabilities } from '../adapters/transport/types.js';

export function isMemoryMode(store: { capabilities: StoreCapabilities }, transport: { capabilities: TransportCapabilities }): boolean {
  return !store.capabilities.durable || !(transport.capabilities.durable || transport.capabilities.inProcess === true);
}

/** The application attempts any branch may have in this deployment: the contract's own budget is capped by it. */
export function deploymentAttemptsMax(store: { capabilities: StoreCapabilities }, transport: { capabilities: TransportCapabilities }): number {
  return isMemoryMode(store, transport) ? limits.memoryModeAttemptsMax : limits.attemptsMax;
}
