/**
 * A CloudEvent's `time` names an instant (RFC 3339): its form and its calendar — a month of the
 * year, a day of that month, an hour, minute and second of the day, an offset within a day. An
 * attribute whose name the JSON format does not allow is refused by its name.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cloudEventProblem } from '../../src/contract/cloudevents.js';
import type { JsonValue } from '../../src/contract/json.js';

const event = (time: string) => ({ specversion: '1.0', id: 'e1', source: 'https://convoke.dev/test', type: 'com.example.placed', time, data: {} });

test("a CloudEvent's time is taken when it names an instant, refused when its form does but its calendar does not", () => {
  for (const time of ['2026-12-06T08:00:00Z', '2026-12-06t08:00:00.123456z', '2024-02-29T23:59:59+01:00', '2026-12-31T23:59:60Z'])
    assert.equal(cloudEventProblem(event(time)), undefined, time);
  for (const time of [
    '2026-13-45T99:99:99Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T12:00:00Z',
    '2026-12-06T24:00:00Z',
    '2026-12-06T08:60:00Z',
    '2026-12-06T08:00:00+24:00',
  ]) {
    const problem = cloudEventProblem(event(time));
    assert.ok(problem?.includes('/time'), `${time}: ${problem}`);
  }
  // The form alone is still RFC 3339's: a space for the T, or no offset, is refused.
  for (const time of ['2026-12-06 08:00:00Z', '2026-12-06T08:00:00']) assert.ok(cloudEventProblem(event(time))?.includes('/time'), time);
});

test('an attribute whose name the JSON format does not allow is refused by its name', () => {
  for (const name of ['Amount', 'a_b', 'averyveryverylongattributename']) {
    const problem = cloudEventProblem({ ...event('2026-12-06T08:00:00Z'), [name]: 'x' });
    assert.equal(problem, `(root) property name ${JSON.stringify(name)} must match pattern "^(?:[a-z0-9]{1,20}|data_base64)$"`, name);
  }
  const two = cloudEventProblem({ ...event('2026-12-06T08:00:00Z'), Amount: 'x', 'a.b': 'y' });
  assert.match(two ?? '', /property name "Amount" must match .*; \(root\) property name "a\.b" must match/);
});

test("an attribute's value outside the CloudEvents type system is refused by the attribute's name", () => {
  const base = event('2026-12-06T08:00:00Z');
  // Strings: no control character (U+0000–U+001F, U+007F–U+009F), no noncharacter, no lone surrogate.
  for (const [name, value, shown] of [
    ['subject', 'order\n42', 'U+000A'],
    ['id', 'e\u00001', 'U+0000'],
    ['subject', 'caf\u0085', 'U+0085'],
    ['traceparent', 'abc\u007f', 'U+007F'],
    ['subject', 'a\ufffe', 'U+FFFE'],
    ['subject', 'a\ufdd0', 'U+FDD0'],
    ['subject', 'a\u{1fffF}', 'U+1FFFF'],
    ['subject', 'a\ud800b', 'U+D800'],
  ] as const) {
    const problem = cloudEventProblem({ ...base, [name]: value });
    assert.ok(problem?.includes(`/${name}`) && problem.includes(shown), `${name} ${JSON.stringify(value)}: ${problem}`);
  }
  // Integers: 32-bit signed.
  for (const value of [2_147_483_648, -2_147_483_649, Number.MAX_SAFE_INTEGER]) {
    const problem = cloudEventProblem({ ...base, amount: value });
    assert.ok(problem?.includes('/amount') && problem.includes('-2147483648'), `${value}: ${problem}`);
  }
  // At the edges, and in data (which is the application's, not an attribute), they pass.
  const edges: Record<string, JsonValue>[] = [
    { amount: 2_147_483_647 },
    { amount: -2_147_483_648 },
    { subject: 'tab-free \u00a0 \u{1f600} \ufffd' },
    { data: { note: 'line\nbreak \u0000' } },
  ];
  for (const extra of edges) assert.equal(cloudEventProblem({ ...base, ...extra }), undefined, JSON.stringify(extra));
});
