/**
 * The events of a workflow instance's stream (`convoke-wf-<instanceId>`) and their JSON Schemas.
 * One transition per handled command, like an operation's: the events that belong together, a
 * time guard, and the command's name. A decided transition that fails its schema is a bug (an
 * assertion); one read back from a store that fails it is corruption (never folded).
 *
 * Every value a step produced — an expression's result, an HTTP answer, a contract call's
 * result — is an event, so rebuilding the instance never evaluates or calls anything.
 */
import type { JsonValue } from '../../contract/json.js';
import { describedProblem, lazyPasses } from '../../contract/validation.js';
import type { TimeGuard } from '../../events/types.js';

/** A DSL error (RFC 7807 problem details); `instance` is the JSON Pointer of the task that raised it. */
export interface WorkflowError {
  type: string;
  status: number;
  title?: string;
  detail?: string;
  instance?: string;
}

/** A step's recorded result: a value, or the error it raised. */
export type StepResult = { ok: JsonValue } | { error: WorkflowError };

/**
 * A value recorded earlier in the same log, named instead of written again: the value a step
 * recorded (`{step}`: its `ok` result), the output of a completed task (`{task}`), the
 * workflow's input (`{input: true}`: workflow-started's), or what a listen took (`{listen}`: the
 * events of its `to`, in log order, as its `read` reads them — record.ts listenOutput — each
 * recorded by its own listen-event-received). The last lets a listen complete with events that
 * each fit a transition but together would not: written again in one task-completed, they could
 * not be, and the senders were answered that the instance took them. A stage's answer is written once (its
 * call-answered) and its task's output, the next task's input and the workflow's output refer to
 * it; the first task's input is the workflow's. The fold puts the referenced value in the record,
 * so the record (live or replayed) is the one the values written in full would give. Logs written
 * before refs carry the values themselves, and still fold.
 */
export type ValueRef = { step: string } | { task: string } | { listen: string } | { input: true };

export type TimerPurpose = 'wait' | 'retry' | 'task-timeout' | 'workflow-timeout';

/** What names an instance (its id is derived from the rest: ids.ts workflowInstanceId). */
export interface InstanceIdentity {
  instanceId: string;
  principalId: string;
  invocationKey: string;
  workflowName: string;
  /** The digest of the bundle that pins the document, or of the document itself when run from a file. */
  bundleDigest: string;
}

export interface WorkflowStarted extends InstanceIdentity {
  type: 'workflow-started';
  v: 1;
  document: JsonValue;
  input: JsonValue;
  /**
   * The workflow's timeout (`timeout.after`), or null: its deadline counts from the instant the
   * store committed this event — the instance's startedAtMs — and is derived in the record.
   */
  timeoutMs?: number | null;
  /** Logs written before timeoutMs: the deadline as the start decided it (from its decision instant). */
  deadlineMs?: number | null;
  /** Set when a `run: workflow` task of another instance started this one: that instance, its task execution, and this one's depth (1 for a child of a top-level instance). */
  parent?: WorkflowParent;
  /** The scheme of its task execution keys (keys.ts); absent in logs written before it: scheme 1. */
  keys?: 2 | 3;
  /**
   * The log's format: 2 records a call's evaluated `with` (its `>with` step) as the results of its
   * expressions alone, in document order; absent in logs written before it (format 1: the whole
   * evaluated value, the document's constant parts included).
   */
  format?: 2;
}

/**
 * The first event of a child instance its parent cancelled before the child's start was stored
 * (subworkflows.ts disposeSubworkflow): the stream is created with it under the same
 * create-if-absent a start uses, so whichever of the two is stored first wins and the other finds
 * it. Such an instance never ran and never will: a start of its id finds it (created: false) and
 * answers it, cancelled. It names what the parent bound — the child's identity and the parent —
 * and nothing of the start it forestalled (no document, no input: the start was never made).
 */
export interface WorkflowCancelledBeforeStart extends InstanceIdentity {
  type: 'workflow-cancelled-before-start';
  v: 1;
  parent: WorkflowParent;
  reason: string;
}

/** The instance and task execution whose `run: workflow` started a child instance. */
export interface WorkflowParent {
  instanceId: string;
  at: string;
  depth: number;
}

