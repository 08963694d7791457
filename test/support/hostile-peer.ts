/**
 * A hostile principal for the fault suites: a peer (`mallory` in the chaos run) that is a real
 * NATS user with exactly a peer's permissions — its own result, claim and cancel-result subjects
 * in its deployment's namespace, and in a second namespace whose audience also names it — and a
 * real audience member of one interaction, so its forgeries aim at branches that exist while its
 * one real answer per assignment may count. It runs beside the honest deployment for the whole
 * run, driven by a seeded Random, with a bounded count per kind and a bounded rate, so it ends by
 * itself. (The seed fixes its draws; which message a draw lands on depends on timing, as with the
 * chaos run's kills.)
 *
 * It knows what an adversary can know: an operation id is a pure function of principal, contract
 * digest and invocation key (src/contract/ids.ts) and the caller's keys are predictable, so it
 * computes the ids of operations before they are even invoked, and the Nats-Msg-Id each honest
 * peer's result will carry (publicationId + `.result`, as src/peer/peer.ts publishes it); it also
 * learns ids (and its branch's attempt and fence) from its own requests and cancels.
 *
 * What it publishes, by tally kind:
 * - `legit`: its one answer per assignment of its own branch (approve, reject, a claim release —
 *   which makes the coordinator reassign the branch at the next attempt and fence — or silence),
 *   and cancel replies; each result is kept in a ledger (`legitimate()`);
 * - `flood-junk`, `flood-malformed`, `flood-huge`: random bytes, JSON that fails the strict parser
 *   or the wire schemas (truncated, duplicate keys, fence 0, unsafe integers, lone surrogates,
 *   foreign fields, the wrong kind, a payload naming another operation, a subject that names no
 *   operation), and results of a few hundred KB (within the stream's message limit) that fail the
 *   interaction's result schema — all on its own subjects;
 * - `replay`: messages it published earlier, again (verbatim), and a conflicting second answer
 *   for an assignment it already answered;
 * - `squat`: on its own subjects, under the Nats-Msg-Id an honest peer's result will carry,
 *   published before the operation exists;
 * - `impersonate`: results, claim releases and cancel replies whose payload names an honest peer
 *   (or its branch) on mallory's own subjects;
 * - `stale`: its own branch with wrong assignments: the previous attempt's fence once the branch
 *   was reassigned, a fence or attempt never issued, renewals and cancel replies with stale fences;
 * - `cross-namespace`: results, claim releases and cancel replies naming the run's operations —
 *   its own branch with its current fence included — on the second namespace's subjects;
 * - `cross-interaction`: the same on the subjects of another interaction of its own namespace;
 * - `denied`: a publication on an honest peer's subject, which the broker must refuse.
 *
 * Every publication is tallied by kind with its receipt (`stored` counts `already-stored`).
 */
import { randomBytes } from 'node:crypto';
import { parseStrictBytes } from '../../src/contract/ijson.js';
import { operationId as operationIdOf, publicationId } from '../../src/contract/ids.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { subjectFor, type SubjectKind } from '../../src/adapters/transport/subjects.js';
import type { InboundMessage, PublishOptions, Subscription, Transport } from '../../src/adapters/transport/types.js';
import { checkCancelRequest, checkRequestMessage } from '../../src/events/wire-schemas.js';
import type { CancelRequest, RequestMessage } from '../../src/events/wire.js';
import type { Random } from '../../src/runtime/random.js';

export const hostileKinds = [
  'legit',
  'flood-junk',
  'flood-malformed',
  'flood-huge',
  'replay',
  'squat',
  'impersonate',
  'stale',
  'cross-namespace',
  'cross-interaction',
  'denied',
] as const;
export type HostileKind = (typeof hostileKinds)[number];

export interface Tally {
  published: number;
  /** The broker stored it (`stored` or `already-stored`). */
  stored: number;
  /** The broker refused it, or never proved anything (`rejected`, `unknown`). */
  unproven: number;
}

/** How many of each kind mallory publishes at most (its own answers are not bounded here: one per assignment). */
export const hostileBudgetDefault: Record<Exclude<HostileKind, 'legit'>, number> = {
  'flood-junk': 24,
  'flood-malformed': 30,
  'flood-huge': 4,
  replay: 24,
  squat: 60,
  impersonate: 30,
  stale: 40,
  'cross-namespace': 40,
  'cross-interaction': 24,
  denied: 3,
};

