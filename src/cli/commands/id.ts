/**
 * `convoke id operation|publication`: computes the identities of docs/design.md §3 from their parts, so an
 * operator can find an operation's stream or a publication's Nats-Msg-Id by hand. Prints the id and
 * a newline (exit 0), or the AdapterError as JSON on stderr (exit 2).
 */
import { invalidInput, isAdapterError } from '../../contract/errors.js';
import { checkToken, isContractDigest, isOperationId, operationId, publicationId } from '../../contract/ids.js';
import { limits } from '../../contract/limits.js';
import type { CliIo } from '../io.js';
import { exitCodeOfError } from '../exit-codes.js';
import { terminalText } from '../terminal-text.js';

function run(io: CliIo, compute: () => string): number {
  try {
    io.stdout.write(compute() + '\n');
    return 0;
  } catch (err) {
    if (!isAdapterError(err)) throw err;
    io.stderr.write(terminalText(JSON.stringify(err.toJSON())) + '\n');
    return exitCodeOfError(err);
  }
}

function checkContractDigest(value: string): void {
  if (!isContractDigest(value)) throw invalidInput('contract digest must be sha256: followed by 64 lowercase hex digits');
}

function checkBytes(value: string, bytesMax: number, what: string): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > bytesMax) throw invalidInput(`${what} is ${bytes} bytes, more than ${bytesMax}`);
}

export function idOperationCommand(opts: { principal: string; contractDigest: string; key: string }, io: CliIo): number {
  return run(io, () => {
    if (opts.principal === '') throw invalidInput('principal must not be empty');
    checkBytes(opts.principal, limits.principalIdBytesMax, 'principal');
    checkBytes(opts.key, limits.invocationKeyBytesMax, 'invocation key');
    checkContractDigest(opts.contractDigest);
    return operationId(opts.principal, opts.contractDigest, opts.key);
  });
}

export function idPublicationCommand(opts: { contractDigest: string; operation: string; branch: string; attempt: string }, io: CliIo): number {
  return run(io, () => {
    checkContractDigest(opts.contractDigest);
    if (!isOperationId(opts.operation)) throw invalidInput('operation must be op followed by 64 lowercase hex digits');
    checkToken(opts.branch, 'branch');
    // Plain decimal only: Number() would also take '0x10', '1e1', ' 2 ' or '01'.
    if (!/^[1-9][0-9]?$/.test(opts.attempt)) throw invalidInput(`attempt must be an integer in 1..${limits.attemptsMax}`);
    return publicationId(opts.contractDigest, opts.operation, opts.branch, Number(opts.attempt));
  });
}
