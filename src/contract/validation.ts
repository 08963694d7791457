/** One shared ajv instance and the conversion of ajv errors into AdapterError descriptions. */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { invalidInput } from './errors.js';
import { cutText } from './json.js';

export const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, discriminator: true });

/** The characters of a given value a refusal quotes: a caller decides how long it is. */
const quotedCharactersMax = 60;

/**
 * A value a caller gave, as a refusal quotes it: its JSON, cut to its first quotedCharactersMax
 * characters (and `…`, then its length) when longer, so that what a refusal echoes back is bounded
 * whatever the caller sent (a query string, a NATS command's body, the CLI's options, a property name a schema refused).
 */
export function quoted(value: unknown): string {
  if (typeof value === 'string')
    return value.length <= quotedCharactersMax
      ? JSON.stringify(value)
      : `${JSON.stringify(value.slice(0, quotedCharactersMax)).slice(0, -1)}…" (${value.length} characters)`;
  const json = JSON.stringify(value) ?? String(value);
  return json.length <= quotedCharactersMax ? json : `${cutText(json, quotedCharactersMax)}… (${json.length} characters of JSON)`;
}

/**
 * Every ajv error, each as `<pointer> <message>`, joined: a bad document learns all its faults at
 * once. A property's name that fails `propertyNames` is not in the pointer (it points at the
 * object), so the name is said: `(root) property name "Amount" must match pattern …`; ajv's
 * summary beside it ("property name must be valid") is left out when the name's own failure says more.
 */
export function describeErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return 'invalid';
  const namedFailures = new Set(errors.flatMap((e) => (e.propertyName === undefined ? [] : [`${e.instancePath}\u0000${e.propertyName}`])));
  return errors
    .filter((e) => e.keyword !== 'propertyNames' || !namedFailures.has(`${e.instancePath}\u0000${(e.params as { propertyName: string }).propertyName}`))
    .map((e) => {
      const where = e.instancePath === '' ? '(root)' : e.instancePath;
      const extra = e.keyword === 'additionalProperties' ? ` "${(e.params as { additionalProperty: string }).additionalProperty}"` : '';
      if (e.keyword === 'propertyNames') return `${where} property name ${quoted((e.params as { propertyName: string }).propertyName)} must be valid`;
      if (e.propertyName !== undefined) return `${where} property name ${quoted(e.propertyName)} ${e.message ?? e.keyword}`;
      return `${where} ${e.message ?? e.keyword}${extra}`;
    })
    .join('; ');
}

/**
 * A checker that compiles its schema on first use (a process compiles only the schemas it uses:
 * a peer never pays for the deployment config's); calling it throws invalid-input listing every error.
 */
export function compileChecker<T>(schema: object, what: string): (value: unknown) => T {
  const validate = lazyValidator(schema);
  return (value: unknown): T => {
    const v = validate();
    if (!v(value)) throw invalidInput(`${what}: ${describeErrors(v.errors)}`);
    return value as T;
  };
}

/**
 * The same options but stopping at the first error: for valid data (the common case of a check
 * that guards our own output) it accepts exactly what the shared ajv accepts, several times
 * faster, because an all-errors validator cannot stop early inside a keyword.
 */
const firstErrorAjv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true, discriminator: true });

/**
 * Why `value` fails `schema` (every error, from the shared ajv), or undefined when it passes: the
 * pass/fail answer comes from a first-error validator of the same schema, compiled on first use;
 * only a failure pays for the all-errors description.
 */
export function lazyProblem(schema: object): (value: unknown) => string | undefined {
  let passes: ValidateFunction | undefined;
  const describe = lazyValidator(schema);
  return (value) => {
    passes ??= firstErrorAjv.compile(schema);
    if (passes(value)) return undefined;
    const validate = describe();
    validate(value);
    return describeErrors(validate.errors);
  };
}

/** A first-error validator of `schema` (as lazyProblem's), compiled on the first call: whether `value` passes. */
export function lazyPasses(schema: object): (value: unknown) => boolean {
  let passes: ValidateFunction | undefined;
  return (value) => (passes ??= firstErrorAjv.compile(schema))(value);
}

/**
 * Why `value` fails `schema`, or undefined when `passes` accepts it: `passes` must accept exactly
 * what `schema` accepts (a cheaper check of the same rules); only a failure pays for the shared
 * ajv's every-error description against the schema itself.
 */
export function describedProblem(passes: (value: unknown) => boolean, schema: object): (value: unknown) => string | undefined {
  const describe = lazyValidator(schema);
  return (value) => {
    if (passes(value)) return undefined;
    const validate = describe();
    validate(value);
    return describeErrors(validate.errors);
  };
}

/** The shared ajv's validator for `schema`, compiled on the first call and kept. */
export function lazyValidator(schema: object): () => ValidateFunction {
  let compiled: ValidateFunction | undefined;
  return () => (compiled ??= ajv.compile(schema));
}

/** Compiles an application schema supplied by a bundle; an invalid schema is invalid-input, not a crash. */
export function compileApplicationSchema(schema: object, what: string): ValidateFunction {
  try {
    return ajv.compile(schema);
  } catch (error) {
    throw invalidInput(`${what} is not a valid JSON Schema: ${(error as Error).message}`, error);
  }
}
