/**
 * `convoke list --store URL [filters] [--stuck [REASON]] [--json]`: a page of the operations index,
 * read from the store as an operator (every principal's operations), newest admission first. The
 * same parameters, checks and cursor as GET /contract-invocations; `--principal` narrows to one
 * principal. The table fits the terminal; the next page's command is printed under it.
 */
import { SystemClock } from '../../contract/clock.js';
import { listingBounds } from '../stuck-bounds.js';
import { listOperations, parseListParameters, type ListedOperation } from '../../runtime/operation-list.js';
import type { CliIo } from '../io.js';
import { renderTable, ShortId, widthOf, type Cell } from '../table.js';
import { terminalText } from '../terminal-text.js';
import { withStore, type StoreOptions } from './ops.js';

/** What both list commands (operations, workflow instances) take beside their own filters. */
export interface ListPageOptions extends StoreOptions {
  principal?: string;
  since?: string;
  until?: string;
  limit?: string;
  cursor?: string;
  /** true (any reason) or a reason. */
  stuck?: boolean | string;
  /** The deployment config whose stuck bounds apply (stuck-bounds.ts: stuck, or workflows.stuck); the defaults without one. */
  config?: string;
  json: boolean;
}

export interface ListOptions extends ListPageOptions {
  phase?: string;
  outcome?: string;
  settlement?: string;
  interaction?: string;
}

export async function listCommand(options: ListOptions, io: CliIo): Promise<number> {
  // Checked before any store is opened: a typo is exit 2 whatever the store's state.
  const request = parseListParameters(givenOptions(options, ['phase', 'outcome', 'settlement', 'interaction', 'since', 'until', 'limit', 'cursor', 'stuck']));
  const bounds = (await listingBounds(options.config)).operations;
  return withStore({ ...options, notice: (line) => io.stderr.write(`convoke list: ${terminalText(line)}\n`) }, async (store) => {
    const clock = new SystemClock();
    const page = await listOperations({ index: store.index, nowMs: clock.nowMs(), bounds, principalId: options.principal }, request);
    const headers = ['operation', 'admitted', 'principal', 'interaction', 'state', 'open', 'next due', 'stuck'];
    writeListPage(io, options.json, page, { headers, rows: page.operations.map(rowCells), noun: 'operation' });
    return 0;
  });
}

/** A page as JSON, or as a table fitting the terminal with its count and the next page's cursor. */
export function writeListPage(
  io: CliIo,
  json: boolean,
  page: { nextCursor?: string | null },
  table: { headers: string[]; rows: Cell[][]; noun: string },
): void {
  if (json) {
    io.stdout.write(JSON.stringify(page, null, 2) + '\n');
    return;
  }
  io.stdout.write(renderTable(table.headers, table.rows, widthOf(io)));
  const count = table.rows.length;
  const next = page.nextCursor ? `; next page:\n--cursor ${terminalText(page.nextCursor)}` : '';
  io.stdout.write(`\n${count} ${table.noun}${count === 1 ? '' : 's'}${next}\n`);
}

/** The named options a command was given, as the list parameters a query string would carry. */
export function givenOptions<O, K extends keyof O>(options: O, names: readonly K[]): Record<string, string | boolean> {
  const raw: Record<string, string | boolean> = {};
  for (const name of names) {
    const value = options[name];
    if (typeof value === 'string' || typeof value === 'boolean') raw[String(name)] = value;
  }
  return raw;
}

/** The most milliseconds from 1970, either way, a Date holds (ECMA-262 TimeClip); a workflow's timer may be due later, up to 2^53 − 1. */
const dateMsMax = 8.64e15;

/** An instant in a table cell: ISO 8601 to the second, or its milliseconds past what a Date holds. */
export const instant = (ms: number | null) =>
  ms === null ? null : Math.abs(ms) <= dateMsMax ? new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z') : `${ms} ms`;

function rowCells(row: ListedOperation) {
  return [
    new ShortId(row.operationId),
    instant(row.admittedAtMs),
    row.principalId,
    row.interaction,
    // phase, outcome, settlement: "active open pending", "settled success complete".
    `${row.phase} ${row.outcome ?? 'open'} ${row.settlement}`,
    row.openBranches,
    instant(row.nextDueMs),
    row.stuck.length === 0 ? '' : row.stuck.join(' '),
  ];
}
