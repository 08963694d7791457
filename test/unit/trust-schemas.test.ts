/**
 * Spec: "Application data is the only schema-parameterized slot; control/trust metadata cannot hide
 * arbitrary additional fields." Two proofs over every JSON Schema convoke validates with — wire
 * messages, stored events, the bundle, HTTP and command bodies, configs:
 *
 * - a walk of each schema: every object shape is closed (additionalProperties: false, or a map
 *   whose keys and values are both typed), and every open slot is one of the application-data
 *   slots listed below, each with the reason it is open;
 * - a valid example of every message kind, event type and document, into which an unknown field
 *   is put at every control object it has: each such copy is refused.
 *
 * And a stored event carrying an unknown field fails validation when the operation is read back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { adapterErrorSchema, bundleSchema, contractRefSchema, invocationRequestSchema, invocationResultSchema } from '../../src/contract/schemas.js';
import { transitionSchema } from '../../src/events/schemas.js';
import { cancelRequestSchema, cancelResultSchema, claimMessageSchema, requestMessageSchema, resultMessageSchema } from '../../src/events/wire-schemas.js';
import { healthSchema, operationParamsSchema, postInvocationSchema, waitQuerySchema } from '../../src/http/schemas.js';
import { cancelCommandSchema, commandReplySchema, getCommandSchema } from '../../src/nats-api/commands.js';
import { deploymentConfigSchema } from '../../src/deployment/config.js';
import { peerConfigSchema } from '../../src/cli/commands/peer.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { scenario } from '../support/scenario.js';

const schemas: Record<string, object> = {
  transition: transitionSchema,
  'wire.result': resultMessageSchema,
  'wire.claim': claimMessageSchema,
  'wire.cancel-result': cancelResultSchema,
  'wire.request': requestMessageSchema,
  'wire.cancel': cancelRequestSchema,
  bundle: bundleSchema,
  'contract-ref': contractRefSchema,
  'invocation-request': invocationRequestSchema,
  'invocation-result': invocationResultSchema,
  'adapter-error': adapterErrorSchema,
  'http.body': postInvocationSchema.body,
  'http.query': waitQuerySchema,
  'http.params': operationParamsSchema,
  'http.health': healthSchema,
  'cmd.get': getCommandSchema,
  'cmd.cancel': cancelCommandSchema,
  'cmd.reply': commandReplySchema,
  config: deploymentConfigSchema,
  'peer-config': peerConfigSchema,
};

/** The open slots, each with why it may be open. Anything else open is a control field that could hide data. */
const applicationData: Record<string, string> = {
  'transition.events[].input': 'the invocation input, governed by the interaction input schema',
  'transition.events[].result': 'a peer result, governed by the interaction result schema',
  'wire.result.result': 'the peer result, governed by the interaction result schema',
  'wire.request.input': 'the invocation input, governed by the interaction input schema',
  'bundle.interactions.*.input': 'a JSON Schema of application data',
  'bundle.interactions.*.result': 'a JSON Schema of application data',
  'bundle.interactions.*.output': 'a JSON Schema of application data',
  'bundle.interactions.*.success.equals': 'an application value the result is compared with',
  'bundle.interactions.*.retryable.equals': 'an application value the result is compared with',
  'bundle.pipelines.*.input': 'a JSON Schema of application data (the pipeline input)',
  'bundle.pipelines.*.transforms.*.input': 'a JSON Schema of application data (a transform input)',
  'bundle.pipelines.*.transforms.*.output': 'a JSON Schema of application data (a transform output)',
  'bundle.workflows.*':
    'a Serverless Workflow 1.0.3 document: the DSL schema governs it, checked by src/workflow/dsl (the SDK validates it; unsupported tasks refused)',
  'bundle.workflows.*.document': "the workflow document's header, governed by the DSL schema (the SDK validates it)",
  'invocation-request.input': 'the invocation input, governed by the interaction input schema',
  'invocation-request.manifest': 'prohibited: named so that supplying it is refused as denied',
  'invocation-request.expected': 'prohibited: named so that supplying it is refused as denied',
  'invocation-request.branches': 'prohibited: named so that supplying it is refused as denied',
  'http.body.input': 'the invocation input, governed by the interaction input schema',
  'http.body.manifest': 'prohibited: named so that supplying it is refused as denied',
  'http.body.expected': 'prohibited: named so that supplying it is refused as denied',
  'http.body.branches': 'prohibited: named so that supplying it is refused as denied',
  'invocation-result.branches[].result': 'a peer result',
  'invocation-result.output': 'the aggregate, governed by the interaction output schema',
  'cmd.reply.result.branches[].result': 'a peer result',
  'cmd.reply.result.output': 'the aggregate, governed by the interaction output schema',
  'config.transport': 'closed per kind: each allOf branch (memory, nats) has additionalProperties false',
  'config.transport.kind': 'constrained by the enclosing enum',
  'config.transport.examplePeers.*': 'example results keyed by interaction id; checked against the bundles at build',
  'config.transport.examplePeers.*.*': 'an example result, checked against the interaction result schema at build',
  'peer-config.interactions.*.result': 'a result the peer answers, application data',
  'peer-config.interactions.*.rules[].result': 'a result the peer answers, application data',
  'peer-config.interactions.*.rules[].when.equals': 'an application value the input is compared with',
  'peer-config.interactions.*.rules[].when.contains': 'an application value the input is searched for',
};

