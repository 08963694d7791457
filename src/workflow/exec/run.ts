/**
 * What a task kind (tasks.ts, calls.ts) sees of the interpreter running it, and the shapes they
 * share: the frame a task runs in, one task execution, its outcome. The interpreter implements
 * `Interpreting`; the kinds depend on this interface, not on the interpreter.
 */
import type { CloudEventSink } from '../../contract/cloudevents.js';
import type { JsonValue } from '../../contract/json.js';
import type { OriginPattern } from '../../contract/origins.js';
import type { Random } from '../../runtime/random.js';
import type { ContractCalls } from './http-contracts.js';
import type { Proposal } from './decide.js';
import type { SubworkflowRef, TaskEntry } from './document.js';
import type { ExpressionEvaluator } from './jq.js';
import type { Journal } from './journal.js';
import type { KeyScope } from './keys.js';
import type { OpenApiDocuments } from './openapi.js';
import type { WorkflowRecord } from './record.js';
import type { ValueRef, WorkflowCancelledBeforeStart, WorkflowParent } from './events.js';

export interface InterpreterDeps {
  journal: Journal;
  evaluator: ExpressionEvaluator;
  random: Random;
  fetch: typeof fetch;
  invocations: ContractCalls | undefined;
  runtime: { name: string; version: string };
  httpTimeoutMs: number;
  /** OpenAPI documents kept between calls (openapi.ts); without it each call fetches its document. */
  openApiDocuments: OpenApiDocuments | undefined;
  /** How long one wait on a child operation lasts before it is asked again. */
  contractWaitChunkMs: number;
  /** Where emitted CloudEvents are published once recorded; without one they are only recorded. */
  events: CloudEventSink | undefined;
  /** Task executions one instance may make (a flow directive can loop). */
  tasksMax: number;
  /** The most bytes one transition may take in the store (WorkflowStore.transitionBytesMax): what a held fact must fit alone. */
  transitionBytesMax: number;
  /** The secrets the deployment provides, by name (a workflow reads those its `use.secrets` declares: src/workflow/secrets.ts). */
  secrets: ReadonlyMap<string, JsonValue>;
  /** The only origins a request carrying a secret may go to, by the secret's name; a secret not named here may go to any the egress policy allows. */
  secretOrigins: ReadonlyMap<string, readonly OriginPattern[]>;
  /** Runs `run: workflow` children (the executor); without it such a task raises a configuration error. */
  subworkflows: SubworkflowHost | undefined;
}

/** What the interpreter asks of the executor to run child instances. */
export interface SubworkflowHost {
  /** The document a reference names for the parent (its bundle's, or its own), or undefined. */
  resolve(parent: WorkflowRecord, ref: SubworkflowRef): JsonValue | undefined;
  /** Starts the child, or finds it (create-if-absent under its id); answers its id. */
  start(request: ChildStart): Promise<{ instanceId: string }>;
  /** Waits up to waitMs for the child to end (in memory: nothing is recorded); its record, or undefined when unknown. */
  wait(instanceId: string, waitMs: number, signal: AbortSignal): Promise<WorkflowRecord | undefined>;
  /**
   * Cancels the child where it still runs; its record afterwards. When no instance has its id yet
   * and `unstarted` is given, the child's stream is created cancelled before its start (that first
   * event, under the create-if-absent a start uses): a start still in flight then finds it, and
   * never runs the child; a start stored first is cancelled as any running child. Without
   * `unstarted`, undefined when no instance has its id.
   */
  cancel(instanceId: string, reason: string, unstarted?: WorkflowCancelledBeforeStart): Promise<WorkflowRecord | undefined>;
}

export interface ChildStart {
  principalId: string;
  bundleDigest: string;
  invocationKey: string;
  document: JsonValue;
  input: JsonValue;
  parent: WorkflowParent;
}

