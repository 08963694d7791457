/**
 * `convoke get ID` and `convoke cancel ID`.
 *
 * get, as the invoking principal over the NATS command API (`--nats --user`): the same
 * InvocationResult and waiting as GET /contract-invocations/{id} (the principal sees only its own
 * operations). get, as an operator reading a store (`--store URL`): the InvocationResult projected
 * from the operation's log, any principal's (without the interaction's aggregate output, which
 * needs the contract; `inspect` shows the log itself).
 *
 * cancel goes through the coordinator, always: only the invoker, over NATS, and only where the
 * interaction declares caller cancellation (unsupported, exit 7, otherwise).
 *
 * IDs: the full id, the short form `tail` prints, or a unique prefix. The NATS commands take full
 * ids, so over NATS a short id is resolved through `--store` when given (an operator's shell); an
 * ambiguous prefix is an error that lists the candidates.
 */
import { invalidInput } from '../../contract/errors.js';
import { isOperationId } from '../../contract/ids.js';
import { fold } from '../../projections/record.js';
import { invocationResult, reached } from '../../projections/views.js';
import { commandTimeoutMs } from '../../nats-api/commands.js';
import type { CliIo } from '../io.js';
import { commandWaitMs, renderResult, resultExitCode, sendAndReport, type NatsClientOptions } from './invoke.js';
import { notInStore, parseTypedId, readLog, resolveOperationId, withStore, type StoreOptions } from './ops.js';
import { widthOf } from '../table.js';

export interface GetOptions extends Partial<NatsClientOptions>, Partial<StoreOptions> {
  waitFor?: string;
  waitMs?: number;
  json: boolean;
  failOnOutcome?: boolean;
}

export interface CancelOptions extends Partial<NatsClientOptions>, Partial<StoreOptions> {
  json: boolean;
}

export async function getCommand(typedId: string, options: GetOptions, io: CliIo): Promise<number> {
  parseTypedId(typedId);
  if (options.nats === undefined) {
    if (options.store === undefined) throw invalidInput('get needs --nats and --user (as the invoking principal) or --store (as an operator)');
    if (options.waitFor !== undefined || options.waitMs !== undefined) throw invalidInput('--wait-for and --wait-ms wait through the coordinator: use --nats');
    return getFromStore(typedId, { store: options.store, storeAuth: options.storeAuth }, options, io);
  }
  const client = natsClient(options);
  const body: { operationId: string; waitFor?: string; waitMs?: number } = { operationId: await fullId(typedId, options) };
  if (options.waitFor !== undefined) {
    if (options.waitFor !== 'decision' && options.waitFor !== 'settled')
      throw invalidInput(`--wait-for must be decision or settled, got ${JSON.stringify(options.waitFor)}`);
    body.waitFor = options.waitFor;
  }
  if (options.waitMs !== undefined) body.waitMs = commandWaitMs(options.waitMs);
  return sendAndReport(client, io, 'get', body, commandTimeoutMs(body.waitMs), {
    json: options.json,
    failOnOutcome: options.failOnOutcome === true,
    unknown: 'try again',
  });
}

export async function cancelCommand(typedId: string, options: CancelOptions, io: CliIo): Promise<number> {
  parseTypedId(typedId);
  if (options.nats === undefined) throw invalidInput('cancel goes through the coordinator as the invoking principal: give --nats and --user');
  const client = natsClient(options);
  const operationId = await fullId(typedId, options);
  // A cancelled operation is what was asked for: its failed (cancelled) decision is not a failure here.
  return sendAndReport(client, io, 'cancel', { operationId }, commandTimeoutMs(0), {
    json: options.json,
    failOnOutcome: false,
    unknown: 'whether it was cancelled is unknown: get it, or cancel again',
  });
}

function natsClient(options: Partial<NatsClientOptions>): NatsClientOptions {
  if (options.nats === undefined || (options.user ?? options.principal) === undefined) throw invalidInput('--nats and --user are both needed');
  return { nats: options.nats, user: options.user, login: options.login, principal: options.principal, env: options.env };
}

/** The NATS commands take a full id: a short one is resolved through the store, if one is named. */
async function fullId(typedId: string, options: Partial<StoreOptions>): Promise<string> {
  if (isOperationId(typedId)) return typedId;
  const store = options.store;
  if (store === undefined)
    throw invalidInput(
      `${JSON.stringify(typedId)} is not a full operation id (op + 64 hex); to use a short id or prefix, also give --store so it can be resolved`,
    );
  return withStore({ store, storeAuth: options.storeAuth }, (opened) => resolveOperationId(opened, typedId));
}

async function getFromStore(typedId: string, target: StoreOptions, options: GetOptions, io: CliIo): Promise<number> {
  return withStore(target, async (store) => {
    const operationId = await resolveOperationId(store, typedId);
    const record = fold(await readLog(store, operationId));
    if (!record) throw notInStore(operationId);
    const result = invocationResult(record, undefined);
    // Read from the log, nothing waited: decided is "reached" for the exit code, open is pending.
    const status = reached(record, 'decision') ? 200 : 202;
    if (options.json) io.stdout.write(JSON.stringify({ status, result }, null, 2) + '\n');
    else io.stdout.write(renderResult(status, result, widthOf(io)));
    return resultExitCode(status, result, options.failOnOutcome === true);
  });
}
