/**
 * `convoke workflow run FILE [--with FILE]… --input JSON [--store URL] [--running-bound N] [--context NAME] [--json]`: runs a Serverless Workflow
 * 1.0.3 document (YAML or JSON) embedded — no server — on the given store (memory by default) and
 * prints its output. Each `--with` document is pinned beside it as a bundle's would be: a `run:
 * workflow` task names one by its `document.namespace`, `name` and `version` (the document itself
 * always resolves). With `--with`, the instance's bundle digest is that of all the documents
 * (FILE first, then each `--with` in order), so the same --store and --key resume the instance
 * only with the same documents. Exit 0 when the instance completed, 11 when it faulted or was cancelled (the
 * error on stderr), 10 when it was still running at the end of --wait-ms (its id on stderr: run
 * the same command again with the same --key and --store to resume it), or the AdapterError's
 * code when it could not start (an unsupported task: 7).
 *
 * Registered by `addWorkflowRunCommand` under `convoke workflow` (created here when absent).
 */
import type { Command } from 'commander';
import { AdapterError, isAdapterError, invalidInput } from '../../contract/errors.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import type { SubworkflowRef } from '../../workflow/exec/document.js';
import type { WorkflowExecutor } from '../../workflow/exec/executor.js';
import type { WorkflowRecord } from '../../workflow/exec/record.js';
import type { ExpressionEvaluator } from '../../workflow/exec/jq.js';
import type { CliIo } from '../io.js';
import { exitCodeOfError, exitCodes } from '../exit-codes.js';
import { prefixHexMin, typedInstanceId } from '../typed-ids.js';
import { storeLogin, type StoreAuth } from '../connection.js';
import {
  contextOptions,
  nonNegativeInteger,
  repeatable,
  startConnectionOf,
  startContextOptions,
  storeCredsOption,
  storeOf,
  workflowCommand,
} from '../options.js';
import { checkSecretFile } from '../secrets.js';
import { limits } from '../../contract/limits.js';
import type { EgressOptions } from '../../workflow/exec/egress.js';
import { originPatterns } from '../../contract/origins.js';
import { terminalText } from '../terminal-text.js';

export interface WorkflowRunOptions {
  input: string;
  /** Documents a `run: workflow` task may name beside the run's own (`--with`, repeatable). */
  with: string[];
  store: string;
  key: string;
  principal: string;
  waitMs: number;
  seed: number | undefined;
  /** `--running-bound`: running instances the principal may hold on the store, this one included (default limits.workflowRunningPerPrincipalDefault). */
  runningBound?: number;
  json: boolean;
  /** A convoke HTTP facade the workflow's contract calls go to (without it they raise a configuration error). */
  endpoint?: string;
  /** The credential reference for --endpoint: an environment variable name, or a file (owner-only). */
  tokenEnv?: string;
  tokenFile?: string;
  /** How a jetstream: or esdb: store logs in (a context's, when its URL names no user). */
  storeAuth?: StoreAuth;
  /** `--http-allow`: the only origins HTTP calls may reach (then private addresses only with `httpPrivate`); none: calls go anywhere, as they always have. */
  httpAllow?: string[];
  /** `--http-private`: with --http-allow, the listed origins may be private or special-purpose addresses. */
  httpPrivate?: boolean;
}

