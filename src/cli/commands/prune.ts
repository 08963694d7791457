/**
 * `convoke prune --store URL --keep PERIOD [--dry-run] [--json]`: payload expiry. Every operation
 * settled (complete) longer than PERIOD ago loses its log and keeps a tombstone of its key
 * (src/runtime/retention.ts): `get`, `inspect` and a new admission under the key answer `expired`.
 * Then every workflow instance that ended longer ago, unless a parent or child of it still runs
 * (src/workflow/exec/retention.ts).
 * A terminal shows the count so far while it runs; a table of what became of each operation
 * listed (or `--json`) follows. Exit 0 when every operation was read and pruned or kept; when
 * some could not be, the exit code of the first failure's kind (4 for an unavailable store),
 * after the rest were done.
 */
import { SystemClock } from '../../contract/clock.js';
import { invalidInput, type AdapterErrorKind } from '../../contract/errors.js';
import { keepMsProblem, pruneOperations, PruneStopped, type InstancePruneTally, type PruneTally } from '../../runtime/retention.js';
import { exitCodeOfKind, exitCodes } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { fitText, heading, renderTable, ShortId, widthOf } from '../table.js';
import { terminalText } from '../terminal-text.js';
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

/** `stop` resolves when the prune should end after the operation or instance it is at (an interrupt). */
export async function pruneCommand(options: PruneOptions, io: CliIo, stop: Promise<void>): Promise<number> {
  // Checked before any store is opened: a typo is exit 2 whatever the store's state.
  const keepMs = periodMs(options.keep);
  return withStore({ ...options, notice: (line) => io.stderr.write(`convoke prune: ${terminalText(line)}\n`) }, async (store) => {
    const shown = !options.json && io.stderrIsTerminal === true;
    const verb = options.dryRun ? 'to prune' : 'pruned';
    let stopped = false;
    void stop.then(() => (stopped = true));
    const request = { store, nowMs: new SystemClock().nowMs(), keepMs, dryRun: options.dryRun, stopped: () => stopped };
    let operations: PruneTally | undefined;
    let instances: InstancePruneTally;
    try {
      operations = await pruneOperations({
        ...request,
        ...(shown ? { progress: (t: PruneTally) => io.stderr.write(`\r${t.examined} operations examined, ${t.pruned} ${verb}`) } : {}),
      });
      if (shown && operations.examined > 0) io.stderr.write('\n');
      const { pruneWorkflowInstances } = await import('../../workflow/exec/retention.js');
      instances = await pruneWorkflowInstances({
        ...request,
        ...(shown ? { progress: (t: InstancePruneTally) => io.stderr.write(`\r${t.examined} workflow instances examined, ${t.pruned} ${verb}`) } : {}),
      });
    } catch (error) {
      // Stopped part-way by a page the index could not list: what it did is said before the failure (exit by its kind).
      if (error instanceof PruneStopped) {
        const [ops, wf] = operations === undefined ? [error.tally as PruneTally, undefined] : [operations, error.tally as InstancePruneTally];
        const ofInstances = wf === undefined ? '' : `, ${wf.pruned} workflow instances ${verb}`;
        io.stderr.write(`${shown ? '\n' : ''}convoke prune: stopped part-way: ${ops.pruned} operations ${verb}${ofInstances}\n`);
      }
      throw error;
    }
    if (shown && instances.examined > 0) io.stderr.write('\n');
    writeTallies(io, options, { operations, instances }, stopped);
    if (stopped) return interruptedExit;
    const first = operations.failures[0] ?? instances.failures[0];
    // A failure's kind is an AdapterError kind: not-found is counted as gone, never as a failure.
    return first === undefined ? exitCodes.ok : exitCodeOfKind(first.kind as AdapterErrorKind);
  });
}

function writeTallies(io: CliIo, options: PruneOptions, tallies: { operations: PruneTally; instances: InstancePruneTally }, interrupted: boolean): void {
  const { operations: ops, instances: wf } = tallies;
  if (options.json) {
    const body = { dryRun: options.dryRun, keep: options.keep, cutoffMs: ops.cutoffMs, interrupted, operations: ops, workflowInstances: wf };
    io.stdout.write(JSON.stringify(body, null, 2) + '\n');
    return;
  }
  const width = widthOf(io);
  const cutoff = new Date(ops.cutoffMs).toISOString();
  io.stdout.write(heading(`${options.dryRun ? 'dry run: ' : ''}settled or ended before ${cutoff} (${options.keep} ago)`, width));
  // A tombstone left half-done (its payload or index row still there) is done again: a row only when there was one.
  const finished = [
    options.dryRun ? '  of them to finish' : '  of them finished',
    ops.finished,
    wf.finished,
    'tombstoned already, yet still listed: finished now',
  ];
  const rows = [
    [options.dryRun ? 'would prune' : 'pruned', ops.pruned, wf.pruned, 'settled (complete) or ended before the cutoff: the log goes, the key answers expired'],
    ...(ops.finished + wf.finished > 0 ? [finished] : []),
    ['kept: open or running', ops.open, wf.running, 'not settled, or still running'],
    ['kept: indeterminate', ops.indeterminate, '-', 'settled indeterminate: left for an operator'],
    ['kept: needed', '-', wf.needed, 'its parent or a child it started still runs, or it still owes a child’s disposal record'],
    ['kept: recent', ops.recent, wf.recent, 'settled or ended after the cutoff'],
    ['already gone', ops.gone, wf.gone, 'not found when read: removed meanwhile'],
    ['failed', ops.failures.length, wf.failures.length, 'read, replay or tombstone failed: the next prune tries again'],
  ];
  // What a row means is prose: where its column would be a sliver (60 columns), it reads under its row.
  io.stdout.write(renderTable(['', 'operations', 'instances', 'what'], rows, width, { proseLast: true }));
  const failures = [...ops.failures.map((f) => ({ id: f.operationId, ...f })), ...wf.failures.map((f) => ({ id: f.instanceId, ...f }))];
  if (failures.length > 0) {
    io.stdout.write('\n');
    io.stdout.write(
      renderTable(
        ['stream', 'kind', 'description'],
        failures.slice(0, 20).map((f) => [new ShortId(f.id), f.kind, f.description]),
        width,
      ),
    );
    if (failures.length > 20) io.stdout.write(`… and ${failures.length - 20} more (--json lists them all)\n`);
  }
  const examined = `${ops.examined} operations and ${wf.examined} workflow instances begun before the cutoff examined`;
  io.stdout.write(`\n${fitText(`${examined}${interrupted ? '; interrupted: the rest were not' : ''}`, width)}`);
}
