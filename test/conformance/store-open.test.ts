/** openStore: each scheme opens its adapter; an unknown scheme is invalid-input. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { AdapterError } from '../../src/contract/errors.js';
import { openStore } from '../../src/adapters/store/open.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { startJetStreamServer } from '../support/jetstream-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;
const clock = new VirtualClock();

test('openStore: memory: and sqlite:PATH open their adapters', async () => {
  const memory = await openStore('memory:', { clock });
  assert.equal(memory.name, 'memory');
  await memory.close();
  const dir = await mkdtemp(join(tmpdir(), 'convoke-open-'));
  try {
    for (const url of [`sqlite:${join(dir, 'a.db')}`, `sqlite://${join(dir, 'b.db')}`]) {
      const store = await openStore(url, { clock });
      assert.equal(store.name, 'sqlite');
      assert.equal(store.capabilities.durable, true);
      await store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('openStore: jetstream:nats://host:port?stream= opens a JetStream store', async () => {
  const server = await startJetStreamServer();
  try {
    const store = await openStore(`jetstream:${server.url}?stream=OPEN_TEST`, { clock });
    assert.equal(store.name, 'jetstream');
    assert.equal(store.capabilities.guard, 'on-fold');
    await store.close();
  } finally {
    await server.dispose();
  }
});

test('openStore: esdb:// and eventstoredb:// build an EventStoreDB store (connection is lazy)', async () => {
  for (const url of ['esdb://127.0.0.1:1?tls=false', 'eventstoredb://127.0.0.1:1?tls=false']) {
    const store = await openStore(url, { clock });
    assert.equal(store.name, 'eventstoredb');
    await store.close();
  }
});

test('openStore: an unknown scheme or a malformed URL is invalid-input', async () => {
  for (const url of ['redis://localhost', 'nope', '', 'sqlite:', 'jetstream:not a url', 'jetstream:http://x:1']) {
    await assert.rejects(openStore(url, { clock }), (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input', url);
  }
});
