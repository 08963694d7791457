/**
 * Commands over NATS (docs/design.md §5): services invoke, read, cancel and list operations by
 * request/reply on `convoke.cmd.<principal>.{invoke,get,cancel,list}` (and, where the deployment
 * hosts workflow instances, `workflow-start`, `workflow-get`, `workflow-cancel`: workflow-commands.ts) (list: the operations index,
 * as GET /contract-invocations, with the page as `{"status": 200, "page": …}`), with the same InvocationRequest,
 * InvocationResult and AdapterError JSON as the HTTP facade.
 *
 * Identity: the principal is the subject's second token, proven by the broker's publish
 * permission exactly as a result publisher's peer id is. The deployment MUST give each command
 * principal its own NATS user allowed to publish only `convoke.cmd.<principal>.>` (and to
 * subscribe only its own inbox `_INBOX.cmd.<principal>.>`): nats-permissions.ts
 * `commandClientPermissions` builds that block. A user allowed a wider publish (`convoke.cmd.>`,
 * `>`) can speak as every principal; such users are outside this proof and must not exist.
 *
 * Replies: `{"status": 200|202, "result": InvocationResult}` or
 * `{"status": <HTTP status>, "error": AdapterError}`; a result too large for the server's
 * max_payload is answered without its large members, named in `omitted` (omitted.ts). Statuses
 * are HTTP's, mapped in the same place (httpStatusOf, plus 404 for a missing or hidden
 * operation), so a client of both transports branches on one table. 200/202 describe invocation progress, never business success.
 *
 * Bodies are strictly parsed (duplicate keys, unsafe integers and lone surrogates are 400) and
 * validated without coercion. Waiting follows POST/GET: the caller's waitFor may strengthen the
 * contract's boundary, never weaken it; waitMs is clamped to the deployment's bound. A wait ends
 * at the boundary, at waitMs, or at shutdown, and ending a wait never cancels work; only `cancel`
 * (where the interaction declares caller cancellation and policy allows it) does.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { Counter, Registry } from 'prom-client';
import { registryCounter } from '../runtime/metrics.js';
import type { BundleRegistry } from '../contract/bundle.js';
import { AdapterError, AssertionFailure, invalidInput, unavailable, type AdapterErrorBody } from '../contract/errors.js';
import { parseStrictBody } from '../contract/ijson.js';
import { tokenPattern } from '../contract/ids.js';
import { limits } from '../contract/limits.js';
import { adapterErrorSchema, invocationRequestLevels, invocationRequestSchema, invocationResultSchema } from '../contract/schemas.js';
import type { InvocationRequest, WaitFor } from '../contract/types.js';
import { describeErrors } from '../contract/validation.js';
import { outputResultLevels, type InvocationResult } from '../projections/views.js';
import type { InboundMessage, Subscription, Transport } from '../adapters/transport/types.js';
import { PayloadTooLarge } from '../adapters/transport/nats-errors.js';
import type { Caller, InvocationService } from '../runtime/service.js';
import { parseListParameters, type ListPage } from '../runtime/operation-list.js';
import { adapterErrorStatus, internalError } from '../runtime/errors.js';
import { contractBoundary, effectiveBoundary } from '../runtime/boundary.js';
import type { WorkflowInstanceService } from '../runtime/workflow-service.js';
import { commandSubject, commandSubjectPrefix, requestCommand } from './request.js';
import { WaitSlots, waitsPerPrincipalDefault } from '../runtime/wait-slots.js';
import {
  instanceReadPath,
  invocationResultReductions,
  operationReadPath,
  reducedInvocationResultSchema,
  replyOmissionSchema,
  workflowInstanceReductions,
  type ReducedInvocationResult,
  type ReplyOmission,
} from './omitted.js';

export { commandSubject, commandSubjectPrefix };
import {
  handleWorkflowCommand,
  isWorkflowCommandVerb,
  workflowCommandVerbs,
  type WorkflowCommandVerb,
  type WorkflowListReply,
  type WorkflowReply,
} from './workflow-commands.js';

export const commandVerbs = ['invoke', 'get', 'cancel', 'list'] as const;
export type CommandVerb = (typeof commandVerbs)[number];

/** The default queue group: every coordinator of a deployment shares the command load. */
export const commandQueueDefault = 'convoke-coordinators';