type Schema = Record<string, unknown>;
const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
/** Accepts any value: no keyword but annotations. */
const acceptsAnything = (s: Schema) => Object.keys(s).every((k) => k === 'description' || k === 'title');
const describesObject = (s: Schema) => s.type === 'object' || 'properties' in s || 'required' in s;
/** Closed: nothing beyond its named properties, or a map whose keys and values are both typed. */
const closed = (s: Schema) =>
  s.additionalProperties === false ||
  ('propertyNames' in s && isSchema(s.additionalProperties) && !acceptsAnything(s.additionalProperties)) ||
  (Array.isArray(s.oneOf) && s.oneOf.every((b) => isSchema(b) && b.additionalProperties === false));

/** Every subschema with its instance path (`.name`, `[]` for items, `.*` for map values); `if` is a condition, not a shape. */
function* walk(schema: unknown, path: string): Generator<{ path: string; schema: Schema }> {
  if (!isSchema(schema)) return;
  yield { path, schema };
  for (const [name, sub] of Object.entries((schema.properties as Schema | undefined) ?? {})) yield* walk(sub, `${path}.${name}`);
  if (schema.items !== undefined) yield* walk(schema.items, `${path}[]`);
  if (isSchema(schema.additionalProperties)) yield* walk(schema.additionalProperties, `${path}.*`);
  for (const key of ['oneOf', 'anyOf', 'allOf'] as const) for (const sub of (schema[key] as unknown[] | undefined) ?? []) yield* walk(sub, path);
  for (const key of ['then', 'else'] as const) yield* walk(schema[key], path);
}

test('control and trust metadata is closed in every schema: the only open slots are the listed application-data slots', () => {
  const open = new Set<string>();
  for (const [name, schema] of Object.entries(schemas)) {
    for (const { path, schema: s } of walk(schema, name)) {
      if (acceptsAnything(s) || (describesObject(s) && !closed(s))) open.add(path);
    }
  }
  const unexpected = [...open].filter((path) => !(path in applicationData));
  assert.deepEqual(unexpected, [], `open control slots: ${unexpected.join(', ')}`);
  // The list holds no stale entries: every slot named there is found open by the walk.
  assert.deepEqual(
    Object.keys(applicationData).filter((path) => !open.has(path)),
    [],
  );
});

// ── examples ─────────────────────────────────────────────────────────────────

