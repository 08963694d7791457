/**
 * The workflow executor: workflow instances as an event-sourced aggregate on the kernel
 * (src/kernel, unchanged) and the operation stores. It starts an instance (create-if-absent under
 * its id: the same principal, bundle, workflow and key find the same instance; a different input
 * under them is a conflict), runs its interpreter, fires its timers through guarded appends, and
 * resumes any running instance it loads — on restart, or on another worker sharing the store.
 */
import { AdmissionRate, workflowStartWords, type AdmissionRateConfig } from '../../runtime/admission-rate.js';
import { canonicalJson, checkCanonicalizable, sha256Hex } from '../../contract/canonical.js';
import { asLogged } from '../../contract/ijson.js';
import { checkInvocationKey } from '../../contract/ids.js';
import { hostname } from 'node:os';
import { doublingDelayMs, toldInARow, type Clock, type TimerHandle } from '../../contract/clock.js';
import type { CloudEvent, CloudEventDelivery, CloudEventIntake, CloudEventSink } from '../../contract/cloudevents.js';
import { AdapterError, AssertionFailure, conflict, invalidInput, isAdapterError } from '../../contract/errors.js';
import { jsonEquals, type JsonObject, type JsonValue } from '../../contract/json.js';
import { Kernel, newStream, type Stored, type StoreFailure, type Stream } from '../../kernel/index.js';
import type { Random } from '../../runtime/random.js';
import { transitionBytes } from '../../runtime/log-budget.js';
import type { Transition } from '../../events/types.js';
import type { ContractCalls } from './http-contracts.js';
import { workflowInstanceId } from '../ids.js';
import { workflowAggregate } from './aggregate.js';
import { decideCancel, decideDefectFault, decideDisposals, decideDue, decideProposal, type Proposal } from './decide.js';
import { checkDocument, isObject, isWorkflowNamed, workflowTimeoutMs, type SubworkflowRef } from './document.js';
import { workflowTransitionProblem, type WorkflowCancelledBeforeStart, type WorkflowEvent, type WorkflowParent, type WorkflowTransition } from './events.js';
import { deliverEvent, untilWaitEnd } from './intake.js';
import { Interpreter } from './interpreter.js';
import { raise } from './dsl-errors.js';
import { secretValueProblem } from '../secrets.js';
import type { ExpressionEvaluator } from './jq.js';
import { Halted, logBudgetExhausted, type Journal } from './journal.js';
import { keyScheme } from './keys.js';
import { decideAcquire, decidePark, decideRelease, decideRenew, holderLease, LeaseLost } from './lease.js';
import { applyWorkflow, foldWorkflow, type WorkflowRecord } from './record.js';
import type { WorkflowStore } from './streams.js';
import type { SubworkflowHost } from './run.js';
import { disposeOwed, owedDisposals } from './subworkflows.js';
import { owedReleases, releaseOwed } from './losers.js';
import { OpenApiDocuments } from './openapi.js';
import { egressFetch, type EgressFetch, type EgressOptions } from './egress.js';
import { originPatterns, type OriginPattern } from '../../contract/origins.js';
import { limits } from '../../contract/limits.js';
import { RunningBound, RunningBoundReached } from './running-bound.js';

export interface WorkflowExecutorOptions {
  /** The instances' streams; `resume` reads the running ones from `runningIds` (workflowStreams gives it). */
  store: WorkflowStore;
  clock: Clock;
  random: Random;
  evaluator: ExpressionEvaluator;
  /**
   * HTTP calls go through this (tests route public hosts to a loopback stub); exclusive with
   * `egress`. Requests are made with `redirect: 'manual'`: it must answer a 3xx as it came.
   */
  fetch?: typeof fetch;
  /**
   * The egress policy of HTTP calls (egress.ts: which origins, whether private addresses), enforced
   * on each connection; without it (and without `fetch`) calls go through the global fetch, anywhere.
   */
  egress?: EgressOptions;
  /** Contract calls go through this (the coordinator in-process, or HttpContracts); without it they raise a configuration error. */
  invocations?: ContractCalls;
  /** Where emitted CloudEvents are published after their record commits (NatsCloudEventSink); by default they are only recorded. */
  events?: CloudEventSink;
  /** A function sink (tests); `events` wins when both are given. */
  emit?: (event: JsonObject) => Promise<void>;
  runtime?: { name: string; version: string };
  httpTimeoutMs?: number;
  /** How long a fetched OpenAPI document is kept for later `call: openapi` tasks (default 60 s; 0: every call fetches its own). */
  openApiDocumentKeepMs?: number;
  /** Task executions one instance may make (default and most: limits.workflowTaskExecutionsMax). */
  tasksMax?: number;
  /** Transitions one instance may append while it runs (default and most: limits.workflowTransitionsMax); past it a step faults it. */
  transitionsMax?: number;
  /** Bytes one instance's log may hold while it runs (default and most: limits.workflowLogBytesMax); a step past it faults it. */
  logBytesMax?: number;
  /**
   * Running instances one principal may hold, its children included (default
   * limits.workflowRunningPerPrincipalDefault, at most limits.workflowRunningPerPrincipalMax):
   * a start past it is refused before anything is recorded (running-bound.ts).
   */
  runningPerPrincipal?: number;
  /** What sets that bound where this executor runs, named in a refusal (default: serve's `workflows.runningInstancesPerPrincipal`). */
  runningBoundSetting?: string;
  /**
   * Told each error that stopped driving an instance (the store unavailable, a refused append):
   * the instance is still running and is driven again shortly. `convoke serve` logs them.
   */
  onFailure?: (error: unknown) => void;
  /**
   * Told each start refused before anything was recorded, by who asked (a caller, or a workflow's
   * `run: workflow` task) and why: the running bound (RunningBoundReached) or the start rate.
   * `convoke serve` counts them.
   */
  onStartRefused?: (starter: 'caller' | 'workflow', reason: 'running-bound' | 'start-rate') => void;
  /** New instances a caller may start per principal (config workflows.startRate); unbounded without it. */
  startRate?: AdmissionRateConfig;
  /**
   * Whether the principal may start a new instance of the workflow (the deployment's policy, action
   * start-workflow), a caller's start or a `run: workflow` child's (for its parent's principal):
   * asked for every start that would create an instance, after the look for one under its id and
   * before anything is recorded or a token of the start rate taken; it throws the refusal (an
   * AdapterError: denied, unavailable). Without it (convoke workflow run) every start is allowed.
   */
  authorizeStart?: (start: { principalId: string; bundleDigest: string; workflow: string }) => Promise<void>;
  /** Ended instances kept in memory for fast reads (default finishedCacheMaxDefault); older ones are read again on demand. */
  finishedCacheMax?: number;
  /** This worker's name in the instances' leases; unique among the workers sharing the store (default: host/pid/n). */
  worker?: string;
  /** How long a lease lasts unless renewed (renewed every third of it): how long a takeover waits after a crash. */
  leaseMs?: number;
  /**
   * How long a delivered event waits, in all, for the `until` expressions' verdicts on the events
   * the listens took before it (intake.ts; default and most: limits.listenUntilWaitMsMax).
   */
  listenUntilWaitMs?: number;
  /** The most instances one delivered event is appended to (default and most: limits.cloudEventMatchesMax); past it the delivery is partial (intake.ts). */
  eventMatchesMax?: number;
  /**
   * Secrets the deployment provides, by name: a workflow reads those it declares in use.secrets,
   * where src/workflow/secrets.ts allows. Each credential in one is at least
   * limits.workflowSecretBytesMin bytes (secretValueProblem), or the executor is refused.
   */
  secrets?: ReadonlyMap<string, JsonValue>;
  /**
   * The only origins a request carrying a secret may go to, by the secret's name (origins.ts: the
   * egress allow list's syntax; config workflowSecrets.<name>.origins): a request to any other is
   * refused before it is made (calls.ts). A secret not named here may go wherever the egress policy lets calls go.
   */
  secretOrigins?: ReadonlyMap<string, readonly string[]>;
  /**
   * The documents `run: workflow` may name beside an instance's own: those pinned by the bundle
   * with this digest (the deployment's bundles). Without it a document runs only itself. Throwing
   * an AdapterError of a definite kind while a task looks its child up faults that task (the DSL
   * error of its kind); `unavailable`, or any other exception, has the parent driven again.
   */
  workflows?: (bundleDigest: string, ref: SubworkflowRef) => JsonValue | undefined;
}

