import type { RuntimeContext } from '../../contract/types.js';

/** A revisioned observation of a group's members. It does not promise that a peer stays connected. */
export interface AudienceObservation {
  peers: string[];
  revision: string;
}

export interface Directory {
  audience(context: RuntimeContext, group: string): Promise<AudienceObservation>;
}
