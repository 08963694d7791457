/**
 * `convoke workflow start BUNDLE --workflow NAME --key K --input JSON` and `convoke workflow get ID`
 * against a running `convoke serve`, over the NATS command API as `convoke invoke` and `get` are
 * (the same options: --nats, --user, --password-env or --creds, --principal, or a context):
 * workflow-start and workflow-get on `convoke.cmd.<principal>.*` (src/nats-api/workflow-commands.ts).
 *
 * BUNDLE is a bundle file (its id, version and digest are read from it) or `ID@VERSION@sha256:…`.
 * Exit codes: 0 the instance completed; 11 it faulted or was cancelled; 10 still running when the
 * wait ended (get it later); the AdapterError kind's code when the coordinator refused, 9 for an
 * instance not found; 4 when no coordinator answered (a start's outcome is then unknown: send it
 * again with the same --key).
 *
 * Registered by `addWorkflowFacadeCommands` under `convoke workflow` (created here when absent).
 */
import type { Command } from 'commander';
import type { ContractRef } from '../../contract/types.js';
import type { WorkflowInstance } from '../../runtime/workflow-service.js';
import type { CliIo } from '../io.js';
import { exitCodeOfReplyError, exitCodes } from '../exit-codes.js';
import { natsClientOf, natsPrincipalOptions, nonNegativeInteger, workflowCommand } from '../options.js';
import type { NatsClientOptions } from './invoke.js';
import type { ReducedWorkflowInstance } from '../../nats-api/omitted.js';
import { labelled, labelledId, widthOf } from '../table.js';
import { terminalText } from '../terminal-text.js';

export interface WorkflowClientOptions extends NatsClientOptions {
  waitMs: number;
  json: boolean;
}

export interface WorkflowStartOptions extends WorkflowClientOptions {
  workflow: string;
  key: string;
  input: string;
}

const refPattern = /^([^@]+)@([^@]+)@(sha256:[0-9a-f]{64})$/;

async function bundleRef(argument: string): Promise<ContractRef> {
  const match = refPattern.exec(argument);
  if (match) return { id: match[1] as string, version: match[2] as string, digest: match[3] as string };
  const { readBundleFile } = await import('../../deployment/files.js');
  return (await readBundleFile(argument)).ref;
}

export async function workflowStartCommand(bundle: string, options: WorkflowStartOptions, io: CliIo): Promise<number> {
  const { parseStrict } = await import('../../contract/ijson.js');
  const body = {
    bundle: await bundleRef(bundle),
    workflow: options.workflow,
    invocationKey: options.key,
    input: parseStrict(options.input, '--input'),
    waitMs: options.waitMs,
  };
  return sendAndReport(options, io, 'workflow-start', body, 'the outcome is unknown: send the start again with the same --key');
}

export async function workflowGetCommand(instanceId: string, options: WorkflowClientOptions, io: CliIo): Promise<number> {
  return sendAndReport(options, io, 'workflow-get', { instanceId, waitMs: options.waitMs }, 'no answer: get it again');
}

async function sendAndReport(
  options: WorkflowClientOptions,
  io: CliIo,
  verb: 'workflow-start' | 'workflow-get',
  body: object,
  unknown: string,
): Promise<number> {
  const [{ requestAsClient, describeOmission, commandWaitMs }, { sendWorkflowCommand }, { commandTimeoutMs }] = await Promise.all([
    import('./invoke.js'),
    import('../../nats-api/workflow-commands.js'),
    import('../../nats-api/commands.js'),
  ]);
  commandWaitMs(options.waitMs);
  const sent = await requestAsClient(options, io, verb, unknown, (transport, principal) =>
    sendWorkflowCommand(transport, principal, verb, body, commandTimeoutMs(options.waitMs)),
  );
  if ('exitCode' in sent) return sent.exitCode;
  const reply = sent.reply;
  if (options.json) io.stdout.write(JSON.stringify(reply, null, 2) + '\n');
  if (!('instance' in reply)) {
    io.stderr.write(`status ${reply.status}: ${terminalText(JSON.stringify(reply.error))}\n`);
    return exitCodeOfReplyError(reply.status, reply.error.kind);
  }
  // An instance past the server's max_payload comes without its large members, named in `omitted`: shown as left out.
  if (!options.json) io.stdout.write(renderInstance(reply.instance, widthOf(io), 'omitted' in reply ? describeOmission(reply.omitted) : undefined));
  if (reply.instance.status === 'running') return exitCodes.pending;
  return reply.instance.status === 'completed' ? exitCodes.ok : exitCodes.outcomeNotSuccess;
}