/** Where a task runs: its key's markers (keys.ts), loop indexes, variables, cancellation. */
export interface Frame {
  suffix: string;
  /** Key schemes 2 and 3: the task execution whose body the frame runs in (keys.ts). */
  scope?: KeyScope;
  iterations: readonly number[];
  vars: Readonly<Record<string, JsonValue>>;
  signal: AbortSignal;
  /**
   * The task execution whose definition the frame's expressions belong to: `$task` there (the DSL's
   * runtime arguments). Tasks nested in its body run in frames of their own definitions.
   */
  task?: FrameTask;
}

/** A task execution as `$task` describes it: its entry, its key and its raw input. */
export interface FrameTask {
  entry: TaskEntry;
  at: string;
  rawInput: JsonValue;
}

export interface Outcome {
  output: JsonValue;
  then: string | undefined;
  ended: boolean;
}

/** One task execution as its kind sees it. */
export interface TaskRun {
  entry: TaskEntry;
  /** The execution's key: the task's pointer and its frame suffix. */
  at: string;
  /** The task's transformed input (`$input`, `.`). */
  input: JsonValue;
  frame: Frame;
}

export interface Interpreting {
  readonly deps: InterpreterDeps;
  readonly record: WorkflowRecord;
  /**
   * An expression that reads `$secrets`, evaluated for an outgoing request and never recorded;
   * a secret the document does not declare, or the deployment does not provide, raises an
   * authorization error (403), and an evaluation error is raised without its message (it could
   * hold a secret's value).
   */
  evaluateSecret(expression: string, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue>;
  /** A transform's result (a string expression, or an object whose `${ }` strings are filled in), recorded under `at`. */
  transform(at: string, transform: JsonValue, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue>;
  /** The variables an expression of the frame's task sees ($context, $workflow, $runtime, $task, the frame's own) and `extra`. */
  vars(frame: Frame, extra: Readonly<Record<string, JsonValue>>): Record<string, JsonValue>;
  /** Validates a value against the document's data schema at `pointer`, if any (a validation error, 400, at `instance`). */
  validate(pointer: string, value: JsonValue, instance: string, what: string): void;
  /** A secret the document declares and the deployment provides, for a secret-based authentication policy (403 otherwise). */
  secret(name: string, ref: string): JsonValue;
  /** Commits the proposal with the facts held before it (interpreter.ts: what is recorded, and when). */
  propose(proposal: Proposal): Promise<WorkflowRecord>;
  /** Commits the facts held, if any: before reading what only the log knows (a task's start instant) or waiting. */
  flush(): Promise<void>;
  /** Throws Halted when the frame was stopped or the instance is no longer running. */
  alive(frame: Frame): void;
  /** `rerun`: whether a call found started but unanswered (its worker stopped) may be made again. */
  step(at: string, frame: Frame, kind: 'expression' | 'call', compute: () => Promise<JsonValue>, rerun?: boolean, levels?: number): Promise<JsonValue>;
  evaluate(at: string, expression: string, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue>;
  evaluateValue(at: string, value: JsonValue, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue>;
  evaluateArgs(at: string, value: JsonValue, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue>;
  runList(list: JsonValue | undefined, base: string, input: JsonValue, frame: Frame): Promise<{ output: JsonValue; ended: boolean }>;
  /**
   * A list of other outputs a task answers as its own (a fork's branches' outputs, a listen's
   * events or iterations), held to limits.jsonDepthMax + outputLevels (calls.ts) as every task's
   * output is: deeper, a runtime error (500, `Value not recordable`) at the task, naming it. A
   * completion the log holds already is as it was recorded.
   */
  heldOutput(run: TaskRun, output: JsonValue[]): JsonValue[];
  /** Counts one task execution against the instance's budget (deps.tasksMax): a runtime error (500) at `pointer` past it. */
  spend(pointer: string): void;
  /**
   * Notes where a value the task returns is recorded already (events.ts ValueRef), unless an
   * earlier place was noted: its completion, and what reads it next, name that place instead of
   * writing the value again.
   */
  noteOrigin(value: JsonValue, from: ValueRef): void;
  /** Runs one execution of a task: `visit` is its revisit in its list (0: the first visit). */
  runTask(entry: TaskEntry, rawInput: JsonValue, frame: Frame, visit?: number): Promise<Outcome>;
}
