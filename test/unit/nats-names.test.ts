import assert from 'node:assert/strict';
import { commandSender } from '../../src/nats-api/commands.js';
import { test } from 'node:test';
import fc from 'fast-check';
import { durableLayout, durableStreamNames, durableStreamSubjects } from '../../src/adapters/transport/nats-names.js';

/** NATS subject matching, written plainly: does `pattern` match every subject `candidate` can be? */
function within(candidate: string, pattern: string): boolean {
  const a = candidate.split('.');
  const b = pattern.split('.');
  return a.length === b.length && !a.includes('>') && a.every((token, i) => b[i] === '*' || (token !== '*' && token === b[i]));
}

const namespace = 'demo.v1.lab';
const peers = ['alfa', 'bravo'];

test("streamFor places subjects and patterns exactly as each peer's streams' subject patterns do", () => {
  const layout = durableLayout(namespace, peers);
  // Any token-safe peer token has its streams (concrete subjects need no peer list).
  const expected = (candidate: string) => {
    const last = candidate.split('.').at(-1) ?? '';
    for (const peer of /^[A-Za-z0-9_-]{1,64}$/.test(last) ? [last] : []) {
      const subjects = durableStreamSubjects(namespace, peer);
      const names = durableStreamNames(namespace, peer);
      if (subjects.requests.some((p) => within(candidate, p))) return names.requests;
      if (subjects.results.some((p) => within(candidate, p))) return names.results;
    }
    return undefined;
  };
  const token = fc.constantFrom(
    'demo',
    'v1',
    'lab',
    'review',
    'op1',
    'request',
    'cancel',
    'result',
    'cancel-result',
    'claim',
    'claims',
    'alfa',
    'bravo',
    '*',
    '>',
    '',
  );
  fc.assert(
    fc.property(fc.boolean(), fc.array(token, { minLength: 0, maxLength: 6 }), (prefixed, tokens) => {
      const candidate = (prefixed ? [namespace, ...tokens] : tokens).join('.');
      assert.equal(layout.streamFor(candidate), expected(candidate), candidate);
    }),
    { numRuns: 5000 },
  );
  assert.equal(layout.streamFor(`${namespace}.review.op1.request.alfa`), durableStreamNames(namespace, 'alfa').requests);
  assert.equal(layout.streamFor(`${namespace}.review.op1.cancel-result.bravo`), durableStreamNames(namespace, 'bravo').results);
  // A peer the layout does not list still has its streams' names: its publishes wait for a storage ack.
  assert.equal(layout.streamFor(`${namespace}.review.op1.request.zulu`), durableStreamNames(namespace, 'zulu').requests);
  assert.equal(layout.streamFor(`${namespace}.review.op1.claims.alfa`), undefined);
  assert.equal(layout.streamFor(`other.v1.lab.review.op1.result.alfa`), undefined);
});

test("a pattern over every peer spans each known peer's stream with a filter narrowed to that peer", () => {
  const layout = durableLayout(namespace, peers);
  assert.deepEqual(layout.routesFor(`${namespace}.*.*.result.*`), [
    { stream: durableStreamNames(namespace, 'alfa').results, filter: `${namespace}.*.*.result.alfa`, peerId: 'alfa' },
    { stream: durableStreamNames(namespace, 'bravo').results, filter: `${namespace}.*.*.result.bravo`, peerId: 'bravo' },
  ]);
  assert.deepEqual(layout.routesFor(`${namespace}.review.*.request.alfa`), [
    { stream: durableStreamNames(namespace, 'alfa').requests, filter: `${namespace}.review.*.request.alfa`, peerId: 'alfa' },
  ]);
  assert.deepEqual(layout.routesFor(`${namespace}.*.*.*.alfa`), [], 'a pattern spanning requests and results has no one stream');
  assert.deepEqual(layout.routesFor(`${namespace}.>`), []);
  assert.equal(layout.captures(`${namespace}.review.*.claim.*`), true);
  assert.equal(layout.captures('convoke.cmd.billing.invoke'), false);
});

test('a command principal speaks as a peer only by its own commandSenders entry: inherited names read nothing', () => {
  const senders = JSON.parse('{"svc-a":"peer-a"}') as Record<string, string>;
  assert.equal(commandSender(senders, 'svc-a'), 'peer-a');
  for (const principalId of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'svc-b'])
    assert.equal(commandSender(senders, principalId), null, principalId);
  assert.equal(commandSender(undefined, 'svc-a'), null);
});
