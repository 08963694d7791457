/**
 * The NATS `list` command (convoke.cmd.<principal>.list) against `convoke serve` on a real
 * nats-server, core mode, SQLite store: each command principal lists only its own operations, an
 * operator principal lists all, the cursor pages, and invalid parameters answer 400 invalid-input
 * naming each problem — the same answers as GET /contract-invocations.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sendListCommand, type ListReply } from '../../src/nats-api/commands.js';
import type { ListPage } from '../../src/runtime/operation-list.js';
import { deploymentForSuite, e2eBundle, resultOf, type CommandClient } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const clients: Record<string, CommandClient> = {};
const admitted: { billing: string[]; shipping: string[] } = { billing: [], shipping: [] };

const pageOf = (reply: ListReply): ListPage => {
  if (!('page' in reply)) throw new Error(`expected a page, got ${reply.status}: ${JSON.stringify(reply.error)}`);
  return reply.page;
};
const list = (who: string, parameters: Record<string, string | number | boolean> = {}) => sendListCommand(clients[who]!.transport, who, parameters, 10_000);

deploymentForSuite(
  {
    mode: 'core',
    store: 'sqlite',
    bundle: e2eBundle(),
    groups: { reviewers: ['alfa'] },
    peers: {},
    commandClients: ['billing', 'shipping', 'ops'],
    operators: ['ops'],
  },
  {
    startUp: async (f) => {
      await f.startServe();
      for (const who of ['billing', 'shipping', 'ops']) clients[who] = await f.client(who);
      for (const [who, count] of [
        ['billing', 3],
        ['shipping', 2],
      ] as const) {
        for (let i = 0; i < count; i++) admitted[who].push(resultOf(await clients[who]!.invoke('allok', { document: `d${i}` }, { waitMs: 0 })).operationId);
      }
    },
  },
);

test('list over NATS: each principal its own operations, the operator all of them, paged by cursor', async () => {
  const billing = pageOf(await list('billing'));
  assert.deepEqual(new Set(billing.operations.map((o) => o.operationId)), new Set(admitted.billing));
  const shipping = pageOf(await list('shipping', { outcome: 'open' }));
  assert.deepEqual(new Set(shipping.operations.map((o) => o.operationId)), new Set(admitted.shipping));
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page = pageOf(await list('ops', { limit: 2, ...(cursor ? { cursor } : {}) }));
    seen.push(...page.operations.map((o) => o.operationId));
    cursor = page.nextCursor;
  } while (cursor !== null);
  assert.deepEqual(new Set(seen), new Set([...admitted.billing, ...admitted.shipping]));
  assert.equal(seen.length, 5);
});

test('list over NATS: invalid parameters are 400 invalid-input naming each problem', async () => {
  const reply = await list('billing', { phase: 'nope', limit: 0, stuck: 'sometimes' });
  assert.equal(reply.status, 400);
  assert.ok('error' in reply);
  if (!('error' in reply)) return;
  assert.equal(reply.error.kind, 'invalid-input');
  for (const fragment of ['phase must be one of', 'limit must be an integer', 'stuck must be'])
    assert.match(reply.error.description ?? '', new RegExp(fragment));
});