export interface StartRequest {
  principalId: string;
  /** The digest of the bundle pinning the document; defaults to the document's own canonical digest. */
  bundleDigest?: string;
  invocationKey: string;
  document: JsonValue;
  input: JsonValue;
  /** Set when a `run: workflow` task starts this instance as its child. */
  parent?: WorkflowParent;
}

/**
 * A held instance: the kernel's stream, and the bytes its log holds as the store wrote them (the
 * running byte budget, journal): set from the creation's transition, grown by each commit's
 * transition, measured once ahead of its append (`appending`, whose body the store's encoding
 * reuses: codec.measureTransition), and at each read of the log (the kernel's reread hook) grown
 * by the transitions past those already counted (`counted`), or counted afresh when the log read
 * does not begin with them.
 */
interface Instance extends Stream<WorkflowRecord> {
  logBytes: number;
  /** How many of the log's first transitions `logBytes` counts, and the revision of the last of them. */
  counted: { transitions: number; revision: string };
  /** The transition last measured ahead of its append, and its bytes: its commit adds them without measuring again. */
  appending: Measured | undefined;
}

interface Measured {
  transition: WorkflowTransition;
  bytes: number;
}

/** The kernel's new stream with nothing of its log counted yet, as one literal: every instance has one shape (spread from the stream, instances took many, and the kernel's reads of them went megamorphic). */
function newInstance(id: string, record: WorkflowRecord, revision: string): Instance {
  const { queue, waiters, dueTimer, dueAtMs, known } = newStream(id, record, revision);
  return { id, record, queue, waiters, dueTimer, dueAtMs, known, logBytes: 0, counted: { transitions: 0, revision: '' }, appending: undefined };
}

/** The bytes a store writes for `transition` (its JSON body, codec.ts): workflow transitions are stored in the operations' shape (streams.ts). */
const bytesOf = (transition: WorkflowTransition): number => transitionBytes(transition as unknown as Transition);

/** Measures `transition` ahead of its append (the store's encoding reuses the body), kept as the instance's `appending`. */
function measure(instance: Instance, transition: WorkflowTransition): number {
  const bytes = bytesOf(transition);
  instance.appending = { transition, bytes };
  return bytes;
}

/** The bytes of a transition the instance appended: as measured ahead of the append, or measured now. */
function appendedBytes(instance: Instance, transition: WorkflowTransition): number {
  const measured = instance.appending;
  instance.appending = undefined;
  return measured?.transition === transition ? measured.bytes : bytesOf(transition);
}

/**
 * The bytes of the log's transitions from `from` on, as read back from the store: each stored
 * body is the serialization of the transition it decodes to, and serializing that again gives the
 * same text.
 */
function logBytesOf(log: readonly Stored<WorkflowTransition>[], from = 0): number {
  let bytes = 0;
  for (let at = from; at < log.length; at++) bytes += bytesOf((log[at] as Stored<WorkflowTransition>).transition);
  return bytes;
}

/** A transition the instance appended (its creation or a commit) counted: the log's next, at `revision`. */
function countAppended(instance: Instance, transition: WorkflowTransition, revision: string): void {
  instance.logBytes += appendedBytes(instance, transition);
  instance.counted = { transitions: instance.counted.transitions + 1, revision };
}

/**
 * The log read again: the transitions past those counted are measured (a log only grows, so one
 * that still holds the last counted revision where it was begins with what was counted); a log
 * that does not (the store lost writes: the kernel says so) is counted whole.
 */
function countRead(instance: Instance, log: readonly Stored<WorkflowTransition>[]): void {
  const { transitions, revision } = instance.counted;
  const continues = transitions > 0 && log.length >= transitions && log[transitions - 1]?.revision === revision;
  instance.logBytes = continues ? instance.logBytes + logBytesOf(log, transitions) : logBytesOf(log);
  instance.counted = { transitions: log.length, revision: log.at(-1)?.revision ?? '' };
}

/**
 * The tail of the log read after `after` (the revision of the record held), applied: its
 * transitions are measured onto the count, which ends at that same revision (the counts follow
 * the record through every commit and read).
 */
function countExtended(instance: Instance, tail: readonly Stored<WorkflowTransition>[], after: string): void {
  const { transitions, revision } = instance.counted;
  if (revision !== after) throw new AssertionFailure(`instance ${instance.id}: its log's bytes are counted to revision ${revision}, the tail follows ${after}`);
  instance.logBytes += logBytesOf(tail);
  instance.counted = { transitions: transitions + tail.length, revision: tail.at(-1)?.revision ?? revision };
}

/** Counts failures in a row per instance: one more when `failed`, the count forgotten otherwise; answers it. */
function inARow(counts: Map<string, number>, instanceId: string, failed: boolean): number {
  if (!failed) {
    counts.delete(instanceId);
    return 0;
  }
  const count = (counts.get(instanceId) ?? 0) + 1;
  counts.set(instanceId, count);
  return count;
}

/**
 * Whether the instance owes a child a disposition: a child workflow after its end (owedDisposals),
 * a child operation whose task a timeout cancelled or that lost a fork (owedReleases), running or
 * ended.
 */
const owesChildren = (record: WorkflowRecord): boolean => owedDisposals(record).length > 0 || owedReleases(record).length > 0;

/** The children owed a disposition now, by task execution (what a try of settle covered). */
const owedKeys = (record: WorkflowRecord): string[] => [...owedDisposals(record), ...owedReleases(record)].map((owed) => owed.at);

/** How long after an interpreter stopped on a store failure it runs the instance again. */
const redriveDelayMs = 1000;
/**
 * The longest wait between two tries of an ended instance's disposals (settle), and between two
 * drives of a running instance the store refused (driveFailed): both double from redriveDelayMs.
 */
export const disposeRetryMaxMs = 60_000;
/** How long after an interpreter halted (its lease lost, a step refused) it tries the lease again. */
const haltedRedriveMs = 100;
/** A lease held elsewhere is tried again this long after its end (the store's clock may lag a little). */
const takeoverSlackMs = 5;
export const defaultLeaseMs = 10_000;
/** Ended instances an executor keeps in memory unless its options say otherwise (the kernel's finished bound). */
export const finishedCacheMaxDefault = 1000;
/** Instances read at once by `resume`. */
const resumeReadsMax = 16;
/** The log format a new instance records (events.ts WorkflowStarted.format): a call's `with` by its expressions' results. */
const logFormat = 2;

/** Why an interpreter's signal aborts once it has returned (an abort reason made once: none is built per run). */
const interpreterEnded = new Halted('the interpreter ended');
const leaseParked = new Halted('the lease was parked while the instance waits');

/** A running instance's armed redrive (drive), and how many of its timers had fired when it was armed (timerFiredMeanwhile). */
interface Redrive {
  timer: TimerHandle;
  firedTimers: number;
}

/** How many of the record's timers have fired. */
function firedTimers(record: WorkflowRecord): number {
  let fired = 0;
  for (const timer of Object.values(record.timers)) if (timer.state === 'fired') fired += 1;
  return fired;
}

/** One interpreter run under a lease: what the renewal reads to tell a run that only waits. */
interface LeaseRun {
  epoch: number;
  /** The instant of its last recorded step. */
  lastStepMs: number;
  /** The revision its lease was parked at, once parked. */
  parkedAt?: string;
}

const noSecrets: ReadonlyMap<string, JsonValue> = new Map();

/** Refuses a secret too short to scrub from what is recorded (secretValueProblem). */
function checkSecrets(secrets: ReadonlyMap<string, JsonValue> | undefined): void {
  for (const [name, value] of secrets ?? []) {
    const problem = secretValueProblem(value);
    if (problem !== undefined) throw invalidInput(`secrets.${name}: ${problem}`);
  }
}

/** Each secret's origins read (an invalid-input error lists every refused entry); a name the secrets do not hold is refused too. */
function secretOriginsOf(options: WorkflowExecutorOptions): ReadonlyMap<string, readonly OriginPattern[]> {
  const read = new Map<string, readonly OriginPattern[]>();
  for (const [name, origins] of options.secretOrigins ?? []) {
    if (!options.secrets?.has(name)) throw invalidInput(`secretOrigins names ${JSON.stringify(name)}, which is not among the secrets`);
    read.set(name, originPatterns(origins, `secretOrigins.${name}`));
  }
  return read;
}

let workersMade = 0;
const defaultWorker = (): string => `${hostname()}/${process.pid}/${++workersMade}`;

