/**
 * Completion rules as the property tests draw them, and the plain reference they check the
 * runtime against: a rule's vote threshold counted out, with no division to round and nothing of
 * src/contract/completion.ts.
 */
import fc from 'fast-check';

export type Completion =
  | { mode: 'first-success' }
  | { mode: 'quorum'; count: number }
  | { mode: 'quorum'; fraction: { num: number; den: number } }
  | { mode: 'all-successful' }
  | { mode: 'all-terminal' };

/** The votes `completion` needs of `units` units: the smallest count whose share reaches a quorum fraction, by counting. */
export function referenceThreshold(completion: Completion, units: number): number {
  if (completion.mode === 'first-success') return 1;
  if (completion.mode !== 'quorum') return units;
  if ('count' in completion) return completion.count;
  let votes = 0;
  while (votes * completion.fraction.den < units * completion.fraction.num) votes++;
  return votes;
}

/** Any completion rule over `peers` units: a quorum by count up to `peers`, or by a fraction num/den of at most 1 with den up to `denMax`. */
export const completionArb = (peers: number, denMax: number): fc.Arbitrary<Completion> =>
  fc.oneof(
    fc.constant({ mode: 'first-success' as const }),
    fc.integer({ min: 1, max: peers }).map((count) => ({ mode: 'quorum' as const, count })),
    fc
      .tuple(fc.integer({ min: 1, max: denMax }), fc.integer({ min: 1, max: denMax }))
      .filter(([n, d]) => n <= d)
      .map(([num, den]) => ({ mode: 'quorum' as const, fraction: { num, den } })),
    fc.constant({ mode: 'all-successful' as const }),
    fc.constant({ mode: 'all-terminal' as const }),
  );
