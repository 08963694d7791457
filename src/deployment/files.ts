/**
 * Reading the files a deployment names (configs, bundles, key sets, CLI inputs): an unreadable
 * file is invalid-input naming it, and JSON always goes through the strict I-JSON parser.
 */
import { readFile } from 'node:fs/promises';
import { loadBundle, type CompiledBundle } from '../contract/bundle.js';
import { invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';

/** The file's bytes; `what` (e.g. "peer config") prefixes the error. */
export async function readFileBytes(file: string, what?: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (cause) {
    const code = (cause as { code?: unknown }).code;
    const reason = typeof code === 'string' ? code : (cause as Error).message;
    throw invalidInput(`${what === undefined ? '' : `${what}: `}cannot read ${file} (${reason})`, cause);
  }
}

/** The file strictly parsed as I-JSON; parse errors are labelled with `what` (or the file name). */
export async function readJsonFile(file: string, what?: string): Promise<JsonValue> {
  return parseStrictBytes(await readFileBytes(file, what), what ?? file);
}

/**
 * A contract bundle file (JSON; YAML when named .yaml/.yml or not starting with `{`), validated
 * and compiled; its pipelines and workflows checked, lowered and validated against the DSL. The
 * workflow language (and the YAML parser) is loaded only for a bundle that needs it.
 */
export async function readBundleFile(file: string): Promise<CompiledBundle> {
  const read = await readBundleOrDocument(file);
  // The other file a workflow user holds: said in one line, not as every bundle field it lacks.
  if (read.kind === 'document')
    throw invalidInput(
      `${file} is a Serverless Workflow document, not a contract bundle: \`convoke workflow run ${file}\` runs it alone, and a bundle pins it under \`workflows:\``,
    );
  return read.compiled;
}

/**
 * A contract bundle file, read as readBundleFile reads it; or, when the file is a standalone
 * Serverless Workflow document (`document.dsl` and a task list, no bundle fields), that document
 * as parsed, not yet checked.
 */
export async function readBundleOrDocument(file: string): Promise<{ kind: 'bundle'; compiled: CompiledBundle } | { kind: 'document'; document: JsonValue }> {
  const what = `bundle ${file}`;
  const bytes = await readFileBytes(file, what);
  const json = !/\.ya?ml$/i.test(file) && /^\s*\{/.test(Buffer.from(bytes.subarray(0, 64)).toString('latin1'));
  const document = json ? parseStrictBytes(bytes, what) : (await import('../workflow/dsl/text.js')).parseDocumentBytes(bytes, what, file);
  if (looksLikeWorkflowDocument(document)) return { kind: 'document', document };
  const compiled = loadBundle(document);
  if (compiled.bundle.pipelines !== undefined || compiled.bundle.workflows !== undefined) {
    await (await import('../workflow/dsl/bundle.js')).checkBundleWorkflows(compiled);
  }
  return { kind: 'bundle', compiled };
}

const isObject = (value: JsonValue | undefined): value is { [key: string]: JsonValue } => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Whether a file's value is shaped as a standalone workflow document (a `document` header and its
 * `do`), not as a contract bundle: read where a bundle is expected, it is named for what it is
 * rather than refused for every bundle field it lacks.
 */
function looksLikeWorkflowDocument(value: JsonValue): boolean {
  return isObject(value) && isObject(value.document) && value.do !== undefined && value.interactions === undefined;
}

/**
 * Refuses a file shaped as a contract bundle (interactions, no workflow header) where a workflow
 * document is expected (`workflow run FILE`), saying what it is and what takes it.
 */
export function refuseBundle(value: JsonValue, file: string): void {
  if (isObject(value) && value.interactions !== undefined && value.document === undefined)
    throw invalidInput(
      `${file} is a contract bundle, not a workflow document: \`convoke workflow lower ${file} NAME\` prints one of its pipelines or workflows as a document, and \`convoke serve\` runs them`,
    );
}
