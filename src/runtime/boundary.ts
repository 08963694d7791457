/**
 * The waitFor rule shared by every facade (HTTP, NATS commands): the effective boundary is the
 * stronger of the caller's and the contract's — a caller may strengthen decision to settled,
 * never weaken settled to decision (spec: "Workflows and the execution boundary").
 */
import type { BundleRegistry } from '../contract/bundle.js';
import { invalidInput } from '../contract/errors.js';
import type { WaitFor } from '../contract/types.js';

/** The HTTP response header naming the boundary a POST or GET /contract-invocations answer's status (200 or 202) speaks of. */
export const waitForHeader = 'convoke-wait-for';

const strength: Record<WaitFor, number> = { decision: 0, settled: 1 };

export function effectiveBoundary(requested: WaitFor | undefined, contract: WaitFor): WaitFor {
  if (requested === undefined) return contract;
  if (strength[requested] < strength[contract]) {
    throw invalidInput(`waitFor "${requested}" would weaken the contract's boundary "${contract}"; a caller may only strengthen it`);
  }
  return requested;
}

/** The interaction's declared boundary, or undefined when the contract or interaction is not deployed (admission says why). */
export function contractBoundary(bundles: BundleRegistry, digest: string, interaction: string): WaitFor | undefined {
  return bundles.get(digest)?.interactions.get(interaction)?.spec.waitFor;
}
