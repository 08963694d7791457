import type { RuntimeContext } from '../../contract/types.js';

/** A revisioned observation of a group's members. It does not promise that a peer stays connected. */
export interface AudienceObservation {
  peers: string[];
  revision: string;
  /**
   * What the directory observed of the members' presence (on NATS: a live consumer or a
   * heartbeat), with the observation's own revision. A member in neither list was not observed.
   */
  presence?: PresenceReport;
}

export interface Directory {
  audience(context: RuntimeContext, group: string): Promise<AudienceObservation>;
}

/** What was observed of some peers' presence, with the observation's own revision; a peer in neither list was not observed. */
export interface PresenceReport {
  revision: string;
  online: string[];
  offline: string[];
}

/**
 * Where a deployment observes presence (on NATS: the state of each peer's durable request
 * consumer, nats-presence.ts). The coordinator asks it for every audience, directory group or a
 * bundle's static peer list alike; its report replaces what the directory itself reported.
 */
export interface PresenceSource {
  observe(namespace: string, peers: readonly string[]): Promise<PresenceReport>;
}
