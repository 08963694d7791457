/**
 * The `convoke` command. Exit codes (exit-codes.ts, README "Exit codes"): 0 success, 2 invalid
 * usage or input, one code per other AdapterError kind (the error as JSON on stderr), 9 not found,
 * 10 pending, 11 a decision that is not success under --fail-on-outcome, 1 anything unexpected.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { invalidInput, isAdapterError } from '../contract/errors.js';
import { addWorkflowDslCommands } from './commands/workflow-dsl.js';
import { exitCodeOfError, exitCodes } from './exit-codes.js';
import { addContextCommands } from './commands/context.js';
import {
  contextOptions,
  credsHelp,
  getClientOf,
  natsClientOf,
  natsPrincipalOptions,
  startConnectionOf,
  startContextOptions,
  storeCredsOption,
  storeOf,
} from './options.js';
import { processIo, type CliIo } from './io.js';
import { terminalText } from './terminal-text.js';
import { packageVersion } from './version.js';
import { addWorkflowInspectCommand, addWorkflowRunCommand } from './commands/workflow-run.js';
import { addWorkflowFacadeCommands } from './commands/workflow-facade.js';
import { addWorkflowListCommand } from './commands/workflow-list.js';
import { stuckConfigOption } from './stuck-bounds.js';

// Each command's module is imported when that command runs: `convoke peer` never loads Fastify,
// `convoke canonicalize` never loads NATS, and `--help` loads neither.
const commands = {
  canonicalize: () => import('./commands/canonicalize.js'),
  id: () => import('./commands/id.js'),
  demo: () => import('./commands/demo.js'),
  ops: () => import('./commands/ops.js'),
  serve: () => import('./commands/serve.js'),
  bundle: () => import('./commands/bundle.js'),
  peer: () => import('./commands/peer.js'),
  invoke: () => import('./commands/invoke.js'),
  act: () => import('./commands/act.js'),
  list: () => import('./commands/list.js'),
  prune: () => import('./commands/prune.js'),
};

const integer = (value: string) => {
  if (!/^-?[0-9]+$/.test(value)) throw new InvalidArgumentError('expected an integer');
  return Number(value);
};

export { packageVersion };

export function buildProgram(io: CliIo, setExit: (code: number) => void): Command {
  const program = new Command('convoke')
    .version(packageVersion(), '-V, --version', 'print the package version')
    .description('Contract invocations: authenticated fan-out to frozen peers, fenced results, immutable decisions, event-sourced records.')
    .exitOverride()
    // Descriptions wrap even beside long option names on a narrow terminal (commander's default: not below 40).
    .configureHelp({ minWidthToWrap: 16 })
    // Help wraps at the width tables get (the terminal's, $COLUMNS, else 120; 80 for an io with none).
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      // Commander's usage errors quote the argument given, which may be data pasted from anywhere: shown escaped.
      writeErr: (s) => io.stderr.write(terminalText(s)),
      getOutHelpWidth: () => io.columns ?? 80,
      getErrHelpWidth: () => io.columns ?? 80,
    });

  addLocalCommands(program, io, setExit);
  addContextCommands(program, io, setExit);
  addNatsCommands(program, io, setExit);
  addStoreCommands(program, io, setExit);
  addWorkflowDslCommands(program, io, setExit);
  addWorkflowRunCommand(program, io, setExit);
  addWorkflowFacadeCommands(program, io, setExit);
  addWorkflowInspectCommand(program, io, setExit);
  addWorkflowListCommand(program, io, setExit);
  return program;
}

/** Resolves on SIGINT or SIGTERM. */
function interrupted(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}

export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  let code = 0;
  const program = buildProgram(io, (c) => (code = c));
  try {
    await program.parseAsync(argv);
    return code;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? exitCodes.ok : exitCodes.invalidInput;
    // An error's description may be a server's or a store's words: its controls are shown escaped
    // (in the JSON, as JSON's own escapes: the same value).
    if (isAdapterError(error)) {
      io.stderr.write(terminalText(JSON.stringify(error.toJSON())) + '\n');
      return exitCodeOfError(error);
    }
    io.stderr.write(`convoke: ${terminalText((error as Error).stack ?? String(error))}\n`);
    return exitCodes.failure;
  }
}

