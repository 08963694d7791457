/**
 * `convoke prune --store URL --keep PERIOD [--dry-run] [--json]`: payload expiry. Every operation
 * settled (complete) longer than PERIOD ago loses its log and keeps a tombstone of its key
 * (src/runtime/retention.ts): `get`, `inspect` and a new admission under the key answer `expired`.
 * A terminal shows the count so far while it runs; a table of what became of each operation
 * listed (or `--json`) follows. Exit 0 when every operation was read and pruned or kept; when
 * some could not be, the exit code of the first failure's kind (4 for an unavailable store),
 * after the rest were done.
 */
import { SystemClock } from '../../contract/clock.js';
import { invalidInput, type AdapterErrorKind } from '../../contract/errors.js';
import { keepMsProblem, pruneOperations, type PruneTally } from '../../runtime/retention.js';
import { exitCodeOfKind, exitCodes } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { heading, renderTable, ShortId, widthOf } from '../table.js';
import { withStore, type StoreOptions } from './ops.js';

export interface PruneOptions extends StoreOptions {
  keep: string;
  dryRun: boolean;
  json: boolean;
}

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A period as a person writes it: a whole number and a unit (ms, s, m, h, d), e.g. `30d`, `12h`. */
export function periodMs(text: string): number {
  const match = /^([1-9][0-9]{0,12})(ms|s|m|h|d)$/.exec(text);
  if (!match) throw invalidInput(`--keep ${JSON.stringify(text)}: give a period as a whole number and a unit (ms, s, m, h, d), e.g. 30d or 12h`);
  const ms = Number(match[1]) * (units[match[2] as string] as number);
  const problem = keepMsProblem(ms);
  if (problem !== undefined) throw invalidInput(`--keep ${text}: ${problem}`);
  return ms;
}

/** The exit code of a prune a SIGINT or SIGTERM stopped (after the operation it was at): the shell's own for an interrupt. */
const interruptedExit = 130;

/** `stop` resolves when the prune should end after the operation it is at (an interrupt). */
export async function pruneCommand(options: PruneOptions, io: CliIo, stop: Promise<void>): Promise<number> {
  // Checked before any store is opened: a typo is exit 2 whatever the store's state.
  const keepMs = periodMs(options.keep);
  return withStore({ ...options, notice: (line) => io.stderr.write(`convoke prune: ${line}\n`) }, async (store) => {
    const shown = !options.json && io.stderrIsTerminal === true;
    const progress = (t: PruneTally) => io.stderr.write(`\r${t.examined} operations examined, ${t.pruned} ${options.dryRun ? 'to prune' : 'pruned'}`);
    let stopped = false;
    void stop.then(() => (stopped = true));
    const tally = await pruneOperations({
      store,
      nowMs: new SystemClock().nowMs(),
      keepMs,
      dryRun: options.dryRun,
      stopped: () => stopped,
      ...(shown ? { progress } : {}),
    });
    if (shown && tally.examined > 0) io.stderr.write('\n');
    writeTally(io, options, tally, stopped);
    if (stopped) return interruptedExit;
    const first = tally.failures[0];
    return first === undefined ? exitCodes.ok : exitCodeOfKind(first.kind === 'not-found' ? 'unavailable' : (first.kind as AdapterErrorKind));
  });
}

function writeTally(io: CliIo, options: PruneOptions, tally: PruneTally, interrupted: boolean): void {
  if (options.json) {
    io.stdout.write(JSON.stringify({ dryRun: options.dryRun, keep: options.keep, interrupted, ...tally }, null, 2) + '\n');
    return;
  }
  const width = widthOf(io);
  const verb = options.dryRun ? 'would prune' : 'pruned';
  const cutoff = new Date(tally.cutoffMs).toISOString();
  io.stdout.write(heading(`${options.dryRun ? 'dry run: ' : ''}operations settled before ${cutoff} (${options.keep} ago)`, width));
  const rows = [
    [verb, tally.pruned, 'settled (complete) before the cutoff: the log goes, the key answers expired'],
    ['kept: open', tally.open, 'not settled yet'],
    ['kept: indeterminate', tally.indeterminate, 'settled indeterminate: left for an operator'],
    ['kept: recent', tally.recent, 'settled after the cutoff'],
    ['already gone', tally.gone, 'tombstoned or removed meanwhile'],
    ['failed', tally.failures.length, 'read or tombstone failed: the next prune tries again'],
  ];
  io.stdout.write(renderTable(['', 'operations', 'what'], rows, width));
  if (tally.failures.length > 0) {
    io.stdout.write('\n');
    io.stdout.write(
      renderTable(
        ['operation', 'kind', 'description'],
        tally.failures.slice(0, 20).map((f) => [new ShortId(f.operationId), f.kind, f.description]),
        width,
      ),
    );
    if (tally.failures.length > 20) io.stdout.write(`… and ${tally.failures.length - 20} more (--json lists them all)\n`);
  }
  io.stdout.write(`\n${tally.examined} operations admitted before the cutoff examined${interrupted ? '; interrupted: the rest were not' : ''}\n`);
}
