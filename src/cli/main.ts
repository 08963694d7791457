/**
 * The `convoke` command. Exit codes (exit-codes.ts, README "Exit codes"): 0 success, 2 invalid
 * usage or input, one code per other AdapterError kind (the error as JSON on stderr), 9 not found,
 * 10 pending, 11 a decision that is not success under --fail-on-outcome, 1 anything unexpected.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { isAdapterError } from '../contract/errors.js';
import { addWorkflowDslCommands } from './commands/workflow-dsl.js';
import { exitCodeOfError, exitCodes } from './exit-codes.js';
import { processIo, type CliIo } from './io.js';
import { packageVersion } from './version.js';
import { addWorkflowInspectCommand, addWorkflowRunCommand } from './commands/workflow-run.js';

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
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });

  addLocalCommands(program, io, setExit);
  addNatsCommands(program, io, setExit);
  addStoreCommands(program, io, setExit);
  addWorkflowDslCommands(program, io, setExit);
  addWorkflowRunCommand(program, io, setExit);
  addWorkflowInspectCommand(program, io, setExit);
  return program;
}

/**
 * How a command principal reaches the coordinators over NATS: servers, user, where the password is
 * and the principal. `required` when the command works only over NATS (get may read a store instead).
 */
function natsPrincipalOptions(command: Command, required: boolean): Command {
  const option = (flags: string, description: string) => (required ? command.requiredOption(flags, description) : command.option(flags, description));
  option('--nats <url>', 'NATS server URL(s), comma-separated');
  option('--user <user>', 'NATS user (the command principal unless --principal)');
  return command
    .option('--password-env <name>', 'environment variable holding the NATS password', 'CONVOKE_NATS_PASSWORD')
    .option('--principal <id>', 'command principal (subject token); defaults to --user');
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
    if (isAdapterError(error)) {
      io.stderr.write(JSON.stringify(error.toJSON()) + '\n');
      return exitCodeOfError(error);
    }
    io.stderr.write(`convoke: ${(error as Error).stack ?? String(error)}\n`);
    return exitCodes.failure;
  }
}

/** Commands that need nothing running: demo, canonicalize, bundle check, id. */
function addLocalCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  program
    .command('demo')
    .description(
      'run a review interaction end to end in one process (memory store, in-process bus and peers; scenarios that show a retry use a temporary SQLite store)',
    )
    .option('--scenario <name>', 'default | one-eligible-failover | lease-expiry | cancel-siblings | revocation', 'default')
    .option('--peers <n>', 'number of in-process peers', integer, 5)
    .option('--quorum <k>', 'approvals needed', integer, 3)
    .option('--seed <n>', 'seed for peer verdicts and latencies', integer, 7)
    .option('--approve-rate <p>', 'probability that a peer approves', Number, 0.75)
    .option(
      '--store <url>',
      'store URL (memory:, sqlite:PATH, jetstream:nats://HOST:PORT); default memory:, or a temporary SQLite file for a scenario that shows a retry',
    )
    .option('--json', 'machine-readable output', false)
    .action(async (o) =>
      setExit(
        await (
          await commands.demo()
        ).demoCommand({ scenario: o.scenario, store: o.store, peers: o.peers, quorum: o.quorum, json: o.json, seed: o.seed, approveRate: o.approveRate }, io),
      ),
    );

  program
    .command('canonicalize')
    .argument('[file]', 'JSON file (standard input when absent)')
    .description('strictly parse I-JSON and print its RFC 8785 canonical form')
    .action(async (file?: string) => setExit(await (await commands.canonicalize()).canonicalizeCommand(file, io)));

  program
    .command('bundle')
    .description('contract bundles')
    .command('check')
    .argument('<file>', 'bundle JSON file')
    .option('--json', 'machine-readable output', false)
    .description('validate a bundle (every error at once) and print its digest and interactions')
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
  program
    .command('serve')
    .description('serve the HTTP facade (and the coordinator) for the deployment a config file describes')
    .requiredOption('--config <file>', 'deployment config (JSON)')
    .addOption(
      new Option('--log-level <level>', 'least severe log line written (JSON lines on stderr)')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default('info'),
    )
    .action(async (o) => setExit(await (await commands.serve()).serveCommand({ config: o.config, logLevel: o.logLevel }, io)));

  program
    .command('peer')
    .description('run an example peer process on NATS (fixed results, delays, deterministic rules; fenced effect sink)')
    .requiredOption('--config <file>', 'peer config (JSON)')
    .action(async (o) => setExit(await (await commands.peer()).peerCommand({ config: o.config }, io)));

  natsPrincipalOptions(program.command('invoke').description('invoke a contract interaction over the NATS command API and print the InvocationResult'), true)
    .requiredOption('--contract <file>', 'contract bundle file (its id, version and digest are sent)')
    .requiredOption('--interaction <id>', 'interaction id')
    .requiredOption('--key <key>', 'invocation key (retry with the same key)')
    .requiredOption('--input <json>', 'input JSON (strictly parsed)')
    .option('--wait-for <boundary>', "decision | settled (may only strengthen the contract's boundary)")
    .option('--wait-ms <n>', 'how long the coordinator waits for the boundary', integer)
    .option('--json', 'print the reply as JSON', false)
    .option('--fail-on-outcome', `exit ${exitCodes.outcomeNotSuccess} when the decision is not success`, false)
    .action(async (o) =>
      setExit(
        await (
          await commands.invoke()
        ).invokeCommand(
          {
            nats: o.nats,
            user: o.user,
            passwordEnv: o.passwordEnv,
            principal: o.principal,
            contract: o.contract,
            interaction: o.interaction,
            key: o.key,
            input: o.input,
            waitFor: o.waitFor,
            waitMs: o.waitMs,
            json: o.json,
            failOnOutcome: o.failOnOutcome,
          },
          io,
        ),
      ),
    );
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
    false,
  )
    .option('--store <url>', 'read the operation from this store (alone), or resolve a short id with it (with --nats)')
    .option('--wait-for <boundary>', 'decision | settled (over NATS)')
    .option('--wait-ms <n>', 'how long the coordinator waits for the boundary (over NATS)', integer)
    .option('--json', 'machine-readable output', false)
    .option('--fail-on-outcome', `exit ${exitCodes.outcomeNotSuccess} when the decision is not success`, false)
    .action(async (operationId: string, o) =>
      setExit(
        await (
          await commands.act()
        ).getCommand(
          operationId,
          {
            nats: o.nats,
            user: o.user,
            passwordEnv: o.passwordEnv,
            principal: o.principal,
            store: o.store,
            waitFor: o.waitFor,
            waitMs: o.waitMs,
            json: o.json,
            failOnOutcome: o.failOnOutcome,
          },
          io,
        ),
      ),
    );

  natsPrincipalOptions(
    program
      .command('cancel')
      .argument('<operationId>', 'operation id, the short id tail prints (with --store), or a unique prefix (with --store)')
      .description('cancel an open operation as its invoking principal, through the coordinator over NATS; only interactions that declare caller cancellation'),
    true,
  )
    .option('--store <url>', 'resolve a short id or prefix with this store')
    .option('--json', 'print the reply as JSON', false)
    .action(async (operationId: string, o) =>
      setExit(
        await (
          await commands.act()
        ).cancelCommand(operationId, { nats: o.nats, user: o.user, passwordEnv: o.passwordEnv, principal: o.principal, store: o.store, json: o.json }, io),
      ),
    );
}