export class WorkflowExecutor implements CloudEventIntake {
  readonly kernel: Kernel<WorkflowRecord, WorkflowTransition, Instance>;
  private readonly running = new Map<string, Promise<void>>();
  private readonly stopping = new AbortController();
  /**
   * The controller of each instance's interpreter run under way (supervise), one per instance (drive
   * runs one at a time): close aborts each, and an instance's end aborts its own (ended).
   */
  private readonly supervised = new Map<string, AbortController>();
  private readonly options: WorkflowExecutorOptions;
  /** Each running instance's armed redrive (drive): removed when it fires and when the instance ends. */
  private readonly retries = new Map<string, Redrive>();
  /** Ended instances recording their children's dispositions (disposeChildren), one at a time each; and their retries. */
  private readonly disposing = new Map<string, Promise<void>>();
  /** Removed once the instance owes nothing (settle), or its log was tombstoned. */
  private readonly disposeRetries = new Map<string, { timer: TimerHandle | undefined; failures: number }>();
  /** Ended instances whose disposals settle is waiting on (one handler per try). */
  private readonly settling = new Set<string>();
  /** Documents this executor accepted, per bundle digest, with their workflow names (checkedName). */
  private readonly checkedDocuments = new WeakMap<object, Map<string, string>>();
  private rescan: TimerHandle | undefined;
  /** OpenAPI documents fetched by this executor's calls, kept per URI for the next ones. */
  private readonly openApiDocuments: OpenApiDocuments;
  /** The policed fetch `egress` makes (its connections closed with the executor). */
  private readonly egress: EgressFetch | undefined;
  /** options.secretOrigins, read. */
  private readonly secretOrigins: ReadonlyMap<string, readonly OriginPattern[]>;
  /** This worker's name in leases. */
  readonly worker: string;
  readonly leaseMs: number;
  /** The bound on each principal's running instances, asked by every start. */
  private readonly runningBound: RunningBound;
  /** Each principal's bucket of caller starts (options.startRate). */
  private readonly startRate: AdmissionRate | undefined;
  /** A running instance's log budget (options.transitionsMax, logBytesMax, never past the limits): its steps' and its received events'. */
  private readonly logBudget: { transitionsMax: number; bytesMax: number };
  /** The most instances one delivered event is appended to (options.eventMatchesMax, never past the limit). */
  private readonly eventMatchesMax: number;

  constructor(options: WorkflowExecutorOptions) {
    this.options = options;
    this.worker = options.worker ?? defaultWorker();
    this.leaseMs = options.leaseMs ?? defaultLeaseMs;
    if (options.fetch && options.egress) throw invalidInput('a workflow executor takes fetch or an egress policy, not both');
    checkSecrets(options.secrets);
    this.secretOrigins = secretOriginsOf(options);
    this.egress = options.egress ? egressFetch(options.egress) : undefined;
    this.startRate = options.startRate === undefined ? undefined : new AdmissionRate(options.startRate, options.clock, workflowStartWords);
    this.logBudget = {
      transitionsMax: runningTransitionsMax(options.transitionsMax, options.store.transitionsMax),
      bytesMax: Math.min(options.logBytesMax ?? limits.workflowLogBytesMax, limits.workflowLogBytesMax),
    };
    this.eventMatchesMax = Math.min(options.eventMatchesMax ?? limits.cloudEventMatchesMax, limits.cloudEventMatchesMax);
    const runningMost = options.runningPerPrincipal ?? limits.workflowRunningPerPrincipalDefault;
    if (!Number.isSafeInteger(runningMost) || runningMost < 1 || runningMost > limits.workflowRunningPerPrincipalMax)
      throw invalidInput(`a principal's running workflow instances are bounded by 1 to ${limits.workflowRunningPerPrincipalMax}, not ${runningMost}`);
    this.runningBound = new RunningBound(
      (principalId, atMost) => options.store.runningOf(principalId, atMost),
      runningMost,
      options.runningBoundSetting ?? 'workflows.runningInstancesPerPrincipal',
    );
    this.openApiDocuments = new OpenApiDocuments(() => options.clock.nowMs(), options.openApiDocumentKeepMs ?? 60_000);
    this.kernel = new Kernel<WorkflowRecord, WorkflowTransition, Instance>({
      aggregate: workflowAggregate,
      store: () => options.store,
      clock: options.clock,
      finishedCacheMax: options.finishedCacheMax ?? finishedCacheMaxDefault,
      hooks: {
        due: async () => (record) => decideDue(record, options.clock.nowMs()),
        // A due command (a timer) or a reload after another worker's notice that failed: kept and told, as a drive's failure is; the kernel tries it again.
        failed: (_stage, error) => this.noteFailure(error),
        // The log's bytes (the running byte budget): measured ahead of each append, counted at its commit, recounted at each read.
        beforeAppend: (instance, transition) => {
          if (instance.appending?.transition !== transition) measure(instance, transition);
          return undefined;
        },
        committed: (instance, _before, stored) => countAppended(instance, stored.transition, stored.revision),
        reread: countRead,
        extended: countExtended,
        loaded: (stream) => {
          this.drive(stream);
          // A running child read from the store: its parent may have ended owing it a disposition (a worker stopped first).
          const parent = stream.record.started.parent;
          if (parent !== undefined && stream.record.status === 'running') this.parentOf(parent.instanceId, false);
        },
        // A parked (or released) lease: the instance's next move — its timer fired, an event taken — drives it again.
        // So does a timer that fired while a redrive waits (timerFiredMeanwhile): a timeout is acted on when it fires.
        // A running instance that owes a child operation its release (a timeout cancelled the task that bound it) releases
        // it, unless a retry of that is armed: its steps do not hurry a runtime that refused.
        moved: (stream) => {
          const record = stream.record;
          if (record.status === 'running' && (record.lease === null || this.timerFiredMeanwhile(stream))) this.drive(stream);
          if (record.status !== 'running') this.ended(stream);
          else if (!this.disposeRetries.has(stream.id) && owedReleases(record).length > 0) this.settle(stream);
        },
      },
    });
  }

  /** Follows other workers' appends to instances this one holds (their timers, their steps). */
  async watch(): Promise<void> {
    await this.kernel.watch();
  }

  /**
   * Resumes every instance the store lists as running (EventStore.runningWorkflowIds) that this
   * worker does not hold yet: each is read and driven — its lease taken, or the lease another
   * worker holds waited out (a takeover once it ends unrenewed). An instance the store listed but
   * that has ended is dropped from its list. Answers how many it found running; an instance that
   * could not be read is left to the next call (its error in `failures`).
   */
  async resume(): Promise<number> {
    const listed = this.options.store.runningIds?.();
    if (!listed || this.stopping.signal.aborted) return 0;
    const ids: string[] = [];
    for await (const id of listed) if (!this.kernel.cached(id)) ids.push(id);
    let running = 0;
    for (let at = 0; at < ids.length && !this.stopping.signal.aborted; at += resumeReadsMax) {
      const found = await Promise.all(ids.slice(at, at + resumeReadsMax).map((id) => this.resumeOne(id)));
      running += found.filter(Boolean).length;
    }
    return running;
  }

  /**
   * Calls `resume` every `intervalMs` until close: instances started by other workers, or left by
   * a worker that died, are picked up here once their holder's lease has ended.
   */
  resumeEvery(intervalMs: number): void {
    const tick = () => {
      void this.resume()
        .catch((error: unknown) => this.noteFailure(error))
        .then(() => {
          if (!this.stopping.signal.aborted) this.rescan = this.options.clock.at(this.options.clock.nowMs() + intervalMs, tick);
        });
    };
    this.rescan?.cancel();
    this.rescan = this.options.clock.at(this.options.clock.nowMs() + intervalMs, tick);
  }

  private async resumeOne(instanceId: string): Promise<boolean> {
    try {
      const instance = await this.load(instanceId);
      if (instance?.record.status === 'running') return true;
      await this.options.store.ended?.(instanceId);
    } catch (error) {
      this.noteFailure(error);
    }
    return false;
  }

