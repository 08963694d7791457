/**
 * CloudEvents (specversion 1.0, structured JSON) as workflows emit and listen for them, and the two
 * interfaces the layers share: where emitted events go (a sink: NATS core or JetStream) and where
 * received events are delivered (an intake: the workflow executor, fed by a NATS subscription or
 * the HTTP CloudEvents endpoint). An event's subject on NATS is `<prefix>.<type>`: the type's
 * dot-separated tokens become subject tokens, so a type must be made of subject-safe tokens.
 */
import type { JsonObject, JsonValue } from './json.js';
import { limits } from './limits.js';
import { describeErrors, lazyValidator } from './validation.js';

export interface CloudEvent extends JsonObject {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
}

/** Where emitted CloudEvents are published, after their record has committed. Publishing the same id again is a duplicate consumers can drop. */
export interface CloudEventSink {
  publish(event: CloudEvent): Promise<void>;
}

/** What became of a received event: the instances whose waiting listen took it (its append committed), or none. */
export interface CloudEventDelivery {
  matched: string[];
}

/** Where received CloudEvents go. `principalId` limits delivery to that principal's instances; null reaches every instance (a trusted NATS subject). */
export interface CloudEventIntake {
  deliver(event: CloudEvent, principalId: string | null): Promise<CloudEventDelivery>;
}

const token = '[A-Za-z0-9_-]+';
/** A type usable as NATS subject tokens: `com.example.order.placed`. */
export const cloudEventTypePattern = `^${token}(\\.${token})*$`;

const schema = {
  type: 'object',
  required: ['specversion', 'id', 'source', 'type'],
  propertyNames: { pattern: '^[a-z0-9]{1,20}$' },
  properties: {
    specversion: { const: '1.0' },
    id: { type: 'string', minLength: 1, maxLength: 256 },
    source: { type: 'string', minLength: 1, maxLength: 2048 },
    type: { type: 'string', minLength: 1, maxLength: 256, pattern: cloudEventTypePattern },
    subject: { type: 'string', maxLength: 2048 },
    time: { type: 'string', maxLength: 64 },
    datacontenttype: { type: 'string', maxLength: 256 },
    dataschema: { type: 'string', maxLength: 2048 },
  },
} as const;

const validator = lazyValidator(schema);

/** Undefined when the value is a structured CloudEvent this runtime takes; otherwise why not. */
export function cloudEventProblem(value: JsonValue): string | undefined {
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > limits.cloudEventBytesMax) return `the event is ${bytes} bytes; at most ${limits.cloudEventBytesMax}`;
  const validate = validator();
  return validate(value) ? undefined : describeErrors(validate.errors);
}

export const isCloudEvent = (value: JsonValue): value is CloudEvent => cloudEventProblem(value) === undefined;

/** The NATS subject an event of this type is published on. */
export const cloudEventSubject = (prefix: string, type: string): string => `${prefix}.${type}`;
