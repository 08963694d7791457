import type { RuntimeContext } from '../../contract/types.js';

/** A revisioned observation of a group's members. It does not promise that a peer stays connected. */
export interface AudienceObservation {
  peers: string[];
  revision: string;
  /**
   * What the directory observed of the members' presence (on NATS: a live consumer or a
   * heartbeat), with the observation's own revision. A member in neither list was not observed.
   */
  presence?: { revision: string; online: string[]; offline: string[] };
}

export interface Directory {
  audience(context: RuntimeContext, group: string): Promise<AudienceObservation>;
}
