/**
 * The completion modes a bundle may declare, as one table: for each mode, the JSON Schema of its
 * shapes, the rule the schema cannot state, how people read it, the threshold the manifest
 * freezes at admission and which closing rule decides it (the closing rules themselves, over a
 * tally of votes, are src/projections/completion-rules.ts). The `Completion` and
 * `CompletionMode` types, the bundle's and the manifest's completion schema are all derived from
 * this table: a new mode is one entry here, and its tests.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import { assert } from './errors.js';
import { limits } from './limits.js';

/** How a decision closes from its tally: at a threshold of success votes, or when every unit is terminal. */
export type ClosingRuleName = 'threshold' | 'collection';

/** The closed object schema of one completion shape: the mode and its own properties, all required. */
export interface ClosedSchema<M extends string, P extends Record<string, JSONSchema>> {
  readonly type: 'object';
  readonly required: readonly ('mode' | (keyof P & string))[];
  readonly additionalProperties: false;
  readonly properties: { readonly mode: { readonly const: M } } & P;
}

function closed<M extends string, P extends Record<string, JSONSchema>>(mode: M, properties: P): ClosedSchema<M, P> {
  return { type: 'object', required: ['mode', ...Object.keys(properties)], additionalProperties: false, properties: { mode: { const: mode }, ...properties } };
}

/** The shapes a mode's variants accept: one closed object per variant. */
type ShapeOf<M extends string, V extends readonly object[]> = {
  [I in keyof V]: V[I] extends Record<string, JSONSchema> ? FromSchema<ClosedSchema<M, V[I]>> : never;
}[number];

interface ModeRules<C> {
  /** What the schema cannot state; undefined when the completion is fine. */
  problem?(completion: C): string | undefined;
  /** Compact, as `bundle check` prints it ("quorum 2/3"); the mode's name when absent. */
  describe?(completion: C): string;
  /** In words, as the demo headlines it ("first success"). */
  readonly title: string;
  /** The success votes needed among `units` units, frozen in the manifest at admission. */
  threshold(completion: C, units: number): number;
  readonly closes: ClosingRuleName;
}

interface ModeEntry<M extends string, V extends readonly object[]> extends ModeRules<ShapeOf<M, V>> {
  readonly name: M;
  /** The properties of each variant beside `mode`. */
  readonly variants: V;
  /** The closed object schemas of this mode (one per variant), joined in `completionSchema`. */
  readonly schemas: { readonly [I in keyof V]: V[I] extends Record<string, JSONSchema> ? ClosedSchema<M, V[I]> : never };
}

/** One mode: its name, the extra properties of each variant of its shape, and its rules typed by that shape. */
function mode<const M extends string, const V extends readonly object[]>(name: M, variants: V, rules: ModeRules<NoInfer<ShapeOf<M, V>>>): ModeEntry<M, V> {
  const schemas = variants.map((properties) => closed(name, properties as Record<string, JSONSchema>)) as unknown as ModeEntry<M, V>['schemas'];
  return { name, variants, schemas, ...rules };
}

/** The table, with each key checked to be its entry's mode name. */
function modes<T extends { readonly [K in keyof T]: { readonly name: K } }>(table: T): T {
  return table;
}

/**
 * Quorum threshold as an exact integer: count as given; a fraction num/den of the units needs
 * ceil(units·num/den) votes. Inputs are bounded (units ≤ branchesMax, den ≤ 10^6), so the
 * product stays far below 2^53; asserted anyway.
 */
function quorumThreshold(completion: { count: number } | { fraction: { num: number; den: number } }, units: number): number {
  if ('count' in completion) return completion.count;
  const { num, den } = completion.fraction;
  const product = units * num;
  assert(Number.isSafeInteger(product + den), 'quorum arithmetic stays within safe integers');
  return Math.floor((product + den - 1) / den);
}

const quorumFraction = {
  type: 'object',
  required: ['num', 'den'],
  additionalProperties: false,
  properties: {
    num: { type: 'integer', minimum: 1, maximum: limits.quorumDenominatorMax },
    den: { type: 'integer', minimum: 1, maximum: limits.quorumDenominatorMax },
  },
} as const;

export const completionModes = modes({
  'first-success': mode('first-success', [{}], { title: 'first success', threshold: () => 1, closes: 'threshold' }),
  quorum: mode('quorum', [{ count: { type: 'integer', minimum: 1, maximum: limits.branchesMax } }, { fraction: quorumFraction }], {
    title: 'quorum',
    problem: (c) => ('fraction' in c && c.fraction.num > c.fraction.den ? `quorum fraction ${c.fraction.num}/${c.fraction.den} exceeds 1` : undefined),
    describe: (c) => ('count' in c ? `quorum ${c.count}` : `quorum ${c.fraction.num}/${c.fraction.den}`),
    threshold: quorumThreshold,
    closes: 'threshold',
  }),
  'all-successful': mode('all-successful', [{}], { title: 'all successful', threshold: (_, units) => units, closes: 'threshold' }),
  'all-terminal': mode('all-terminal', [{}], { title: 'all terminal', threshold: (_, units) => units, closes: 'collection' }),
});

type Modes = typeof completionModes;
export type CompletionMode = keyof Modes;
/** Every completion shape of every mode, as the schema accepts it. */
export type Completion = { [M in CompletionMode]: ShapeOf<M, Modes[M]['variants']> }[CompletionMode];
/** The completion of one mode, e.g. `CompletionOf<'quorum'>` (count or fraction). */
export type CompletionOf<M extends CompletionMode> = Extract<Completion, { mode: M }>;
type SchemaOf<M extends CompletionMode> = Modes[M]['schemas'][number];

/** The completion rule's schema: closed in every mode (the manifest freezes the same shape). */
export const completionSchema = {
  oneOf: Object.values(completionModes as unknown as Record<string, { schemas: readonly object[] }>).flatMap((entry) => entry.schemas) as unknown as readonly [
    SchemaOf<CompletionMode>,
  ],
} as const;

/** The entry of a completion's mode, typed for it (the lookup TypeScript cannot correlate itself). */
function entryOf<M extends CompletionMode>(completion: CompletionOf<M>): ModeRules<CompletionOf<M>> {
  return completionModes[completion.mode as M] as unknown as ModeRules<CompletionOf<M>>;
}

export function completionProblem(completion: Completion): string | undefined {
  return entryOf(completion).problem?.(completion);
}

export function describeCompletion(completion: Completion): string {
  return entryOf(completion).describe?.(completion) ?? completion.mode;
}

export function thresholdFor(completion: Completion, units: number): number {
  return entryOf(completion).threshold(completion, units);
}

export function closingRuleOf(completion: Completion): ClosingRuleName {
  return entryOf(completion).closes;
}

/** The mode's title in words, or the raw value for something that is not a mode. */
export function completionTitle(mode: string): string {
  return Object.hasOwn(completionModes, mode) ? completionModes[mode as CompletionMode].title : mode;
}
