/**
 * Rule: no subject a peer may publish reaches convoke's own subjects. A peer's user may publish
 * `<ns>.*.*.{result,cancel-result,claim}.<peer>`; the JetStream store captures `<prefix>.op.>` and
 * its siblings, the command API listens on `convoke.cmd.*.>`, replies go to `_INBOX.>`. A bundle
 * whose namespace starts with a reserved root (`convoke`, `_INBOX`) is refused, and so is a
 * deployment whose jetstream store prefix overlaps one of its namespaces.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { AdapterError } from '../../src/contract/errors.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { buildDeployment, parseDeploymentConfig } from '../../src/deployment/config.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { peerPermissions, commandClientPermissions } from '../../src/adapters/transport/nats-permissions.js';
import { jetstreamStorePermissions } from '../../src/deployment/nats/permissions.js';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

const invalid = (fragment: RegExp) => (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input' && fragment.test(e.message);

/** Whether some subject matches both NATS subject patterns (`*` one token, `>` one or more). */
function patternsOverlap(a: string[], b: string[]): boolean {
  if (a.length === 0 || b.length === 0) return a.length === 0 && b.length === 0;
  if (a[0] === '>') return b.length >= 1;
  if (b[0] === '>') return a.length >= 1;
  if (a[0] !== '*' && b[0] !== '*' && a[0] !== b[0]) return false;
  return patternsOverlap(a.slice(1), b.slice(1));
}
const overlap = (a: string, b: string) => patternsOverlap(a.split('.'), b.split('.'));

/** convoke's own subjects: the default store's (without the JetStream API), the command API's, the inboxes. */
const ownSubjects = [
  ...jetstreamStorePermissions().publish.filter((s) => !s.startsWith('$')),
  ...commandClientPermissions('someone').publish,
  'convoke.cmd.*.>',
  '_INBOX.>',
];

const withNamespace = (namespace: string) => ({ ...reviewBundle(), subjectNamespace: namespace });

test('the patterns used here overlap as NATS matches them (the check can fail)', () => {
  assert.ok(overlap('convoke.*.*.result.mallory', 'convoke.op.>'));
  assert.ok(overlap('_INBOX.*.*.result.mallory', '_INBOX.>'));
  assert.ok(!overlap('demo.v1.lab.*.*.result.mallory', 'convoke.op.>'));
  assert.ok(!overlap('convoke.idx.*', 'convoke.idx.a.b'));
});

test('reserved subject roots: no namespace a bundle may declare lets a peer publish onto the store, the command API or an inbox', () => {
  const token = fc.constantFrom('convoke', 'Convoke', '_INBOX', '_inbox', 'op', 'wf', 'idx', 'cmd', 'tomb', 'open', 'openset', 'demo', 'convokes', 'a');
  fc.assert(
    fc.property(fc.array(token, { minLength: 1, maxLength: 4 }), (tokens) => {
      const namespace = tokens.join('.');
      let accepted = true;
      try {
        loadBundle(withNamespace(namespace));
      } catch (error) {
        if (!invalid(/reserved subject root/)(error)) throw error;
        accepted = false;
      }
      const root = tokens[0]!.toLowerCase();
      assert.equal(accepted, root !== 'convoke' && root !== '_inbox', `namespace ${namespace}`);
      if (!accepted) return;
      const peerPublishes = peerPermissions(namespace, 'mallory').publish.filter((s) => !s.startsWith('$'));
      for (const p of peerPublishes) for (const own of ownSubjects) assert.ok(!overlap(p, own), `${namespace}: a peer may publish ${p}, which reaches ${own}`);
    }),
    { numRuns: 300, seed: 20261204 },
  );
});

test('a bundle in a reserved namespace is refused with the root named', () => {
  assert.throws(() => loadBundle(withNamespace('convoke')), invalid(/subjectNamespace.*"convoke".*reserved subject root "convoke"/));
  assert.throws(() => loadBundle(withNamespace('_INBOX.cmd')), invalid(/reserved subject root "_INBOX"/));
  assert.equal(loadBundle(withNamespace('convoker.v1')).bundle.subjectNamespace, 'convoker.v1');
});

