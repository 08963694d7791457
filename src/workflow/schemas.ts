/**
 * The data schemas a Serverless Workflow document declares (DSL 1.0.3 "Data Flow"): `input.schema`
 * and `output.schema` on the workflow, `input.schema`, `output.schema` and `export.schema` on any
 * task (reusable functions included). Each is a `{format: json, document}` JSON Schema, compiled
 * once per document when the document is checked: a schema that cannot compile refuses the
 * document (invalid-input, naming its JSON Pointer), an external `resource` or a format other
 * than `json` is unsupported (everything a workflow runs is in the bundle, pinned by its digest).
 *
 * Schemas are JSON Schema draft-07 under the same ajv options as the bundle's interaction
 * schemas. The compiled validators are kept per document object (a WeakMap: a document nobody
 * holds takes its validators with it), and compiled schemas are removed from the ajv instance's
 * own caches, so a long-lived executor does not accumulate the schemas of every document it ran.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { invalidInput, unsupported } from '../contract/errors.js';
import { jsonPointer } from '../contract/ijson.js';
import { cutText, isObject, type JsonObject, type JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import { describeErrors } from '../contract/validation.js';

/** Where a schema sits: the JSON Pointer of its `schema` member (`/input/schema`, `/do/0/greet/output/schema`). */
export type SchemaPointer = string;

/** A document's compiled data schemas, by pointer. */
export interface DocumentSchemas {
  /** Why `value` fails the schema at `pointer`, or undefined when it passes (or no schema is there). */
  problem(pointer: SchemaPointer, value: JsonValue): string | undefined;
  /** How many schemas the document declares. */
  readonly size: number;
}

/** addUsedSchema: false — a schema's `$id` never enters the instance, so two documents' ids cannot collide. */
const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, addUsedSchema: false });

const compiled = new WeakMap<object, DocumentSchemas>();

/** The description of a failed validation, bounded (it goes into a recorded error). */
const problemBytesMax = 2048;

/**
 * The document's schemas, compiled (once per document object). Throws invalid-input for a schema
 * that does not compile or is too large, unsupported for an external or non-JSON schema; the
 * pointer named is `base` + the schema's pointer in the document.
 */
export function documentSchemas(document: JsonValue, base = ''): DocumentSchemas {
  if (!isObject(document)) return emptySchemas;
  const known = compiled.get(document);
  if (known) return known;
  const found = new Map<SchemaPointer, JsonObject>();
  collect(document, found);
  if (found.size > limits.workflowSchemasMax)
    throw invalidInput(`${base || '/'}: a document may declare at most ${limits.workflowSchemasMax} data schemas, this one declares ${found.size}`);
  const validators = new Map<SchemaPointer, ValidateFunction>();
  for (const [pointer, schema] of found) validators.set(pointer, compile(schema, base + pointer));
  const schemas: DocumentSchemas = {
    size: validators.size,
    problem(pointer, value) {
      const validate = validators.get(pointer);
      if (!validate || validate(value)) return undefined;
      return cutText(describeErrors(validate.errors), problemBytesMax);
    },
  };
  compiled.set(document, schemas);
  return schemas;
}

const emptySchemas: DocumentSchemas = { size: 0, problem: () => undefined };

function compile(definition: JsonObject, where: string): ValidateFunction {
  if (definition.format !== undefined && definition.format !== 'json')
    throw unsupported(`${where}/format: only JSON Schema data schemas (format: json) are supported, got ${JSON.stringify(definition.format)}`);
  if (definition.resource !== undefined && definition.document === undefined)
    throw unsupported(`${where}/resource: external schemas are not supported: a workflow's schemas are written in it, so the bundle's digest pins them`);
  const schema = definition.document;
  if (!isObject(schema) && typeof schema !== 'boolean') throw invalidInput(`${where}/document: a data schema is a JSON Schema object`);
  const size = Buffer.byteLength(JSON.stringify(schema), 'utf8');
  if (size > limits.workflowSchemaBytesMax)
    throw invalidInput(`${where}/document: a data schema is at most ${limits.workflowSchemaBytesMax} bytes, this one is ${size}`);
  try {
    const validate = ajv.compile(schema);
    if (isObject(schema)) ajv.removeSchema(schema);
    return validate;
  } catch (error) {
    throw invalidInput(cutText(`${where}/document: not a valid JSON Schema: ${error instanceof Error ? error.message : String(error)}`, 4000), error);
  }
}

/** Every data schema of the document, keyed by its pointer: the workflow's, then each task's in every task list. */
function collect(document: JsonObject, found: Map<SchemaPointer, JsonObject>): void {
  for (const field of ['input', 'output'] as const) {
    const holder = document[field];
    if (isObject(holder) && isObject(holder.schema)) found.set(jsonPointer([field, 'schema']), holder.schema);
  }
  const use = document.use;
  if (isObject(use) && isObject(use.functions))
    for (const [name, task] of Object.entries(use.functions)) if (isObject(task)) collectTask(task, ['use', 'functions', name], found);
  collectList(document.do, ['do'], found);
}

function collectList(list: JsonValue | undefined, path: (string | number)[], found: Map<SchemaPointer, JsonObject>): void {
  if (!Array.isArray(list)) return;
  list.forEach((item, index) => {
    if (!isObject(item)) return;
    for (const [name, task] of Object.entries(item)) if (isObject(task)) collectTask(task, [...path, index, name], found);
  });
}

function collectTask(task: JsonObject, path: (string | number)[], found: Map<SchemaPointer, JsonObject>): void {
  for (const field of ['input', 'output', 'export'] as const) {
    const holder = task[field];
    if (isObject(holder) && isObject(holder.schema)) found.set(jsonPointer([...path, field, 'schema']), holder.schema);
  }
  collectList(task.do, [...path, 'do'], found);
  collectList(task.try, [...path, 'try'], found);
  if (isObject(task.catch)) collectList(task.catch.do, [...path, 'catch', 'do'], found);
  if (isObject(task.fork)) collectList(task.fork.branches, [...path, 'fork', 'branches'], found);
  // listen's iterator (a sibling of `listen`): its own output and export, and its tasks.
  const foreach = task.foreach;
  if (isObject(foreach)) {
    for (const field of ['output', 'export'] as const) {
      const holder = foreach[field];
      if (isObject(holder) && isObject(holder.schema)) found.set(jsonPointer([...path, 'foreach', field, 'schema']), holder.schema);
    }
    collectList(foreach.do, [...path, 'foreach', 'do'], found);
  }
}