/** A huge result: far above any honest one, well below the streams' 512 KB message limit. */
const hugeResultBytes = 200_000;
/** Messages remembered for replays. */
const historyMax = 256;
/** How far behind and ahead of the caller's progress mallory aims (invocations). */
const aimBehind = 40;
const aimAhead = 6;
/** Forgeries sent per request received, as a probability: the budget lasts the whole run. */
const forgeOnRequestRate = 0.35;

export interface HostilePeerOptions {
  peerId: string;
  /** Connected as mallory's own NATS user, durable in `namespace`. */
  transport: Transport;
  /** Connected as mallory's own NATS user, durable in `otherNamespace`. */
  otherTransport: Transport;
  namespace: string;
  /** Interactions of `namespace` whose operations the caller invokes. */
  interactions: readonly string[];
  /** The interaction whose audience names mallory, and its attempt budget. */
  memberOf: { interaction: string; attemptsMax: number };
  otherNamespace: string;
  /** An interaction of `otherNamespace` (its subjects are where cross-namespace traffic goes). */
  otherInteraction: string;
  honestPeers: readonly string[];
  principalId: string;
  contractDigest: string;
  /** The caller's i-th invocation: key and interaction (an observer of its traffic can predict them). */
  invocation(i: number): { key: string; interaction: string };
  /** How many invocations the caller has begun. */
  progress(): number;
  random: Random;
  budget?: Partial<Record<Exclude<HostileKind, 'legit'>, number>>;
  /** Pause between flood actions: a seeded draw in [min, max) ms. */
  pauseMs?: readonly [number, number];
}

interface Target {
  operationId: string;
  interaction: string;
}

/** What mallory knows about its own branch of an operation (from its requests). */
interface OwnBranch {
  interaction: string;
  attempt: number;
  fence: number;
}

interface Sent {
  namespace: 'own' | 'other';
  subject: string;
  data: Uint8Array;
}

