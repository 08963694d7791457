/**
 * `convoke canonicalize [file]`: strict parse, then print the RFC 8785 canonical form — the exact
 * bytes the input and contract digests are taken over. Exit 0, or 2 with the AdapterError as JSON
 * on stderr.
 */
import { canonicalJson } from '../../contract/canonical.js';
import { isAdapterError } from '../../contract/errors.js';
import { readFileBytes } from '../../deployment/files.js';
import { parseStrictBytes } from '../../contract/ijson.js';
import type { CliIo } from '../io.js';
import { exitCodeOfError } from '../exit-codes.js';
import { terminalText } from '../terminal-text.js';

async function readInput(file: string | undefined, io: CliIo): Promise<Uint8Array> {
  return file === undefined ? io.readStdin() : readFileBytes(file);
}

export async function canonicalizeCommand(file: string | undefined, io: CliIo): Promise<number> {
  try {
    const what = file ?? 'stdin';
    const text = canonicalJson(parseStrictBytes(await readInput(file, io), what), what);
    io.stdout.write(text);
    return 0;
  } catch (err) {
    if (!isAdapterError(err)) throw err;
    io.stderr.write(terminalText(JSON.stringify(err.toJSON())) + '\n');
    return exitCodeOfError(err);
  }
}
