/**
 * The TypeScript types of stored events, wire messages, the contract bundle, the invocation
 * request and result, and the deployment config against their JSON Schemas. The wire message
 * types, the completion shapes (contract/completion.ts) and the CLI contexts file are derived from
 * their schemas; the others are written out with their documentation (and narrower types: JSON
 * values for application data, the defaults an interaction may omit) and checked here, at compile
 * time, to be exactly what their schemas accept: a field added to, removed from or loosened in
 * either one fails `tsc` (run by `npm test`) with the event or shape named at the failing key.
 * The runtime half checks the schemas refuse what the types exclude.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { JsonValue } from '../../src/contract/json.js';
import type { AdapterErrorBody } from '../../src/contract/errors.js';
import type {
  adapterErrorSchema,
  bundleSchema,
  contractRefSchema,
  interactionSchema,
  invocationRequestSchema,
  invocationResultSchema,
  pipelineSchema,
} from '../../src/contract/schemas.js';
import type { ContractBundle, ContractRef, InteractionDeclaration, InvocationRequest, Pipeline } from '../../src/contract/types.js';
import type { deploymentConfigSchema } from '../../src/deployment/config.js';
import type { natsTransportSchema } from '../../src/deployment/nats/settings.js';
import type { DeploymentConfig, NatsTransportConfig } from '../../src/deployment/types.js';
import type { InvocationResult } from '../../src/projections/views.js';
import { transitionProblem, type eventSchemas } from '../../src/events/schemas.js';
import type { DomainEvent } from '../../src/events/types.js';
import type { resultMessageSchema } from '../../src/events/wire-schemas.js';
import type { ResultMessage } from '../../src/events/wire.js';

/** Application data (`input`, `result`) is any JSON value: `{}` in a schema, JsonValue in a type. */
type WithData<E> = { [K in keyof E]: K extends 'input' | 'result' ? JsonValue : E[K] };
type FromEach<S extends readonly unknown[]> = { [K in keyof S]: S[K] extends JSONSchema ? WithData<FromSchema<S[K]>> : never }[number];
type SchemaEvent = FromEach<typeof eventSchemas>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type EventOf<E, T> = Extract<E, { type: T }>;

/** `true` at every event type, or tsc names the event whose type and schema differ. */
const eventsMatchTheirSchemas: { [T in DomainEvent['type']]: Same<EventOf<SchemaEvent, T>, EventOf<DomainEvent, T>> } = {
  'operation-admitted': true,
  'dispatch-recorded': true,
  'result-accepted': true,
  'result-rejected': true,
  'protocol-conflict-recorded': true,
  'lease-renewed': true,
  'claim-ended': true,
  'branch-reassigned': true,
  'branch-failed': true,
  'branch-revoked': true,
  'cancel-dispatched': true,
  'cancel-result-accepted': true,
  'cancel-withdrawn': true,
  'cancel-timed-out': true,
  'decision-closed': true,
  'settlement-completed': true,
};
/** Every schema describes an event of the union, and no event type is without a schema. */
const noEventWithoutSchema: Same<SchemaEvent['type'], DomainEvent['type']> = true;
const wireDerived: Same<WithData<FromSchema<typeof resultMessageSchema>>, ResultMessage> = true;

/** Application data anywhere in a shape: `unknown` (a `{}` schema, or an open object's other keys) is JsonValue. */
type AsJson<T> = unknown extends T ? JsonValue : T extends readonly (infer E)[] ? AsJson<E>[] : T extends object ? { [K in keyof T]: AsJson<T[K]> } : T;
/** What a schema accepts, as JSON (the deployment config's transport is an if/then on its kind). */
type Accepted<S extends JSONSchema> = AsJson<FromSchema<S, { parseIfThenElseKeywords: true }>>;

/** `true` at every shape, or tsc names the shape whose type and schema differ. */
const shapesMatchTheirSchemas: {
  'contract bundle': Same<Accepted<typeof bundleSchema>, ContractBundle>;
  interaction: Same<Accepted<typeof interactionSchema>, InteractionDeclaration>;
  pipeline: Same<Accepted<typeof pipelineSchema>, Pipeline>;
  'contract ref': Same<Accepted<typeof contractRefSchema>, ContractRef>;
  'invocation request': Same<Accepted<typeof invocationRequestSchema>, InvocationRequest>;
  'invocation result': Same<Accepted<typeof invocationResultSchema>, InvocationResult>;
  'adapter error': Same<Accepted<typeof adapterErrorSchema>, AdapterErrorBody>;
  'deployment config': Same<Accepted<typeof deploymentConfigSchema>, DeploymentConfig>;
  'nats transport': Same<Accepted<typeof natsTransportSchema>, NatsTransportConfig>;
} = {
  'contract bundle': true,
  interaction: true,
  pipeline: true,
  'contract ref': true,
  'invocation request': true,
  'invocation result': true,
  'adapter error': true,
  'deployment config': true,
  'nats transport': true,
};

describe('types and their JSON Schemas', () => {
  it('every event type and every bundle, request, result and config shape is exactly what its schema accepts (checked by the compiler), and the schemas refuse what the types exclude', () => {
    assert.ok(Object.values(eventsMatchTheirSchemas).every((v) => v) && noEventWithoutSchema && wireDerived);
    assert.ok(Object.values(shapesMatchTheirSchemas).every((v) => v));
    const rejected = (reason: string) => ({
      events: [{ type: 'result-rejected', v: 1, reason, subject: 's', branchId: null, peerId: null, attempt: null, fence: null, detail: '' }],
      timeGuard: { notBeforeMs: 0, notAfterMs: 1 },
      causation: { command: 'result' },
    });
    assert.equal(transitionProblem(rejected('stale-fence')), undefined);
    // The type allows only the listed reasons; the schema once accepted any string up to 64 characters.
    assert.match(transitionProblem(rejected('anything-else')) ?? '', /reason/);
  });
});
