/**
 * The guard-on-fold answer rule, exhaustively over small numbers: an on-fold adapter's append
 * answer is `ok` exactly when the fold (guard.ts appliesOnFold) will apply the transition, and its
 * failure kind says why (rollback → unavailable, guard → expired). The server-clock conformance
 * runs cannot set a server clock back, so the rollback half of the rule is proven here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { appliesOnFold } from '../../src/events/guard.js';
import { advance, answerOnFold, foldPoint, noAppliedYetMs, type FoldPoint } from '../../src/adapters/store/on-fold.js';
import { makeTransition } from './store.js';

const small = fc.integer({ min: 0, max: 40 });

test('on-fold: the append answer is ok exactly when the fold applies the transition', () => {
  fc.assert(
    fc.property(small, small, small, fc.option(small, { nil: undefined }), (notBeforeMs, width, committedAtMs, lastApplied) => {
      const guard = { notBeforeMs, notAfterMs: notBeforeMs + width + 1 };
      const before: FoldPoint = {
        revision: 1,
        lastAppliedAtMs: lastApplied ?? noAppliedYetMs,
        anyApplied: lastApplied !== undefined,
        count: lastApplied === undefined ? 0 : 1,
      };
      const stored = { revision: '2', committedAtMs, transition: makeTransition(guard, 't') };
      const answer = answerOnFold(guard, '2', committedAtMs, before);
      const applies = appliesOnFold(stored, before.lastAppliedAtMs);
      assert.equal(answer.kind === 'ok', applies);
      if (committedAtMs < before.lastAppliedAtMs) assert.equal(answer.kind, 'unavailable', 'rollback');
      else if (!applies) assert.equal(answer.kind, 'expired', 'guard');
      const after = advance(before, 2, guard, committedAtMs);
      assert.equal(after.lastAppliedAtMs, applies ? committedAtMs : before.lastAppliedAtMs);
      assert.deepEqual(
        after,
        foldPoint(
          lastApplied === undefined
            ? [stored]
            : [{ ...stored, committedAtMs: lastApplied, revision: '1', transition: makeTransition({ notBeforeMs: 0, notAfterMs: 100 }, 'p') }, stored],
          2,
        ),
      );
    }),
  );
});

test('on-fold: a clock that steps back voids protected transitions until it passes the last applied stamp', () => {
  const wide = { notBeforeMs: 0, notAfterMs: 1_000 };
  let point: FoldPoint = { revision: 0, lastAppliedAtMs: noAppliedYetMs, anyApplied: false, count: 0 };
  const answers: string[] = [];
  for (const [revision, stampMs] of [
    [1, 500],
    [2, 400],
    [3, 499],
    [4, 500],
    [5, 501],
  ] as const) {
    answers.push(answerOnFold(wide, String(revision), stampMs, point).kind);
    point = advance(point, revision, wide, stampMs);
  }
  assert.deepEqual(answers, ['ok', 'unavailable', 'unavailable', 'ok', 'ok']);
});