const encoder = new TextEncoder();

export type CommandReply =
  | { status: 200 | 202; result: InvocationResult }
  /** A reply past the server's max_payload, without the members `omitted` names (omitted.ts). */
  | { status: 200 | 202; result: ReducedInvocationResult; omitted: ReplyOmission }
  | { status: number; error: AdapterErrorBody };
/** The `list` command's reply: a page of the operations index (as GET /contract-invocations answers). */
export type ListReply = { status: 200; page: ListPage } | { status: number; error: AdapterErrorBody };
type AnyReply = CommandReply | ListReply | WorkflowReply | WorkflowListReply;

export interface GetCommand {
  operationId: string;
  waitFor?: WaitFor;
  waitMs?: number;
}

export interface CancelCommand {
  operationId: string;
}

// ── schemas ─────────────────────────────────────────────────────────────────

/** Like the HTTP facade's: no coercion, no removal, every error; separate from the contract's ajv (no $id clashes). */
const commandAjv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, coerceTypes: false, removeAdditional: false, useDefaults: false });

const withoutId = <T extends object>(schema: T): Omit<T, '$id'> => {
  const { $id: _ignored, ...rest } = schema as T & { $id?: string };
  return rest;
};

const operationIdSchema = { type: 'string', minLength: 1, maxLength: 100 } as const;

export const getCommandSchema = {
  type: 'object',
  required: ['operationId'],
  additionalProperties: false,
  properties: {
    operationId: operationIdSchema,
    waitFor: { enum: ['decision', 'settled'] },
    waitMs: { type: 'integer', minimum: 0, maximum: limits.waitMsMax },
  },
} as const;

export const cancelCommandSchema = {
  type: 'object',
  required: ['operationId'],
  additionalProperties: false,
  properties: { operationId: operationIdSchema },
} as const;

export const commandReplySchema = {
  oneOf: [
    {
      type: 'object',
      required: ['status', 'result'],
      additionalProperties: false,
      properties: { status: { enum: [200, 202] }, result: withoutId(invocationResultSchema) },
    },
    {
      type: 'object',
      required: ['status', 'error'],
      additionalProperties: false,
      properties: { status: { type: 'integer', minimum: 400, maximum: 599 }, error: withoutId(adapterErrorSchema) },
    },
    {
      type: 'object',
      required: ['status', 'result', 'omitted'],
      additionalProperties: false,
      properties: { status: { enum: [200, 202] }, result: reducedInvocationResultSchema, omitted: replyOmissionSchema },
    },
  ],
} as const;

/**
 * The levels an invoke, get or cancel reply holds a value below its root: a peer's result, at most
 * limits.jsonDepthMax deep, is deepest in a collected output (`result.output`, 2, then
 * outputResultLevels); elsewhere it is at `result.branches[i].result` (4), an output at `result.output` (2).
 */
export const commandReplyLevels = 2 + outputResultLevels;

/** The list parameters of GET /contract-invocations, as JSON values; parseListParameters checks each. */
export const listCommandSchema = {
  type: 'object',
  additionalProperties: { type: ['string', 'integer', 'boolean'] },
} as const;

export const listReplySchema = {
  oneOf: [
    { type: 'object', required: ['status', 'page'], additionalProperties: false, properties: { status: { const: 200 }, page: { type: 'object' } } },
    commandReplySchema.oneOf[1],
  ],
} as const;

const validators: Record<CommandVerb, ValidateFunction> = {
  invoke: commandAjv.compile(withoutId(invocationRequestSchema)),
  get: commandAjv.compile(getCommandSchema),
  cancel: commandAjv.compile(cancelCommandSchema),
  list: commandAjv.compile(listCommandSchema),
};
const validateReply = commandAjv.compile(commandReplySchema);
const validateListReply = commandAjv.compile(listReplySchema);

