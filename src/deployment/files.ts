/**
 * Reading the files a deployment names (configs, bundles, key sets, CLI inputs): an unreadable
 * file is invalid-input naming it, and JSON always goes through the strict I-JSON parser.
 */
import { readFile } from 'node:fs/promises';
import { loadBundle, type CompiledBundle } from '../contract/bundle.js';
import { invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { checkBundleWorkflows } from '../workflow/dsl/bundle.js';
import { parseDocumentBytes } from '../workflow/dsl/text.js';

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
 * A contract bundle file (JSON, or YAML when named .yaml/.yml or not starting with `{`), validated
 * and compiled; its pipelines and workflows checked, lowered and validated against the DSL.
 */
export async function readBundleFile(file: string): Promise<CompiledBundle> {
  const what = `bundle ${file}`;
  const compiled = loadBundle(parseDocumentBytes(await readFileBytes(file, what), what, file));
  if (compiled.bundle.pipelines !== undefined || compiled.bundle.workflows !== undefined) await checkBundleWorkflows(compiled);
  return compiled;
}