  /**
   * Starts an instance (or finds the one its key names) and runs it in the background; answers
   * its id and whether this call created it. The document is checked first: an unsupported task
   * is refused before anything is recorded; so is a start the policy refuses (options.authorizeStart)
   * or past its principal's bound of running instances (RunningBoundReached, running-bound.ts),
   * unless its instance exists already.
   */
  async start(request: StartRequest): Promise<{ instanceId: string; created: boolean }> {
    const bundleDigest = request.bundleDigest ?? `sha256:${sha256Hex(canonicalJson(request.document))}`;
    const workflowName = this.checkedName(request.document, bundleDigest);
    if (request.parent !== undefined && request.parent.depth > limits.workflowDepthMax)
      throw invalidInput(`a child workflow at depth ${request.parent.depth}: at most ${limits.workflowDepthMax} are nested`);
    // Every start's key, a caller's (HTTP, NATS, convoke workflow run) or a child's, as an operation's: 1 to 256 bytes of UTF-8.
    checkInvocationKey(request.invocationKey);
    const instanceId = workflowInstanceId(request.principalId, bundleDigest, workflowName, request.invocationKey);
    // The input as its log will hold it: what the instance runs on is what every replay reads (a caller
    // in-process may hand a value no parser would make: an undefined member, Infinity, -0).
    checkCanonicalizable(request.input, 'the workflow input');
    const input = asLogged(request.input, 'the workflow input');
    const timeout = workflowTimeoutMs(request.document, this.options.clock.nowMs());
    // The deadline counts from the start's commit instant (the record's startedAtMs), which the store decides.
    // The worker that creates the instance takes its lease (epoch 1) in the same transition: it drives it from here.
    const events: WorkflowEvent[] = [
      {
        type: 'workflow-started',
        v: 1,
        instanceId,
        principalId: request.principalId,
        invocationKey: request.invocationKey,
        workflowName,
        bundleDigest,
        document: request.document,
        input,
        timeoutMs: timeout ?? null,
        ...(request.parent ? { parent: request.parent } : {}),
        keys: keyScheme,
        format: logFormat,
      },
      { type: 'lease-acquired', v: 1, worker: this.worker, epoch: 1, untilMs: this.options.clock.nowMs() + this.leaseMs },
    ];
    const transition: WorkflowTransition = {
      events,
      timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'start' },
    };
    const problem = workflowTransitionProblem(transition);
    if (problem !== undefined) throw invalidInput(`the workflow cannot start: ${problem}`);
    // Its key's instance pruned (tombstoned): the key starts nothing again, which the caller is told in the instance's own terms.
    const pruned = (error: unknown) => {
      throw isAdapterError(error) && error.kind === 'expired' ? prunedKey(instanceId, request.invocationKey) : error;
    };
    const admission = await this.admitStart(request, instanceId, { bundleDigest, workflow: workflowName }).catch(pruned);
    if (admission === 'found') return this.found(instanceId, request).catch(pruned);
    let created: { kind: 'ok' } | StoreFailure;
    try {
      created = await this.create(instanceId, transition);
    } finally {
      admission.release();
    }
    if (created.kind === 'ok') return { instanceId, created: true };
    admission.createdNothing();
    if (created.kind === 'expired') throw prunedKey(instanceId, request.invocationKey);
    if (created.kind !== 'conflict') throw new AdapterError(created.kind === 'not-found' ? 'unavailable' : created.kind, `start: ${created.description}`);
    return this.found(instanceId, request).catch(pruned);
  }

  /**
   * An instance stored under this id is answered (`found`: the start creates nothing, keeps no
   * token and runs nothing of the workflow); else the policy (options.authorizeStart), a caller's
   * start rate, then the principal's running bound, before anything is recorded — asked while the
   * look for the id is under way, which each admission waits for; refused by any, an instance
   * stored under this id since is answered as well. A
   * caller's token is given back when the start creates nothing — its key names an instance
   * already, or the running bound refuses it — so that a client retrying, or waiting for a place
   * under the bound, keeps its rate for new work.
   */
  private async admitStart(
    request: StartRequest,
    instanceId: string,
    workflow: { bundleDigest: string; workflow: string },
  ): Promise<'found' | { release(): void; createdNothing(): void }> {
    const stored = async () => (await this.load(instanceId)) !== undefined;
    // Looked up before anything of the workflow runs: create runs it up to its first commit before
    // the store refuses a stream that exists, so a start again would evaluate its first tasks again,
    // at no token. The look goes on while the policy, the rate and the bound are asked (the bound's
    // count is a request of its own on JetStream); every path below awaits it or reads again.
    const looked = stored();
    looked.catch(() => undefined);
    // Who may start it, as for an invocation: a refusal still answers the instance its key names.
    const authorize = this.options.authorizeStart;
    if (authorize !== undefined) {
      try {
        await authorize({ principalId: request.principalId, ...workflow });
      } catch (refusal) {
        if (await stored()) return 'found';
        throw refusal;
      }
    }
    // A run: workflow child takes its root principal's token as a caller's start does: a tree's starts are bounded in rate.
    const rate = this.startRate;
    if (rate !== undefined) {
      try {
        rate.take(request.principalId);
      } catch (refusal) {
        if (await stored()) return 'found';
        this.onStartRefused(request.parent === undefined ? 'caller' : 'workflow', 'start-rate');
        throw refusal;
      }
    }
    const createdNothing = () => rate?.refund(request.principalId);
    const admission = await this.runningBound.admit(request.principalId, stored).catch((error: unknown) => {
      createdNothing();
      if (error instanceof RunningBoundReached) this.onStartRefused(request.parent === undefined ? 'caller' : 'workflow', 'running-bound');
      throw error;
    });
    const nothing = () => {
      admission?.release();
      createdNothing();
    };
    const found = await looked.catch((error: unknown) => {
      nothing();
      throw error;
    });
    if (found || admission === undefined) {
      nothing();
      return 'found';
    }
    return { release: () => admission.release(), createdNothing };
  }

  /** The start's instance, stored already under its id: answered when it is the same start (input and document), else a conflict. */
  private async found(instanceId: string, request: StartRequest): Promise<{ instanceId: string; created: boolean }> {
    const existing = await this.load(instanceId);
    // A child its parent cancelled before this start was stored: its id is taken by that instance, which never runs.
    if (existing?.record.started.cancelledBeforeStart === true) return { instanceId, created: false };
    if (!existing || !jsonEquals(existing.record.started.input, request.input) || !jsonEquals(existing.record.started.document, request.document)) {
      throw conflict(`workflow instance ${instanceId} exists with a different input or document under invocation key ${JSON.stringify(request.invocationKey)}`);
    }
    return { instanceId, created: false };
  }

  /**
   * Creates the instance and drives it, its start carried by its first commit: the interpreter
   * runs first on the record the start gives (nothing is committed, so nothing outside happens
   * yet: a call, a wait, a listen, an emit each commit before they act), and the transition it
   * commits first — with the facts it holds, a contract call's binding and start — is appended
   * with the start as the stream's creation. A pipeline's start and first call are one append.
   * Until then the record's instants are not the store's: what reads them ($workflow.startedAt,
   * settle) commits the start alone first, as does a first proposal under a time guard of its
   * own, or one too large to go with the start. A run that ends before it commits anything (a
   * stop) leaves the start to commit alone, then the instance is driven as any other.
   */
  private async create(instanceId: string, start: WorkflowTransition): Promise<{ kind: 'ok' } | StoreFailure> {
    const clock = this.options.clock;
    const provisional = applyWorkflow(undefined, { revision: '', committedAtMs: clock.nowMs(), transition: start });
    if (provisional === undefined) throw new AssertionFailure('a workflow start yields a record');
    const instance = newInstance(instanceId, provisional, '');
    // The stream the kernel holds once created is the one the interpreter already reads.
    const made = (record: WorkflowRecord, stored: Stored<WorkflowTransition>): Instance => {
      instance.record = record;
      instance.known = new Set([stored.revision]);
      countAppended(instance, stored.transition, stored.revision);
      return instance;
    };
    /** Creates the stream with `transition`, measured ahead (the store's encoding reuses the body). */
    const createWith = (transition: WorkflowTransition) => {
      measure(instance, transition);
      return this.kernel.create(instanceId, transition, made);
    };
    const run: LeaseRun = { epoch: 1, lastStepMs: clock.nowMs() };
    const controller = new AbortController();
    let tried: Promise<Creation> | undefined;
    let firstTry!: (creation: Promise<Creation>) => void;
    const firstTried = new Promise<Creation>((resolve) => (firstTry = resolve));
    let interpreting: Promise<void> = Promise.resolve();
    const opening: Opening = {
      open: () => tried === undefined,
      create: (first, bytesMax) => {
        if (tried) return tried;
        tried = (async (): Promise<Creation> => {
          let together = first && joined(start, first);
          // Past the running byte budget together: the start alone, the proposal checked against the log as any other (journal).
          if (together && measure(instance, together) > bytesMax) together = undefined;
          let outcome = await (together ? this.kernel.create(instanceId, together, made) : createWith(start));
          let carried = together !== undefined;
          // Too large together: the start alone, the proposal committed after it.
          if (together && outcome.kind === 'invalid-input') {
            outcome = await createWith(start);
            carried = false;
          }
          if (outcome.kind !== 'ok') return outcome;
          this.drive(instance, { run, controller, interpreting: () => interpreting });
          return { kind: 'ok', carried };
        })();
        firstTry(tried);
        return tried;
      },
    };
    interpreting = this.interpreter(instance, run, opening).run(controller.signal);
    let stopped: unknown;
    const ended = interpreting.then(
      () => undefined,
      (error: unknown) => void (stopped = error),
    );
    if (this.stopping.signal.aborted) controller.abort();
    await Promise.race([firstTried, ended]);
    if (tried === undefined) {
      // The run ended before its first commit: the start alone, driven as any instance is.
      if (stopped !== undefined && !(stopped instanceof Halted)) this.noteFailure(stopped);
      tried = createWith(start).then((outcome): Creation => (outcome.kind === 'ok' ? { kind: 'ok', carried: false } : outcome));
      const outcome = await tried;
      if (outcome.kind === 'ok') this.drive(instance);
      return outcome;
    }
    const outcome = await tried;
    if (outcome.kind !== 'ok') controller.abort(interpreterEnded);
    return outcome;
  }

  /** Whether this executor holds the instance in memory (a read of it needs no log). */
  holds(instanceId: string): boolean {
    return this.kernel.cached(instanceId) !== undefined;
  }

  /**
   * The instance held or read from the store (a running one is resumed, unless `keep` refuses its
   * record: then it is answered without being held); undefined when unknown.
   */
  load(instanceId: string, keep?: (record: WorkflowRecord) => boolean): Promise<Instance | undefined> {
    // Its log's bytes are counted as the kernel holds it (the reread hook).
    return this.kernel.load(instanceId, (record) => newInstance(instanceId, record, record.revision), keep);
  }

  /** The current record, or undefined; `keep` as for load. */
  async get(instanceId: string, keep?: (record: WorkflowRecord) => boolean): Promise<WorkflowRecord | undefined> {
    return (await this.load(instanceId, keep))?.record;
  }

  /** Waits until the instance has finished (or waitMs passes); answers its record. */
  async wait(instanceId: string, waitMs: number): Promise<WorkflowRecord> {
    const instance = await this.load(instanceId);
    if (!instance) throw invalidInput(`no workflow instance ${instanceId}`);
    await this.kernel.wait(instance, (record) => record.status !== 'running', waitMs);
    return instance.record;
  }

  /**
   * Cancels the instance, and then (recursively) each child workflow instance it still owes a
   * disposition, recording it (disposeChildren); a child that could not be cancelled is thrown
   * (the instance stays cancelled: asking again cancels the rest).
   */
  async cancel(instanceId: string, reason: string): Promise<WorkflowRecord> {
    const instance = await this.load(instanceId);
    if (!instance) throw invalidInput(`no workflow instance ${instanceId}`);
    await this.kernel.enqueue(instance, () => this.kernel.commit(instance, (record) => decideCancel(record, reason)));
    if (instance.record.status !== 'running') await this.disposeChildren(instance);
    return instance.record;
  }

  /**
   * Records what became of the children an instance still owes a disposition: an ended
   * instance's child workflows (subworkflows.ts owedDisposals), each cancelled (recursively), and
   * the child operations bound by tasks a timeout cancelled or that lost a fork, running or ended
   * (losers.ts owedReleases), each released as a fork releases its losers'. The dispositions are
   * appended to the instance's log — the only events an ended one takes (decideDisposals), under
   * the CAS: one another worker (or the run) recorded first is dropped. One at a time per instance.
   */
  private disposeChildren(instance: Instance): Promise<void> {
    const running = this.disposing.get(instance.id);
    if (running) return running;
    if (!owesChildren(instance.record)) return Promise.resolve();
    const work = (async () => {
      const record = instance.record;
      const disposed = [
        ...(await disposeOwed(this.subworkflows, record)),
        ...(await releaseOwed(this.options.invocations, record, () => this.options.clock.nowMs(), this.stopping.signal)),
      ];
      await this.kernel.enqueue(instance, () => this.kernel.commit(instance, (current) => decideDisposals(current, disposed)));
    })().finally(() => this.disposing.delete(instance.id));
    this.disposing.set(instance.id, work);
    return work;
  }

  /**
   * disposeChildren in the background. A failure is tried again after redriveDelayMs, the wait
   * doubling with each failure in a row up to disposeRetryMaxMs: a store down for a moment is
   * caught up at once, while a refusal that lasts (a child's log its store takes no more of) costs
   * a try a minute, not one a second for ever. Only the 1st, 2nd, 4th, 8th… failure in a row is
   * told. A success forgets the count.
   */
  private settle(instance: Instance): void {
    if (this.stopping.signal.aborted) return;
    if (!owesChildren(instance.record)) {
      // Recorded meanwhile (a cancel, another worker): a retry armed or fired since is let go, not kept for good.
      this.disposeRetries.get(instance.id)?.timer?.cancel();
      this.disposeRetries.delete(instance.id);
      return;
    }
    // One handler per try: an instance told ended twice (its own end, a child's) counts a failed try once.
    if (this.settling.has(instance.id)) return;
    this.settling.add(instance.id);
    const failed = this.disposeRetries.get(instance.id)?.failures ?? 0;
    const owed = owedKeys(instance.record);
    this.disposeChildren(instance).then(
      () => {
        this.settling.delete(instance.id);
        this.disposeRetries.get(instance.id)?.timer?.cancel();
        this.disposeRetries.delete(instance.id);
        // Owed since this try looked (a timeout released more, the instance ended): settled in turn.
        if (owedKeys(instance.record).some((key) => !owed.includes(key))) this.settle(instance);
      },
      (error: unknown) => {
        this.settling.delete(instance.id);
        // Tombstoned meanwhile (retention expired it): nothing more can be recorded of it, and trying again cannot change that.
        if (isAdapterError(error) && error.kind === 'expired') return void this.disposeRetries.delete(instance.id);
        const failures = failed + 1;
        if (toldInARow(failures)) this.noteFailure(error);
        if (this.stopping.signal.aborted) return;
        this.disposeRetries.get(instance.id)?.timer?.cancel();
        const waitMs = doublingDelayMs(redriveDelayMs, disposeRetryMaxMs, failures - 1);
        const timer = this.options.clock.at(this.options.clock.nowMs() + waitMs, () => {
          this.disposeRetries.set(instance.id, { timer: undefined, failures });
          this.settle(instance);
        });
        this.disposeRetries.set(instance.id, { timer, failures });
      },
    );
  }

  /**
   * A child's parent, loaded: driven when `drive` (a child ended) and its lease is parked (it
   * waited for the child), and settled when it has ended (it may owe its children dispositions).
   */
  private parentOf(parentId: string, drive: boolean): void {
    void this.load(parentId)
      .then((held) => {
        if (drive && held?.record.status === 'running' && held.record.lease === null) this.drive(held);
        if (held !== undefined && held.record.status !== 'running') this.settle(held);
      })
      .catch((error: unknown) => this.noteFailure(error));
  }

  /**
   * An instance ended: a child's end drives its parent (parked while it waited for it), and an
   * instance that owes its children dispositions (it faulted or was cancelled with children
   * running, or abandoned one) cancels them and records them.
   */
  private ended(instance: Instance): void {
    // Its run is stopped: ended from outside it (the workflow's timeout, a cancel), what it still
    // does (a call's retries, a fork's release, a poll) has nothing left to record, and it would
    // otherwise go on until its next commit or its retry budget ran out.
    this.supervised.get(instance.id)?.abort(interpreterEnded);
    // What drove it is let go: an armed redrive would find it ended and do nothing, and its entry stayed for good.
    this.retries.get(instance.id)?.timer.cancel();
    this.retries.delete(instance.id);
    this.defectiveDrives.delete(instance.id);
    this.refusedDrives.delete(instance.id);
    if (this.stopping.signal.aborted) return;
    const parent = instance.record.started.parent;
    if (parent !== undefined) this.parentOf(parent.instanceId, true);
    this.settle(instance);
  }

  /** The document a `run: workflow` reference names for an instance of `bundleDigest` running `own`: itself, or one its bundle pins. */
  /**
   * The document's workflow name once checkDocument accepted it with this executor's `run:
   * workflow` resolution under `bundleDigest`: an accepted document object is checked once per
   * digest (documents are never modified once handed over; refusals are not kept).
   */
  private checkedName(document: JsonValue, bundleDigest: string): string {
    const known = isObject(document) ? this.checkedDocuments.get(document)?.get(bundleDigest) : undefined;
    if (known !== undefined) return known;
    const name = checkDocument(document, (ref) => this.resolveWorkflow(bundleDigest, document, ref) !== undefined);
    if (isObject(document)) {
      const names = this.checkedDocuments.get(document) ?? new Map<string, string>();
      this.checkedDocuments.set(document, names.set(bundleDigest, name));
    }
    return name;
  }

  private resolveWorkflow(bundleDigest: string, own: JsonValue, ref: SubworkflowRef): JsonValue | undefined {
    if (isWorkflowNamed(own, ref)) return own;
    return this.options.workflows?.(bundleDigest, ref);
  }

  /** What the interpreters ask of this executor for `run: workflow`. */
  private readonly subworkflows: SubworkflowHost = {
    resolve: (parent, ref) => this.resolveWorkflow(parent.started.bundleDigest, parent.started.document, ref),
    start: (request) => this.start(request),
    wait: async (instanceId, waitMs, signal) => {
      const instance = await this.load(instanceId);
      if (!instance) return undefined;
      await this.kernel.wait(instance, (record) => record.status !== 'running', waitMs, signal);
      return instance.record;
    },
    cancel: async (instanceId, reason, unstarted) => {
      if (await this.load(instanceId)) return this.cancel(instanceId, reason);
      if (unstarted === undefined) return undefined;
      const forestalled = await this.cancelBeforeStart(unstarted);
      if (forestalled !== undefined) return forestalled;
      // Its start was stored first (the create-if-absent refused this one): it is cancelled as any running child.
      if (await this.load(instanceId)) return this.cancel(instanceId, reason);
      throw new AdapterError('unavailable', `child workflow instance ${instanceId} exists and cannot be read`);
    },
  };

  /**
   * Creates a child instance cancelled before its start (its stream's first event
   * workflow-cancelled-before-start), under the create-if-absent a start uses: the first of the two
   * stored wins, on any worker sharing the store. Answers its record, or undefined when the stream
   * exists (the start was stored first). An unavailable store is thrown.
   */
  private async cancelBeforeStart(event: WorkflowCancelledBeforeStart): Promise<WorkflowRecord | undefined> {
    const transition: WorkflowTransition = {
      events: [event],
      timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'cancel-before-start' },
    };
    const problem = workflowTransitionProblem(transition);
    if (problem !== undefined) throw new AssertionFailure(`decided an invalid workflow transition (cancel-before-start): ${problem}`);
    const created = await this.kernel.create(event.instanceId, transition, (record, stored) => {
      const made = newInstance(event.instanceId, record, stored.revision);
      countAppended(made, stored.transition, stored.revision);
      return made;
    });
    if (created.kind === 'ok') return created.stream.record;
    if (created.kind === 'conflict') return undefined;
    throw new AdapterError(created.kind === 'not-found' ? 'unavailable' : created.kind, `cancel before start: ${created.description}`);
  }

  /**
   * A received CloudEvent (over NATS or HTTP) offered to the waiting listens of the instances this
   * executor holds — only the principal's own when `principalId` is given; resolves once every
   * append that took it has committed (intake.ts).
   */
  async deliver(event: CloudEvent, principalId: string | null): Promise<CloudEventDelivery> {
    const { evaluator, clock, listenUntilWaitMs } = this.options;
    // One bound for the whole delivery, the second look included.
    const deps = {
      kernel: this.kernel,
      evaluator,
      clock,
      waitUntilMs: untilWaitEnd(clock, listenUntilWaitMs),
      refusal: this.refusal,
      transitionBytesMax: this.options.store.transitionBytesMax,
      matchesMax: this.eventMatchesMax,
    };
    const delivered = await deliverEvent(deps, event, principalId);
    if (delivered.matched.length > 0 || !this.options.store.runningIds) return delivered;
    // An instance another worker started since this one last looked may be waiting for it: look again, once.
    if ((await this.lookAgain()) === 0) return delivered;
    return deliverEvent(deps, event, principalId);
  }

  /** The look for other workers' new instances that deliveries nothing took share (lookAgain). */
  private readonly looks: { running?: Promise<number>; next?: Promise<number> } = {};

  /**
   * A look at the store's running instances (resume) for a delivery nothing took. Deliveries
   * share looks: one that arrives while a look runs waits for the next, which starts once that
   * one ends and serves every delivery that arrived meanwhile. A look that began before this
   * delivery's own pass may have missed what it is looking for, so it is never shared. So a burst
   * of events that match nothing, from any caller, lists the store at most twice at a time.
   */
  private lookAgain(): Promise<number> {
    const looks = this.looks;
    if (looks.next) return looks.next;
    const start = (): Promise<number> => {
      looks.next = undefined;
      const running = this.resume().finally(() => {
        if (looks.running === running) looks.running = undefined;
      });
      looks.running = running;
      return running;
    };
    if (!looks.running) return start();
    looks.next = looks.running.then(start, start);
    return looks.next;
  }

  /**
   * Why the instance does not take `transition` (intake.ts), if it does not: `full`, no room in its
   * running log (the budgets its interpreter's steps meet, journal below) — a received event past
   * them is not taken, leaving the room kept for the instance's end (its timeout, a cancel, its
   * completion) to publishers it does not control; `oversized`, past what the store takes in one
   * transition (measured as the store measures it), so the store would refuse it.
   */
  private readonly refusal = (instance: Instance, transition: WorkflowTransition): 'full' | 'oversized' | undefined => {
    const { transitionsMax, bytesMax } = this.logBudget;
    const bytes = bytesOf(transition);
    if (bytes > this.options.store.transitionBytesMax) return 'oversized';
    return instance.known.size < transitionsMax && instance.logBytes + bytes <= bytesMax ? undefined : 'full';
  };

  /** The record rebuilt from the stored log alone (replay): what every test compares with the live one. */
  async replay(instanceId: string): Promise<WorkflowRecord | undefined> {
    const read = await this.options.store.read(instanceId);
    if (read.kind !== 'ok') return undefined;
    return foldWorkflow(read.transitions);
  }

  /**
   * Drives the instance while it runs: takes its lease (or waits for the lease held elsewhere to
   * end) and runs its interpreter under it, one per process; after a failure or a lost lease it
   * tries again. `led`: the run that created the instance (create), taken under its lease as it is.
   */
  private drive(instance: Instance, led?: Led): void {
    if (this.stopping.signal.aborted || instance.record.status !== 'running' || this.running.has(instance.id)) {
      if (this.stopping.signal.aborted) led?.controller.abort(interpreterEnded);
      return;
    }
    this.retries.get(instance.id)?.timer.cancel();
    this.retries.delete(instance.id);
    const run = (led ? this.supervise(instance, led.run, led.controller, led.interpreting) : this.lead(instance))
      .then(
        (againAtMs) => (this.defectiveDrives.delete(instance.id), this.refusedDrives.delete(instance.id), againAtMs),
        (error: unknown) => this.driveFailed(instance, error),
      )
      .then((againAtMs) => {
        this.running.delete(instance.id);
        if (againAtMs === undefined || this.stopping.signal.aborted || instance.record.status !== 'running') return;
        const timer = this.options.clock.at(againAtMs, () => {
          this.retries.delete(instance.id);
          this.drive(instance);
        });
        this.retries.set(instance.id, { timer, firedTimers: firedTimers(instance.record) });
      });
    this.running.set(instance.id, run);
  }

  /**
   * Whether a timer of the instance fired while its redrive waits (a drive failed, and the next
   * is armed up to disposeRetryMaxMs later): a task's timeout, a wait's or a retry's end. What the
   * timer decided is recorded already (the timeout's fault), but only a run acts on it (a try
   * catching it, the instance faulting, the abandoned child's release): the instance is driven
   * at once rather than at the redrive, which may come a minute after the timeout. An event a
   * listen took does not hurry it: outside publishers would set how often a failing drive is
   * tried again, and nothing times out by the event's wait.
   */
  private timerFiredMeanwhile(instance: Instance): boolean {
    const redrive = this.retries.get(instance.id);
    return redrive !== undefined && firedTimers(instance.record) > redrive.firedTimers;
  }

  /** Drives in a row, per instance, that failed the runtime's own check (driveFailed). */
  private readonly defectiveDrives = new Map<string, number>();
  /** Drives in a row, per instance, that the store refused (driveFailed). */
  private readonly refusedDrives = new Map<string, number>();

  /**
   * After a drive that failed: the store refused (unavailable, too many writers), and the instance,
   * still running, is driven again after redriveDelayMs, the wait doubling with each such drive in
   * a row up to disposeRetryMaxMs: a store down for a moment is caught up at once, one that stays
   * down costs a drive a minute, not one a second for ever. A drive that gets through, or fails
   * otherwise, forgets the count. A failed internal check (AssertionFailure: a decided transition
   * its schema or machine refuses) decides the same again at every drive: it is driven again after
   * redriveDelayMs, and at limits.workflowDefectiveDrivesMax in a row the instance is faulted
   * (decideDefectFault) instead of retried for ever. Each failure is told to onFailure.
   */
  private async driveFailed(instance: Instance, error: unknown): Promise<number | undefined> {
    this.noteFailure(error);
    const defective = error instanceof AssertionFailure;
    const refused = inARow(this.refusedDrives, instance.id, !defective);
    const waitMs = refused === 0 ? redriveDelayMs : doublingDelayMs(redriveDelayMs, disposeRetryMaxMs, refused - 1);
    const againAtMs = () => (instance.record.status === 'running' ? this.options.clock.nowMs() + waitMs : undefined);
    if (inARow(this.defectiveDrives, instance.id, defective) < limits.workflowDefectiveDrivesMax) return againAtMs();
    this.defectiveDrives.delete(instance.id);
    try {
      await this.kernel.enqueue(instance, () => this.kernel.commit(instance, decideDefectFault));
    } catch (again) {
      this.noteFailure(again);
    }
    return againAtMs();
  }

  /** Takes the lease and runs the interpreter under it; answers when to try again (undefined: nothing left to do). */
  private async lead(instance: Instance): Promise<number | undefined> {
    const clock = this.options.clock;
    const terms = { worker: this.worker, nowMs: clock.nowMs(), leaseMs: this.leaseMs };
    // A lease this worker holds with at least two thirds of its length left (taken with the start, or just renewed)
    // needs no append: the renewals below keep it. Otherwise acquire (or renew) it. A takeover the store serialized
    // before the old lease's end (its clock behind ours) is not retried as late: try later.
    const held = instance.record.lease;
    if (held?.worker !== this.worker || held.untilMs - terms.nowMs < (this.leaseMs * 2) / 3)
      await this.kernel.enqueue(instance, () => this.kernel.commit(instance, (record, late) => (late ? undefined : decideAcquire(record, terms))));
    if (instance.record.status !== 'running') return undefined;
    const lease = instance.record.lease;
    if (lease?.worker !== this.worker) return Math.max(lease?.untilMs ?? 0, clock.nowMs()) + takeoverSlackMs;
    const controller = new AbortController();
    const run: LeaseRun = { epoch: lease.epoch, lastStepMs: clock.nowMs() };
    return this.supervise(instance, run, controller, () => this.interpreter(instance, run).run(controller.signal));
  }

  /** Runs the interpreter under the lease `run` names, renewing it; answers when to try again (undefined: nothing left to do). */
  private async supervise(instance: Instance, run: LeaseRun, controller: AbortController, interpret: () => Promise<void>): Promise<number | undefined> {
    const clock = this.options.clock;
    // Stopped by close (which aborts every supervised run): an entry costs less than a listener on the stopping signal.
    this.supervised.set(instance.id, controller);
    const renewal = this.renew(instance, controller, run);
    let returned = false;
    try {
      await interpret();
      returned = true;
    } catch (error) {
      if (!(error instanceof Halted)) throw error;
    } finally {
      renewal.cancel();
      if (this.supervised.get(instance.id) === controller) this.supervised.delete(instance.id);
      // A run that returned has settled everything it started (every branch awaited): nothing is left to stop,
      // and an abort's event dispatch costs more than a short step. One that threw may leave work behind: stop it.
      if (!returned) controller.abort(interpreterEnded);
    }
    if (instance.record.status !== 'running') return undefined;
    // Parked: its next move drives it again (the moved hook); one that came while this run stopped drives it now.
    if (run.parkedAt !== undefined) return instance.record.revision === run.parkedAt && instance.record.lease === null ? undefined : clock.nowMs();
    return clock.nowMs() + haltedRedriveMs;
  }

  /**
   * Renews the lease every third of its length while the interpreter runs; a lost lease stops the
   * interpreter. A run that only waits — every innermost running task a wait on its timer or a
   * listen, no step recorded for a third of the lease, no external call open, nothing due within
   * the lease — parks it instead (decidePark): one transition, however long the wait.
   */
  private renew(instance: Instance, controller: AbortController, run: LeaseRun): TimerHandle {
    const clock = this.options.clock;
    let timer: TimerHandle;
    const again = () => {
      if (!controller.signal.aborted && instance.record.status === 'running') timer = clock.at(clock.nowMs() + this.leaseMs / 3, tick);
    };
    const tick = () => {
      const nowMs = clock.nowMs();
      const park = this.onlyWaits(instance.record, run, nowMs);
      const decide = park
        ? (record: WorkflowRecord) => decidePark(record, this.worker, run.epoch)
        : (record: WorkflowRecord) => decideRenew(record, { worker: this.worker, nowMs, leaseMs: this.leaseMs });
      void this.kernel
        .enqueue(instance, () => this.kernel.commit(instance, decide))
        .then(() => {
          if (park && instance.record.lease === null) {
            run.parkedAt = instance.record.revision;
            controller.abort(leaseParked);
          }
        })
        .catch((error: unknown) => {
          if (error instanceof LeaseLost) controller.abort();
          // Any other failure: the next tick tries again; an ended lease is lost at the next append.
        })
        .then(again);
    };
    timer = clock.at(clock.nowMs() + this.leaseMs / 3, tick);
    return { cancel: () => timer.cancel() };
  }

  /** Whether the run does nothing but wait for longer than its lease (renewing it would only cost transitions). */
  private onlyWaits(record: WorkflowRecord, run: LeaseRun, nowMs: number): boolean {
    if (nowMs - run.lastStepMs < this.leaseMs / 3 || !waitsOnly(record)) return false;
    const dueMs = workflowAggregate.nextDueMs(record);
    return dueMs === undefined || dueMs > nowMs + this.leaseMs;
  }

  private interpreter(instance: Instance, run: LeaseRun, opening?: Opening): Interpreter {
    return new Interpreter({
      journal: this.journal(instance, run, opening),
      evaluator: this.options.evaluator,
      random: this.options.random,
      fetch: this.options.fetch ?? this.egress?.fetch ?? fetch,
      invocations: this.options.invocations,
      runtime: this.options.runtime ?? { name: 'convoke', version: '0.1.0' },
      httpTimeoutMs: this.options.httpTimeoutMs ?? 30_000,
      openApiDocuments: this.openApiDocuments,
      contractWaitChunkMs: 5000,
      events: this.options.events ?? (this.options.emit ? { publish: this.options.emit } : undefined),
      tasksMax: Math.min(this.options.tasksMax ?? limits.workflowTaskExecutionsMax, limits.workflowTaskExecutionsMax),
      transitionBytesMax: this.options.store.transitionBytesMax,
      secrets: this.options.secrets ?? noSecrets,
      secretOrigins: this.secretOrigins,
      subworkflows: this.subworkflows,
    });
  }

  /**
   * Errors that stopped an interpreter without finishing its instance (it is driven again,
   * driveFailed): the latest limits.workflowFailuresKeptMax, so a store that stays unavailable
   * for days does not grow them without end.
   */
  readonly failures: unknown[] = [];

  /** Tells onStartRefused; a listener that throws changes nothing (the start is refused either way). */
  private onStartRefused(starter: 'caller' | 'workflow', reason: 'running-bound' | 'start-rate'): void {
    try {
      this.options.onStartRefused?.(starter, reason);
    } catch {
      // Told, nothing more.
    }
  }

  private noteFailure(error: unknown): void {
    this.failures.push(error);
    if (this.failures.length > limits.workflowFailuresKeptMax) this.failures.splice(0, this.failures.length - limits.workflowFailuresKeptMax);
    tell(this.options.onFailure, error);
  }

  /**
   * The interpreter's view of its instance: every proposal fenced by the lease it runs under.
   * `opening`: the instance is not created yet (create); its first proposal goes with the start.
   */
  private journal(instance: Instance, run: LeaseRun, opening?: Opening): Journal {
    const kernel = this.kernel;
    const worker = this.worker;
    const clock = this.options.clock;
    const { transitionsMax, bytesMax } = this.logBudget;
    const fenced = (record: WorkflowRecord, proposal: Proposal, late: boolean) => {
      if (record.status === 'running') holderLease(record, worker, run.epoch);
      return decideProposal(record, proposal, late);
    };
    /**
     * The proposal decided on the current record; one that would take the log past its running byte
     * budget faults the instance (its fault or completion goes into the rest). Measured here, its
     * size is counted at its commit without measuring it again (the beforeAppend hook keeps it).
     */
    const budgeted = (record: WorkflowRecord, proposal: Proposal, late: boolean) => {
      const transition = fenced(record, proposal, late);
      if (transition === undefined || closingCommands.has(proposal.command)) return transition;
      const bytes = measure(instance, transition);
      if (instance.logBytes + bytes > bytesMax)
        throw raise(
          'runtime',
          500,
          logBudgetExhausted,
          '/',
          `a running workflow instance's log holds at most ${bytesMax} bytes: it holds ${instance.logBytes}, and the next transition (${proposal.command}) is ${bytes}`,
        );
      return transition;
    };
    const commit = (proposal: Proposal) => kernel.enqueue(instance, () => kernel.commit(instance, (record, late) => budgeted(record, proposal, late)));
    /** Creates the instance, carrying `proposal` when it may go with the start (no time guard of its own); Halted when not created. */
    const open = async (pending: Opening, proposal: Proposal | undefined): Promise<void> => {
      const first = proposal && withStart(proposal, instance.record) ? fenced(instance.record, proposal, false) : undefined;
      const created = await pending.create(first, proposal && !closingCommands.has(proposal.command) ? bytesMax : Number.POSITIVE_INFINITY);
      if (created.kind !== 'ok') throw new Halted(`workflow instance ${instance.id} was not created (${created.kind})`);
      if (proposal && !created.carried) await commit(proposal);
    };
    return {
      record: () => instance.record,
      pending: () => opening?.open() === true,
      settle: async () => {
        if (opening?.open()) await open(opening, undefined);
      },
      propose: async (proposal) => {
        // The log's running budget: a step past it faults the instance (its fault or completion goes into the rest).
        if (!closingCommands.has(proposal.command) && instance.known.size >= transitionsMax)
          throw raise('runtime', 500, logBudgetExhausted, '/', `a running workflow instance appends at most ${transitionsMax} transitions`);
        if (opening?.open()) await open(opening, proposal);
        else await commit(proposal);
        run.lastStepMs = clock.nowMs();
        return instance.record;
      },
      until: async (until, signal) => {
        while (!until(instance.record)) {
          if (signal.aborted) throw new Halted('stopped while waiting');
          await kernel.wait(instance, until, 60_000, signal);
        }
        return instance.record;
      },
      nowMs: () => this.options.clock.nowMs(),
    };
  }

  /** Stops the interpreters (their instances stay as recorded), the timers and the watch. */
  async close(): Promise<void> {
    this.stopping.abort();
    for (const controller of this.supervised.values()) controller.abort();
    this.rescan?.cancel();
    for (const redrive of this.retries.values()) redrive.timer.cancel();
    for (const owed of this.disposeRetries.values()) owed.timer?.cancel();
    this.retries.clear();
    this.disposeRetries.clear();
    await Promise.allSettled([...this.running.values(), ...this.disposing.values()]);
    await Promise.allSettled(this.kernel.held().map((instance) => this.release(instance)));
    await this.kernel.close();
    await this.egress?.close();
  }

  /** Ends this worker's lease of a running instance, so that another worker takes it over at once. */
  private async release(instance: Instance): Promise<void> {
    if (instance.record.status !== 'running' || instance.record.lease?.worker !== this.worker) return;
    await this.kernel.enqueue(instance, () => this.kernel.commit(instance, (record) => decideRelease(record, this.worker)));
  }
}

