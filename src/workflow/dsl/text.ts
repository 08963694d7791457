/**
 * Workflow and bundle text: JSON (through the strict I-JSON parser, like every JSON convoke reads)
 * or YAML, the DSL's usual form. YAML is read with the `yaml` package under the YAML 1.2 core
 * schema (no timestamps, no custom tags, no `<<` merge keys), duplicate keys refused, aliases
 * bounded; the result must then be plain I-JSON (no infinities, no integers beyond 2^53), so a
 * YAML document and its JSON twin have the same canonical form and digest.
 */
import { LineCounter, parseDocument } from 'yaml';
import { checkCanonicalizable } from '../../contract/canonical.js';
import { invalidInput } from '../../contract/errors.js';
import { asLogged, parseStrict, parseStrictBytes } from '../../contract/ijson.js';
import type { JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';

export type TextFormat = 'json' | 'yaml';

/** The format a file name implies, else the one the text looks like (`{` or `[` first: JSON). */
export function formatOf(text: string, fileName?: string): TextFormat {
  if (fileName !== undefined && /\.json$/i.test(fileName)) return 'json';
  if (fileName !== undefined && /\.ya?ml$/i.test(fileName)) return 'yaml';
  return /^\s*[{[]/.test(text) ? 'json' : 'yaml';
}

/** Parses JSON or YAML text into a plain JSON value; `what` names it in errors. */
export function parseDocumentText(text: string, what: string, fileName?: string): JsonValue {
  if (Buffer.byteLength(text, 'utf8') > limits.bundleBytesMax) throw invalidInput(`${what}: larger than ${limits.bundleBytesMax} bytes`);
  if (formatOf(text, fileName) === 'json') return parseStrict(text, what);
  const lines = new LineCounter();
  const document = parseDocument(text, { schema: 'core', uniqueKeys: true, merge: false, strict: true, prettyErrors: false, lineCounter: lines });
  const problem = document.errors[0] ?? document.warnings[0];
  if (problem) {
    // Where it is, as an editor counts: the message alone does not say (no excerpt of the text is quoted).
    const { line, col } = lines.linePos(problem.pos[0]);
    throw invalidInput(`${what}: not valid YAML at line ${line}, column ${col}: ${problem.message.split('\n')[0] ?? problem.code}`);
  }
  let value: unknown;
  try {
    value = document.toJS({ maxAliasCount: limits.yamlAliasesMax });
  } catch (error) {
    throw invalidInput(`${what}: ${(error as Error).message}`, error);
  }
  checkCanonicalizable(value, what);
  // YAML's `-0` is -0, which a log or a digest writes as 0: the document holds what they hold.
  return asLogged(value as JsonValue, what);
}

/** The same from a file's bytes: JSON through the strict byte parser, YAML only from valid UTF-8. */
export function parseDocumentBytes(bytes: Uint8Array, what: string, fileName?: string): JsonValue {
  if (bytes.byteLength > limits.bundleBytesMax) throw invalidInput(`${what}: larger than ${limits.bundleBytesMax} bytes`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (error) {
    throw invalidInput(`${what}: not valid UTF-8`, error);
  }
  return formatOf(text, fileName) === 'json' ? parseStrictBytes(bytes, what) : parseDocumentText(text, what, fileName);
}