/** Commands that need nothing running: demo, canonicalize, bundle check, id. */
function addLocalCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  startContextOptions(
    program
      .command('demo')
      .description(
        'run a review interaction end to end in one process (memory store, in-process bus and peers; scenarios that show a retry use a temporary SQLite store)',
      ),
  )
    .option('--scenario <name>', 'default | one-eligible-failover | lease-expiry | cancel-siblings | revocation | pipeline', 'default')
    .option('--peers <n>', 'number of in-process peers', integer, 5)
    .option('--quorum <k>', 'approvals needed', integer, 3)
    .option('--seed <n>', 'seed for peer verdicts and latencies', integer, 7)
    .option('--approve-rate <p>', 'probability that a peer approves', Number, 0.75)
    .option(
      '--store <url>',
      "store URL: memory:, sqlite:PATH, jetstream:nats://HOST:PORT or esdb://… (a jetstream: or esdb: store logs in with the --context's login); default the --context's, else memory:, or a temporary SQLite file for a scenario that shows a retry",
    )
    .option('--json', 'machine-readable output', false)
    .action(async (o) => {
      // A demo takes a context for its store (and that store's login) only when --context names it.
      const c = await startConnectionOf({ context: o.context, contexts: o.contexts, store: o.store }, 'demo', 'demo');
      if (c.contextName !== undefined && c.store === undefined)
        throw invalidInput(`demo --context writes the context's store: context "${c.contextName}" has none`);
      const store = { ...(c.store === undefined ? {} : { store: c.store }), ...(c.storeAuth === undefined ? {} : { storeAuth: c.storeAuth }) };
      const run = { scenario: o.scenario, peers: o.peers, quorum: o.quorum, json: o.json, seed: o.seed, approveRate: o.approveRate };
      setExit(await (await commands.demo()).demoCommand({ ...run, ...store }, io));
    });

  program
    .command('canonicalize')
    .argument('[file]', 'JSON file (standard input when absent)')
    .description('strictly parse I-JSON and print its RFC 8785 canonical form')
    .action(async (file?: string) => setExit(await (await commands.canonicalize()).canonicalizeCommand(file, io)));

  program
    .command('bundle')
    .description('contract bundles')
    .command('check')
    .argument('<file>', 'bundle file (JSON or YAML)')
    .option('--json', 'machine-readable output', false)
    .description('validate a bundle (every error at once) and print its digest, subjects and interactions')
    .action(async (file: string, o) => setExit(await (await commands.bundle()).bundleCheckCommand(file, { json: o.json }, io)));

  const id = program.command('id').description('compute convoke identities');
  id.command('operation')
    .requiredOption('--principal <p>', 'principal id')
    .requiredOption('--contract-digest <c>', 'contract digest (sha256:…)')
    .requiredOption('--key <k>', 'invocation key')
    .action(async (o) => setExit((await commands.id()).idOperationCommand({ principal: o.principal, contractDigest: o.contractDigest, key: o.key }, io)));
  id.command('publication')
    .requiredOption('--contract-digest <c>', 'contract digest (sha256:…)')
    .requiredOption('--operation <o>', 'operation id')
    .requiredOption('--branch <b>', 'branch id')
    .requiredOption('--attempt <n>', 'attempt (1..16)')
    .action(async (o) =>
      setExit(
        (await commands.id()).idPublicationCommand({ contractDigest: o.contractDigest, operation: o.operation, branch: o.branch, attempt: o.attempt }, io),
      ),
    );
}