const opId = `op${'a'.repeat(64)}`;
const digest = `sha256:${'0'.repeat(64)}`;
const hex = 'b'.repeat(64);
const ref = { branchId: 'alfa', attempt: 1, fence: 1 };
const contract = { id: 'lab.review', version: '1.0.0', digest };
const transition = (...events: JsonObject[]): JsonObject => ({
  events,
  timeGuard: { notBeforeMs: 0, notAfterMs: 10 },
  causation: { command: 'test', messageId: 'm' },
});

const admitted: JsonObject = {
  type: 'operation-admitted',
  v: 1,
  operationId: opId,
  principalId: 'svc-a',
  senderPeerId: null,
  contract,
  interaction: 'review',
  subjectNamespace: 'demo.v1.lab',
  invocationKey: 'k',
  inputDigest: digest,
  input: { document: 'd' },
  timeoutMs: 5000,
  manifest: {
    delivery: 'independent',
    completion: { mode: 'quorum', fraction: { num: 2, den: 3 } },
    votes: 'distinct-branches',
    units: 1,
    threshold: 1,
    onTimeout: 'partial',
    siblings: 'cancel',
    waitFor: 'decision',
    attemptsMax: 1,
    leaseMs: 1000,
    renewIntervalMs: 500,
    retryBackoffMs: 0,
    cancelTimeoutMs: 1000,
    settlementGraceMs: 0,
    branches: [{ branchId: 'alfa', peerId: 'alfa' }],
    peers: ['alfa'],
    eligible: ['alfa'],
  },
  revisions: { directory: 'bundle', policy: '1' },
  authorizations: [{ peerId: 'alfa', revision: '1', expiresAtMs: 10 }],
  outbox: [{ branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, publicationId: hex }],
};

const events: JsonObject[] = [
  admitted,
  { type: 'dispatch-recorded', v: 1, ...ref, receipt: 'stored' },
  { type: 'result-accepted', v: 1, ...ref, peerId: 'alfa', status: 'success', retryable: false, retryAtMs: null, result: { verdict: 'approve' }, subject: 's' },
  { type: 'result-rejected', v: 1, reason: 'late', subject: 's', branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, detail: 'd' },
  { type: 'protocol-conflict-recorded', v: 1, ...ref, peerId: 'alfa', subject: 's', resultDigest: digest, detail: 'd' },
  { type: 'lease-renewed', v: 1, ...ref, leaseUntilMs: 5 },
  { type: 'claim-ended', v: 1, ...ref, cause: 'released', retryAtMs: null },
  { type: 'branch-reassigned', v: 1, branchId: 'alfa', attempt: 2, fence: 2, peerId: 'bravo', publicationId: hex },
  { type: 'branch-failed', v: 1, ...ref, reason: 'no-eligible-peer' },
  { type: 'branch-revoked', v: 1, ...ref, policyRevision: '2', reason: 'r' },
  { type: 'cancel-dispatched', v: 1, ...ref, receipt: 'sent' },
  { type: 'cancel-result-accepted', v: 1, ...ref, outcome: 'stopped' },
  { type: 'cancel-withdrawn', v: 1, ...ref, reason: 'request-never-sent' },
  { type: 'cancel-timed-out', v: 1, branchIds: ['alfa'] },
  {
    type: 'decision-closed',
    v: 1,
    outcome: 'success',
    reason: 'threshold',
    successVotes: 1,
    failedUnits: 0,
    siblings: [{ branchId: 'bravo', disposition: 'cancel-requested' }],
  },
  { type: 'settlement-completed', v: 1, status: 'complete' },
];

