/**
 * When work counts as stuck for `convoke list` and `convoke workflow list`: the bounds of the
 * deployment's config (`stuck` for operations, `workflows.stuck` for workflow instances) when
 * `--config` names it, as `convoke serve` on that config counts them (its metrics, its list
 * routes); the built-in defaults otherwise. Absent fields take the defaults, as serve does.
 */
import type { Command } from 'commander';
import { stuckBoundsDefault, type StuckBounds } from '../events/operation-index.js';
import { workflowStuckBoundsDefault, type WorkflowStuckBounds } from '../events/workflow-index.js';

export interface ListingBounds {
  operations: StuckBounds;
  workflows: WorkflowStuckBounds;
}

/** --config: the deployment config whose stuck bounds a list applies. */
export function stuckConfigOption(command: Command): Command {
  return command.option(
    '--config <file>',
    "the deployment's config (as given to convoke serve): its stuck bounds (stuck, workflows.stuck) decide what counts as stuck (default: the built-in bounds)",
  );
}

/** The bounds of the config file, read and checked as serve reads it (a bad file is invalid-input, exit 2); the defaults without one. */
export async function listingBounds(configFile: string | undefined): Promise<ListingBounds> {
  if (configFile === undefined) return { operations: stuckBoundsDefault, workflows: workflowStuckBoundsDefault };
  // Loaded only when used: the config's schemas are most of the deployment wiring's start-up.
  const { readDeploymentConfig } = await import('../deployment/config.js');
  const config = await readDeploymentConfig(configFile);
  return {
    operations: { ...stuckBoundsDefault, ...config.stuck },
    workflows: { ...workflowStuckBoundsDefault, ...config.workflows?.stuck },
  };
}