/** main.ts imports this module to register the command: everything else loads when it runs. */
export async function workflowRunCommand(file: string, options: WorkflowRunOptions, io: CliIo): Promise<number> {
  const [
    { randomInt },
    { parseStrictBytes },
    { openStore },
    { SystemClock },
    { seededRandom },
    { WorkflowExecutor },
    { JqWorkerEvaluator },
    { workflowStreams },
    { isWorkflowNamed },
    { canonicalJson, sha256Hex },
  ] = await Promise.all([
    import('node:crypto'),
    import('../../contract/ijson.js'),
    import('../../adapters/store/open.js'),
    import('../../contract/clock.js'),
    import('../../runtime/random.js'),
    import('../../workflow/exec/executor.js'),
    import('../../workflow/exec/jq.js'),
    import('../../workflow/exec/streams.js'),
    import('../../workflow/exec/document.js'),
    import('../../contract/canonical.js'),
  ]);
  try {
    const egress = egressOf(options);
    // Its worker starts at the first evaluation: it compiles the documents' jq, then evaluates the instance's.
    const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000 });
    try {
      const { document, pinned } = await checkedDocuments(file, options.with, await documentChecks(evaluator));
      const input = parseStrictBytes(Buffer.from(options.input, 'utf8'), '--input');
      const clock = new SystemClock();
      const invocations = await contractCalls(options, clock);
      const credentials = await storeLogin(options.store, options.storeAuth);
      const store = await openStore(options.store, { clock, ...(credentials ? { credentials } : {}) });
      const executor = new WorkflowExecutor({
        store: workflowStreams(store),
        clock,
        random: seededRandom(options.seed ?? randomInt(2 ** 31)),
        evaluator,
        ...(invocations ? { invocations } : {}),
        ...(egress ? { egress } : {}),
        // FILE is pinned beside its --with documents as they are beside it: one of them may run it (the check resolved it so).
        ...(pinned.length > 0 ? { workflows: (_digest, ref) => [document, ...pinned].find((other) => isWorkflowNamed(other, ref)) } : {}),
        ...(options.runningBound === undefined ? {} : { runningPerPrincipal: options.runningBound }),
        runningBoundSetting: '--running-bound',
      });
      // Documents run together are one bundle: their digest names the instance (FILE alone: its own digest, the executor's default).
      const bundleDigest = pinned.length > 0 ? `sha256:${sha256Hex(canonicalJson([document, ...pinned]))}` : undefined;
      const start = { principalId: options.principal, invocationKey: options.key, document, input, ...(bundleDigest ? { bundleDigest } : {}) };
      return await runToReport(executor, start, options, io).finally(() => store.close());
    } finally {
      await evaluator.close();
    }
  } catch (error) {
    if (!isAdapterError(error)) throw error;
    io.stderr.write(terminalText(JSON.stringify(error.toJSON())) + '\n');
    return exitCodeOfError(error);
  }
}

/** Starts (or finds) the instance and reports it once it ends or --wait-ms passes; the executor is closed either way. */
async function runToReport(
  executor: WorkflowExecutor,
  start: Parameters<WorkflowExecutor['start']>[0],
  options: WorkflowRunOptions,
  io: CliIo,
): Promise<number> {
  try {
    const { instanceId } = await executor.start(start);
    return await report(instanceId, await executor.wait(instanceId, options.waitMs), executor, options, io);
  } finally {
    await executor.close();
  }
}

/**
 * Prints the instance as it stands and answers the exit code: with --json the instance and its
 * child instances, as they are; else its output for a person, in JSON still but with its controls
 * shown in JSON's own escapes (terminalText: the same value).
 */
async function report(
  instanceId: string,
  record: WorkflowRecord,
  executor: Pick<WorkflowExecutor, 'get'>,
  options: WorkflowRunOptions,
  io: CliIo,
): Promise<number> {
  if (options.json) {
    const tasks = Object.entries(record.tasks).map(([at, task]) => ({ at, name: task.name, state: task.state }));
    const childInstances = await Promise.all(
      Object.entries(record.subworkflows).map(async ([at, child]) => ({
        at,
        instanceId: child.instanceId,
        workflow: child.workflow,
        status: (await executor.get(child.instanceId))?.status ?? null,
        disposition: child.disposition?.disposition ?? null,
      })),
    );
    const shown = { instanceId, status: record.status, output: record.output, error: record.error, tasks, children: record.children, childInstances };
    io.stdout.write(JSON.stringify(shown, null, 2) + '\n');
  } else if (record.status === 'completed') io.stdout.write(terminalText(JSON.stringify(record.output, null, 2)) + '\n');
  if (record.status === 'running') {
    io.stderr.write(`workflow instance ${instanceId} is still running after ${options.waitMs} ms\n`);
    return exitCodes.pending;
  }
  if (record.status !== 'completed') {
    io.stderr.write(terminalText(JSON.stringify({ instanceId, status: record.status, error: record.error })) + '\n');
    return exitCodes.outcomeNotSuccess;
  }
  return exitCodes.ok;
}

/**
 * FILE and the `--with` documents, each read like FILE. FILE and each of them are checked as the executor
 * would check them beside the others (their `run: workflow` references resolved among them), then
 * against the DSL 1.0.3 schema as a bundle's workflows are (dsl-schema.ts), then every jq
 * expression compiled (jq-compile.ts), before the store is opened: nothing is stored for a
 * document a bundle could not pin. Two naming the same workflow (namespace, name and version) are
 * refused, as is one naming the run's own.
 */