/** Commands that serve, or talk to, a deployment over NATS: serve, peer, invoke. */
function addNatsCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  startContextOptions(program.command('serve').description('serve the HTTP facade (and the coordinator) for the deployment a config file describes'))
    .requiredOption('--config <file>', 'deployment config (JSON)')
    .option('--creds <file>', `${credsHelp}; with a nats transport, in place of transport.passwordEnv`)
    .addOption(
      new Option('--log-level <level>', 'least severe log line written (JSON lines on stderr)')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default('info'),
    )
    .action(async (o) =>
      setExit(
        await (await commands.serve()).serveCommand({ config: o.config, logLevel: o.logLevel, context: o.context, contexts: o.contexts, creds: o.creds }, io),
      ),
    );

  startContextOptions(
    program.command('peer').description('run an example peer process on NATS (fixed results, delays, deterministic rules; fenced effect sink)'),
  )
    .requiredOption('--config <file>', 'peer config (JSON)')
    .option('--creds <file>', `${credsHelp}; in place of nats.passwordEnv`)
    .action(async (o) =>
      setExit(await (await commands.peer()).peerCommand({ config: o.config, context: o.context, contexts: o.contexts, creds: o.creds }, io)),
    );

  natsPrincipalOptions(program.command('invoke').description('invoke a contract interaction over the NATS command API and print the InvocationResult'))
    .requiredOption('--contract <file>', 'contract bundle file (its id, version and digest are sent)')
    .requiredOption('--interaction <id>', 'interaction id')
    .requiredOption('--key <key>', 'invocation key (retry with the same key)')
    .requiredOption('--input <json>', 'input JSON (strictly parsed)')
    .option('--wait-for <boundary>', "decision | settled (may only strengthen the contract's boundary)")
    .option('--wait-ms <n>', 'how long the coordinator waits for the boundary', integer)
    .option('--json', 'print the reply as JSON', false)
    .option('--fail-on-outcome', `exit ${exitCodes.outcomeNotSuccess} when the decision is not success`, false)
    .action(async (o) => {
      const client = await natsClientOf(o, 'invoke');
      const { invokeCommand } = await commands.invoke();
      const request = { contract: o.contract, interaction: o.interaction, key: o.key, input: o.input, waitFor: o.waitFor, waitMs: o.waitMs };
      setExit(await invokeCommand({ ...client, ...request, json: o.json, failOnOutcome: o.failOnOutcome }, io));
    });
}

/** Commands that read a store: get, cancel, inspect, list, tail, replay. */
function addStoreCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  addActCommands(program, io, setExit);
  addReadCommands(program, io, setExit);
}

/** `get` and `cancel`: acting on one operation as its principal (or reading it as an operator). */
function addActCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  natsPrincipalOptions(
    program
      .command('get')
      .argument('<operationId>', 'operation id, the short id tail prints, or a unique prefix')
      .description('show an operation as its InvocationResult: as the invoking principal over NATS (--nats, --user), or from a store as an operator (--store)'),
  )
    .option('--store <url>', 'read the operation from this store (alone), or resolve a short id with it (with --nats)')
    .option('--wait-for <boundary>', 'decision | settled (over NATS)')
    .option('--wait-ms <n>', 'how long the coordinator waits for the boundary (over NATS)', integer)
    .option('--json', 'machine-readable output', false)
    .option('--fail-on-outcome', `exit ${exitCodes.outcomeNotSuccess} when the decision is not success`, false)
    .action(async (operationId: string, o) => {
      const client = await getClientOf(o);
      const { getCommand } = await commands.act();
      setExit(await getCommand(operationId, { ...client, waitFor: o.waitFor, waitMs: o.waitMs, json: o.json, failOnOutcome: o.failOnOutcome }, io));
    });

  natsPrincipalOptions(
    program
      .command('cancel')
      .argument('<operationId>', 'operation id, the short id tail prints (with --store), or a unique prefix (with --store)')
      .description('cancel an open operation as its invoking principal, through the coordinator over NATS; only interactions that declare caller cancellation'),
  )
    .option('--store <url>', 'resolve a short id or prefix with this store')
    .option('--json', 'print the reply as JSON', false)
    .action(async (operationId: string, o) => {
      const client = await natsClientOf(o, 'cancel');
      setExit(await (await commands.act()).cancelCommand(operationId, { ...client, json: o.json }, io));
    });
}

