/**
 * What an interaction needs of the deployment, checked at admission before any state or send
 * (spec: "Reject ... unavailable delivery/verification/ownership capabilities", "Unsupported
 * capabilities fail before dispatch", "Providers advertise result-fencing and effect-fencing
 * separately"). A missing capability is `unsupported`, with the reason.
 */
import type { CompiledBundle, CompiledInteraction } from '../contract/bundle.js';
import { unsupported } from '../contract/errors.js';
import type { CoordinatorDeps } from './host.js';

export function checkCapabilities(deps: CoordinatorDeps, bundle: CompiledBundle, interaction: CompiledInteraction): void {
  const problem = capabilityProblem(deps, bundle, interaction);
  if (problem !== undefined) throw unsupported(`interaction "${interaction.id}" of ${bundle.ref.id}: ${problem}`);
}

function capabilityProblem(deps: CoordinatorDeps, bundle: CompiledBundle, interaction: CompiledInteraction): string | undefined {
  const namespace = bundle.bundle.subjectNamespace;
  const unverifiable = deps.verifier.namespaceProblem(namespace);
  if (unverifiable !== undefined) return `result publishers cannot be verified (${unverifiable}), so every result would be rejected`;
  const spec = interaction.spec;
  // With one attempt there is only fence 1; a retry or reassignment makes older fences stale.
  if (spec.attempts > 1 && !deps.transport.capabilities.resultFencing)
    return `${spec.attempts} attempts need result fencing, which the transport does not advertise`;
  if (spec.effects === 'fenced' && deps.effectFencing?.(namespace) !== true)
    return `fenced effects need effect sinks that advertise effect fencing, which this deployment does not for namespace ${namespace}`;
  return undefined;
}

/**
 * Effect fencing as the operator attests it, per subject namespace. The coordinator cannot observe
 * a remote peer's effect sink, so — like publisher exclusivity — it is the operator's statement
 * that every peer serving that namespace commits its effects through a sink that rejects older
 * fences and honours the operation/branch key atomically.
 */
export function attestedEffectFencing(attestations: readonly { namespace: string; effectFencing?: boolean }[]): (namespace: string) => boolean {
  const fenced = new Set(attestations.filter((a) => a.effectFencing === true).map((a) => a.namespace));
  return (namespace) => fenced.has(namespace);
}
