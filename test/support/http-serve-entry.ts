/**
 * The child-process entry for HTTP integration tests: runs the real `convoke` program with the
 * given arguments. Until `serve` is wired into src/cli/main.ts, `serve --config FILE` falls back to
 * calling serveCommand directly (same code path after argument parsing).
 */
import { buildProgram, main } from '../../src/cli/main.js';
import { serveCommand } from '../../src/cli/commands/serve.js';
import { processIo } from '../../src/cli/io.js';
import { isAdapterError } from '../../src/contract/errors.js';

const args = process.argv.slice(2);
const wired = buildProgram(processIo, () => {}).commands.some((c) => c.name() === 'serve');

async function run(): Promise<number> {
  if (wired || args[0] !== 'serve') return main([process.argv[0]!, 'convoke', ...args]);
  const at = args.indexOf('--config');
  const config = at >= 0 ? args[at + 1] : undefined;
  if (config === undefined) {
    process.stderr.write('usage: serve --config FILE\n');
    return 2;
  }
  try {
    return await serveCommand({ config }, processIo);
  } catch (error) {
    if (isAdapterError(error)) {
      process.stderr.write(JSON.stringify(error.toJSON()) + '\n');
      return 2;
    }
    throw error;
  }
}

process.exitCode = await run();
