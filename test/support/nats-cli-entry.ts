/**
 * The child-process entry for NATS integration tests: `peer --config FILE` and `invoke …`, parsed
 * by a commander program wired exactly as src/cli/main.ts is asked to wire them (see the NATS
 * issue's report). It imports only these two commands, so a peer process starts quickly; the
 * coordinator runs through the real CLI (test/support/http-server.ts startServe).
 */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { isAdapterError } from '../../src/contract/errors.js';
import { processIo, type CliIo } from '../../src/cli/io.js';
import { invokeCommand } from '../../src/cli/commands/invoke.js';
import { peerCommand } from '../../src/cli/commands/peer.js';

const integer = (value: string) => {
  if (!/^-?[0-9]+$/.test(value)) throw new InvalidArgumentError('expected an integer');
  return Number(value);
};

function program(io: CliIo, setExit: (code: number) => void): Command {
  const p = new Command('convoke').exitOverride();
  p.command('peer')
    .description('run an example peer process on NATS (fixed results, delays, deterministic rules; fenced effect sink)')
    .requiredOption('--config <file>', 'peer config (JSON)')
    .action(async (o) => setExit(await peerCommand({ config: o.config }, io)));
  p.command('invoke')
    .description('invoke a contract interaction over the NATS command API and print the InvocationResult')
    .requiredOption('--nats <url>', 'NATS server URL(s), comma-separated')
    .requiredOption('--user <user>', 'NATS user (the command principal unless --principal)')
    .option('--password-env <name>', 'environment variable holding the NATS password', 'CONVOKE_NATS_PASSWORD')
    .option('--principal <id>', 'command principal (subject token); defaults to --user')
    .requiredOption('--contract <file>', 'contract bundle file (its id, version and digest are sent)')
    .requiredOption('--interaction <id>', 'interaction id')
    .requiredOption('--key <key>', 'invocation key (retry with the same key)')
    .requiredOption('--input <json>', 'input JSON (strictly parsed)')
    .option('--wait-for <boundary>', "decision | settled (may only strengthen the contract's boundary)")
    .option('--wait-ms <n>', 'how long the coordinator waits for the boundary', integer)
    .option('--json', 'print the reply as JSON', false)
    .action(async (o) =>
      setExit(
        await invokeCommand(
          { nats: o.nats, user: o.user, passwordEnv: o.passwordEnv, principal: o.principal, contract: o.contract, interaction: o.interaction, key: o.key, input: o.input, waitFor: o.waitFor, waitMs: o.waitMs, json: o.json },
          io,
        ),
      ),
    );
  return p;
}

async function run(): Promise<number> {
  let code = 0;
  try {
    await program(processIo, (c) => (code = c)).parseAsync(process.argv);
    return code;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    if (isAdapterError(error)) {
      process.stderr.write(JSON.stringify(error.toJSON()) + '\n');
      return 2;
    }
    process.stderr.write(`convoke: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

process.exitCode = await run();
