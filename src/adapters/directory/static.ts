/**
 * A static directory: groups from deployment config, with a revision that changes whenever
 * membership changes. Membership changes never alter an admitted manifest.
 */
import { AdapterError } from '../../contract/errors.js';
import { checkToken } from '../../contract/ids.js';
import type { RuntimeContext } from '../../contract/types.js';
import type { AudienceObservation, Directory } from './types.js';

export type Presence = 'online' | 'offline';

export interface StaticDirectoryConfig {
  groups: Record<string, string[]>;
  revision?: string;
  /** Observed presence of peers; a peer not listed is not observed. */
  presence?: Record<string, Presence>;
}

export class StaticDirectory implements Directory {
  private groups: Map<string, string[]>;
  private revisionSeq = 1;
  private readonly baseRevision: string;
  private readonly presence = new Map<string, Presence>();
  private presenceSeq = 1;

  constructor(config: StaticDirectoryConfig) {
    this.baseRevision = config.revision ?? 'static';
    this.groups = new Map();
    for (const [name, peers] of Object.entries(config.groups)) this.setGroupQuietly(name, peers);
    for (const [peer, state] of Object.entries(config.presence ?? {})) {
      checkToken(peer, 'peer with presence');
      this.presence.set(peer, state);
    }
  }

  /** The revision of the presence observations; it moves on every presence change. */
  get presenceRevision(): string {
    return `${this.baseRevision}.presence.${this.presenceSeq}`;
  }

  /** Records what was observed of a peer (undefined: no longer observed) and advances the presence revision. */
  setPresence(peerId: string, state: Presence | undefined): void {
    checkToken(peerId, 'peer with presence');
    if (state === undefined) this.presence.delete(peerId);
    else this.presence.set(peerId, state);
    this.presenceSeq++;
  }

  get revision(): string {
    return `${this.baseRevision}.${this.revisionSeq}`;
  }

  async audience(_context: RuntimeContext, group: string): Promise<AudienceObservation> {
    const peers = this.groups.get(group);
    if (peers === undefined) throw new AdapterError('invalid-input', `unknown audience group "${group}"`);
    if (this.presence.size === 0) return { peers: [...peers], revision: this.revision };
    const observed = (state: Presence) => peers.filter((p) => this.presence.get(p) === state);
    return {
      peers: [...peers],
      revision: this.revision,
      presence: { revision: this.presenceRevision, online: observed('online'), offline: observed('offline') },
    };
  }

  /** Replaces a group's members and advances the revision. */
  setGroup(name: string, peers: string[]): void {
    this.setGroupQuietly(name, peers);
    this.revisionSeq++;
  }

  private setGroupQuietly(name: string, peers: string[]): void {
    for (const peer of peers) checkToken(peer, `peer in group ${name}`);
    this.groups.set(name, [...new Set(peers)]);
  }
}
