/**
 * The client side of every NATS command (operations and workflow instances): the subject a
 * principal sends a verb on, and one request whose reply is strictly parsed and checked against
 * its schema before anything in it is trusted.
 */
import type { ValidateFunction } from 'ajv';
import { AdapterError, invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import { limits } from '../contract/limits.js';
import { tokenPattern } from '../contract/ids.js';
import { describeErrors } from '../contract/validation.js';
import type { Transport } from '../adapters/transport/types.js';

export const commandSubjectPrefix = 'convoke.cmd';

/** `convoke.cmd.<principal>.<verb>`: the principal must be one NATS token (the broker proves it). */
export function commandSubject(principalId: string, verb: string): string {
  if (!tokenPattern.test(principalId))
    throw invalidInput(`a command principal must be a NATS-token-safe id (${tokenPattern.source}), got ${JSON.stringify(principalId)}`);
  return `${commandSubjectPrefix}.${principalId}.${verb}`;
}

/**
 * Sends `body` as JSON on the principal's `verb` subject and answers the reply once it parses
 * strictly and passes `validate` (else `protocol-conflict`, naming `schemaName`). `levels` is how
 * far below its root the reply holds a value the runtime keeps at most limits.jsonDepthMax deep
 * (an input, an output, a peer's result): the reply is parsed to that depth plus these. A transport
 * failure (no coordinator, timeout) is the transport's AdapterError ('unavailable').
 */
export async function requestCommand<T>(
  transport: Transport,
  principalId: string,
  verb: string,
  body: unknown,
  timeoutMs: number,
  validate: ValidateFunction,
  schemaName: string,
  levels: number,
): Promise<T> {
  if (!transport.request) throw new AdapterError('unsupported', `transport ${transport.identity} has no request/reply`);
  const data = await transport.request(commandSubject(principalId, verb), new TextEncoder().encode(JSON.stringify(body)), timeoutMs);
  const reply = parseStrictBytes(data, `${verb} reply`, limits.jsonDepthMax + levels);
  if (!validate(reply))
    throw new AdapterError('protocol-conflict', `${verb} reply does not match the ${schemaName} schema: ${describeErrors(validate.errors)}`);
  return reply as T;
}