const peerMessage = { operationId: opId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1 };
const invocationResult: JsonObject = {
  operationId: opId,
  contract,
  interaction: 'review',
  invocationKey: 'k',
  phase: 'settled',
  admittedAtMs: 0,
  deadlineMs: 5,
  decision: { outcome: 'success', reason: 'threshold', closedAtMs: 1, successVotes: 1, failedUnits: 0, units: 1, threshold: 1 },
  settlement: { status: 'complete', siblings: [{ branchId: 'bravo', disposition: 'cancel-requested', outcome: 'stopped' }] },
  branches: [{ branchId: 'alfa', peerId: 'alfa', status: 'success', attempt: 1, fence: 1, result: { verdict: 'approve' } }],
  output: { counts: { approve: 1 }, total: 1 },
  outputError: { kind: 'invalid-input', description: 'd' },
};
const config = (transport: JsonObject): JsonObject => ({
  store: 'memory:',
  transport,
  bundles: ['b.json'],
  directory: { groups: { reviewers: ['alfa'] } },
  policy: { rules: [{ effect: 'allow', principals: ['svc-a'] }], ttlMs: 1000 },
  attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true, exceptions: [{ principal: 'ops', attested: true }] }],
  deployment: { account: 'a', system: 's', domain: 'd' },
  http: {
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 65536,
    waitMsMax: 1000,
    principals: [{ principalId: 'web', tokenSha256: hex }],
    jwt: { issuer: 'i', audience: 'a', jwksFile: 'k.json' },
  },
  resultBatchMs: 0,
});

/** [schema, what, a valid example] for every message kind, event type and document. */
const examples: [string, string, JsonObject][] = [
  ...events.map((e): [string, string, JsonObject] => ['transition', `event ${e.type as string}`, transition(e)]),
  ['wire.result', 'result message', { kind: 'result', ...peerMessage, result: { verdict: 'approve' } }],
  ['wire.claim', 'claim message', { kind: 'claim', action: 'renew', ...peerMessage }],
  ['wire.cancel-result', 'cancel result', { kind: 'cancel-result', ...peerMessage, outcome: 'already-completed' }],
  [
    'wire.request',
    'request message',
    {
      kind: 'request',
      ...peerMessage,
      contract,
      interaction: 'review',
      deadlineMs: 5,
      leaseUntilMs: 5,
      renewIntervalMs: 1,
      publicationId: hex,
      input: { document: 'd' },
    },
  ],
  ['wire.cancel', 'cancel request', { kind: 'cancel', ...peerMessage, reason: 'decision-closed' }],
  [
    'bundle',
    'bundle',
    reviewBundle({
      retryable: { pointer: '/verdict', equals: 'retry' },
      branches: [{ branchId: 'x', peerId: 'alfa' }],
      delivery: 'explicit',
      audience: { peers: ['alfa'] },
    }),
  ],
  ['bundle', 'bundle (fraction quorum)', reviewBundle({ completion: { mode: 'quorum', fraction: { num: 1, den: 2 } } })],
  ['http.body', 'InvocationRequest', { contract, interaction: 'review', invocationKey: 'k', input: { document: 'd' }, waitFor: 'settled', waitMs: 1 }],
  ['invocation-result', 'InvocationResult', invocationResult],
  ['adapter-error', 'AdapterError', { kind: 'denied', description: 'd' }],
  ['http.query', 'GET query', { waitFor: 'decision', waitMs: '5' }],
  ['http.params', 'GET params', { operationId: opId }],
  ['cmd.get', 'get command', { operationId: opId, waitFor: 'decision', waitMs: 5 }],
  ['cmd.cancel', 'cancel command', { operationId: opId }],
  ['cmd.reply', 'command reply (result)', { status: 200, result: invocationResult }],
  ['cmd.reply', 'command reply (error)', { status: 409, error: { kind: 'conflict' } }],
  ['config', 'deployment config (memory)', config({ kind: 'memory', examplePeers: { alfa: { delayMs: 5, review: { verdict: 'approve' } } } })],
  [
    'config',
    'deployment config (nats)',
    config({ kind: 'nats', servers: 'nats://x', user: 'u', passwordEnv: 'P', mode: 'durable', durable: { duplicateWindowMs: 1000 } }),
  ],
  [
    'peer-config',
    'peer config',
    {
      peerId: 'alfa',
      namespace: 'demo.v1.lab',
      nats: { servers: 'nats://x', passwordEnv: 'P' },
      durable: false,
      interactions: { review: { result: { verdict: 'approve' }, rules: [{ when: { pointer: '/x', equals: 1 }, result: { verdict: 'reject' } }] } },
      faults: { crashAfterEffect: false },
    },
  ],
];