/** `at` names a task execution: its JSON Pointer and the frame (loop index, retry attempt, branch) it ran in. */
export interface TaskStarted {
  type: 'task-started';
  v: 1;
  at: string;
  ref: string;
  name: string;
  /** The task's raw input, or (`inputFrom`) where it was recorded already: exactly one of the two. */
  input?: JsonValue;
  inputFrom?: ValueRef;
}
export interface TaskCompleted {
  type: 'task-completed';
  v: 1;
  at: string;
  /** The task's output, or (`outputFrom`) where it was recorded already: exactly one of the two. */
  output?: JsonValue;
  outputFrom?: ValueRef;
}
export interface TaskFaulted {
  type: 'task-faulted';
  v: 1;
  at: string;
  error: WorkflowError;
}
export interface TaskCancelled {
  type: 'task-cancelled';
  v: 1;
  at: string;
  reason: string;
}
/** An expression's (or a set of expressions') result, recorded so that replay never runs jq. */
export interface ExpressionEvaluated {
  type: 'expression-evaluated';
  v: 1;
  at: string;
  result: StepResult;
}
/** An external call's answer (HTTP, a contract invocation's result as the workflow sees it). */
export interface CallAnswered {
  type: 'call-answered';
  v: 1;
  at: string;
  result: StepResult;
}
/**
 * A `run: workflow` task's child instance, recorded before the child is started: recovery starts
 * the same child again (create-if-absent under its id) and finds it.
 */
export interface SubworkflowBound {
  type: 'subworkflow-bound';
  v: 1;
  at: string;
  ref: string;
  instanceId: string;
  /** The child's invocation key (derived like a stage's: src/workflow/ids.ts stageInvocationKey). */
  invocationKey: string;
  /** The child's document name (the workflow it runs). */
  workflow: string;
  iterations: number[];
  attempt: number;
}

/**
 * What became of an awaited child instance once the task awaiting it stopped waiting — its own
 * timeout or an enclosing task's fired, or it was in a competing fork's losing branch: cancelled
 * by its parent (which owns it), already closed (it had completed, faulted, or been cancelled by
 * someone else such as its caller, before its parent's cancel reached it), or never started (the
 * start did not happen before the task was abandoned). `at` is the `run: workflow` task
 * execution; `by` the execution whose end released it (the timed-out task, or the fork).
 *
 * `not-started` is recorded only once the child's id holds an instance cancelled before its start
 * (workflow-cancelled-before-start): no start of that id can succeed afterwards. (Logs written
 * before that event recorded `not-started` when the cancel found no instance under the id, which a
 * start still in flight could then create.)
 */
export type SubworkflowDisposition = 'cancelled' | 'already-closed' | 'not-started';
export interface SubworkflowDisposed {
  type: 'subworkflow-disposed';
  v: 1;
  at: string;
  instanceId: string;
  by: string;
  disposition: SubworkflowDisposition;
  detail: string;
}

/** A contract call's identity, recorded before the call: recovery calls again under this key. */
export interface ChildBound {
  type: 'child-bound';
  v: 1;
  at: string;
  ref: string;
  operationId: string;
  invocationKey: string;
  /** The index of each enclosing loop iteration, outermost first. */
  iterations: number[];
  /** The logical invocation of this position: 1, or more after DSL retries (docs/workflows-executor.md). */
  attempt: number;
}
export interface TimerSet {
  type: 'timer-set';
  v: 1;
  at: string;
  dueAtMs: number;
  purpose: TimerPurpose;
}
export interface TimerFired {
  type: 'timer-fired';
  v: 1;
  at: string;
}
/**
 * The worker lease (lease.ts): the one worker that drives the instance and alone makes its
 * external calls. Acquired by a worker (epoch + 1; a takeover commits no earlier than the
 * previous lease's end), renewed by its holder, released on a clean shutdown.
 */