/** The levels each command's body adds above the value it carries (none but invoke's input). */
const bodyLevels: Record<CommandVerb, number> = { invoke: invocationRequestLevels, get: 0, cancel: 0, list: 0 };

function checkBody<T>(verb: CommandVerb, data: Uint8Array, bodyLimitBytes: number): T {
  if (data.byteLength > bodyLimitBytes) throw new CommandBodyTooLarge(bodyLimitBytes);
  const value = parseStrictBody(data, `${verb} command body`, bodyLevels[verb]);
  const validate = validators[verb];
  if (!validate(value)) throw invalidInput(`${verb} command body: ${describeErrors(validate.errors)}`);
  return value as T;
}

/** Over the configured body limit: 413 with an invalid-input body, as HTTP answers. */
class CommandBodyTooLarge extends AdapterError {
  constructor(bodyLimitBytes: number) {
    super('invalid-input', `body exceeds ${bodyLimitBytes} bytes`);
  }
}

// ── status ──────────────────────────────────────────────────────────────────

/**
 * The mapping every facade shares (adapterErrorStatus: 404 for a missing or hidden operation, else
 * the kind's status; 500 for a bug), plus the one case of this transport: an oversized body, 413.
 * A bug's 500 says what is unknown in the words of the command's own subject matter (internalErrors).
 */
export function commandErrorReply(verb: CommandVerb | WorkflowCommandVerb, error: unknown): { status: number; error: AdapterErrorBody } {
  if (error instanceof CommandBodyTooLarge) return { status: 413, error: error.toJSON() };
  const known = adapterErrorStatus(error);
  return known ? { status: known.status, error: known.body } : { status: 500, error: internalError(verb) };
}

// ── the server ──────────────────────────────────────────────────────────────

export interface CommandServerOptions {
  transport: Transport;
  coordinator: InvocationService;
  bundles: BundleRegistry;
  /** Workflow instances (workflow-start, workflow-get, workflow-cancel: workflow-commands.ts); not subscribed without them. */
  workflows?: WorkflowInstanceService;
  /** The longest wait a command may ask for; longer waitMs values are clamped (as HTTP's waitMsMax). */
  waitMsMax: number;
  /** Commands with `waitMs` one principal has waiting at once (default waitsPerPrincipalDefault); past it a command answers at once. */
  waitsPerPrincipal?: number;
  bodyLimitBytes: number;
  queue?: string;
  /** Principals that speak as a peer (sender exclusion): principal id -> peer id. */
  senders?: Record<string, string>;
  /**
   * The inbox prefix a principal's replies must go to. A command whose reply subject lies outside
   * its principal's inbox is neither run nor answered (counted as status "misaddressed"): answering
   * it would deliver one principal's reply into another's inbox. A principal token it throws for
   * (no convoke id: it has no inbox) is misaddressed whatever the reply subject.
   */
  replyInbox?: (principalId: string) => string;
  /** Told about 500s (bugs); the caller only learns "internal error". */
  onInternalError?: (error: unknown) => void;
  /** Told about a reply that could not be sent (the connection lost): its caller learns nothing but its timeout. */
  onReplyFailure?: (error: unknown, verb: string) => void;
  /** Told about a command neither run nor answered (counted as status "misaddressed"): its verb, its principal token, why. */
  onMisaddressed?: (verb: string, principal: string, reason: string) => void;
}

export interface CommandServer {
  readonly subjects: string[];
  /** New commands get 503; waits in progress are released and answered with their current state. */
  close(): Promise<void>;
}

interface ServerState {
  options: CommandServerOptions;
  closing: boolean;
  waits: Set<AbortController>;
  /** The waits each principal holds at once (runtime/wait-slots.ts). */
  slots: WaitSlots;
  inFlight: Set<Promise<void>>;
  replies: Counter<string>;
  /** Replies past max_payload sent reduced, or not carried at all (sendReply), counted apart by how. */
  reduced: Counter<string>;
}

