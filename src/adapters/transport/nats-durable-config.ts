/** The settings of a durable NATS transport's streams and consumers (a leaf: streams, consumers and their health checks all read it). */
export interface DurableConfig {
  /** The bundle's subjectNamespace; the streams are derived from it and the peers (durableStreamNames). */
  namespace: string;
  /** The peers whose streams this transport creates and verifies, and which a `*` peer token spans. */
  peers: readonly string[];
  /** Must cover the operation deadline plus recovery/settlement grace (docs/design.md §5). */
  duplicateWindowMs: number;
  /** In-flight messages each stream holds (per peer and direction); full means new publishes are rejected. */
  maxMsgs?: number;
  /** The largest message a stream stores; larger ones are rejected. */
  maxMsgBytes?: number;
  replicas?: 1;
  /** Broker deliveries per message before exhaustion becomes an observed event. */
  maxDeliver: number;
  /** Redelivery after this long without an ack. */
  ackWaitMs: number;
}
