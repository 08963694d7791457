/**
 * A static directory: groups from deployment config, with a revision that changes whenever
 * membership changes. Membership changes never alter an admitted manifest.
 */
import { AdapterError } from '../../contract/errors.js';
import { checkToken } from '../../contract/ids.js';
import type { RuntimeContext } from '../../contract/types.js';
import type { AudienceObservation, Directory } from './types.js';

export interface StaticDirectoryConfig {
  groups: Record<string, string[]>;
  revision?: string;
}

export class StaticDirectory implements Directory {
  private groups: Map<string, string[]>;
  private revisionSeq = 1;
  private readonly baseRevision: string;

  constructor(config: StaticDirectoryConfig) {
    this.baseRevision = config.revision ?? 'static';
    this.groups = new Map();
    for (const [name, peers] of Object.entries(config.groups)) this.setGroupQuietly(name, peers);
  }

  get revision(): string {
    return `${this.baseRevision}.${this.revisionSeq}`;
  }

  async audience(_context: RuntimeContext, group: string): Promise<AudienceObservation> {
    const peers = this.groups.get(group);
    if (peers === undefined) throw new AdapterError('invalid-input', `unknown audience group "${group}"`);
    return { peers: [...peers], revision: this.revision };
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