/** `inspect`, `list`, `tail`, `replay`: an operator reading a store. */
function addReadCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  program
    .command('inspect')
    .argument('<operationId>', 'operation id, the short id tail prints, or a unique prefix')
    .requiredOption('--store <url>', 'store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://…')
    .option('--json', 'machine-readable output', false)
    .description("show an operation's stored transitions (guard, applied or void) and its projected record")
    .action(async (operationId: string, o) => setExit(await (await commands.ops()).inspectCommand(operationId, { store: o.store, json: o.json }, io)));

  addListCommand(program, io, setExit);

  program
    .command('tail')
    .requiredOption('--store <url>', 'store URL')
    .option('--json', 'one JSON object per transition', false)
    .description('follow new transitions as they are appended, until interrupted')
    .action(async (o) => setExit(await (await commands.ops()).tailCommand({ store: o.store, json: o.json }, io, interrupted())));

  program
    .command('replay')
    .argument('[operationId]', 'one operation: id, short id or unique prefix (all when absent)')
    .requiredOption('--store <url>', 'store URL')
    .option('--json', 'machine-readable output', false)
    .option('--fix-index', 'write every operations index row that differs from its log again (and remove rows without a log)', false)
    .description('rebuild records from their logs through the XState machines and check the operations index against them; exit 1 on any difference')
    .action(async (operationId: string | undefined, o) =>
      setExit(await (await commands.ops()).replayCommand(operationId, { store: o.store, json: o.json, fixIndex: o.fixIndex }, io)),
    );
}

/** `list`: the operations index as an operator sees it. */
function addListCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  program
    .command('list')
    .description("list operations from the operations index, newest admission first, as an operator (every principal's); filters as GET /contract-invocations")
    .requiredOption('--store <url>', 'store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://…')
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
    .action(async (o) =>
      setExit(
        await (
          await commands.list()
        ).listCommand(
          {
            store: o.store,
            principal: o.principal,
            phase: o.phase,
            outcome: o.outcome,
            settlement: o.settlement,
            interaction: o.interaction,
            since: o.since,
            until: o.until,
            limit: o.limit,
            cursor: o.cursor,
            stuck: o.stuck,
            json: o.json,
          },
          io,
        ),
      ),
    );
}
