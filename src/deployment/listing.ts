/** The config's listing settings as coordinator dependencies: operator principals and stuck bounds. */
import { stuckBoundsDefault, type StuckBounds } from '../events/operation-index.js';
import type { DeploymentConfig } from './types.js';

/** Who lists every principal's operations, and when open work counts as stuck. */
export function listingDeps(config: Pick<DeploymentConfig, 'operators' | 'stuck'>): { operators: ReadonlySet<string>; stuckBounds: StuckBounds } {
  return { operators: new Set(config.operators ?? []), stuckBounds: { ...stuckBoundsDefault, ...config.stuck } };
}
