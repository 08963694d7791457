/**
 * CloudEvents (specversion 1.0, structured JSON) as workflows emit and listen for them, and the two
 * interfaces the layers share: where emitted events go (a sink: NATS core or JetStream) and where
 * received events are delivered (an intake: the workflow executor, fed by a NATS subscription or
 * the HTTP CloudEvents endpoint). An event's subject on NATS is `<prefix>.<type>`: the type's
 * dot-separated tokens become subject tokens, so a type must be made of subject-safe tokens. An
 * event a workflow emits travels on `<emitPrefix>.<principal token>.<type>` instead, a space only
 * the coordinator may publish to: its subject proves whose workflow emitted it.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import { sha256Hex } from './canonical.js';
import type { JsonObject, JsonValue } from './json.js';
import { limits } from './limits.js';
import { describeErrors } from './validation.js';

/** The media type of one event in the CloudEvents JSON format (structured mode): the NATS sink's content-type header, the HTTP route's structured mode. */
export const cloudEventsMediaType = 'application/cloudevents+json';

export interface CloudEvent extends JsonObject {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
}

/** The task execution that emitted an event: whose instance, and where in it (the task's pointer and frame). */
export interface EmitOrigin {
  principalId: string;
  instanceId: string;
  /** The task execution (`TaskRun.at`: pointer, loop iterations, retry attempt, branch). */
  at: string;
}

/**
 * Where emitted CloudEvents are published, after their record has committed. The same task
 * execution publishes the same event again after a crash: a duplicate consumers can drop.
 */
export interface CloudEventSink {
  /**
   * Publishes the event. A refusal that stays one (the event past a limit of the broker, known
   * only once it answered) is `invalid-input`; `unavailable` is an outage, the same publish may
   * pass later.
   */
  publish(event: CloudEvent, origin: EmitOrigin): Promise<void>;
  /**
   * Why this event can never be published here, when the sink knows beforehand (larger than the
   * broker takes in one message), or undefined. Asked before the event is recorded as emitted, so
   * the log never holds, as emitted, an event the sink could not send: the emit task faults
   * instead, where a `try` can catch it.
   */
  refusal?(event: CloudEvent, origin: EmitOrigin): string | undefined;
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

/**
 * RFC 3339 (the CloudEvents `time` attribute): a date, `T`, a time with optional fractions, and
 * `Z` or an offset — its form; ajv-formats' `date-time` checks that it names an instant (a month
 * of the year, a day of that month, an hour of the day…).
 */
const rfc3339 = '^\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2})$';

/**
 * A media type (RFC 2046, its names as RFC 6838 §4.2 restricts them): `type/subtype`, then
 * parameters. The parameters' form is not checked: nothing here reads them.
 */
const mediaType = '^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(?:[ \\t]*;.*)?$';

/**
 * A media type that declares JSON-formatted data (CloudEvents JSON format §3.1): its subtype is
 * `json` or ends in `+json`, in any case, parameters aside.
 */
const jsonMediaType = '^[^/]+/(?:[^;]*\\+)?[Jj][Ss][Oo][Nn][ \\t]*(?:;.*)?$';

const jsonMediaTypePattern = new RegExp(jsonMediaType, 'u');
const mediaTypePattern = new RegExp(mediaType, 'u');

/** Whether a value is a media type as the checker reads `datacontenttype` (binary mode's content-type is one). */
export const isMediaType = (value: string): boolean => mediaTypePattern.test(value);

/** Whether an event's data under this datacontenttype is JSON (a JSON value in the JSON format), as the checker reads the type. */
export const declaresJson = (datacontenttype: string): boolean => jsonMediaTypePattern.test(datacontenttype);

/** Base64 as RFC 4648 §4 writes it (the JSON format's `data_base64`): padded, no line breaks. */
const base64 = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$';

const schema = {
  type: 'object',
  required: ['specversion', 'id', 'source', 'type'],
  // Attribute names are lowercase letters and digits; `data` and `data_base64` are the JSON format's two members for the data.
  propertyNames: { pattern: '^(?:[a-z0-9]{1,20}|data_base64)$' },
  properties: {
    specversion: { const: '1.0' },
    id: { type: 'string', minLength: 1, maxLength: 256 },
    // A URI-reference (RFC 3986 §4.1): `https://shop.example/orders`, `/orders`, `urn:uuid:…`.
    source: { type: 'string', minLength: 1, maxLength: 2048, format: 'uri-reference' },
    type: { type: 'string', minLength: 1, maxLength: 256, pattern: cloudEventTypePattern },
    subject: { type: 'string', maxLength: 2048 },
    time: { type: 'string', maxLength: 64, pattern: rfc3339, format: 'date-time' },
    datacontenttype: { type: 'string', maxLength: 256, pattern: mediaType },
    // An absolute URI (RFC 3986 §4.3).
    dataschema: { type: 'string', minLength: 1, maxLength: 2048, format: 'uri' },
    data: true,
    // Binary data in the JSON format (CloudEvents JSON format §3.1): one of `data` and `data_base64`, never both.
    data_base64: { type: 'string', pattern: base64 },
  },
  not: { required: ['data', 'data_base64'] },
  // Data whose datacontenttype is not JSON travels as a JSON string (JSON format §3.1): any other value contradicts its type.
  if: { required: ['datacontenttype', 'data'], properties: { datacontenttype: { type: 'string', not: { pattern: jsonMediaType } } } },
  then: { properties: { data: { type: 'string' } } },
  // Extension attributes: the CloudEvents type system's values (string, integer, boolean), never an object or an array.
  additionalProperties: { type: ['string', 'integer', 'boolean'] },
} as const;

/**
 * The CloudEvents checker has an ajv of its own: it alone checks formats (RFC 3986 URIs and RFC
 * 3339 instants, through ajv-formats), which the shared instance leaves unchecked in every other schema — a contract's
 * own schemas among them, whose meaning must not change with this one.
 */
let validator: ValidateFunction | undefined;

function compiled(): ValidateFunction {
  if (validator !== undefined) return validator;
  const checking = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true });
  formats.default(checking, ['uri', 'uri-reference', 'date-time']);
  validator = checking.compile(schema);
  return validator;
}