/**
 * The peer a command principal speaks as (transport.commandSenders), or null: its own entries only.
 * The config is a parsed JSON object, and a principal named `constructor` or `__proto__` (both
 * subject tokens) would otherwise read what every object inherits.
 */
export function commandSender(senders: Readonly<Record<string, string>> | undefined, principalId: string): string | null {
  return senders !== undefined && Object.hasOwn(senders, principalId) ? (senders[principalId] ?? null) : null;
}

/** Subscribes the three command subjects (queue group) and answers each request. */
export async function startCommandServer(options: CommandServerOptions): Promise<CommandServer> {
  const state: ServerState = {
    options,
    closing: false,
    waits: new Set(),
    slots: new WaitSlots(options.waitsPerPrincipal ?? waitsPerPrincipalDefault),
    inFlight: new Set(),
    ...commandMetrics(options.coordinator.metrics.registry),
  };
  const queue = options.queue ?? commandQueueDefault;
  const subscriptions: Subscription[] = [];
  const verbs: (CommandVerb | WorkflowCommandVerb)[] = [...commandVerbs, ...(options.workflows ? workflowCommandVerbs : [])];
  const subjects = verbs.map((verb) => `${commandSubjectPrefix}.*.${verb}`);
  try {
    for (const verb of verbs) {
      subscriptions.push(
        await options.transport.subscribe(`${commandSubjectPrefix}.*.${verb}`, (message) => track(state, answer(state, verb, message)), { queue }),
      );
    }
  } catch (error) {
    await Promise.all(subscriptions.map((s) => s.close().catch(() => undefined)));
    throw error;
  }
  return {
    subjects,
    close: async () => {
      state.closing = true;
      for (const controller of state.waits) controller.abort('shutdown');
      await Promise.all(subscriptions.map((s) => s.close().catch(() => undefined)));
      await Promise.allSettled([...state.inFlight]);
    },
  };
}

function track(state: ServerState, work: Promise<void>): Promise<void> {
  state.inFlight.add(work);
  return work.finally(() => state.inFlight.delete(work));
}

async function answer(state: ServerState, verb: CommandVerb | WorkflowCommandVerb, message: InboundMessage): Promise<void> {
  const principalId = message.subject.split('.')[2] ?? '';
  const misaddressed = misaddressedReply(state.options.replyInbox, principalId, message.replyTo);
  if (misaddressed !== undefined) {
    state.replies.inc({ verb, status: 'misaddressed' });
    state.options.onMisaddressed?.(verb, principalId, misaddressed);
    return;
  }
  // With no reply subject nothing could receive what a wait would answer: the command waits for nothing.
  const waitMsMax = message.respond === undefined ? 0 : state.options.waitMsMax;
  let reply: AnyReply;
  try {
    reply = isWorkflowCommandVerb(verb)
      ? await handleWorkflow(state, verb, principalId, message.data, waitMsMax)
      : await handleCommand(state, verb, principalId, message.data, waitMsMax);
  } catch (error) {
    reply = commandErrorReply(verb, error);
    if (reply.status === 500) state.options.onInternalError?.(error);
  }
  // No reply subject: the sender asked for no answer (a fire-and-forget invoke still admits).
  const sent = message.respond === undefined ? reply : await sendReply(state, verb, message.respond, reply);
  state.replies.inc({ verb, status: String(sent.status) });
}

/**
 * Why a command's reply subject is not proven to lie in its principal's inbox, or undefined when it
 * is (or when there is no reply subject, or no inbox rule). A principal token the rule has no inbox
 * for (one that is no convoke id, `bad@x`: only a broker user written by hand can send it) proves
 * nothing about any reply subject, so its command is refused unanswered like any other misaddressed
 * one; where the rule does give it an inbox and the reply lies there, the command goes on and is
 * answered 400 for its principal.
 */
