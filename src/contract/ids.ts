/**
 * Identities with exact byte layouts (docs/design.md §3); test/vectors/ids.json holds vectors computed
 * independently of this code.
 *
 * Each part is length-prefixed, never joined with a separator, so no choice of principal, digest
 * or key can make two different tuples hash alike.
 */
import { sha256Hex } from './canonical.js';
import { invalidInput } from './errors.js';
import { hasLoneSurrogate } from './ijson.js';
import { limits } from './limits.js';

/** For each part: u64 big-endian byte count of its UTF-8 encoding, then those bytes. */
export function lengthPrefixed(parts: readonly string[]): Buffer {
  let size = 0;
  for (let index = 0; index < parts.length; index++) {
    // Buffer.from would turn a lone surrogate into U+FFFD: two different strings, one identity.
    const part = parts[index] ?? '';
    if (hasLoneSurrogate(part)) throw invalidInput(`identity part ${index}: lone surrogate`);
    size += 8 + Buffer.byteLength(part, 'utf8');
  }
  const out = Buffer.allocUnsafe(size);
  let offset = 0;
  for (const part of parts) {
    // The buffer was sized exactly, so write() stores the whole part and answers its byte count.
    const length = out.write(part, offset + 8, 'utf8');
    // A JavaScript string's UTF-8 form stays far below 2^32 bytes: the high word is zero.
    out.writeUInt32BE(0, offset);
    out.writeUInt32BE(length, offset + 4);
    offset += 8 + length;
  }
  return out;
}

/** An invocation key is 1 to limits.invocationKeyBytesMax bytes of UTF-8 (an operation's, and a workflow instance's). */
export function checkInvocationKey(key: string): void {
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes === 0 || bytes > limits.invocationKeyBytesMax) {
    throw invalidInput(`invocationKey must be 1..${limits.invocationKeyBytesMax} bytes (got ${bytes})`);
  }
}

/**
 * The same rule as a JSON Schema fragment, for every request that carries a key (an invocation, a
 * workflow start, a workflow's contract call). JSON Schema's maxLength counts characters, not
 * bytes, so the byte bound itself is checked where the key is used (checkInvocationKey).
 */
export const invocationKeySchema = { type: 'string', minLength: 1, maxLength: limits.invocationKeyBytesMax } as const;

/** `op` + lowercase hex SHA-256 of lengthPrefixed([principalId, contractDigest, invocationKey]): 66 chars. */
export function operationId(principalId: string, contractDigest: string, invocationKey: string): string {
  return 'op' + sha256Hex(lengthPrefixed([principalId, contractDigest, invocationKey]));
}

/**
 * The JetStream `Nats-Msg-Id` of one publication: lowercase hex SHA-256 of
 * lengthPrefixed([contractDigest, operationId, branchId, attempt in decimal]). Retrying an uncertain
 * publish reuses it, so the server's duplicate window absorbs the retry.
 */
export function publicationId(contractDigest: string, operationId: string, branchId: string, attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 1 || attempt > limits.attemptsMax) {
    throw invalidInput(`attempt must be an integer in 1..${limits.attemptsMax}, got ${String(attempt)}`);
  }
  return sha256Hex(lengthPrefixed([contractDigest, operationId, branchId, String(attempt)]));
}

/** Peer and branch IDs: NATS-token-safe ASCII, so they can be subject tokens as they are. */
export const tokenPattern = /^[A-Za-z0-9_-]{1,64}$/;
/** A subject namespace: one to eight such tokens, dot-separated. */
export const namespacePattern = /^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$/;
/**
 * Subject roots a bundle's namespace may not start with: `convoke` carries the command API
 * (`convoke.cmd.<principal>.<verb>`) and the JetStream store's default subjects (`convoke.op.>`,
 * `convoke.wf.>`, `convoke.idx.*`, …), `_INBOX` every principal's replies. A peer's permissions
 * cover `<ns>.*.*.result.<peer>`: under such a namespace they would reach into one of those
 * (a namespace `convoke` with an interaction `op` would store a peer's message in the operations
 * stream). NATS subjects are case-sensitive; the roots are refused in any case all the same.
 */
export const reservedSubjectRoots: readonly string[] = ['convoke', '_INBOX'];

/** Why `namespace` may not be a bundle's subject namespace given the extra reserved roots, or undefined. */
export function reservedNamespaceProblem(namespace: string, extraRoots: readonly string[] = []): string | undefined {
  const root = namespace.split('.', 1)[0] ?? '';
  const taken = [...reservedSubjectRoots, ...extraRoots].find((r) => r.toLowerCase() === root.toLowerCase());
  if (taken === undefined) return undefined;
  return `subject namespace ${JSON.stringify(namespace)} starts with the reserved subject root "${taken}" (convoke's commands, stores and inboxes live under ${[...new Set([...reservedSubjectRoots, ...extraRoots])].map((r) => `"${r}"`).join(', ')}): a peer's result subjects there would reach them`;
}

/** Whether two dot-separated subject spaces overlap: one's tokens are a prefix of the other's. */
export function subjectSpacesOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** The same two rules as JSON Schema fragments, for every schema that names a token or a namespace. */
export const tokenSchema = { type: 'string', pattern: tokenPattern.source } as const;
export const namespaceSchema = { type: 'string', pattern: namespacePattern.source } as const;

export function checkToken(value: string, what: string): void {
  if (!tokenPattern.test(value)) {
    throw invalidInput(`${what} must match ${tokenPattern.source}, got ${JSON.stringify(value.slice(0, 80))}`);
  }
}

export const operationIdPattern = /^op[0-9a-f]{64}$/;

export function isOperationId(value: string): boolean {
  return operationIdPattern.test(value);
}

/** What digestOf produces: `sha256:` + 64 lowercase hex digits. */
export const contractDigestPattern = /^sha256:[0-9a-f]{64}$/;

export function isContractDigest(value: string): boolean {
  return contractDigestPattern.test(value);
}
