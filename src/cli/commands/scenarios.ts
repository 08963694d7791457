/**
 * Demo scenarios that show the branch lifecycle with real time and in-process peers:
 * default, one-eligible-failover, lease-expiry, cancel-siblings, revocation.
 */
import type { JsonObject } from '../../contract/json.js';
import type { Embedded } from '../../deployment/embedded.js';
import type { Random } from '../../runtime/random.js';
import type { Handler } from '../../peer/peer.js';

export interface DemoScenario {
  description: string;
  review: (options: { peers: number; quorum: number }) => JsonObject;
  /** Starts the in-process peers. */
  peers: (embedded: Embedded, names: string[], random: Random, approveRate: number) => Promise<void>;
  /** Something that happens while the operation runs (e.g. a revocation). */
  during?: (embedded: Embedded, names: string[]) => Promise<void>;
  /**
   * The scenario shows a branch's attempt 2. Memory mode has one attempt, so it runs on a durable
   * store: a temporary SQLite file unless --store names one.
   */
  retries?: true;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const reviewer =
  (peerId: string, delayMs: number, verdict: string): Handler =>
  async (_input, context) => {
    await sleep(delayMs);
    // The business effect goes through the fenced sink: at most once per operation/branch.
    return context.effect(() => ({ verdict, note: `${peerId} read it in ${delayMs} ms` }));
  };

/** Works until cancelled, then stops (cooperative cancellation). */
const longRunning: Handler = (_input, context) =>
  new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(new Error('stopped'))));

const fast = { timeoutMs: 3000, leaseMs: 400, renewIntervalMs: 150, retryBackoffMs: 100, cancelTimeoutMs: 500, settlementGraceMs: 500 };

export const scenarios: Record<string, DemoScenario> = {
  default: {
    description: 'N peers review a document; a quorum of approvals decides; late siblings are detached',
    review: ({ quorum }) => ({ completion: { mode: 'quorum', count: quorum }, timeoutMs: 3000 }),
    peers: async (embedded, names, random, approveRate) => {
      for (const peerId of names) {
        const delayMs = 5 + random.int(60);
        await embedded.addPeer(peerId, { review: reviewer(peerId, delayMs, random.next() < approveRate ? 'approve' : 'reject') });
      }
    },
  },
  'one-eligible-failover': {
    description: 'one branch, given to the first eligible peer in byte order; alfa asks to retry, so the same branch moves to bravo with attempt 2 and fence 2',
    review: () => ({ ...fast, delivery: 'one-eligible', completion: { mode: 'first-success' }, attempts: 3 }),
    retries: true,
    peers: async (embedded, names) => {
      await embedded.addPeer(peerAt(names, 0), { review: reviewer(peerAt(names, 0), 20, 'retry') });
      for (const peerId of names.slice(1)) await embedded.addPeer(peerId, { review: reviewer(peerId, 20, 'approve') });
    },
  },
  'lease-expiry': {
    description:
      'charlie takes the request and stalls without renewing; its lease expires and attempt 2 (fence 2) of the same branch is sent after the backoff',
    review: () => ({ ...fast, completion: { mode: 'all-successful' }, attempts: 2, timeoutMs: 3000 }),
    retries: true,
    peers: async (embedded, names) => {
      for (const peerId of names) {
        if (peerId !== 'charlie') {
          await embedded.addPeer(peerId, { review: reviewer(peerId, 20, 'approve') });
          continue;
        }
        let calls = 0;
        const stallsOnce: Handler = async (input, context) => (++calls === 1 ? new Promise(() => {}) : reviewer(peerId, 20, 'approve')(input, context));
        await embedded.addPeer(peerId, { review: stallsOnce }, { renew: false });
      }
    },
  },
  'cancel-siblings': {
    description: 'first success wins; the still-running siblings are sent cancel requests and answer stopped, so settlement completes',
    review: () => ({ ...fast, completion: { mode: 'first-success' }, siblings: 'cancel', leaseMs: 3000, renewIntervalMs: 1000, waitFor: 'settled' }),
    peers: async (embedded, names) => {
      await embedded.addPeer(peerAt(names, 0), { review: reviewer(peerAt(names, 0), 30, 'approve') });
      for (const peerId of names.slice(1)) await embedded.addPeer(peerId, { review: longRunning });
    },
  },
  revocation: {
    description: 'bravo is revoked while the operation runs; its result is refused and its branch ends revoked, the rest still decide',
    review: ({ quorum }) => ({ ...fast, completion: { mode: 'quorum', count: Math.min(quorum, 2) }, leaseMs: 3000, renewIntervalMs: 1000 }),
    peers: async (embedded, names) => {
      for (const peerId of names) await embedded.addPeer(peerId, { review: reviewer(peerId, peerId === names[1] ? 20 : 80, 'approve') });
    },
    during: async (embedded, names) => {
      await sleep(5);
      embedded.policy.revoke({ peerId: peerAt(names, 1) });
    },
  },
};

/** The scenario's i-th peer: a scenario run with fewer peers than it names fails here, plainly. */
function peerAt(names: readonly string[], index: number): string {
  const name = names[index];
  if (name === undefined) throw new Error(`the scenario needs at least ${index + 1} peers`);
  return name;
}
