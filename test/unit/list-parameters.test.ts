/**
 * The list parameters and cursors both lists share (runtime/list-parameters.ts): a cursor is the
 * list's own (an operation's is never taken for an instance's, nor the other way), has one
 * spelling, and round-trips its position; the shared parameters are checked the same way for
 * both lists, every problem named at once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdapterError } from '../../src/contract/errors.js';
import { decodeCursor, encodeCursor, parseListParameters } from '../../src/runtime/operation-list.js';
import { decodeWorkflowCursor, encodeWorkflowCursor, parseWorkflowListParameters } from '../../src/runtime/workflow-list.js';

const operationId = `op${'ab'.repeat(32)}`;
const instanceId = `wf${'cd'.repeat(32)}`;

/** The same bytes spelled otherwise: the last character's two unused bits set. */
function respelled(cursor: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(cursor.at(-1)!);
  return cursor.slice(0, -1) + alphabet[last | 3];
}

const invalid = (fn: () => unknown, pattern: RegExp) =>
  assert.throws(fn, (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input' && pattern.test(error.message));

test('list cursors: each list takes its own, round-trips the position and has one spelling', () => {
  const operation = encodeCursor({ admittedAtMs: -5, operationId });
  const instance = encodeWorkflowCursor({ startedAtMs: 1_700_000_000_000, instanceId });
  assert.deepEqual(decodeCursor(operation), { admittedAtMs: -5, operationId });
  assert.deepEqual(decodeWorkflowCursor(instance), { startedAtMs: 1_700_000_000_000, instanceId });
  assert.equal(decodeCursor(instance), undefined, "an instance's cursor is not an operation's");
  assert.equal(decodeWorkflowCursor(operation), undefined, "an operation's cursor is not an instance's");
  assert.notEqual(respelled(operation), operation);
  assert.equal(decodeCursor(respelled(operation)), undefined, 'a second spelling of the same position is refused');
  assert.equal(decodeWorkflowCursor(respelled(instance)), undefined);
  assert.equal(parseListParameters({ cursor: operation }).cursor, operation);
  invalid(() => parseListParameters({ cursor: instance }), /cursor is not one a list page returned/);
  invalid(() => parseWorkflowListParameters({ cursor: operation }), /cursor is not one a list page returned/);
});

test('list parameters: the shared ones are checked alike for both lists, every problem named at once', () => {
  for (const parse of [parseListParameters, parseWorkflowListParameters]) {
    assert.deepEqual(parse({ since: '2026-01-31T12:00:00Z', until: '1800000000000', limit: '7', stuck: 'true' }), {
      limit: 7,
      sinceMs: Date.parse('2026-01-31T12:00:00Z'),
      untilMs: 1_800_000_000_000,
      stuck: true,
    });
    assert.equal(parse({}).limit, 50);
    invalid(
      () => parse({ since: 20, until: 10, limit: 0, stuck: 'maybe', bogus: 1 }),
      /unknown parameter "bogus".*since must be before until.*limit must be an integer from 1.*stuck must be true, false or a reason/,
    );
  }
  assert.equal(parseListParameters({ stuck: 'lease-expired' }).stuck, 'lease-expired');
  invalid(() => parseWorkflowListParameters({ stuck: 'outbox-pending' }), /stuck must be/);
});

test('list parameters: a refusal quotes what it was given only in part, however much a caller sends, and names every problem still', () => {
  const long = 'x'.repeat(8000);
  const many = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`${long.slice(0, 300)}${i}`, '1']));
  for (const parse of [parseListParameters, parseWorkflowListParameters]) {
    for (const raw of [{ limit: long }, { since: long, until: long, stuck: long }, { [long]: '1' }, many]) {
      assert.throws(
        () => parse(raw),
        (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input' && error.message.length < 2048,
        `${Object.keys(raw).length} parameters, ${JSON.stringify(raw).length} characters`,
      );
    }
    invalid(() => parse({ limit: long }), /^invalid-input: list parameters: limit must be an integer from 1 to \d+ \(got "x{60}…" \(8000 characters\)\)$/);
    invalid(() => parse(many), /unknown parameters "x{60}…" \(301 characters\), "x{60}…" \(301 characters\), .* and 195 more \(known: /);
    invalid(
      () => parse({ since: long, limit: '0', colour: 'red' }),
      /unknown parameter "colour".*since must be.*limit must be an integer from 1 to \d+ \(got "0"\)/,
    );
  }
  invalid(() => parseWorkflowListParameters({ status: long }), /status must be one of .* \(got "x{60}…" \(8000 characters\)\)$/);
  invalid(() => parseListParameters({ phase: long }), /phase must be one of .* \(got "x{60}…" \(8000 characters\)\)$/);
});
