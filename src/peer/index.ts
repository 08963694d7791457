/**
 * The peer SDK, for services that answer contract invocations: `import { createNatsPeer } from 'convoke/peer'`.
 * createNatsPeer binds a NATS connection (core or durable mode); createPeer takes any Transport.
 */
export { createNatsPeer, type NatsPeerOptions } from './nats-peer.js';
export { createPeer, type Handler, type HandlerContext, type Peer, type PeerOptions } from './peer.js';
export { MemoryEffectSink, type EffectKey, type EffectRecord, type EffectSink } from './effect-sink.js';
export { SqliteEffectSink } from './sqlite-effect-sink.js';
export type { JsonValue } from '../contract/json.js';