function misaddressedReply(inbox: ((principalId: string) => string) | undefined, principalId: string, replyTo: string | undefined): string | undefined {
  if (replyTo === undefined || inbox === undefined) return undefined;
  let prefix: string;
  try {
    prefix = inbox(principalId);
  } catch {
    return `command principal ${quoted(principalId)} is not a token-safe id: it has no inbox`;
  }
  return replyTo.startsWith(`${prefix}.`) ? undefined : `its reply subject ${quoted(replyTo)} is outside the principal's inbox ${prefix}.>`;
}

/** A subject token or subject for a log line: quoted, and cut where long. */
function quoted(text: string): string {
  return JSON.stringify(text.length > limits.describedCharsMax ? `${text.slice(0, limits.describedCharsMax)}…` : text);
}

/**
 * Sends the reply and answers what was sent. A reply the transport refuses for good as larger than
 * it carries (NATS: past the server's max_payload) is answered at once, never left to the caller's
 * timeout (it would take the coordinator for gone, and asking again would meet the same refusal):
 * a result or an instance as a smaller reply (smallerReplies), an error with its description cut,
 * a list page with a refusal asking for a smaller page. Any other failure (the connection lost)
 * leaves the caller to its timeout, as an unanswered request does, and is reported to onReplyFailure.
 * A reply past max_payload is counted apart too (`reduced`, by how it was sent), so operators see
 * how often replies are cut: answer() counts each only under the status it was sent with.
 */
async function sendReply(
  state: ServerState,
  verb: CommandVerb | WorkflowCommandVerb,
  respond: (data: Uint8Array) => Promise<void>,
  reply: AnyReply,
): Promise<AnyReply> {
  try {
    await respond(encoder.encode(JSON.stringify(reply)));
    return reply;
  } catch (error) {
    if (!(error instanceof PayloadTooLarge)) {
      state.options.onReplyFailure?.(error, verb);
      return reply;
    }
    let smallest = error.bytes;
    for (const smaller of smallerReplies(reply, error)) {
      const data = encoder.encode(JSON.stringify(smaller));
      smallest = data.byteLength;
      if (data.byteLength > error.maxPayload) continue;
      try {
        await respond(data);
      } catch (again) {
        // The server's max_payload may have shrunk meanwhile (another server after a reconnect): try smaller.
        if (again instanceof PayloadTooLarge) continue;
        state.options.onReplyFailure?.(again, verb);
      }
      state.reduced.inc({ verb, form: 'error' in smaller ? 'cut' : 'omitted' });
      return smaller;
    }
    state.reduced.inc({ verb, form: 'unsent' });
    const refusal = replyTooLarge(verb, reply, error, smallest);
    await respond(encoder.encode(JSON.stringify(refusal))).catch((again: unknown) => state.options.onReplyFailure?.(again, verb));
    return refusal;
  }
}

/**
 * The reply without its large members, larger first (omitted.ts): its status and the small members
 * kept, `omitted` naming what was left out. An error reply keeps its status and kind, its
 * description cut, then dropped. A list page has none: fewer rows would be another page.
 */
function smallerReplies(reply: AnyReply, refused: PayloadTooLarge): AnyReply[] {
  const omission = (members: string[], read: string): ReplyOmission => ({ members, replyBytes: refused.bytes, maxPayload: refused.maxPayload, read });
  if ('result' in reply && !('omitted' in reply)) {
    const read = operationReadPath(reply.result.operationId);
    return invocationResultReductions(reply.result).map(({ members, value }) => ({ status: reply.status, result: value, omitted: omission(members, read) }));
  }
  if ('instance' in reply && !('omitted' in reply)) {
    const read = instanceReadPath(reply.instance.instanceId);
    return workflowInstanceReductions(reply.instance).map(({ members, value }) => ({
      status: reply.status,
      instance: value,
      omitted: omission(members, read),
    }));
  }
  if ('error' in reply && reply.error.description !== undefined) {
    const cut = `${reply.error.description.slice(0, errorDescriptionCut)}… (cut: the reply was ${refused.bytes} bytes; the NATS server takes at most ${refused.maxPayload} (max_payload))`;
    return [
      { status: reply.status, error: { ...reply.error, description: cut } },
      { status: reply.status, error: { kind: reply.error.kind } },
    ];
  }
  return [];
}