interface DocumentChecks {
  readFileBytes: (path: string) => Promise<Uint8Array>;
  parseDocumentBytes: (bytes: Uint8Array, source: string, name: string) => JsonValue;
  refuseBundle: (document: JsonValue, file: string) => void;
  checkDocument: (document: JsonValue, resolves?: (ref: SubworkflowRef) => boolean) => string;
  isWorkflowNamed: (document: JsonValue, ref: SubworkflowRef) => boolean;
  validateDslDocument: (document: JsonObject, where: string) => Promise<void>;
  /** Throws invalid-input naming `prefix` and the pointer of an expression jq does not compile. */
  compiles: (document: JsonObject, prefix: string) => Promise<void>;
}

/** The checks of a workflow file and its --with documents, loaded when a command needs them; jq compiled by `evaluator`. */
async function documentChecks(evaluator: ExpressionEvaluator): Promise<DocumentChecks> {
  const [{ readFileBytes, refuseBundle }, { parseDocumentBytes }, { checkExpressionsCompile }, { checkDocument, isWorkflowNamed }, { validateDslDocument }] =
    await Promise.all([
      import('../../deployment/files.js'),
      // One reader of workflow text for bundles and files: YAML 1.2 core or strict JSON, then I-JSON.
      import('../../workflow/dsl/text.js'),
      import('../../workflow/exec/jq-compile.js'),
      import('../../workflow/exec/document.js'),
      import('../../workflow/dsl/dsl-schema.js'),
    ]);
  const compiles = (checked: JsonObject, prefix: string) => checkExpressionsCompile(checked, evaluator, prefix);
  return { readFileBytes, parseDocumentBytes, refuseBundle, checkDocument, isWorkflowNamed, validateDslDocument, compiles };
}

/**
 * A standalone workflow file and its `--with` documents checked as `workflow run` checks them
 * before anything runs (supported tasks, resolved calls and `run: workflow` references, the DSL
 * 1.0.3 schema, deterministic expressions, jq that compiles): `workflow validate` and `graph` on a
 * document. Throws the first refusal.
 */
export async function checkWorkflowFiles(file: string, files: readonly string[]): Promise<{ document: JsonObject; pinned: JsonValue[] }> {
  const { JqWorkerEvaluator } = await import('../../workflow/exec/jq.js');
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000 });
  try {
    const { document, pinned } = await checkedDocuments(file, files, await documentChecks(evaluator));
    return { document: document as JsonObject, pinned };
  } finally {
    await evaluator.close();
  }
}

async function checkedDocuments(file: string, files: readonly string[], parts: DocumentChecks): Promise<{ document: JsonValue; pinned: JsonValue[] }> {
  const own = parts.parseDocumentBytes(await parts.readFileBytes(file), file, file);
  parts.refuseBundle(own, file);
  const documents: JsonValue[] = [];
  for (const path of files) documents.push(parts.parseDocumentBytes(await parts.readFileBytes(path), path, path));
  const all = [own, ...documents];
  const seen = new Map<string, string>();
  for (const [index, document] of all.entries()) {
    const path = index === 0 ? 'the workflow' : (files[index - 1] as string);
    const header = headerOf(document);
    const key = JSON.stringify(header);
    const earlier = seen.get(key);
    if (earlier !== undefined) throw invalidInput(`--with ${path}: ${header.join('/')} is also ${earlier}; each workflow is given once`);
    seen.set(key, index === 0 ? 'the workflow run' : `--with ${path}`);
    try {
      parts.checkDocument(document, (ref) => all.some((other) => parts.isWorkflowNamed(other, ref)));
    } catch (error) {
      // FILE's refusals name its pointers alone, as the executor's do.
      if (!isAdapterError(error) || index === 0) throw error;
      throw new AdapterError(error.kind, `--with ${path}: ${error.description ?? error.kind}`);
    }
    // Checked, so an object: the schema's refusal names the file and the pointer, as a bundle's names the workflow.
    await parts.validateDslDocument(document as JsonObject, index === 0 ? file : `--with ${path}`);
    await parts.compiles(document as JsonObject, index === 0 ? '' : `--with ${path}: `);
  }
  return { document: own, pinned: documents };
}

