/** A static manifest source from deployment config: `{ "<contract id>/<interaction>": [{branchId, peerId}…] }`. */
import { AdapterError } from '../../contract/errors.js';
import { checkToken } from '../../contract/ids.js';
import type { ContractRef, RuntimeContext } from '../../contract/types.js';
import type { ManifestBranch } from '../../events/types.js';
import type { GatheredManifest, ManifestSource } from './types.js';

export class StaticManifestSource implements ManifestSource {
  private readonly manifests: Map<string, ManifestBranch[]>;

  constructor(
    manifests: Record<string, ManifestBranch[]>,
    private readonly revision = 'static',
  ) {
    this.manifests = new Map();
    for (const [key, branches] of Object.entries(manifests)) {
      const ids = new Set<string>();
      for (const b of branches) {
        checkToken(b.branchId, `branch id in manifest ${key}`);
        checkToken(b.peerId, `peer id in manifest ${key}`);
        if (ids.has(b.branchId)) throw new AdapterError('invalid-input', `manifest ${key}: duplicate branch id ${b.branchId}`);
        ids.add(b.branchId);
      }
      this.manifests.set(
        key,
        branches.map((b) => ({ branchId: b.branchId, peerId: b.peerId })),
      );
    }
  }

  async gather(_context: RuntimeContext, contract: ContractRef, interaction: string): Promise<GatheredManifest> {
    const branches = this.manifests.get(`${contract.id}/${interaction}`);
    if (!branches) throw new AdapterError('unavailable', `no gather manifest is configured for ${contract.id}/${interaction}`);
    return { branches: branches.map((b) => ({ ...b })), revision: this.revision };
  }
}