/** An error description cut to fit is cut here (in UTF-16 units; far below any max_payload a deployment runs). */
const errorDescriptionCut = 512;

/**
 * The answer to a command whose reply cannot be carried even reduced. A list page: 400, asking for
 * a smaller page (nothing was changed by asking). A result or an instance: the command was carried
 * out, so never 400, which says it was refused; 500 `unavailable` as for any reply the coordinator
 * cannot give (the outcome is unknown to the caller), naming the operation or instance to read over HTTP.
 */
function replyTooLarge(
  verb: CommandVerb | WorkflowCommandVerb,
  reply: AnyReply,
  refused: PayloadTooLarge,
  smallest: number,
): { status: number; error: AdapterErrorBody } {
  const sizes = `the ${verb} reply is ${refused.bytes} bytes; the NATS server takes at most ${refused.maxPayload} (max_payload)`;
  const read = 'result' in reply ? operationReadPath(reply.result.operationId) : 'instance' in reply ? instanceReadPath(reply.instance.instanceId) : undefined;
  // An error reply that does not fit even as its kind alone keeps its status: the command was answered, not refused for its size.
  if ('error' in reply) return { status: reply.status, error: { kind: reply.error.kind, description: sizes } };
  if (read === undefined) return commandErrorReply(verb, invalidInput(`${sizes}: ask for less (a smaller list limit) or read it over HTTP`));
  return {
    status: 500,
    error: {
      kind: 'unavailable',
      description: `${sizes}, and ${smallest} bytes even with only its small members. The command was carried out; only its reply cannot be carried: read it over HTTP (${read})`,
    },
  };
}

/** One workflow command: the same gates as the others (shutdown, principal token, body size), then workflow-commands.ts. */
async function handleWorkflow(
  state: ServerState,
  verb: WorkflowCommandVerb,
  principalId: string,
  data: Uint8Array,
  waitMsMax: number,
): Promise<WorkflowReply | WorkflowListReply> {
  if (state.closing) throw unavailable('the coordinator is shutting down; retry against another instance or later');
  if (!tokenPattern.test(principalId)) throw invalidInput(`command principal ${JSON.stringify(principalId)} is not a token-safe id`);
  const { workflows, bodyLimitBytes } = state.options;
  if (!workflows) throw new AssertionFailure('workflow commands are subscribed only with workflow instances');
  if (data.byteLength > bodyLimitBytes) throw new CommandBodyTooLarge(bodyLimitBytes);
  const controller = new AbortController();
  state.waits.add(controller);
  try {
    return await handleWorkflowCommand({ workflows, waitMsMax, waits: state.slots, signal: controller.signal }, verb, principalId, data);
  } finally {
    state.waits.delete(controller);
  }
}