const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class HostilePeer {
  readonly tallies = Object.fromEntries(hostileKinds.map((k) => [k, { published: 0, stored: 0, unproven: 0 }])) as Record<HostileKind, Tally>;
  /** Honest results' Nats-Msg-Ids mallory stored first in its own stream: operation, branch, attempt. */
  readonly squatted: { operationId: string; branchId: string; attempt: number }[] = [];
  private readonly remaining: Record<Exclude<HostileKind, 'legit'>, number>;
  /** `${operationId}/${attempt}/${fence}` -> its results (JSON) on its own subject for that assignment. */
  private readonly ledger = new Map<string, Set<string>>();
  private readonly own = new Map<string, OwnBranch>();
  private readonly released = new Set<string>();
  private readonly history: Sent[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private readonly subscriptions: Subscription[] = [];
  private squatCursor = 0;
  private stopping = false;
  private loop: Promise<void> | undefined;

  private constructor(private readonly o: HostilePeerOptions) {
    this.remaining = { ...hostileBudgetDefault, ...o.budget };
  }

  /** Binds mallory's provisioned request and cancel consumers (as a peer does) and starts the flood. */
  static async start(options: HostilePeerOptions): Promise<HostilePeer> {
    const peer = new HostilePeer(options);
    const { namespace, peerId, transport } = options;
    for (const kind of ['request', 'cancel'] as const) {
      const handler = kind === 'request' ? (m: InboundMessage) => peer.onRequest(m) : (m: InboundMessage) => peer.onCancel(m);
      peer.subscriptions.push(await transport.subscribe(`${namespace}.*.*.${kind}.${peerId}`, handler, { durable: peerConsumerName(peerId, kind) }));
    }
    peer.loop = peer.flood();
    return peer;
  }

  /** Ends the flood (it also ends by itself when every budget is spent); mallory keeps answering its requests. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
  }

  /** Stops everything: the flood, answering, and what is still being sent. */
  async close(): Promise<void> {
    await this.stop();
    await Promise.all(this.subscriptions.map((s) => s.close().catch(() => undefined)));
    await Promise.allSettled([...this.pending]);
  }

  /** Whether mallory published exactly this result for this assignment of its own branch, on its own subject. */
  legitimate(operationId: string, attempt: number, fence: number, result: JsonValue): boolean {
    return this.ledger.get(`${operationId}/${attempt}/${fence}`)?.has(JSON.stringify(result)) === true;
  }

  summary(): string {
    return hostileKinds.map((k) => `${k} ${this.tallies[k].stored}/${this.tallies[k].published}`).join(', ');
  }

  // ── its own branch ─────────────────────────────────────────────────────────

  private onRequest(inbound: InboundMessage): Promise<void> {
    let request: RequestMessage;
    try {
      request = checkRequestMessage(parseStrictBytes(inbound.data, 'request'));
    } catch {
      return inbound.ack();
    }
    // Answered off the delivery path: a hostile peer acknowledges whenever it likes.
    this.track(this.answer(request));
    return inbound.ack();
  }

  private async answer(request: RequestMessage): Promise<void> {
    const { operationId, interaction, attempt, fence } = request;
    const previous = this.own.get(operationId);
    this.own.set(operationId, { interaction, attempt, fence });
    if (previous !== undefined && previous.attempt === attempt) return; // a redelivery: answered already
    const mine = (extra: JsonObject = {}): JsonObject => ({
      kind: 'result',
      operationId,
      branchId: this.o.peerId,
      peerId: this.o.peerId,
      attempt,
      fence,
      result: { verdict: 'approve' },
      ...extra,
    });
    if (previous !== undefined && this.released.has(operationId)) {
      // The branch is now at this attempt and fence: the previous assignment's are stale.
      await this.send('stale', 'own', this.subject(interaction, operationId, 'result'), mine({ attempt: previous.attempt, fence: previous.fence }));
    }
    if (this.o.random.next() < forgeOnRequestRate) await this.forgeForOwnBranch(request, mine);
    await this.answerOwn(request);
  }

  /** The current assignment's vote where it does not belong, wrong assignments where it does, and a sibling's vote. */
  private async forgeForOwnBranch(request: RequestMessage, mine: (extra?: JsonObject) => JsonObject): Promise<void> {
    const { operationId, interaction, attempt, fence } = request;
    const otherInteraction = this.o.interactions.find((i) => i !== interaction) ?? interaction;
    await this.send('cross-namespace', 'other', subjectFor(this.o.otherNamespace, this.o.otherInteraction, operationId, 'result', this.o.peerId), mine());
    await this.send('cross-interaction', 'own', this.subject(otherInteraction, operationId, 'result'), mine());
    await this.send('stale', 'own', this.subject(interaction, operationId, 'result'), mine({ fence: fence + 1 }));
    await this.send('stale', 'own', this.subject(interaction, operationId, 'result'), mine({ attempt: attempt + 1 }));
    // An honest sibling's vote while the operation is surely open, on mallory's own subject.
    const honest = this.honest();
    await this.send('impersonate', 'own', this.subject(interaction, operationId, 'result'), mine({ branchId: honest, peerId: honest }));
  }

  /** Its one real answer for this assignment: approve, reject, release the claim, or nothing. */
  private async answerOwn(request: RequestMessage): Promise<void> {
    const { operationId, interaction, attempt, fence } = request;
    const random = this.o.random;
    const subject = this.subject(interaction, operationId, 'result');
    const identity = { operationId, branchId: this.o.peerId, peerId: this.o.peerId, attempt, fence };
    // The first few assignments always release, so a stale fence of its own is certain to occur.
    if (attempt < this.o.memberOf.attemptsMax && (this.released.size < 3 || random.next() < 0.2)) {
      this.released.add(operationId);
      await this.send('legit', 'own', this.subject(interaction, operationId, 'claim'), { kind: 'claim', action: 'release', ...identity });
      return;
    }
    const choice = random.next();
    if (choice >= 0.6) return; // silence: its branch is cancelled once the operation closes
    const verdict = choice < 0.4 ? 'approve' : 'reject';
    await sleep(random.int(400));
    this.record(operationId, attempt, fence, { verdict });
    await this.send('legit', 'own', subject, { kind: 'result', ...identity, result: { verdict } });
    if (random.next() < 0.3) {
      // A second, different answer for the same assignment: a protocol conflict, never a second vote.
      const other = verdict === 'approve' ? 'reject' : 'approve';
      this.record(operationId, attempt, fence, { verdict: other });
      await this.send('replay', 'own', subject, { kind: 'result', ...identity, result: { verdict: other } });
    }
  }

  private onCancel(inbound: InboundMessage): Promise<void> {
    let cancel: CancelRequest;
    try {
      cancel = checkCancelRequest(parseStrictBytes(inbound.data, 'cancel'));
    } catch {
      return inbound.ack();
    }
    const interaction = this.own.get(cancel.operationId)?.interaction ?? this.o.memberOf.interaction;
    const subject = this.subject(interaction, cancel.operationId, 'cancel-result');
    const reply = (extra: JsonObject): JsonObject => ({
      kind: 'cancel-result',
      operationId: cancel.operationId,
      branchId: cancel.branchId,
      peerId: this.o.peerId,
      attempt: cancel.attempt,
      fence: cancel.fence,
      outcome: 'unknown',
      ...extra,
    });
    this.track(
      (async () => {
        await this.send('stale', 'own', subject, reply({ fence: cancel.fence + 1, outcome: 'stopped' }));
        if (this.o.random.next() < 0.5) await this.send('legit', 'own', subject, reply({}));
      })(),
    );
    return inbound.ack();
  }

  private record(operationId: string, attempt: number, fence: number, result: JsonValue): void {
    const key = `${operationId}/${attempt}/${fence}`;
    const results = this.ledger.get(key) ?? new Set<string>();
    this.ledger.set(key, results.add(JSON.stringify(result)));
  }

  // ── the flood ──────────────────────────────────────────────────────────────

  private async flood(): Promise<void> {
    const [minMs, maxMs] = this.o.pauseMs ?? [80, 200];
    const floodKinds = Object.keys(this.remaining) as Exclude<HostileKind, 'legit'>[];
    while (!this.stopping) {
      const left = floodKinds.filter((k) => this.remaining[k] > 0);
      if (left.length === 0) return;
      // Each kind once first (a run too short for a small budget's turn would leave it untried),
      // then weighted by what is left, so every kind is spread over the run.
      const untried = left.filter((k) => this.tallies[k].published === 0);
      const open = untried.length > 0 ? untried : left;
      let draw = this.o.random.int(open.reduce((n, k) => n + this.remaining[k], 0));
      const kind = open.find((k) => (draw -= this.remaining[k]) < 0)!;
      await this.act(kind).catch(() => undefined);
      await sleep(minMs + this.o.random.int(maxMs - minMs));
    }
  }

  private act(kind: Exclude<HostileKind, 'legit'>): Promise<unknown> {
    switch (kind) {
      case 'flood-junk':
        return this.send(
          kind,
          'own',
          this.subject(this.target().interaction, this.target().operationId, this.peerKind()),
          randomBytes(64 + this.o.random.int(2048)),
        );
      case 'flood-malformed':
        return this.malformed();
      case 'flood-huge': {
        const t = this.target();
        return this.send(kind, 'own', this.subject(t.interaction, t.operationId, 'result'), {
          kind: 'result',
          operationId: t.operationId,
          branchId: this.o.peerId,
          peerId: this.o.peerId,
          attempt: 1,
          fence: 1,
          result: { verdict: 'approve', note: 'x'.repeat(hugeResultBytes) },
        });
      }
      case 'replay':
        return this.replay();
      case 'squat':
        return this.squat();
      case 'impersonate':
        return this.impersonate();
      case 'stale':
        return this.staleOwn();
      case 'cross-namespace':
        return this.crossNamespace();
      case 'cross-interaction': {
        const t = this.target();
        const other = this.o.interactions.find((i) => i !== t.interaction) ?? t.interaction;
        const honest = this.honest();
        return this.send(kind, 'own', this.subject(other, t.operationId, 'result'), {
          kind: 'result',
          operationId: t.operationId,
          branchId: honest,
          peerId: honest,
          attempt: 1,
          fence: 1,
          result: { verdict: 'approve' },
        });
      }
      case 'denied': {
        const t = this.target();
        const honest = this.honest();
        const subject = subjectFor(this.o.namespace, t.interaction, t.operationId, 'result', honest);
        return this.send(kind, 'own', subject, {
          kind: 'result',
          operationId: t.operationId,
          branchId: honest,
          peerId: honest,
          attempt: 1,
          fence: 1,
          result: { verdict: 'reject' },
        });
      }
    }
  }

  /** Payloads the strict parser or the wire schemas refuse, on its own subjects. */
  private malformed(): Promise<unknown> {
    const t = this.target();
    const me = this.o.peerId;
    const subject = this.subject(t.interaction, t.operationId, 'result');
    const body = `"kind":"result","operationId":"${t.operationId}","branchId":"${me}","peerId":"${me}"`;
    const variants: [string, string][] = [
      [subject, `{${body},"attempt":1,"fence":1,"result":{"verdict":"approve"}`],
      [subject, `{${body},"attempt":1,"fence":1,"fence":1,"result":{"verdict":"approve"}}`],
      [subject, `{${body},"attempt":1,"fence":0,"result":{"verdict":"approve"}}`],
      [subject, `{${body},"attempt":0,"fence":1,"result":{"verdict":"approve"}}`],
      [subject, `{${body},"attempt":1,"fence":1152921504606846976,"result":{"verdict":"approve"}}`],
      [subject, `{${body},"attempt":1,"fence":1,"result":{"verdict":"\\ud800"}}`],
      [subject, `{${body},"attempt":1,"fence":1,"result":{"verdict":"approve"},"trustMe":true}`],
      [subject, `{"kind":"claim","action":"release","operationId":"${t.operationId}","branchId":"${me}","peerId":"${me}","attempt":1,"fence":1}`],
      [
        subject,
        `{"kind":"result","operationId":"op${'0'.repeat(64)}","branchId":"${me}","peerId":"${me}","attempt":1,"fence":1,"result":{"verdict":"approve"}}`,
      ],
      [subjectFor(this.o.namespace, t.interaction, 'not-an-operation', 'result', me), `{${body},"attempt":1,"fence":1,"result":{"verdict":"approve"}}`],
      [
        this.subject(t.interaction, t.operationId, 'claim'),
        `{"kind":"claim","action":"steal",${body.slice(body.indexOf('"operationId"'))},"attempt":1,"fence":1}`,
      ],
      [
        this.subject(t.interaction, t.operationId, 'cancel-result'),
        `{"kind":"cancel-result",${body.slice(body.indexOf('"operationId"'))},"attempt":1,"fence":1,"outcome":"reversed"}`,
      ],
    ];
    const [to, text] = variants[this.o.random.int(variants.length)]!;
    return this.send('flood-malformed', 'own', to, encoder.encode(text));
  }

  /** One of its earlier messages again, verbatim (without a Msg-Id: the coordinator sees it again). */
  private replay(): Promise<unknown> {
    if (this.history.length === 0) return Promise.resolve(false);
    const sent = this.history[this.o.random.int(this.history.length)]!;
    return this.send('replay', sent.namespace, sent.subject, sent.data);
  }

  /** The Nats-Msg-Ids the honest peers' results will carry, taken first in mallory's own stream. */
  private async squat(): Promise<void> {
    const index = Math.max(this.squatCursor, this.o.progress() + 2);
    this.squatCursor = index + 1 + this.o.random.int(3);
    const { interaction, operationId } = this.predicted(index);
    for (const peer of this.o.honestPeers) {
      const msgId = `${publicationId(this.o.contractDigest, operationId, peer, 1)}.result`;
      const body = { kind: 'result', operationId, branchId: peer, peerId: peer, attempt: 1, fence: 1, result: { verdict: 'reject' } };
      const stored = await this.send('squat', 'own', this.subject(interaction, operationId, 'result'), body, { msgId });
      if (stored) this.squatted.push({ operationId, branchId: peer, attempt: 1 });
    }
  }

  /** Messages whose payload names an honest peer or its branch, on mallory's own subjects. */
  private impersonate(): Promise<unknown> {
    const t = this.target();
    const honest = this.honest();
    const as = this.o.random.next() < 0.5 ? honest : this.o.peerId;
    const identity = { operationId: t.operationId, branchId: honest, peerId: as, attempt: 1, fence: 1 };
    switch (this.o.random.int(3)) {
      case 0:
        return this.send('impersonate', 'own', this.subject(t.interaction, t.operationId, 'result'), {
          kind: 'result',
          ...identity,
          result: { verdict: 'reject' },
        });
      case 1:
        return this.send('impersonate', 'own', this.subject(t.interaction, t.operationId, 'claim'), { kind: 'claim', action: 'release', ...identity });
      default:
        return this.send('impersonate', 'own', this.subject(t.interaction, t.operationId, 'cancel-result'), {
          kind: 'cancel-result',
          ...identity,
          outcome: 'stopped',
        });
    }
  }

  /** Its own branch of an operation it learned, under an assignment that is not the current one. */
  private staleOwn(): Promise<unknown> {
    const known = [...this.own];
    if (known.length === 0) return Promise.resolve();
    const [operationId, branch] = known[this.o.random.int(known.length)]!;
    const identity = { operationId, branchId: this.o.peerId, peerId: this.o.peerId, attempt: branch.attempt, fence: branch.fence };
    const stale = branch.attempt > 1 ? { attempt: branch.attempt - 1, fence: branch.fence - 1 } : { fence: branch.fence + 2 };
    if (this.o.random.next() < 0.5)
      return this.send('stale', 'own', this.subject(branch.interaction, operationId, 'result'), {
        kind: 'result',
        ...identity,
        ...stale,
        result: { verdict: 'approve' },
      });
    return this.send('stale', 'own', this.subject(branch.interaction, operationId, 'claim'), {
      kind: 'claim',
      action: this.o.random.next() < 0.5 ? 'renew' : 'release',
      ...identity,
      ...stale,
    });
  }

  /** The run's operations named on the other namespace's subjects (results, claim releases, cancel replies). */
  private crossNamespace(): Promise<unknown> {
    const t = this.target();
    const branch = this.own.get(t.operationId);
    const identity = branch
      ? { operationId: t.operationId, branchId: this.o.peerId, peerId: this.o.peerId, attempt: branch.attempt, fence: branch.fence }
      : { operationId: t.operationId, branchId: this.honest(), peerId: this.o.peerId, attempt: 1, fence: 1 };
    const to = (kind: SubjectKind) => subjectFor(this.o.otherNamespace, this.o.otherInteraction, t.operationId, kind, this.o.peerId);
    switch (this.o.random.int(3)) {
      case 0:
        return this.send('cross-namespace', 'other', to('result'), { kind: 'result', ...identity, result: { verdict: 'approve' } });
      case 1:
        return this.send('cross-namespace', 'other', to('claim'), { kind: 'claim', action: 'release', ...identity });
      default:
        return this.send('cross-namespace', 'other', to('cancel-result'), { kind: 'cancel-result', ...identity, outcome: 'stopped' });
    }
  }

  // ── helpers ────────────────────────────────────────────────────────────────

  /** An operation of the run: one it learned, or one computed from the caller's predictable keys. */
  private target(): Target {
    const known = [...this.own];
    if (known.length > 0 && this.o.random.next() < 0.4) {
      const [operationId, branch] = known[this.o.random.int(known.length)]!;
      return { operationId, interaction: branch.interaction };
    }
    const progress = this.o.progress();
    const low = Math.max(0, progress - aimBehind);
    return this.predicted(low + this.o.random.int(progress + aimAhead - low));
  }

  private predicted(index: number): Target {
    const { key, interaction } = this.o.invocation(index);
    return { operationId: operationIdOf(this.o.principalId, this.o.contractDigest, key), interaction };
  }

  private subject(interaction: string, operationId: string, kind: SubjectKind): string {
    return subjectFor(this.o.namespace, interaction, operationId, kind, this.o.peerId);
  }

  private honest(): string {
    return this.o.honestPeers[this.o.random.int(this.o.honestPeers.length)]!;
  }

  private peerKind(): SubjectKind {
    return (['result', 'claim', 'cancel-result'] as const)[this.o.random.int(3)]!;
  }

  private track(work: Promise<unknown>): void {
    const p = work.catch(() => undefined).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Publishes within the kind's budget and tallies the receipt; answers whether the broker stored it. */
  private async send(
    kind: HostileKind,
    namespace: Sent['namespace'],
    subject: string,
    body: JsonObject | Uint8Array,
    options?: PublishOptions,
  ): Promise<boolean> {
    if (kind !== 'legit') {
      if (this.remaining[kind] <= 0) return false;
      this.remaining[kind]--;
    }
    const data = body instanceof Uint8Array ? body : encoder.encode(JSON.stringify(body));
    const transport = namespace === 'own' ? this.o.transport : this.o.otherTransport;
    const tally = this.tallies[kind];
    tally.published++;
    const { receipt } = await transport.publish(subject, data, options).catch(() => ({ receipt: 'unknown' as const }));
    const stored = receipt === 'stored' || receipt === 'already-stored';
    if (stored) tally.stored++;
    else tally.unproven++;
    if (kind !== 'replay' && kind !== 'denied' && kind !== 'flood-huge') {
      this.history.push({ namespace, subject, data });
      if (this.history.length > historyMax) this.history.splice(0, this.history.length - historyMax);
    }
    return stored;
  }
}
