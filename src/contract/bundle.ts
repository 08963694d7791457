/**
 * Loading a contract bundle: schema validation (every ajv error reported), profile semantics the
 * schema cannot express, defaults, canonical digest, and compiled application-data validators.
 */
import type { ValidateFunction } from 'ajv';
import { digestOf } from './canonical.js';
import { completionProblem } from './completion.js';
import { invalidInput } from './errors.js';
import { reservedNamespaceProblem } from './ids.js';
import type { JsonObject, JsonValue } from './json.js';
import { bundleSchema, interactionDefaults } from './schemas.js';
import type { ContractBundle, ContractRef, Interaction } from './types.js';
import { compileApplicationSchema, compileChecker } from './validation.js';

const checkBundle = compileChecker<ContractBundle>(bundleSchema, 'contract bundle');

export interface CompiledInteraction {
  id: string;
  spec: Interaction;
  validateInput: ValidateFunction;
  validateResult: ValidateFunction;
  validateOutput: ValidateFunction | undefined;
}

export interface CompiledBundle {
  bundle: ContractBundle;
  digest: string;
  ref: ContractRef;
  interactions: Map<string, CompiledInteraction>;
}

/** Validates a strictly parsed bundle document and compiles it. Throws AdapterError('invalid-input'). */
export function loadBundle(document: JsonValue): CompiledBundle {
  const bundle = checkBundle(structuredClone(document));
  const reserved = reservedNamespaceProblem(bundle.subjectNamespace);
  if (reserved !== undefined) throw invalidInput(`contract bundle: subjectNamespace: ${reserved}`);
  const digest = digestOf(document);
  const interactions = new Map<string, CompiledInteraction>();
  for (const [id, raw] of Object.entries(bundle.interactions)) {
    const spec: Interaction = { ...interactionDefaults, ...raw };
    checkInteractionSemantics(id, spec);
    interactions.set(id, {
      id,
      spec,
      validateInput: compileApplicationSchema(spec.input, `interactions.${id}.input`),
      validateResult: compileApplicationSchema(spec.result, `interactions.${id}.result`),
      validateOutput: spec.output ? compileApplicationSchema(spec.output, `interactions.${id}.output`) : undefined,
    });
  }
  return { bundle, digest, ref: { ...bundle.contract, digest }, interactions };
}

/** Profile rules the JSON Schema cannot state. */
function checkInteractionSemantics(id: string, spec: Interaction): void {
  const where = `interactions.${id}`;
  const fail = (message: string) => {
    throw invalidInput(`contract bundle: ${where}: ${message}`);
  };
  const completion = completionProblem(spec.completion);
  if (completion !== undefined) fail(completion);
  if (spec.delivery === 'explicit' && !spec.branches) fail('delivery "explicit" needs "branches"');
  if (spec.delivery !== 'explicit' && spec.branches) fail(`"branches" is only for delivery "explicit" (got "${spec.delivery}")`);
  if (spec.branches) {
    const ids = new Set(spec.branches.map((b) => b.branchId));
    if (ids.size !== spec.branches.length) fail('explicit branch IDs must be unique');
  }
  if (spec.renewIntervalMs >= spec.leaseMs) fail(`renewIntervalMs (${spec.renewIntervalMs}) must be below leaseMs (${spec.leaseMs})`);
  if (spec.aggregate && !spec.output) fail('"aggregate" needs an "output" schema to validate against');
  if (spec.delivery === 'one-eligible' && spec.votes === 'distinct-peers') {
    // One branch whose assignee may change: a peer vote would follow the assignee, not the branch.
    fail('delivery "one-eligible" counts distinct branches; use votes "distinct-branches"');
  }
}

/** A registry of loaded bundles, looked up by the digest a request names. */
export class BundleRegistry {
  private readonly byDigest = new Map<string, CompiledBundle>();

  add(bundle: CompiledBundle): CompiledBundle {
    this.byDigest.set(bundle.digest, bundle);
    return bundle;
  }

  get(digest: string): CompiledBundle | undefined {
    return this.byDigest.get(digest);
  }

  all(): CompiledBundle[] {
    return [...this.byDigest.values()];
  }
}

/** Reads the value at an RFC 6901 pointer; undefined when absent. */
export function valueAt(document: JsonValue, pointer: string): JsonValue | undefined {
  if (pointer === '') return document;
  let current: JsonValue | undefined = document;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key)) return undefined;
      current = current[Number(key)];
    } else if (current !== null && typeof current === 'object') {
      current = Object.prototype.hasOwnProperty.call(current, key) ? (current as JsonObject)[key] : undefined;
    } else {
      return undefined;
    }
    if (current === undefined) return undefined;
  }
  return current;
}
