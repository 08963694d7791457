/**
 * `convoke invoke --nats URL --user U --contract FILE --interaction I --key K --input JSON
 *   [--wait-for decision|settled] [--wait-ms N] [--principal P] [--password-env NAME] [--json]`
 *
 * A command client over NATS (src/nats-api/commands.ts): sends an InvocationRequest on
 * `convoke.cmd.<principal>.invoke` and prints the InvocationResult as tables (or the reply as
 * JSON). The password is read from the environment variable --password-env names (default
 * CONVOKE_NATS_PASSWORD), never from the command line. The principal is the NATS user unless
 * --principal says otherwise; the server proves it by the user's publish permission.
 *
 * Exit codes: 0 the coordinator answered 200 or 202 (read decision.outcome: a failed business
 * decision is still 0); 1 it answered an error, or no coordinator answered (the outcome of the
 * invoke is then unknown: retry with the same --key); 2 invalid usage or input.
 */
import { AdapterError, invalidInput } from '../../contract/errors.js';
import { parseStrict } from '../../contract/ijson.js';
import { readBundleFile } from '../../deployment/files.js';
import type { InvocationRequest, WaitFor } from '../../contract/types.js';
import { inboxPrefixFor } from '../../adapters/transport/nats-names.js';
import { NatsTransport } from '../../adapters/transport/nats.js';
import type { InvocationResult } from '../../projections/views.js';
import { commandTimeoutMs, sendCommand, type CommandReply } from '../../nats-api/commands.js';
import type { CliIo } from '../io.js';
import { heading, renderTable } from '../table.js';

export interface InvokeOptions {
  nats: string;
  user: string;
  /** Names the environment variable holding the password. */
  passwordEnv?: string;
  /** The command principal (subject token); the user by default. */
  principal?: string;
  contract: string;
  interaction: string;
  key: string;
  input: string;
  waitFor?: string;
  waitMs?: number;
  json: boolean;
  env?: NodeJS.ProcessEnv;
}

export const passwordEnvDefault = 'CONVOKE_NATS_PASSWORD';

export async function invokeCommand(options: InvokeOptions, io: CliIo): Promise<number> {
  const request = await buildRequest(options);
  const passwordEnv = options.passwordEnv ?? passwordEnvDefault;
  const pass = (options.env ?? process.env)[passwordEnv];
  if (pass === undefined || pass === '') throw invalidInput(`environment variable ${passwordEnv} (the NATS password) is not set`);
  const principal = options.principal ?? options.user;
  const transport = await NatsTransport.connect({ servers: options.nats, user: options.user, pass, name: `convoke-invoke-${principal}`, inboxPrefix: inboxPrefixFor('cmd', principal) }, { identity: options.user });
  let reply: CommandReply;
  try {
    reply = await sendCommand(transport, principal, 'invoke', request, commandTimeoutMs(request.waitMs));
  } catch (error) {
    if (!(error instanceof AdapterError) || error.kind === 'invalid-input') throw error;
    // No answer is not an answer: the invocation may or may not have been admitted.
    io.stderr.write(`${JSON.stringify({ kind: error.kind, description: `${error.description ?? error.kind}; the outcome is unknown: retry with the same --key` })}\n`);
    return 1;
  } finally {
    await transport.close();
  }
  if (options.json) io.stdout.write(JSON.stringify(reply, null, 2) + '\n');
  else if ('result' in reply) io.stdout.write(renderResult(reply.status, reply.result));
  else io.stderr.write(`status ${reply.status}: ${JSON.stringify(reply.error)}\n`);
  return 'result' in reply ? 0 : 1;
}

async function buildRequest(options: InvokeOptions): Promise<InvocationRequest> {
  const bundle = await readBundleFile(options.contract);
  if (!bundle.interactions.has(options.interaction)) throw invalidInput(`contract ${bundle.ref.id} has no interaction "${options.interaction}"`);
  const request: InvocationRequest = { contract: bundle.ref, interaction: options.interaction, invocationKey: options.key, input: parseStrict(options.input, '--input') };
  if (options.waitFor !== undefined) {
    if (options.waitFor !== 'decision' && options.waitFor !== 'settled') throw invalidInput(`--wait-for must be decision or settled, got ${JSON.stringify(options.waitFor)}`);
    request.waitFor = options.waitFor as WaitFor;
  }
  if (options.waitMs !== undefined) {
    if (!Number.isSafeInteger(options.waitMs) || options.waitMs < 0) throw invalidInput(`--wait-ms must be a non-negative integer, got ${options.waitMs}`);
    request.waitMs = options.waitMs;
  }
  return request;
}

const cell = (value: unknown) => (value === undefined || value === null ? '-' : typeof value === 'string' ? value : JSON.stringify(value));

/** The InvocationResult for a person: the operation, its decision and settlement, then one row per branch. */
export function renderResult(status: number, result: InvocationResult): string {
  const d = result.decision;
  const overview = renderTable(
    ['field', 'value'],
    [
      ['status', `${status} ${status === 200 ? '(boundary reached)' : '(pending: get it later with the same principal)'}`],
      ['operation', result.operationId],
      ['contract', `${result.contract.id}@${result.contract.version}`],
      ['interaction', result.interaction],
      ['key', result.invocationKey],
      ['phase', result.phase],
      ['decision', d ? `${d.outcome} (${d.reason}) — ${d.successVotes}/${d.threshold} votes, ${d.failedUnits} failed of ${d.units} units, ${d.closedAtMs - result.admittedAtMs} ms after admission` : 'pending'],
      ['settlement', `${result.settlement.status}${result.settlement.siblings.length ? ` — ${result.settlement.siblings.map((s) => `${s.branchId}: ${s.disposition}${s.outcome ? `/${s.outcome}` : ''}`).join(', ')}` : ''}`],
      ['output', cell(result.output)],
      ...(result.outputError ? [['output error', cell(result.outputError)]] : []),
    ],
  );
  const branches = renderTable(
    ['branch', 'peer', 'status', 'attempt', 'fence', 'result'],
    result.branches.map((b) => [b.branchId, b.peerId, b.status, b.attempt, b.fence, cell(b.result)]),
  );
  return `${overview}${heading('branches')}${branches}`;
}