/** A document's namespace, name and version, as a `run: workflow` reference names it. */
export function headerOf(document: JsonValue): [string, string, string] {
  const head = typeof document === 'object' && document !== null && !Array.isArray(document) ? document.document : undefined;
  const field = (name: string) =>
    typeof head === 'object' && head !== null && !Array.isArray(head) && typeof head[name] === 'string' ? (head[name] as string) : '?';
  return [field('namespace'), field('name'), field('version')];
}

/**
 * The egress policy --http-allow and --http-private ask for. One user running their own workflow on
 * their own machine calls what they choose (local services included), so without --http-allow
 * there is none; with it, the rules of `convoke serve` (workflows.http) hold.
 */
function egressOf(options: WorkflowRunOptions): EgressOptions | undefined {
  const allow = options.httpAllow ?? [];
  if (allow.length === 0) {
    if (options.httpPrivate) throw invalidInput('--http-private goes with --http-allow (without --http-allow, HTTP calls may go anywhere)');
    return undefined;
  }
  originPatterns(allow, '--http-allow');
  return { allow, privateNetworks: options.httpPrivate === true };
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
    .option(
      '--with <file>',
      'a workflow document its run: workflow tasks may name (by document namespace, name and version); repeat for more',
      repeatable,
      [] as string[],
    )
    .option('--input <json>', 'the workflow input (strictly parsed JSON)', '{}')
    .option(
      '--store <url>',
      "store URL: memory:, sqlite:PATH, jetstream:nats://HOST:PORT or esdb://… (a jetstream: or esdb: store logs in with the --context's login); the same --store and --key resume an unfinished instance (default: the context's, else memory:)",
    )
    .option('--key <key>', 'invocation key of the instance', 'run')
    .option('--principal <id>', "principal the instance runs as (default: the context's, else local)")
    .option('--wait-ms <n>', 'how long to wait for the instance to finish', nonNegativeInteger, 600_000)
    .option('--seed <n>', 'seed of the retry jitter source', nonNegativeInteger)
    .option(
      '--running-bound <n>',
      `running instances the principal may hold on the store, this one included: past it nothing starts (1 to ${limits.workflowRunningPerPrincipalMax}, default ${limits.workflowRunningPerPrincipalDefault})`,
      nonNegativeInteger,
    )
    .option('--json', 'print the instance (status, output, error, tasks) as JSON', false)
    .option(
      '--endpoint <url>',
      "a convoke HTTP facade for the workflow's contract calls (--principal must be the credential's principal; default: the context's)",
    )
    .option('--token-env <name>', "environment variable holding the bearer token for --endpoint (default: the context's)")
    .option('--token-file <path>', "file holding the bearer token for --endpoint, mode 0600 (default: the context's)")
    .option(
      '--http-allow <origin>',
      'an origin HTTP calls may reach (https://api.example.com, https://*.example.com, http://10.1.2.3:8080); repeat for more; given, no other origin and no private address (see --http-private)',
      repeatable,
      [] as string[],
    )
    .option('--http-private', 'with --http-allow: the listed origins may be private or special-purpose addresses (loopback, RFC 1918, link-local, …)', false)
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
    with: o.with as string[],
    store: flag('store') ?? c.store ?? 'memory:',
    key: o.key as string,
    principal: flag('principal') ?? c.principal ?? 'local',
    waitMs: o.waitMs as number,
    seed: o.seed as number | undefined,
    json: o.json as boolean,
    ...(o.runningBound === undefined ? {} : { runningBound: o.runningBound as number }),
    httpAllow: o.httpAllow as string[],
    httpPrivate: o.httpPrivate as boolean,
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
    .argument('<instanceId>', `workflow instance id (wf…), or a unique prefix of one (wf and at least ${prefixHexMin} hex, as workflow list shows it)`)
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://… (default: the context's)")
    .option('--json', 'machine-readable output', false)
    .description("show a workflow instance's stored transitions (guard, applied or void), its record, and whether it replays through the machines")
    .action(async (instanceId: string, o) => {
      if (typedInstanceId(instanceId) === undefined)
        throw invalidInput(
          `not a workflow instance id (wf + 64 hex) nor a prefix of one (wf + ${prefixHexMin}..63 hex): ${JSON.stringify(instanceId.slice(0, 80))}`,
        );
      const target = await storeOf(o, 'workflow inspect');
      setExit(await (await import('./ops.js')).inspectCommand(instanceId, { ...target, json: o.json }, io));
    });
}
