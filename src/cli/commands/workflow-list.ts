/**
 * `convoke workflow list --store URL [filters] [--stuck [REASON]] [--json]`: a page of the
 * workflow instances index, read from the store as an operator (every principal's instances),
 * newest start first. The same parameters, checks and cursor as GET /workflow-instances;
 * `--principal` narrows to one principal. The table fits the terminal; the next page's cursor is
 * printed under it.
 */
import type { Command } from 'commander';
import { SystemClock } from '../../contract/clock.js';
import { listingBounds, stuckConfigOption } from '../stuck-bounds.js';
import { listWorkflowInstances, parseWorkflowListParameters, type ListedInstance } from '../../runtime/workflow-list.js';
import type { CliIo } from '../io.js';
import { ShortId } from '../table.js';
import { terminalText } from '../terminal-text.js';
import { contextOptions, storeCredsOption, storeOf, workflowCommand } from '../options.js';
import { givenOptions, instant, writeListPage, type ListPageOptions } from './list.js';

export interface WorkflowListOptions extends ListPageOptions {
  status?: string;
  workflow?: string;
}

export async function workflowListCommand(options: WorkflowListOptions, io: CliIo): Promise<number> {
  // Checked before any store is opened: a typo is exit 2 whatever the store's state.
  const request = parseWorkflowListParameters(givenOptions(options, ['status', 'workflow', 'since', 'until', 'limit', 'cursor', 'stuck']));
  const bounds = (await listingBounds(options.config)).workflows;
  const { withStore } = await import('./ops.js');
  return withStore({ ...options, notice: (line) => io.stderr.write(`convoke workflow list: ${terminalText(line)}\n`) }, async (store) => {
    const clock = new SystemClock();
    const page = await listWorkflowInstances({ index: store.workflowIndex, nowMs: clock.nowMs(), bounds, principalId: options.principal }, request);
    // `child ops` counts the contract calls the row records; child workflow instances are rows of their own (their `parent` in --json).
    const headers = ['instance', 'started', 'principal', 'workflow', 'status', 'task', 'next due', 'child ops', 'stuck'];
    writeListPage(io, options.json, page, { headers, rows: page.instances.map(rowCells), noun: 'instance' });
    return 0;
  });
}

function rowCells(row: ListedInstance) {
  return [
    new ShortId(row.instanceId),
    instant(row.startedAtMs),
    row.principalId,
    row.workflowName,
    row.status,
    row.currentTask?.name ?? (row.lastError ? `${row.lastError.status} ${row.lastError.title ?? row.lastError.type}` : ''),
    instant(row.nextDueMs),
    row.childOperations,
    row.stuck.length === 0 ? '' : row.stuck.join(' '),
  ];
}

/** `convoke workflow list`: the workflow instances index as an operator sees it. */
export function addWorkflowListCommand(program: Command, io: CliIo, setExit: (code: number) => void): void {
  stuckConfigOption(storeCredsOption(contextOptions(workflowCommand(program).command('list'))))
    .description(
      "list workflow instances from the workflow instances index, newest start first, as an operator (every principal's); filters as GET /workflow-instances",
    )
    .option('--store <url>', "store URL: sqlite:PATH, jetstream:nats://HOST:PORT, esdb://… (default: the context's)")
    .option('--principal <id>', "only this principal's instances")
    .option('--status <status>', 'running | completed | faulted | cancelled')
    .option('--workflow <name>', 'workflow (or pipeline) name')
    .option('--since <instant>', 'started at or after (RFC 3339 or ms since the epoch)')
    .option('--until <instant>', 'started before (RFC 3339 or ms since the epoch)')
    .option('--limit <n>', 'rows per page (1..500, default 50)')
    .option('--cursor <cursor>', 'the next page, as the previous page printed it')
    .option('--stuck [reason]', 'only stuck instances: any reason, or past-timeout | timer-overdue | lease-expired')
    .option('--json', 'machine-readable output', false)
    .action(async (o) => {
      const target = await storeOf(o, 'workflow list');
      const filters = { principal: o.principal, status: o.status, workflow: o.workflow, since: o.since, until: o.until };
      const page = { limit: o.limit, cursor: o.cursor, stuck: o.stuck, config: o.config };
      setExit(await workflowListCommand({ ...target, ...filters, ...page, json: o.json }, io));
    });
}
