/**
 * The child-process entry for NATS integration tests: the real CLI (`peer`, `invoke`, …), so the
 * tests exercise exactly the wiring users run.
 */
import { main } from '../../src/cli/main.js';

process.exitCode = await main(process.argv);