/** One command, from body bytes to reply (waiting at most waitMsMax); throws what commandErrorReply maps. */
async function handleCommand(state: ServerState, verb: CommandVerb, principalId: string, data: Uint8Array, waitMsMax: number): Promise<AnyReply> {
  if (state.closing) throw unavailable('the coordinator is shutting down; retry against another instance or later');
  // The subject permission proves the token; a token convoke cannot use as a principal id is refused.
  if (!tokenPattern.test(principalId)) throw invalidInput(`command principal ${JSON.stringify(principalId)} is not a token-safe id`);
  const { coordinator, bundles, bodyLimitBytes } = state.options;
  switch (verb) {
    case 'invoke': {
      const body = checkBody<InvocationRequest>(verb, data, bodyLimitBytes);
      const declared = contractBoundary(bundles, body.contract.digest, body.interaction);
      // Checked before admission, so a weakening request creates no state; an undeployed
      // contract has no boundary and admission rejects it with the precise kind.
      const requested = declared === undefined ? undefined : effectiveBoundary(body.waitFor, declared);
      const caller: Caller = { principalId, senderPeerId: commandSender(state.options.senders, principalId) };
      const { result } = await coordinator.invoke(caller, body);
      if (requested === undefined) throw new AssertionFailure('an admitted invocation names a deployed interaction');
      return waitAndAnswer(state, principalId, result.operationId, requested, Math.min(body.waitMs ?? 0, waitMsMax));
    }
    case 'get': {
      const body = checkBody<GetCommand>(verb, data, bodyLimitBytes);
      // Visibility first: a weakening waitFor on someone else's operation is still just 404.
      const current = await coordinator.get(principalId, body.operationId);
      const declared = contractBoundary(bundles, current.contract.digest, current.interaction);
      if (declared === undefined) throw new AssertionFailure('a visible operation names a deployed interaction');
      return waitAndAnswer(state, principalId, body.operationId, effectiveBoundary(body.waitFor, declared), Math.min(body.waitMs ?? 0, waitMsMax));
    }
    case 'cancel': {
      const body = checkBody<CancelCommand>(verb, data, bodyLimitBytes);
      // The decision is closed when cancel returns (it asserts so): cancelled now, or decided before.
      return { status: 200, result: await coordinator.cancel(principalId, body.operationId) };
    }
    case 'list': {
      // Visibility is the coordinator's: its own operations, or every one for an operator principal.
      const body = checkBody<Record<string, unknown>>(verb, data, bodyLimitBytes);
      return { status: 200, page: await coordinator.list(principalId, parseListParameters(body)) };
    }
    default: {
      const unreachable: never = verb;
      return unreachable;
    }
  }
}

async function waitAndAnswer(state: ServerState, principalId: string, operationId: string, boundary: WaitFor, waitMs: number): Promise<CommandReply> {
  const controller = new AbortController();
  state.waits.add(controller);
  if (state.closing) controller.abort('shutdown');
  try {
    const waited = await state.slots.bounded(principalId, waitMs, (granted) =>
      state.options.coordinator.wait(principalId, operationId, boundary, granted, controller.signal),
    );
    return { status: waited.reached ? 200 : 202, result: waited.result };
  } finally {
    state.waits.delete(controller);
  }
}

/** The command API's counters on `registry` (once per registry); exported so the documentation test can list them. */
export function commandMetrics(registry: Registry): { replies: Counter<string>; reduced: Counter<string> } {
  return {
    replies: registryCounter(registry, 'convoke_nats_command_replies_total', 'Replies to NATS commands, by verb and status', ['verb', 'status']),
    reduced: registryCounter(
      registry,
      'convoke_nats_command_replies_reduced_total',
      'Replies to NATS commands past max_payload, by verb and how they were sent: omitted (large members left out), cut (an error description cut), unsent (an error instead)',
      ['verb', 'form'],
    ),
  };
}

// ── the client side ─────────────────────────────────────────────────────────

/** Extra time a client waits for the reply beyond the wait it asked the coordinator for. */
export const replyMarginMs = 5_000;

/**
 * Sends one command and checks the reply's shape. A transport failure (no coordinator, timeout)
 * is thrown as an AdapterError ('unavailable'): the outcome of an invoke is then unknown, and the
 * caller retries with the same invocationKey or gets the operation.
 */
export async function sendCommand(
  transport: Transport,
  principalId: string,
  verb: Exclude<CommandVerb, 'list'>,
  body: unknown,
  timeoutMs: number,
): Promise<CommandReply> {
  return requestCommand<CommandReply>(transport, principalId, verb, body, timeoutMs, validateReply, 'command reply', commandReplyLevels);
}

/** Sends a `list` command (list parameters as JSON values) and checks the reply's shape. */
export async function sendListCommand(
  transport: Transport,
  principalId: string,
  parameters: Record<string, string | number | boolean>,
  timeoutMs: number,
): Promise<ListReply> {
  return requestCommand<ListReply>(transport, principalId, 'list', parameters, timeoutMs, validateListReply, 'list reply', 0);
}

/** The reply timeout for a command that asks the coordinator to wait waitMs. */
export function commandTimeoutMs(waitMs: number | undefined): number {
  return (waitMs ?? 0) + replyMarginMs;
}
