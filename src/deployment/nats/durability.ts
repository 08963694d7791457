/**
 * Durable mode's guarantee at run time: the admission gate that refuses new operations while
 * durability is not proven, the monitor that re-verifies the broker resources, and the
 * connection's status log.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { StoredTransition, Transition } from '../../events/types.js';
import type { AppendOutcome, EventStore, IndexAfter, ReadOutcome, StoreFailure, TailOutcome } from '../../adapters/store/types.js';
import type { DurabilityCheck } from '../../adapters/transport/types.js';
import type { DeploymentLog } from '../types.js';

/**
 * Refuses `create` (the admission commit point) while the gate names a problem; everything else
 * passes through, so operations already admitted carry on (their publications are receipted and
 * reconciled as usual). The coordinator answers the refusal as AdapterError('unavailable').
 */
export class AdmissionGatedStore implements EventStore {
  /** The inner store's, where it has one: reads are never gated. */
  readonly readAfter?: (operationId: string, revision: string) => Promise<TailOutcome>;

  constructor(
    private readonly inner: EventStore,
    private readonly problem: () => string | undefined,
  ) {
    const readAfter = inner.readAfter;
    if (readAfter !== undefined) this.readAfter = (operationId, revision) => readAfter.call(inner, operationId, revision);
  }

  get name(): string {
    return this.inner.name;
  }

  get capabilities() {
    return this.inner.capabilities;
  }

  get limits() {
    return this.inner.limits;
  }

  get index() {
    return this.inner.index;
  }

  get workflowIndex() {
    return this.inner.workflowIndex;
  }

  async create(operationId: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    const problem = this.problem();
    if (problem !== undefined) return { kind: 'unavailable', description: problem };
    return this.inner.create(operationId, transition, after);
  }

  append(operationId: string, expectedRevision: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    return this.inner.append(operationId, expectedRevision, transition, after);
  }

  read(operationId: string): Promise<ReadOutcome> {
    return this.inner.read(operationId);
  }

  operationIds(): AsyncIterable<string> {
    return this.inner.operationIds();
  }

  runningWorkflowIds(): AsyncIterable<string> {
    return this.inner.runningWorkflowIds();
  }

  workflowEnded(instanceId: string): Promise<void> {
    return this.inner.workflowEnded(instanceId);
  }

  workflowInstanceIds(): AsyncIterable<string> {
    return this.inner.workflowInstanceIds();
  }

  tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    return this.inner.tombstone(operationId);
  }

  follow(listener: (operationId: string, stored: StoredTransition) => void): Promise<{ close(): Promise<void> }> {
    return this.inner.follow(listener);
  }

  watch(listener: (operationId: string, revision: string) => void): Promise<{ close(): Promise<void> }> {
    return this.inner.watch(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * Re-verifies the broker resources on a period and at once after a reconnect; a lost connection
 * closes the gate immediately (nothing can be proven while disconnected). Logs each change.
 * A check that finds a namespace's streams provably broken (not merely unreachable) also hands
 * those namespaces to `onBroken`: the operations open there close as indeterminate.
 *
 * A check proves the connection it ran on. Each disconnect starts a new connection epoch: a check
 * still running from an earlier one is neither joined nor heeded (its requests may have been
 * dropped with the old connection, and its success would say nothing of the new one), and no
 * check starts while disconnected.
 */
export class DurabilityMonitor {
  private current: string | undefined;
  private running: { epoch: number; done: Promise<void> } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private connected = true;
  private epoch = 0;
  onBroken: ((namespaces: string[], description: string) => Promise<void>) | undefined;

  constructor(
    private readonly check: () => Promise<DurabilityCheck>,
    private readonly log: DeploymentLog,
  ) {}

  /** The reason admissions are refused, or undefined while durability is proven. */
  problem(): string | undefined {
    return this.current === undefined ? undefined : `durable delivery is not proven, new admissions are refused: ${this.current}`;
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.run(), intervalMs);
    this.timer.unref();
  }

  /** The connection went away: nothing can be proven until it is back and checked. */
  disconnected(): void {
    if (this.stopped) return;
    this.connected = false;
    this.epoch++;
    this.set('the NATS connection is lost');
  }

  /** The connection is back: checked at once, afresh (a check from before the disconnect proves nothing of it). */
  reconnected(): Promise<void> {
    this.connected = true;
    return this.run();
  }

  /** Runs one check (or joins the one running on this connection) and updates the gate; nothing while disconnected. */
  run(): Promise<void> {
    if (!this.connected) return Promise.resolve();
    const epoch = this.epoch;
    if (this.running?.epoch === epoch) return this.running.done;
    const current = () => epoch === this.epoch;
    const entry = { epoch, done: Promise.resolve() };
    entry.done = (async () => {
      try {
        const result = await this.check();
        // What it repaired is repaired whichever connection asked; only the gate waits for a check of this one.
        for (const line of result.repaired ?? []) this.log(`durable consumer repaired: ${line}`);
        if (!current()) return;
        this.set(result.ok ? undefined : result.description);
        if (!result.ok && result.brokenNamespaces && result.brokenNamespaces.length > 0) await this.onBroken?.(result.brokenNamespaces, result.description);
      } catch (error) {
        if (current()) this.set(`cannot verify: ${(error as Error).message}`);
      } finally {
        if (this.running === entry) this.running = undefined;
      }
    })();
    this.running = entry;
    return entry.done;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  private set(problem: string | undefined): void {
    if (problem === this.current) return;
    const before = this.current;
    this.current = problem;
    if (problem === undefined) this.log(`durability proven again (was: ${before}); admissions resume`, 'info');
    else this.log(`durability NOT proven, new admissions refused: ${problem}`, 'error');
  }
}

/**
 * Logs what the server tells the coordinator's connection — permission violations above all: the
 * server reports a refused publish or subscribe to the connection, never to the call — and feeds
 * disconnects and reconnects to the durability gate. Ends when the connection closes.
 */
export function watchConnection(nc: NatsConnection, log: DeploymentLog, monitor: DurabilityMonitor | undefined): void {
  void (async () => {
    for await (const status of nc.status()) {
      switch (status.type) {
        case 'disconnect':
          log(`NATS: disconnected from ${status.server}`);
          monitor?.disconnected();
          break;
        case 'reconnect':
          log(`NATS: reconnected to ${status.server}`, 'info');
          void monitor?.reconnected();
          break;
        case 'error':
          log(`NATS: ${status.error.message}`);
          break;
        default:
          break;
      }
    }
  })().catch(() => undefined);
}
