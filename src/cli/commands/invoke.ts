/**
 * `convoke invoke --nats URL --user U --contract FILE --interaction I --key K --input JSON
 *   [--wait-for decision|settled] [--wait-ms N] [--principal P] [--password-env NAME | --creds FILE] [--json]
 *   [--fail-on-outcome]`
 *
 * A command client over NATS (src/nats-api/commands.ts): sends an InvocationRequest on
 * `convoke.cmd.<principal>.invoke` and prints the InvocationResult as tables (or the reply as
 * JSON). It logs in with the credentials file --creds names, or with the password in the
 * environment variable --password-env names (default CONVOKE_NATS_PASSWORD), or the context's
 * credentials or password file; never a secret on the command line. The principal is the NATS
 * user unless --principal says otherwise; the server proves it by the user's publish permission.
 *
 * Exit codes (exit-codes.ts): 0 the boundary was reached (a failed decision too, unless
 * --fail-on-outcome: then 11); 10 still pending when the wait ended (get it later); the
 * AdapterError kind's code when the coordinator answered an error, 9 for an operation not found;
 * 4 (unavailable) when no coordinator answered: the outcome of the invoke is then unknown, retry
 * with the same --key.
 */
import { AdapterError, invalidInput } from '../../contract/errors.js';
import { parseStrict } from '../../contract/ijson.js';
import { limits } from '../../contract/limits.js';
import { readBundleFile } from '../../deployment/files.js';
import type { InvocationRequest, WaitFor } from '../../contract/types.js';
import { inboxPrefixFor } from '../../adapters/transport/nats-names.js';
import { NatsTransport } from '../../adapters/transport/nats.js';
import type { Transport } from '../../adapters/transport/types.js';
import type { InvocationResult } from '../../projections/views.js';
import { commandTimeoutMs, sendCommand, type CommandReply, type CommandVerb } from '../../nats-api/commands.js';
import type { ReducedInvocationResult, ReplyOmission } from '../../nats-api/omitted.js';
import type { CliIo } from '../io.js';
import { passwordEnvDefault } from '../connection.js';
import { readLogin, type LoginSource } from '../secrets.js';
import { exitCodeOfKind, exitCodeOfReplyError, exitCodes } from '../exit-codes.js';
import { heading, renderTable, wholeId, widthOf } from '../table.js';
import { terminalText } from '../terminal-text.js';

/** How a command client reaches the coordinators: NATS servers, user, and how it logs in. */
export interface NatsClientOptions {
  nats: string;
  /** The NATS user; with credentials only a name (the principal's default), since the credentials identify the connection. */
  user?: string;
  /**
   * How it logs in: a password's source (an environment variable by name, or a password file) with
   * the user, or a credentials file; the password in $CONVOKE_NATS_PASSWORD by default.
   */
  login?: LoginSource;
  /** The command principal (subject token); the user by default. */
  principal?: string;
  env?: NodeJS.ProcessEnv;
}

export interface InvokeOptions extends NatsClientOptions {
  contract: string;
  interaction: string;
  key: string;
  input: string;
  waitFor?: string;
  waitMs?: number;
  json: boolean;
  /** Exit 11 when the decision is not success. */
  failOnOutcome?: boolean;
}

export async function invokeCommand(options: InvokeOptions, io: CliIo): Promise<number> {
  const request = await buildRequest(options);
  return sendAndReport(options, io, 'invoke', request, commandTimeoutMs(request.waitMs), {
    json: options.json,
    failOnOutcome: options.failOnOutcome === true,
    unknown: 'the outcome is unknown: retry with the same --key',
  });
}

/**
 * Connects as the principal's command client, sends one command and prints the reply; the exit
 * code follows exit-codes.ts. `failOnOutcome` makes a decided, not-successful result exit 11.
 */
export async function sendAndReport(
  options: NatsClientOptions,
  io: CliIo,
  verb: Exclude<CommandVerb, 'list'>,
  body: unknown,
  timeoutMs: number,
  report: { json: boolean; failOnOutcome: boolean; unknown: string },
): Promise<number> {
  const sent = await requestAsClient(options, io, verb, report.unknown, (transport, principal) => sendCommand(transport, principal, verb, body, timeoutMs));
  if ('exitCode' in sent) return sent.exitCode;
  const reply: CommandReply = sent.reply;
  if (!('result' in reply)) {
    if (report.json) io.stdout.write(JSON.stringify(reply, null, 2) + '\n');
    // The coordinator's error, for a person: its controls shown escaped (JSON's escapes, the same value).
    io.stderr.write(`status ${reply.status}: ${terminalText(JSON.stringify(reply.error))}\n`);
    return exitCodeOfReplyError(reply.status, reply.error.kind);
  }
  // A result past the server's max_payload comes without its large members, named in `omitted`: shown as left out, never as empty.
  if (report.json) io.stdout.write(JSON.stringify(reply, null, 2) + '\n');
  else io.stdout.write(renderResult(reply.status, reply.result, widthOf(io), 'omitted' in reply ? reply.omitted : undefined));
  return resultExitCode(reply.status, reply.result, report.failOnOutcome);
}

/**
 * Connects as the principal's command client (the password from its source, never the command
 * line) and makes one request. No answer is not an answer: the command may or may not have been
 * carried out, so that is written to stderr as its AdapterError with `unknown` (what to do next)
 * and answered as its exit code.
 */
