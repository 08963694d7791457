/**
 * The contract bundle (the "profile reference" the spec names but does not supply): its shapes,
 * as TypeScript types. The JSON Schema in ./schemas.ts is the authority; these types are written
 * out with their documentation and checked at compile time to be exactly what it accepts
 * (test/unit/schema-types.test.ts), with application data (`{}` in a schema) as JsonValue.
 */
import type { Completion } from './completion.js';
import type { JsonObject, JsonValue } from './json.js';

export type { Completion, CompletionMode } from './completion.js';

export type DeliveryMode = 'independent' | 'one-eligible' | 'explicit' | 'gather';
export type VoteMode = 'distinct-branches' | 'distinct-peers';
export type WaitFor = 'decision' | 'settled';
export type SiblingPolicy = 'detach' | 'cancel';

/** A typed equality predicate over the application result: the value at `pointer` equals `equals`. */
export interface Predicate {
  pointer: string;
  equals: JsonValue;
}

export type Audience = { group: string } | { peers: string[] };

export interface ExplicitBranch {
  branchId: string;
  peerId: string;
}

export type Aggregate = { kind: 'collect' } | { kind: 'tally'; pointer: string } | { kind: 'first-success' };

/** An interaction with every default applied (bundle.ts); as declared in a bundle it is an InteractionDeclaration. */
export interface Interaction {
  description?: string;
  input: JsonObject;
  result: JsonObject;
  output?: JsonObject;
  audience: Audience;
  delivery: DeliveryMode;
  /** Only with delivery "explicit": the operator-declared branch bindings. */
  branches?: ExplicitBranch[];
  completion: Completion;
  votes: VoteMode;
  success: Predicate;
  retryable?: Predicate;
  timeoutMs: number;
  onTimeout: 'partial' | 'failed';
  attempts: number;
  retryBackoffMs: number;
  leaseMs: number;
  renewIntervalMs: number;
  siblings: SiblingPolicy;
  cancelTimeoutMs: number;
  settlementGraceMs: number;
  waitFor: WaitFor;
  sender: 'include' | 'exclude';
  /**
   * What a candidate the directory observed offline means: `deliver` sends it its request anyway
   * (durable delivery keeps it until the peer binds; without durable delivery the admission is
   * unsupported), `exclude` leaves it out at admission.
   */
  offline: 'deliver' | 'exclude';
  /** `fenced`: the peers' business effects must commit through fencing effect sinks; admission checks the deployment advertises it. */
  effects: 'unfenced' | 'fenced';
  /** Whether the original invoker may cancel an open operation (an explicit, authorized command). */
  cancellation: 'none' | 'caller';
  aggregate?: Aggregate;
}

/** The fields an interaction may leave out: bundle.ts fills them from `interactionDefaults` (schemas.ts). */
export type InteractionDefaulted =
  | 'delivery'
  | 'votes'
  | 'onTimeout'
  | 'attempts'
  | 'retryBackoffMs'
  | 'leaseMs'
  | 'renewIntervalMs'
  | 'siblings'
  | 'cancelTimeoutMs'
  | 'settlementGraceMs'
  | 'waitFor'
  | 'sender'
  | 'offline'
  | 'effects'
  | 'cancellation';

/** An interaction as a bundle declares it: the defaulted fields optional. */
export type InteractionDeclaration = Omit<Interaction, InteractionDefaulted> & Partial<Pick<Interaction, InteractionDefaulted>>;

/** A Serverless Workflow DSL document: a JSON object with `document` and `do` (the DSL's schema governs the rest, src/workflow/dsl). */
export type WorkflowSource = JsonObject & { document: JsonObject; do: JsonValue[] };

/** A named input transform of a pipeline: a jq expression between two declared schemas. */
export interface PipelineTransform {
  description?: string;
  input: JsonObject;
  output: JsonObject;
  /** jq, without the `${ }` delimiters. */
  expression: string;
}

/** A finite operation: one message sent on a literal subject; `subscribe` is refused as unbounded. */
export interface StageOperation {
  action: 'send' | 'subscribe';
  subject: string;
  /** The CloudEvents type of the message. */
  type: string;
  /** JSON Pointer into the stage input: the payload sent (the whole input when absent). */
  payload?: string;
}

/** One pipeline stage: exactly one of `interaction` and `operation`. */
export interface PipelineStage {
  name: string;
  description?: string;
  interaction?: string;
  operation?: StageOperation;
  /** JSON Pointer selecting the invocation input from the stage input (after its transform). */
  stageInput?: string;
  /** A transform of the pipeline, applied to the stage input before `stageInput` selects. */
  transform?: string;
  waitFor?: WaitFor;
}

/** The spec's sequential pipeline syntax (src/workflow/dsl lowers it to a Serverless Workflow document). */
export interface Pipeline {
  description?: string;
  input: JsonObject;
  transforms?: Record<string, PipelineTransform>;
  stages: PipelineStage[];
}

export interface ContractBundle {
  profile: '0.2';
  contract: { id: string; version: string };
  subjectNamespace: string;
  /** As declared: bundle.ts applies the defaults (CompiledInteraction.spec is the Interaction). */
  interactions: Record<string, InteractionDeclaration>;
  pipelines?: Record<string, Pipeline>;
  /** Serverless Workflow DSL documents by name. */
  workflows?: Record<string, WorkflowSource>;
  /** Which pipelines and workflows (by name) the caller that started an instance may cancel; absent: none. */
  workflowCancellation?: Record<string, 'none' | 'caller'>;
}

export interface ContractRef {
  id: string;
  version: string;
  digest: string;
}

/** The closed runtime context (spec: "Identity, context and authorization"). */
export interface RuntimeContext {
  principalId: string;
  /** The logical peer the invoker speaks as, when it is itself a peer (used by `sender: exclude`). */
  senderPeerId: string | null;
  account: string;
  system: string;
  domain: string;
  /** Trusted provider time of this call. */
  nowMs: number;
  /** Null before admission; the recorded operation deadline after. */
  deadlineMs: number | null;
}

export interface InvocationRequest {
  contract: ContractRef;
  interaction: string;
  invocationKey: string;
  input: JsonValue;
  waitFor?: WaitFor;
  waitMs?: number;
  /** Prohibited (refused as denied): the expected result set never comes from the caller. */
  manifest?: JsonValue;
  expected?: JsonValue;
  branches?: JsonValue;
}