export interface LeaseAcquired {
  type: 'lease-acquired';
  v: 1;
  worker: string;
  epoch: number;
  untilMs: number;
}
export interface LeaseRenewed {
  type: 'lease-renewed';
  v: 1;
  epoch: number;
  untilMs: number;
}
export interface LeaseReleased {
  type: 'lease-released';
  v: 1;
  epoch: number;
}
/** An external call (HTTP, a contract invocation, an emitted event) is about to be made under the lease's epoch. */
export interface CallStarted {
  type: 'call-started';
  v: 1;
  at: string;
  epoch: number;
}
/** The winning branch of a competing fork; every other branch of it is cancelled. */
export interface ForkWon {
  type: 'fork-won';
  v: 1;
  at: string;
  branch: number;
}
/**
 * What became of a child operation no task awaits any more — a losing fork branch's, once the
 * fork's winner committed, or one bound inside a task a timeout cancelled (recorded after the
 * timeout's fault, the instance ended or not):
 * cancelled through the coordinator's caller-cancellation path (the interaction declares it),
 * detached (it does not, or policy refuses the cancel), already closed (decided when the release
 * came to it: before the win, or after it and before the release's look or cancel), or never
 * admitted (the call never reached the runtime). `at` is the child's task execution.
 */
export type ChildDisposition = 'cancelled' | 'detached' | 'already-closed' | 'not-admitted';
export interface ChildDisposed {
  type: 'child-disposed';
  v: 1;
  at: string;
  /** The execution whose end released the child: the competing fork it lost, or the timed-out task it ran inside. */
  fork: string;
  operationId: string;
  disposition: ChildDisposition;
  detail: string;
}
/**
 * A listen task waits: its consumption strategy as it was recorded (`correlate.*.expect` already
 * evaluated against the task's input) and how events are read. From here until the task ends, a
 * delivered event is matched against it.
 */
export interface ListenStarted {
  type: 'listen-started';
  v: 1;
  at: string;
  to: JsonValue;
  read: 'data' | 'envelope' | 'raw';
}
/**
 * Who could have sent a delivered event, as its way in proves it: `outside`, an event publisher
 * allowed its type (NATS `<subjectPrefix>.<type>`, which reaches every principal's listens);
 * `principal`, the instance's own principal (its workflows' emitted events, `<emitSubjectPrefix>.<P>.<type>`,
 * or its own POST /workflow-events).
 */
export type EventSender = 'outside' | 'principal';

/** A delivered CloudEvent the waiting listen took: which filter (of `to`, or of `until`) and the correlation values it carried. */
export interface ListenEventReceived {
  type: 'listen-event-received';
  v: 1;
  at: string;
  event: JsonValue;
  group: 'to' | 'until';
  filter: number;
  correlation: Record<string, JsonValue>;
  /** Who could have sent it (its identity is that sender's: listen-match.ts); absent in logs written before it: either. */
  from?: EventSender;
}
export interface WorkflowCompleted {
  type: 'workflow-completed';
  v: 1;
  /** The workflow's output, or (`outputFrom`) where it was recorded already: exactly one of the two. */
  output?: JsonValue;
  outputFrom?: ValueRef;
}
export interface WorkflowFaulted {
  type: 'workflow-faulted';
  v: 1;
  error: WorkflowError;
}
export interface WorkflowCancelled {
  type: 'workflow-cancelled';
  v: 1;
  reason: string;
}

export type WorkflowEvent =
  | WorkflowStarted
  | WorkflowCancelledBeforeStart
  | TaskStarted
  | TaskCompleted
  | TaskFaulted
  | TaskCancelled
  | ExpressionEvaluated
  | CallAnswered
  | ChildBound
  | SubworkflowBound
  | SubworkflowDisposed
  | TimerSet
  | TimerFired
  | ForkWon
  | ChildDisposed
  | ListenStarted
  | ListenEventReceived
  | LeaseAcquired
  | LeaseRenewed
  | LeaseReleased
  | CallStarted
  | WorkflowCompleted
  | WorkflowFaulted
  | WorkflowCancelled;

export interface WorkflowTransition {
  events: WorkflowEvent[];
  timeGuard: TimeGuard;
  causation: { command: string };
}

// ── schemas ──────────────────────────────────────────────────────────────