/** Keys whose values are application data (or, under examplePeers, keyed by interaction id): no control object inside. */
const dataKeys = new Set(['input', 'result', 'output', 'equals', 'contains', 'examplePeers']);

/** Every control object of a value, as a path of keys and indexes from the root (the root included). */
function controlObjects(value: JsonValue, path: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((item, i) => controlObjects(item, [...path, i]));
  if (typeof value !== 'object' || value === null) return [];
  const found: (string | number)[][] = [path];
  for (const [key, sub] of Object.entries(value)) if (!dataKeys.has(key)) found.push(...controlObjects(sub, [...path, key]));
  return found;
}

function withUnknownField(value: JsonObject, path: (string | number)[]): JsonObject {
  const copy = structuredClone(value);
  let target: JsonValue = copy;
  for (const step of path) target = (target as Record<string | number, JsonValue>)[step]!;
  (target as JsonObject).trustMe = true;
  return copy;
}

test('an unknown field is refused in every control object of every message kind, event type and document', () => {
  const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, discriminator: true });
  const validators = new Map(Object.entries(schemas).map(([name, schema]) => [name, ajv.compile(withoutId(schema))]));
  const covered = new Set<string>();
  for (const [name, what, example] of examples) {
    const validate = validators.get(name)!;
    assert.ok(validate(example), `${what} example is valid: ${JSON.stringify(validate.errors)}`);
    for (const path of controlObjects(example)) {
      const where = `${what} at /${path.join('/')}`;
      assert.equal(validate(withUnknownField(example, path)), false, `${where}: an unknown field must be refused`);
      covered.add(where);
    }
  }
  // The places that were open before: a request's contract and the manifest's completion rule.
  assert.ok(covered.has('request message at /contract'));
  assert.ok(covered.has('event operation-admitted at /events/0/manifest/completion'));
  assert.ok(covered.has('event operation-admitted at /events/0/manifest/completion/fraction'));
  const eventTypes = new Set(events.map((e) => e.type));
  assert.equal(eventTypes.size, 16, 'one example per event type');
});

function withoutId(schema: object): object {
  const { $id: _ignored, ...rest } = schema as { $id?: string };
  return rest;
}

test('a stored event with an unknown control field fails validation when the operation is read back', async () => {
  const s = await scenario({ peers: 3 });
  const { result } = await s.invoke('k');
  await s.settle();
  const read = await s.store.read(result.operationId);
  assert.ok(read.kind === 'ok');
  const admission = read.transitions[0]!.transition;
  for (const [where, tamper] of [
    ['the manifest completion', (e: JsonObject) => void (((e.manifest as JsonObject).completion as JsonObject).trustMe = true)],
    ['the contract', (e: JsonObject) => void ((e.contract as JsonObject).trustMe = true)],
    ['the event', (e: JsonObject) => void (e.extra = 1)],
  ] as const) {
    const tampered = structuredClone(admission);
    tamper(tampered.events[0] as unknown as JsonObject);
    // The store checks only the envelope, as every store does; the runtime validates the events on read.
    const store = new MemoryEventStore({ clock: s.clock });
    assert.equal((await store.create(result.operationId, tampered)).kind, 'ok');
    const reader = await createEmbedded({ clock: s.clock, bundle: reviewBundle(), groups: { reviewers: ['alfa', 'bravo', 'charlie'] }, store });
    await assert.rejects(
      reader.coordinator.get('svc-a', result.operationId),
      (e: unknown) => e instanceof AdapterError && e.kind === 'unavailable' && /fails its schema/.test(e.description ?? ''),
      where,
    );
    await reader.close();
  }
});