export async function requestAsClient<R>(
  options: NatsClientOptions,
  io: CliIo,
  verb: string,
  unknown: string,
  send: (transport: Transport, principal: string) => Promise<R>,
): Promise<{ reply: R } | { exitCode: number }> {
  const principal = options.principal ?? options.user;
  if (principal === undefined) throw invalidInput(`convoke ${verb} needs a principal: --principal, or --user`);
  const login = await readLogin(options.login ?? { kind: 'env', name: passwordEnvDefault }, options.user, `convoke ${verb}`, options.env);
  const transport = await NatsTransport.connect(
    { servers: options.nats, ...login, name: `convoke-${verb}-${principal}`, inboxPrefix: inboxPrefixFor('cmd', principal) },
    { identity: options.user ?? principal },
  );
  try {
    return { reply: await send(transport, principal) };
  } catch (error) {
    if (!(error instanceof AdapterError) || error.kind === 'invalid-input') throw error;
    io.stderr.write(`${terminalText(JSON.stringify({ kind: error.kind, description: `${error.description ?? error.kind}; ${unknown}` }))}\n`);
    return { exitCode: exitCodeOfKind(error.kind) };
  } finally {
    await transport.close();
  }
}

/** 202 is pending whatever the flag; a decided result fails only under --fail-on-outcome. */
export function resultExitCode(status: 200 | 202, result: Pick<InvocationResult, 'decision'>, failOnOutcome: boolean): number {
  if (status === 202) return exitCodes.pending;
  if (failOnOutcome && result.decision !== null && result.decision.outcome !== 'success') return exitCodes.outcomeNotSuccess;
  return exitCodes.ok;
}

async function buildRequest(options: InvokeOptions): Promise<InvocationRequest> {
  const bundle = await readBundleFile(options.contract);
  if (!bundle.interactions.has(options.interaction)) throw invalidInput(`contract ${bundle.ref.id} has no interaction "${options.interaction}"`);
  const request: InvocationRequest = {
    contract: bundle.ref,
    interaction: options.interaction,
    invocationKey: options.key,
    input: parseStrict(options.input, '--input'),
  };
  if (options.waitFor !== undefined) {
    if (options.waitFor !== 'decision' && options.waitFor !== 'settled')
      throw invalidInput(`--wait-for must be decision or settled, got ${JSON.stringify(options.waitFor)}`);
    request.waitFor = options.waitFor as WaitFor;
  }
  if (options.waitMs !== undefined) request.waitMs = commandWaitMs(options.waitMs);
  return request;
}

/**
 * A --wait-ms the coordinator is asked to wait (invoke, get, workflow start and get): 0 to
 * limits.waitMsMax, as every command body holds it, refused before anything is sent. Past it the
 * coordinator refuses the body, and from 2^31 ms on the reply's timer (commandTimeoutMs) would not
 * hold it: Node fires it at once, and the command's answer would be taken for none.
 */
export function commandWaitMs(waitMs: number): number {
  if (!Number.isSafeInteger(waitMs) || waitMs < 0 || waitMs > limits.waitMsMax)
    throw invalidInput(`--wait-ms must be an integer in 0..${limits.waitMsMax}, got ${waitMs}`);
  return waitMs;
}

const cell = (value: unknown) => (value === undefined || value === null ? '-' : typeof value === 'string' ? value : JSON.stringify(value));

/**
 * What a reply left out (past the server's max_payload) for a person: the members, both sizes, where
 * to read the whole.
 */
export function describeOmission(omitted: ReplyOmission): string {
  return `${omitted.members.join(', ')}: the reply is ${omitted.replyBytes} bytes, past the NATS server's max_payload (${omitted.maxPayload}); read it in full with ${omitted.read}`;
}

/**
 * The InvocationResult for a person: the operation, its decision and settlement, then one row per
 * branch; what a reduced reply left out (`omitted`) is said so, not shown as empty.
 */
export function renderResult(
  status: number,
  result: InvocationResult | ReducedInvocationResult,
  widthMax = Number.POSITIVE_INFINITY,
  omitted?: ReplyOmission,
): string {
  const d = result.decision;
  const overview = renderTable(
    ['field', 'value'],
    [
      ['status', `${status} ${status === 200 ? '(boundary reached)' : '(pending: get it later with the same principal)'}`],
      // Whole where the column holds it, else a prefix get and inspect resolve: never cut across two lines.
      ['operation', wholeId(result.operationId)],
      ['contract', `${result.contract.id}@${result.contract.version}`],
      ['interaction', result.interaction],
      ['key', result.invocationKey],
      ['phase', result.phase],
      [
        'decision',
        d
          ? `${d.outcome} (${d.reason}) — ${d.successVotes}/${d.threshold} votes, ${d.failedUnits} failed of ${d.units} units, ${d.closedAtMs - result.admittedAtMs} ms after admission`
          : 'pending',
      ],
      [
        'settlement',
        `${result.settlement.status}${result.settlement.siblings?.length ? ` — ${result.settlement.siblings.map((s) => `${s.branchId}: ${s.disposition}${s.outcome ? `/${s.outcome}` : ''}`).join(', ')}` : ''}`,
      ],
      ...('output' in result ? [['output', cell(result.output)]] : []),
      ...(result.outputError ? [['output error', cell(result.outputError)]] : []),
      ...(omitted ? [['left out', describeOmission(omitted)]] : []),
    ],
    widthMax,
  );
  if (result.branches === undefined) return overview;
  const resultsLeftOut = omitted?.members.includes('branches[].result') === true;
  const branches = renderTable(
    ['branch', 'peer', 'status', 'attempt', 'fence', 'result'],
    result.branches.map((b) => [b.branchId, b.peerId, b.status, b.attempt, b.fence, resultsLeftOut ? '(left out)' : cell(b.result)]),
    widthMax,
  );
  return `${overview}${heading('branches')}${branches}`;
}