/**
 * Whether the instance only waits: no external call open (started, not answered), and each
 * innermost running task waits — a listen, or a task with its wait or retry timer armed.
 */
function waitsOnly(record: WorkflowRecord): boolean {
  // A child workflow's run is a call left open while the parent waits for the child's end (which drives it again).
  const waitsForChild = (at: string) => record.subworkflows[at] !== undefined && record.steps[`${at}>run`] === undefined;
  if (Object.keys(record.calls).some((step) => record.steps[step] === undefined && !(step.endsWith('>run') && waitsForChild(step.slice(0, -4))))) return false;
  const running = Object.keys(record.tasks).filter((at) => record.tasks[at]?.state === 'running');
  const innermost = running.filter((at) => !running.some((other) => other !== at && other.startsWith(at)));
  const armed = Object.entries(record.timers).filter(([, timer]) => timer.state === 'armed' && (timer.purpose === 'wait' || timer.purpose === 'retry'));
  return innermost.length > 0 && innermost.every((at) => record.listens[at] !== undefined || waitsForChild(at) || armed.some(([key]) => key.startsWith(at)));
}

/** Tells a listener (onFailure, onStartRefused) what happened; one that throws changes nothing: the instance is driven again, the start refused, either way. */
function tell<T>(listener: ((value: T) => void) | undefined, value: T): void {
  try {
    listener?.(value);
  } catch {
    // Told, nothing more.
  }
}