const ms = { type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER } as const;
const at = { type: 'string', minLength: 1, maxLength: 2048 } as const;
const text = { type: 'string', maxLength: 4096 } as const;
const json = {} as const;
const errorSchema = {
  type: 'object',
  required: ['type', 'status'],
  additionalProperties: false,
  properties: {
    type: text,
    status: { type: 'integer', minimum: 100, maximum: 999 },
    title: text,
    detail: { type: 'string', maxLength: 16384 },
    instance: text,
  },
} as const;
/** `{ok: value}` or `{error: …}`: exactly one of the two (said without oneOf, which checks both and builds the failing one's errors). */
const stepResult = {
  type: 'object',
  minProperties: 1,
  maxProperties: 1,
  additionalProperties: false,
  properties: { ok: json, error: errorSchema },
} as const;

function event(type: string, properties: Record<string, object>) {
  return {
    type: 'object',
    required: ['type', 'v', ...Object.keys(properties)],
    additionalProperties: false,
    properties: { type: { const: type }, v: { const: 1 }, ...properties },
  };
}

/** The event with `names` left out of its required properties (fields logs written before them lack). */
function optional(schema: ReturnType<typeof event>, ...names: string[]) {
  return { ...schema, required: schema.required.filter((name) => !names.includes(name)) };
}

/** A ValueRef: `{step}`, `{task}`, `{listen}` or `{input: true}`, one of the four. */
const valueRef = {
  type: 'object',
  minProperties: 1,
  maxProperties: 1,
  additionalProperties: false,
  properties: { step: at, task: at, listen: at, input: { const: true } },
} as const;

/** An event whose value `field` is written in full or referred to (`<field>From`): exactly one of the two. */
function valueOrRef(schema: ReturnType<typeof event>, field: 'input' | 'output') {
  return {
    ...schema,
    required: schema.required.filter((name) => name !== field && name !== `${field}From`),
    oneOf: [{ required: [field] }, { required: [`${field}From`] }],
  };
}

const parentSchema = {
  type: 'object',
  required: ['instanceId', 'at', 'depth'],
  additionalProperties: false,
  properties: { instanceId: { type: 'string', pattern: '^wf[0-9a-f]{64}$' }, at, depth: { type: 'integer', minimum: 1 } },
} as const;

/** workflow-started: timeoutMs (or, in older logs, deadlineMs) — the one or the other. */
function startedSchema(schema: ReturnType<typeof event>) {
  return {
    ...schema,
    required: schema.required.filter((name) => name !== 'timeoutMs' && name !== 'deadlineMs' && name !== 'parent' && name !== 'keys' && name !== 'format'),
    oneOf: [{ required: ['timeoutMs'] }, { required: ['deadlineMs'] }],
  };
}

/** InstanceIdentity's fields. */
const instanceIdentity = {
  instanceId: { type: 'string', pattern: '^wf[0-9a-f]{64}$' },
  principalId: { type: 'string', minLength: 1, maxLength: 256 },
  invocationKey: { type: 'string', maxLength: 256 },
  workflowName: { type: 'string', minLength: 1, maxLength: 256 },
  bundleDigest: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' },
} as const;

