/**
 * `convoke workflow run FILE --input JSON [--store URL] [--context NAME] [--json]`: runs a Serverless Workflow
 * 1.0.3 document (YAML or JSON) embedded — no server — on the given store (memory by default) and
 * prints its output. Exit 0 when the instance completed, 11 when it faulted or was cancelled (the
 * error on stderr), 10 when it was still running at the end of --wait-ms (its id on stderr: run
 * the same command again with the same --key and --store to resume it), or the AdapterError's
 * code when it could not start (an unsupported task: 7).
 *
 * Registered by `addWorkflowRunCommand` under `convoke workflow` (created here when absent).
 */
import type { Command } from 'commander';
import { isAdapterError, invalidInput } from '../../contract/errors.js';
import type { CliIo } from '../io.js';
import { exitCodeOfError, exitCodes } from '../exit-codes.js';
import { isWorkflowInstanceId } from '../../workflow/ids.js';
import { storeLogin, type StoreAuth } from '../connection.js';
import { contextOptions, nonNegativeInteger, startConnectionOf, startContextOptions, storeCredsOption, storeOf, workflowCommand } from '../options.js';
import { checkSecretFile } from '../secrets.js';
import { limits } from '../../contract/limits.js';

export interface WorkflowRunOptions {
  input: string;
  store: string;
  key: string;
  principal: string;
  waitMs: number;
  seed: number | undefined;
  json: boolean;
  /** A convoke HTTP facade the workflow's contract calls go to (without it they raise a configuration error). */
  endpoint?: string;
  /** The credential reference for --endpoint: an environment variable name, or a file (owner-only). */
  tokenEnv?: string;
  tokenFile?: string;
  /** How a jetstream: or esdb: store logs in (a context's, when its URL names no user). */
  storeAuth?: StoreAuth;
}

/** main.ts imports this module to register the command: everything else loads when it runs. */
export async function workflowRunCommand(file: string, options: WorkflowRunOptions, io: CliIo): Promise<number> {
  const [
    { randomInt },
    { readFileBytes },
    { parseStrictBytes },
    { parseDocumentBytes },
    { openStore },
    { SystemClock },
    { seededRandom },
    { WorkflowExecutor },
    { JqWorkerEvaluator },
    { workflowStreams },
  ] = await Promise.all([
    import('node:crypto'),
    import('../../deployment/files.js'),
    import('../../contract/ijson.js'),
    // One reader of workflow text for bundles and files: YAML 1.2 core or strict JSON, then I-JSON.
    import('../../workflow/dsl/text.js'),
    import('../../adapters/store/open.js'),
    import('../../contract/clock.js'),
    import('../../runtime/random.js'),
    import('../../workflow/exec/executor.js'),
    import('../../workflow/exec/jq.js'),
    import('../../workflow/exec/streams.js'),
  ]);
  try {
    const document = parseDocumentBytes(await readFileBytes(file), file, file);
    const input = parseStrictBytes(Buffer.from(options.input, 'utf8'), '--input');
    const clock = new SystemClock();
    const invocations = await contractCalls(options, clock);
    const credentials = await storeLogin(options.store, options.storeAuth);
    const store = await openStore(options.store, { clock, ...(credentials ? { credentials } : {}) });
    const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000 });
    const executor = new WorkflowExecutor({
      store: workflowStreams(store),
      clock,
      random: seededRandom(options.seed ?? randomInt(2 ** 31)),
      evaluator,
      ...(invocations ? { invocations } : {}),
    });
    try {
      const { instanceId } = await executor.start({ principalId: options.principal, invocationKey: options.key, document, input });
      const record = await executor.wait(instanceId, options.waitMs);
      if (options.json) {
        const tasks = Object.entries(record.tasks).map(([at, task]) => ({ at, name: task.name, state: task.state }));
        io.stdout.write(
          JSON.stringify({ instanceId, status: record.status, output: record.output, error: record.error, tasks, children: record.children }, null, 2) + '\n',
        );
      } else if (record.status === 'completed') io.stdout.write(JSON.stringify(record.output, null, 2) + '\n');
      if (record.status === 'running') {
        io.stderr.write(`workflow instance ${instanceId} is still running after ${options.waitMs} ms\n`);
        return exitCodes.pending;
      }
      if (record.status !== 'completed') {
        io.stderr.write(JSON.stringify({ instanceId, status: record.status, error: record.error }) + '\n');
        return exitCodes.outcomeNotSuccess;
      }
      return exitCodes.ok;
    } finally {
      await executor.close();
      await evaluator.close();
      await store.close();
    }
  } catch (error) {
    if (!isAdapterError(error)) throw error;
    io.stderr.write(JSON.stringify(error.toJSON()) + '\n');
    return exitCodeOfError(error);
  }
}