/**
 * The transitions an instance may append while it runs: the executor's option (never past
 * limits.workflowTransitionsMax), and never past half of what the store holds of one log
 * (`storeTransitionsMax`, EventStore.limits). The other half is kept for what comes after the
 * budget: the fault or completion, lease renewals and releases, a cancellation, and a disposition
 * per child bound while it ran (at most one per running transition) — as the default budget keeps
 * the rest of limits.transitionsStoredMax. Without it a store holding fewer than the budget
 * refused the instance's fault with its other appends, and the instance stayed running, driven
 * again every second, for ever.
 */
function runningTransitionsMax(configured: number | undefined, storeTransitionsMax: number): number {
  const most = Math.min(configured ?? limits.workflowTransitionsMax, limits.workflowTransitionsMax, Math.floor(storeTransitionsMax / 2));
  if (most < 1)
    throw invalidInput(`the store holds ${storeTransitionsMax} transitions of a log: a workflow instance needs at least 2 (one to run, one to end)`);
  return most;
}

/** The interpreter's proposals that end an instance: accepted past its running log budget (executor.ts journal). */
const closingCommands: ReadonlySet<string> = new Set(['fault', 'complete']);

/** An instance whose start is not committed yet (WorkflowExecutor.create): its first commit carries it. */
interface Opening {
  /** Whether the creation has not been tried yet. */
  open(): boolean;
  /**
   * Creates the stream (once): with `first` when given and it fits — in a transition, and with the
   * start in `bytesMax` (the running byte budget; unbounded for a closing proposal) — else the start alone.
   */
  create(first: WorkflowTransition | undefined, bytesMax: number): Promise<Creation>;
}