/**
 * A character the CloudEvents type system's String excludes (core specification, Type System): a
 * control character (U+0000–U+001F, U+007F–U+009F), a noncharacter, a surrogate not in a pair.
 */
const notInString = /[\p{Cc}\p{Cs}\p{Noncharacter_Code_Point}]/u;

/** The CloudEvents type system's Integer: 32-bit signed. */
const integerMin = -2_147_483_648;
const integerMax = 2_147_483_647;

/**
 * Why an attribute's value (every member but the data) is outside the type system the schema's
 * types leave open, or undefined: a string holding a character no String holds, an integer past 32
 * bits. The data is the application's and is not held to it.
 */
function attributeValueProblem(event: JsonObject, nameOf: (pointer: string) => string): string | undefined {
  for (const [name, value] of Object.entries(event)) {
    if (name === 'data' || name === 'data_base64') continue;
    if (typeof value === 'string') {
      const found = notInString.exec(value);
      if (found === null) continue;
      const codePoint = (found[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
      return `${nameOf(`/${name}`)} holds U+${codePoint} at index ${found.index}: a CloudEvents string holds no control character, noncharacter or unpaired surrogate`;
    }
    if (typeof value === 'number' && (value < integerMin || value > integerMax))
      return `${nameOf(`/${name}`)} is ${value}: a CloudEvents integer is from ${integerMin} to ${integerMax}`;
  }
  return undefined;
}

/**
 * Undefined when the value is a structured CloudEvent this runtime takes; otherwise why not. Each
 * member is named by its JSON Pointer (`/time`), or as `nameOf` names it where the event was read
 * from elsewhere (binary mode's headers: `header ce-time`).
 */
export function cloudEventProblem(value: JsonValue, nameOf: (pointer: string) => string = (pointer) => pointer): string | undefined {
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > limits.cloudEventBytesMax) return `the event is ${bytes} bytes; at most ${limits.cloudEventBytesMax}`;
  const validate = compiled();
  if (validate(value)) return attributeValueProblem(value as JsonObject, nameOf);
  // The one `not` says only "must NOT be valid", and the `if` only "must match "then" schema": say what each refuses.
  const bothData = 'must carry data or data_base64, not both';
  const notJson = `datacontenttype ${String((value as JsonObject).datacontenttype).slice(0, 256)} is not JSON: its data must be a string (CloudEvents JSON format §3.1)`;
  return describeErrors(
    validate.errors?.map((e) =>
      e.keyword === 'not' && e.instancePath === ''
        ? { ...e, message: bothData }
        : e.keyword === 'if'
          ? { ...e, message: notJson }
          : { ...e, instancePath: e.instancePath === '' ? '' : nameOf(e.instancePath) },
    ),
  );
}

export const isCloudEvent = (value: JsonValue): value is CloudEvent => cloudEventProblem(value) === undefined;

/** The NATS subject an event of this type is published on. */
export const cloudEventSubject = (prefix: string, type: string): string => `${prefix}.${type}`;

/** A principal id as it stands as a subject token: itself when token-safe and not starting with `_`; otherwise `_` + base64url of its UTF-8. */
const literalPrincipal = /^[A-Za-z0-9-][A-Za-z0-9_-]*$/;

/**
 * The subject token of a principal id. Principal ids are not all subject tokens (an HTTP
 * principal is any name, a JWT principal `jwt:<issuer>:<sub>`), so those are encoded; the
 * encoding is injective (a literal never starts with `_`, an encoded one always does), and
 * `principalOfSubjectToken` inverts it.
 */
export function principalSubjectToken(principalId: string): string {
  return literalPrincipal.test(principalId) ? principalId : `_${Buffer.from(principalId, 'utf8').toString('base64url')}`;
}

/** The principal id a subject token stands for; undefined for a token `principalSubjectToken` never makes. */
export function principalOfSubjectToken(token: string): string | undefined {
  if (literalPrincipal.test(token)) return token;
  if (!/^_[A-Za-z0-9_-]+$/.test(token)) return undefined;
  const principalId = Buffer.from(token.slice(1), 'base64url').toString('utf8');
  // Only the canonical encoding of valid UTF-8 round-trips (padding bits, replaced bytes and literal-safe ids do not).
  return principalId.length > 0 && principalSubjectToken(principalId) === token ? principalId : undefined;
}

/** The NATS subject an event of this type emitted by a workflow of this principal is published on. */
export const emittedEventSubject = (emitPrefix: string, principalId: string, type: string): string =>
  `${emitPrefix}.${principalSubjectToken(principalId)}.${type}`;

/**
 * The JetStream `Nats-Msg-Id` of an emitted event: lowercase hex SHA-256 of the instance id and
 * the task execution, under its own label. Derived from the execution, never from the event (whose
 * `id` a document may set), so no document chooses it, and a republish after a crash carries the
 * same one.
 */
export const emittedMessageId = (origin: Pick<EmitOrigin, 'instanceId' | 'at'>): string =>
  sha256Hex(`convoke-emitted\u0000${origin.instanceId}\u0000${origin.at}`);