/** `inspect`, `list`, `tail`, `replay`: an operator reading a store. */
function addReadCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  storeCredsOption(contextOptions(program.command('inspect')))
    .argument('<operationId>', 'operation id, the short id tail and list print, or a unique prefix; or a workflow instance (wf… id or unique prefix)')
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://… (default: the context's)")
    .option('--json', 'machine-readable output', false)
    .description("show an operation's (or a workflow instance's) stored transitions (guard, applied or void) and its projected record")
    .action(async (operationId: string, o) => {
      const target = await storeOf(o, 'inspect');
      setExit(await (await commands.ops()).inspectCommand(operationId, { ...target, json: o.json }, io));
    });

  addListCommand(program, io, setExit);
  addPruneCommand(program, io, setExit);

  storeCredsOption(contextOptions(program.command('tail')))
    .option('--store <url>', "store URL (default: the context's)")
    .option('--json', 'one JSON object per transition', false)
    .description('follow new transitions as they are appended, until interrupted')
    .action(async (o) => {
      const target = await storeOf(o, 'tail');
      setExit(await (await commands.ops()).tailCommand({ ...target, json: o.json }, io, interrupted()));
    });

  storeCredsOption(contextOptions(program.command('replay')))
    .argument('[operationId]', 'one operation (id, short id or unique prefix) or workflow instance (wf… id or unique prefix); every one when absent')
    .option('--store <url>', "store URL (default: the context's)")
    .option('--json', 'machine-readable output', false)
    .option('--fix-index', 'write every operations and workflow instances index row that differs from its log again (and remove rows without a log)', false)
    .description(
      'rebuild records from their logs through the XState machines and check the operations and workflow instances indexes against them; exit 1 on any difference',
    )
    .action(async (operationId: string | undefined, o) => {
      const target = await storeOf(o, 'replay');
      setExit(await (await commands.ops()).replayCommand(operationId, { ...target, json: o.json, fixIndex: o.fixIndex }, io));
    });
}

/** `prune`: payload expiry of settled operations, as an operator. */
function addPruneCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  storeCredsOption(contextOptions(program.command('prune')))
    .description(
      'payload expiry: tombstone every operation settled (complete) and every workflow instance ended longer ago than --keep (an instance whose parent or child still runs is kept); the log goes, the key stays and answers expired (never admitted or started again)',
    )
    .requiredOption('--keep <period>', 'the replay/recovery period: a whole number and a unit (ms, s, m, h, d), at least 1h, e.g. 30d')
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://… (default: the context's)")
    .option('--dry-run', 'count what would be pruned, change nothing', false)
    .option('--json', 'machine-readable output', false)
    .action(async (o) => {
      const target = await storeOf(o, 'prune');
      setExit(await (await commands.prune()).pruneCommand({ ...target, keep: o.keep, dryRun: o.dryRun, json: o.json }, io, interrupted()));
    });
}

/** `list`: the operations index as an operator sees it. */
function addListCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  stuckConfigOption(storeCredsOption(contextOptions(program.command('list'))))
    .description("list operations from the operations index, newest admission first, as an operator (every principal's); filters as GET /contract-invocations")
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://… (default: the context's)")
    .option('--principal <id>', "only this principal's operations")
    .option('--phase <phase>', 'admitted | active | closed | settled')
    .option('--outcome <outcome>', 'open | success | partial | failed | indeterminate')
    .option('--settlement <status>', 'pending | complete | indeterminate')
    .option('--interaction <id>', 'interaction id')
    .option('--since <instant>', 'admitted at or after (RFC 3339 or ms since the epoch)')
    .option('--until <instant>', 'admitted before (RFC 3339 or ms since the epoch)')
    .option('--limit <n>', 'rows per page (1..500, default 50)')
    .option('--cursor <cursor>', 'the next page, as the previous page printed it')
    .option('--stuck [reason]', 'only stuck operations: any reason, or open-past-deadline | lease-expired | outbox-pending | settlement-indeterminate')
    .option('--json', 'machine-readable output', false)
    .action(async (o) => {
      const target = await storeOf(o, 'list');
      const filters = { principal: o.principal, phase: o.phase, outcome: o.outcome, settlement: o.settlement, interaction: o.interaction };
      const page = { since: o.since, until: o.until, limit: o.limit, cursor: o.cursor, stuck: o.stuck, config: o.config };
      setExit(await (await commands.list()).listCommand({ ...target, ...filters, ...page, json: o.json }, io));
    });
}
