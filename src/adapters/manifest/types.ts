/**
 * Gather manifests: the expected result set of a `gather` interaction comes from a manifest
 * source the deployment configures and trusts (authenticated by being deployment-bound), never
 * from the caller. Each gathered peer is still authorized at admission like any other.
 */
import type { ContractRef, RuntimeContext } from '../../contract/types.js';
import type { ManifestBranch } from '../../events/types.js';

export interface GatheredManifest {
  branches: ManifestBranch[];
  /** The source's revision, recorded with the admission. */
  revision: string;
}

export interface ManifestSource {
  /** Throws AdapterError('unavailable') when no answer can be had; admission then fails closed. */
  gather(context: RuntimeContext, contract: ContractRef, interaction: string): Promise<GatheredManifest>;
}