export const workflowEventSchemas = [
  startedSchema(
    event('workflow-started', {
      ...instanceIdentity,
      document: { type: 'object' },
      input: json,
      timeoutMs: { anyOf: [{ type: 'null' }, { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }] },
      deadlineMs: { anyOf: [{ type: 'null' }, ms] },
      parent: parentSchema,
      keys: { enum: [2, 3] },
      format: { const: 2 },
    }),
  ),
  event('workflow-cancelled-before-start', {
    ...instanceIdentity,
    parent: parentSchema,
    reason: text,
  }),
  valueOrRef(event('task-started', { at, ref: at, name: { type: 'string', maxLength: 256 }, input: json, inputFrom: valueRef }), 'input'),
  valueOrRef(event('task-completed', { at, output: json, outputFrom: valueRef }), 'output'),
  event('task-faulted', { at, error: errorSchema }),
  event('task-cancelled', { at, reason: text }),
  event('expression-evaluated', { at, result: stepResult }),
  event('call-answered', { at, result: stepResult }),
  event('child-bound', {
    at,
    ref: at,
    operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
    invocationKey: { type: 'string', minLength: 1, maxLength: 256 },
    iterations: { type: 'array', items: { type: 'integer', minimum: 0 } },
    attempt: { type: 'integer', minimum: 1 },
  }),
  event('subworkflow-bound', {
    at,
    ref: at,
    instanceId: { type: 'string', pattern: '^wf[0-9a-f]{64}$' },
    invocationKey: { type: 'string', minLength: 1, maxLength: 256 },
    workflow: { type: 'string', minLength: 1, maxLength: 256 },
    iterations: { type: 'array', items: { type: 'integer', minimum: 0 } },
    attempt: { type: 'integer', minimum: 1 },
  }),
  event('subworkflow-disposed', {
    at,
    instanceId: { type: 'string', pattern: '^wf[0-9a-f]{64}$' },
    by: at,
    disposition: { enum: ['cancelled', 'already-closed', 'not-started'] },
    detail: text,
  }),
  event('timer-set', { at, dueAtMs: ms, purpose: { enum: ['wait', 'retry', 'task-timeout', 'workflow-timeout'] } }),
  event('timer-fired', { at }),
  event('fork-won', { at, branch: { type: 'integer', minimum: 0 } }),
  event('child-disposed', {
    at,
    fork: at,
    operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
    disposition: { enum: ['cancelled', 'detached', 'already-closed', 'not-admitted'] },
    detail: text,
  }),
  event('listen-started', { at, to: { type: 'object' }, read: { enum: ['data', 'envelope', 'raw'] } }),
  optional(
    event('listen-event-received', {
      at,
      event: { type: 'object', required: ['specversion', 'id', 'source', 'type'] },
      group: { enum: ['to', 'until'] },
      filter: { type: 'integer', minimum: 0 },
      correlation: { type: 'object' },
      from: { enum: ['outside', 'principal'] },
    }),
    'from',
  ),
  event('lease-acquired', { worker: { type: 'string', minLength: 1, maxLength: 256 }, epoch: { type: 'integer', minimum: 1 }, untilMs: ms }),
  event('lease-renewed', { epoch: { type: 'integer', minimum: 1 }, untilMs: ms }),
  event('lease-released', { epoch: { type: 'integer', minimum: 1 } }),
  event('call-started', { at, epoch: { type: 'integer', minimum: 0 } }),
  valueOrRef(event('workflow-completed', { output: json, outputFrom: valueRef }), 'output'),
  event('workflow-faulted', { error: errorSchema }),
  event('workflow-cancelled', { reason: text }),
];

export const workflowTransitionSchema = {
  $id: 'https://convoke.dev/schemas/workflow-transition.json',
  type: 'object',
  required: ['events', 'timeGuard', 'causation'],
  additionalProperties: false,
  properties: {
    events: { type: 'array', minItems: 1, items: { type: 'object', required: ['type'], discriminator: { propertyName: 'type' }, oneOf: workflowEventSchemas } },
    timeGuard: { type: 'object', required: ['notBeforeMs', 'notAfterMs'], additionalProperties: false, properties: { notBeforeMs: ms, notAfterMs: ms } },
    causation: { type: 'object', required: ['command'], additionalProperties: false, properties: { command: { type: 'string', maxLength: 64 } } },
  },
} as const;

/**
 * The pass/fail check, event by event: the transition's envelope, then each event against its own
 * type's schema (what the discriminator picks), each compiled on first use. One validator of the
 * whole vocabulary is too large a function for V8 to optimize, and every check of a decided
 * transition would run it unoptimized; these are small. A failure is described by the whole
 * schema's validator (every error, with its pointer into the transition).
 */
const envelopePasses = lazyPasses({
  ...workflowTransitionSchema,
  $id: undefined,
  properties: { ...workflowTransitionSchema.properties, events: { type: 'array', minItems: 1, items: { type: 'object', required: ['type'] } } },
});
const eventPasses = new Map(workflowEventSchemas.map((schema) => [schema.properties.type.const, lazyPasses(schema)]));

function transitionPasses(value: unknown): boolean {
  if (!envelopePasses(value)) return false;
  for (const event of (value as { events: { type: unknown }[] }).events) {
    const passes = typeof event.type === 'string' ? eventPasses.get(event.type) : undefined;
    if (passes === undefined || !passes(event)) return false;
  }
  return true;
}

const problem = describedProblem(transitionPasses, workflowTransitionSchema);

/** Undefined when valid; otherwise every schema error. */
export function workflowTransitionProblem(transition: unknown): string | undefined {
  return problem(transition);
}