/** The creation's outcome: `carried` when the first transition went with the start. */
type Creation = { kind: 'ok'; carried: boolean } | StoreFailure;

/** A run already under way (create), taken over by drive. */
interface Led {
  run: LeaseRun;
  controller: AbortController;
  interpreting: () => Promise<void>;
}

/**
 * Whether a proposal may commit with the start: no time guard or late alternative of its own, and
 * a workflow deadline after the start's instant. Every proposal commits before the deadline
 * (decideProposal), which counts from the start's commit instant: a timeout longer than 0 ms is
 * met at that instant, a timeout of 0 ms never is (the guard's upper bound is exclusive) — then
 * the start commits alone, the proposal expires, and the workflow's timer faults the instance.
 * (`started` is the provisional record, whose deadline is its start's instant plus the timeout.)
 */
const withStart = (proposal: Proposal, { started, startedAtMs }: WorkflowRecord): boolean =>
  proposal.notBeforeMs === undefined &&
  proposal.notAfterMs === undefined &&
  proposal.late === undefined &&
  (started.deadlineMs === null || started.deadlineMs > startedAtMs);

/**
 * The start carrying the first transition's events, or undefined when the first fails its schema
 * (then it is appended after the start, whose check asserts it). The schema checks each event on
 * its own, so the start (checked by start) and the first together pass when each does.
 */
function joined(start: WorkflowTransition, first: WorkflowTransition): WorkflowTransition | undefined {
  if (workflowTransitionProblem(first) !== undefined) return undefined;
  return { ...start, events: [...start.events, ...first.events] };
}

/** A start under the key of a pruned instance: expired (410), as an operation's tombstoned key is. */
function prunedKey(instanceId: string, invocationKey: string): AdapterError {
  return new AdapterError(
    'expired',
    `workflow instance ${instanceId} was pruned: its invocation key ${JSON.stringify(invocationKey)} starts no instance again`,
  );
}
