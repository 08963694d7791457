/**
 * The completion modes a bundle may declare, as one table: for each mode, its JSON Schema
 * variants, the rule the schema cannot state, and how people read it. The decision side of each
 * mode (its threshold and when it closes) is the table in src/projections/completion-rules.ts.
 * Both are keyed by `CompletionMode`, so a mode added to the type without an entry in either
 * table does not compile: a new mode is one entry here, one there, and their tests.
 */
import type { JSONSchema } from 'json-schema-to-ts';
import { limits } from './limits.js';
import type { Completion, CompletionMode } from './types.js';

/** The completion of one mode, e.g. `CompletionOf<'quorum'>` (count or fraction). */
export type CompletionOf<M extends CompletionMode> = Extract<Completion, { mode: M }>;

interface CompletionSyntax<M extends CompletionMode> {
  /** The closed object schemas of this mode (one per shape), joined in `completionSchema`. */
  readonly schemas: readonly object[];
  /** What the schema cannot state; undefined when the completion is fine. */
  problem(completion: CompletionOf<M>): string | undefined;
  /** Compact, as `bundle check` prints it ("quorum 2/3"). */
  describe(completion: CompletionOf<M>): string;
  /** In words, as the demo headlines it ("first success"). */
  readonly title: string;
}

/** A closed object schema of one completion shape, typed exactly (the Completion type is checked against it). */
function closed<const M extends CompletionMode, const P extends Record<string, JSONSchema> = Record<never, never>>(mode: M, properties?: P) {
  return {
    type: 'object',
    required: ['mode', ...Object.keys(properties ?? {})] as readonly ('mode' | (keyof P & string))[],
    additionalProperties: false,
    properties: { mode: { const: mode }, ...properties } as { mode: { const: M } } & P,
  } as const;
}

const quorumSchemas = [
  closed('quorum', { count: { type: 'integer', minimum: 1, maximum: limits.branchesMax } }),
  closed('quorum', {
    fraction: {
      type: 'object',
      required: ['num', 'den'],
      additionalProperties: false,
      properties: {
        num: { type: 'integer', minimum: 1, maximum: limits.quorumDenominatorMax },
        den: { type: 'integer', minimum: 1, maximum: limits.quorumDenominatorMax },
      },
    },
  }),
] as const;

const plain = (mode: CompletionMode, title: string) => ({ schemas: [closed(mode)], problem: () => undefined, describe: () => mode, title });

export const completionModes: { readonly [M in CompletionMode]: CompletionSyntax<M> } = {
  'first-success': plain('first-success', 'first success'),
  quorum: {
    schemas: quorumSchemas,
    problem: (c) => ('fraction' in c && c.fraction.num > c.fraction.den ? `quorum fraction ${c.fraction.num}/${c.fraction.den} exceeds 1` : undefined),
    describe: (c) => ('count' in c ? `quorum ${c.count}` : `quorum ${c.fraction.num}/${c.fraction.den}`),
    title: 'quorum',
  },
  'all-successful': plain('all-successful', 'all successful'),
  'all-terminal': plain('all-terminal', 'all terminal'),
};

/** The entry of a completion's mode, typed for it (the lookup TypeScript cannot correlate itself). */
function syntaxOf<M extends CompletionMode>(completion: CompletionOf<M>): CompletionSyntax<M> {
  return completionModes[completion.mode as M] as CompletionSyntax<M>;
}

/** The completion rule's schema: closed in every mode (the manifest freezes the same shape). */
export const completionSchema = {
  oneOf: [closed('first-success'), ...quorumSchemas, closed('all-successful'), closed('all-terminal')],
} as const;

export function completionProblem(completion: Completion): string | undefined {
  return syntaxOf(completion).problem(completion);
}

export function describeCompletion(completion: Completion): string {
  return syntaxOf(completion).describe(completion);
}

/** The mode's title in words, or the raw value for something that is not a mode. */
export function completionTitle(mode: string): string {
  return Object.hasOwn(completionModes, mode) ? completionModes[mode as CompletionMode].title : mode;
}