/** Contract calls over HTTP to --endpoint, authenticated by the credential --token-env or --token-file names. */
async function contractCalls(options: WorkflowRunOptions, clock: import('../../contract/clock.js').Clock) {
  if (options.endpoint === undefined) {
    if (options.tokenEnv !== undefined || options.tokenFile !== undefined) throw invalidInput('--token-env and --token-file go with --endpoint');
    return undefined;
  }
  if ((options.tokenEnv === undefined) === (options.tokenFile === undefined))
    throw invalidInput('--endpoint needs exactly one of --token-env and --token-file');
  // Read at each call (it may be rotated), but refused now if others may read it, like a password file.
  if (options.tokenFile !== undefined) await checkSecretFile(options.tokenFile, 'token file', limits.tokenFileBytesMax);
  const { HttpContracts } = await import('../../workflow/exec/http-contracts.js');
  const credential = options.tokenEnv !== undefined ? { env: options.tokenEnv } : { file: options.tokenFile as string };
  return new HttpContracts({ endpoint: options.endpoint, credential, clock });
}

/** `convoke workflow run`, under the `workflow` command (created when no other module made it). */
export function addWorkflowRunCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  const workflow = workflowCommand(program);
  startContextOptions(
    workflow
      .command('run')
      .argument('<file>', 'workflow document (YAML or JSON)')
      .description('run a workflow document embedded (no server) and print its output'),
  )
    .option('--input <json>', 'the workflow input (strictly parsed JSON)', '{}')
    .option(
      '--store <url>',
      "store URL (memory:, sqlite:PATH); the same --store and --key resume an unfinished instance (default: the context's, else memory:)",
    )
    .option('--key <key>', 'invocation key of the instance', 'run')
    .option('--principal <id>', "principal the instance runs as (default: the context's, else local)")
    .option('--wait-ms <n>', 'how long to wait for the instance to finish', nonNegativeInteger, 600_000)
    .option('--seed <n>', 'seed of the retry jitter source', nonNegativeInteger)
    .option('--json', 'print the instance (status, output, error, tasks) as JSON', false)
    .option(
      '--endpoint <url>',
      "a convoke HTTP facade for the workflow's contract calls (--principal must be the credential's principal; default: the context's)",
    )
    .option('--token-env <name>', "environment variable holding the bearer token for --endpoint (default: the context's)")
    .option('--token-file <path>', "file holding the bearer token for --endpoint, mode 0600 (default: the context's)")
    .action(async (file: string, o) => setExit(await workflowRunCommand(file, await runOptionsOf(o), io)));
}

/** workflow run's options: each flag, else the context --context names, else the default. */
async function runOptionsOf(o: Record<string, unknown>): Promise<WorkflowRunOptions> {
  const c = await startConnectionOf(o, 'workflow run', 'workflow-run');
  const flag = (name: string) => o[name] as string | undefined;
  const endpoint = flag('endpoint') ?? c.endpoint;
  // A token flag replaces the context's token whichever kind it is.
  const tokenFlagged = flag('tokenEnv') !== undefined || flag('tokenFile') !== undefined;
  const token = tokenFlagged
    ? { tokenEnv: flag('tokenEnv'), tokenFile: flag('tokenFile') }
    : c.token === undefined
      ? {}
      : 'env' in c.token
        ? { tokenEnv: c.token.env }
        : { tokenFile: c.token.file };
  const options: WorkflowRunOptions = {
    input: o.input as string,
    store: flag('store') ?? c.store ?? 'memory:',
    key: o.key as string,
    principal: flag('principal') ?? c.principal ?? 'local',
    waitMs: o.waitMs as number,
    seed: o.seed as number | undefined,
    json: o.json as boolean,
    ...(endpoint === undefined ? {} : { endpoint }),
    ...(c.storeAuth === undefined ? {} : { storeAuth: c.storeAuth }),
  };
  if (token.tokenEnv !== undefined) options.tokenEnv = token.tokenEnv;
  if (token.tokenFile !== undefined) options.tokenFile = token.tokenFile;
  return options;
}

/** `convoke workflow inspect ID --store URL`: the same as `convoke inspect wf…`. */
export function addWorkflowInspectCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  const workflow = workflowCommand(program);
  storeCredsOption(contextOptions(workflow.command('inspect')))
    .argument('<instanceId>', 'workflow instance id (wf…)')
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT (default: the context's)")
    .option('--json', 'machine-readable output', false)
    .description("show a workflow instance's stored transitions (guard, applied or void), its record, and whether it replays through the machines")
    .action(async (instanceId: string, o) => {
      if (!isWorkflowInstanceId(instanceId)) throw invalidInput(`not a workflow instance id: ${JSON.stringify(instanceId.slice(0, 80))}`);
      const target = await storeOf(o, 'workflow inspect');
      setExit(await (await import('./ops.js')).inspectCommand(instanceId, { ...target, json: o.json }, io));
    });
}