// Bounded: with the injected clock standing still, a start-up wait measured by that clock never ended.
test('a deployment whose jetstream store prefix overlaps a bundle namespace is refused before anything is opened', { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-reserved-'));
  try {
    await writeFile(join(dir, 'b.json'), JSON.stringify(withNamespace('acme.orders')));
    // Port 9 (discard): nothing is listening, so reaching the store would fail as unavailable, not invalid-input.
    const build = (prefix: string) =>
      buildDeployment(
        parseDeploymentConfig(
          new TextEncoder().encode(
            JSON.stringify(
              minimalServeConfig({
                store: `jetstream:nats://127.0.0.1:9?prefix=${prefix}`,
                attestations: [{ namespace: 'acme.orders', exclusivePeerPublishers: true }],
              }),
            ),
          ),
          dir,
        ),
        { clock: new VirtualClock() },
      );
    for (const prefix of ['acme', 'acme.orders', 'acme.orders.x']) {
      await assert.rejects(build(prefix), invalid(/subject namespace "acme\.orders" overlaps the jetstream store's subjects/), prefix);
    }
    await assert.rejects(build('acme.billing'), (e: unknown) => e instanceof AdapterError && e.kind !== 'invalid-input');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a jetstream store prefix must be token-safe and outside _INBOX (checked before connecting)', async () => {
  for (const prefix of ['_INBOX', '_INBOX.store', 'a.>', 'a b', '']) {
    await assert.rejects(JetStreamEventStore.open({ servers: 'nats://127.0.0.1:9', subjectPrefix: prefix }), invalid(/jetstream store: prefix/), prefix);
  }
});

/** A deployment with a bundle in `acme.orders` and these workflow events settings, built in `dir`. */
const buildWithEvents = (dir: string) => (events: Record<string, unknown>) =>
  buildDeployment(
    parseDeploymentConfig(
      new TextEncoder().encode(
        JSON.stringify(minimalServeConfig({ workflows: { events }, attestations: [{ namespace: 'acme.orders', exclusivePeerPublishers: true }] })),
      ),
      dir,
    ),
    { clock: new VirtualClock() },
  );

async function inBundleDir(run: (build: ReturnType<typeof buildWithEvents>) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-reserved-'));
  try {
    await writeFile(join(dir, 'b.json'), JSON.stringify(withNamespace('acme.orders')));
    await run(buildWithEvents(dir));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

test('workflow events whose subject prefix reaches a namespace, the store or the command API are refused', () =>
  inBundleDir(async (build) => {
    for (const [prefix, reached] of [
      ['acme.orders.review', 'acme.orders'],
      ['acme', 'acme.orders'],
      ['convoke', 'convoke.op'],
      ['convoke.cmd.billing', 'convoke.cmd'],
    ] as const) {
      await assert.rejects(build({ subjectPrefix: prefix }), invalid(new RegExp(`subjectPrefix "${escaped(prefix)}" overlaps "${escaped(reached)}"`)), prefix);
    }
    // Every subject the store writes (its index snapshots too): an event publisher allowed a type
    // there, or a workflow emitting one, would write into the store's streams.
    for (const subject of jetstreamStorePermissions().publish.filter((s) => !s.startsWith('$'))) {
      const prefix = subject.replace(/\.>$/, '');
      await assert.rejects(build({ subjectPrefix: prefix }), invalid(new RegExp(`subjectPrefix "${escaped(prefix)}" overlaps`)), prefix);
    }
    for (const events of [{}, { subjectPrefix: 'acme.events' }]) {
      const deployment = await build(events);
      await deployment.close();
    }
  }));

test('workflow events whose emitted subject prefix reaches a namespace, the store, the command API, an inbox or the publishers’ space are refused', () =>
  inBundleDir(async (build) => {
    // The same roots, and the publishers' space in either direction.
    for (const [emitSubjectPrefix, reached] of [
      ['acme.orders.emitted', '"acme.orders"'],
      ['convoke', '"convoke.op"'],
      ['convoke.cmd', '"convoke.cmd"'],
      ['_INBOX.emitted', '"_INBOX"'],
      ['convoke.events.emitted', 'workflows.events.subjectPrefix "convoke.events"'],
      ['convoke.events', 'workflows.events.subjectPrefix "convoke.events"'],
    ] as const) {
      await assert.rejects(
        build({ emitSubjectPrefix }),
        invalid(new RegExp(`emitSubjectPrefix "${escaped(emitSubjectPrefix)}" overlaps ${escaped(reached)}`)),
        emitSubjectPrefix,
      );
    }
    await assert.rejects(
      build({ subjectPrefix: 'acme.events', emitSubjectPrefix: 'acme.events.emitted' }),
      invalid(/emitSubjectPrefix "acme\.events\.emitted" overlaps workflows\.events\.subjectPrefix "acme\.events"/),
    );
    await assert.rejects(
      build({ subjectPrefix: 'acme.events.outside', emitSubjectPrefix: 'acme.events' }),
      invalid(/emitSubjectPrefix "acme\.events" overlaps workflows\.events\.subjectPrefix "acme\.events\.outside"/),
    );
    for (const subject of jetstreamStorePermissions().publish.filter((s) => !s.startsWith('$'))) {
      const emitSubjectPrefix = subject.replace(/\.>$/, '');
      await assert.rejects(build({ emitSubjectPrefix }), invalid(new RegExp(`emitSubjectPrefix "${escaped(emitSubjectPrefix)}" overlaps`)), emitSubjectPrefix);
    }
    const deployment = await build({ subjectPrefix: 'acme.events', emitSubjectPrefix: 'acme.emitted' });
    await deployment.close();
  }));