/**
 * The instance as a few labelled lines: identity, status, each stage's operation and decision,
 * the output or error, and what a reduced reply left out (`leftOut`, its `omitted` described); each
 * wrapped to `widthMax` under its label.
 */
export function renderInstance(instance: WorkflowInstance | ReducedWorkflowInstance, widthMax = Number.POSITIVE_INFINITY, leftOut?: string): string {
  // Ids whole where a line holds them, else a prefix inspect resolves: never cut across two lines.
  const id = (text: string) => labelledId(' '.repeat(11), text, widthMax);
  const lines: [string, string][] = [
    ['instance', id(instance.instanceId)],
    ['workflow', `${instance.workflow} (${instance.bundle.id}@${instance.bundle.version})`],
    ['status', `${instance.status}${instance.currentTask ? ` (running ${instance.currentTask.name} at ${instance.currentTask.at})` : ''}`],
  ];
  for (const stage of instance.stages ?? []) {
    const d = stage.decision;
    const decision = d ? `${d.outcome} (${d.reason}: ${d.successVotes} of ${d.threshold} needed, ${d.units} asked)` : 'undecided';
    lines.push(['stage', `${stage.stage}: ${id(stage.operationId)} decision ${decision}, settlement ${stage.settlement?.status ?? 'unknown'}`]);
  }
  // Older servers' answers lack the links.
  if (instance.parent) lines.push(['parent', `${id(instance.parent.instanceId)} at ${instance.parent.at}`]);
  for (const child of instance.childInstances ?? [])
    lines.push([
      'child',
      `${child.at}: ${id(child.instanceId)} (${child.workflow}) ${child.status ?? 'not started'}${child.disposition ? `, released by its parent: ${child.disposition}` : ''}`,
    ]);
  if (instance.status === 'completed' && 'output' in instance) lines.push(['output', JSON.stringify(instance.output)]);
  if (instance.error) lines.push(['error', JSON.stringify(instance.error)]);
  if (leftOut !== undefined) lines.push(['left out', leftOut]);
  return lines.map(([label, text]) => labelled(label.padEnd(11), text, widthMax)).join('\n') + '\n';
}

/** The CLI's shared NATS client options (options.ts: servers, user, login, principal; from the flags or the context), and these. */
function natsOptions(command: Command): Command {
  return natsPrincipalOptions(command)
    .option('--wait-ms <n>', 'how long the coordinator may wait for the instance to end', nonNegativeInteger, 0)
    .option('--json', 'print the reply as JSON', false);
}

async function clientOf(o: Record<string, unknown>, command: string): Promise<WorkflowClientOptions> {
  const { store: _store, storeAuth: _auth, ...client } = await natsClientOf(o, command);
  return { ...client, waitMs: o.waitMs as number, json: o.json as boolean };
}

/** `convoke workflow start|get`, under the `workflow` command (created when no other module made it). */
export function addWorkflowFacadeCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  const workflow = workflowCommand(program);
  natsOptions(
    workflow
      .command('start')
      .argument('<bundle>', 'bundle file, or ID@VERSION@sha256:…')
      .description("start an instance of a bundle's pipeline or workflow on a running convoke serve (NATS command API)")
      .requiredOption('--workflow <name>', 'pipeline or workflow name')
      .requiredOption('--key <key>', 'invocation key (the same key and input find the same instance)')
      .option('--input <json>', 'the workflow input (strictly parsed JSON)', '{}'),
  ).action(async (bundle: string, o) =>
    setExit(await workflowStartCommand(bundle, { ...(await clientOf(o, 'workflow start')), workflow: o.workflow, key: o.key, input: o.input }, io)),
  );
  natsOptions(
    workflow
      .command('get')
      .argument('<instanceId>', 'workflow instance id (wf…)')
      .description('read a workflow instance from a running convoke serve (NATS command API)'),
  ).action(async (instanceId: string, o) => setExit(await workflowGetCommand(instanceId, await clientOf(o, 'workflow get'), io)));
}
