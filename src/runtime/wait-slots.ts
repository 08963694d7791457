import { PrincipalSlots } from '../contract/principal-slots.js';

/**
 * The waits one principal holds at once at a facade: HTTP long-polls (`waitMs` on an invocation
 * or a workflow instance) and NATS commands with `waitMs`. Each holds a socket or an in-flight
 * command and a waiter until its boundary or `waitMs`; without a bound, one principal could hold
 * every socket and waiter a process has, and every other principal would wait behind it. Past the
 * bound a wait answers at once, as one asked with `waitMs` 0 (202 and the state as it is): the
 * caller asks again. Where principals are many (every `sub` a JWT issuer signs is one), enough of
 * them within their bounds could still hold all of it: past `total` waits of all principals at
 * once (http.waitsMax), a wait answers at once the same way. The runtime's own waits (a
 * workflow's contract calls) never meet either bound.
 */
export class WaitSlots {
  private readonly slots: PrincipalSlots;

  constructor(perPrincipal: number, total?: number) {
    this.slots = new PrincipalSlots(perPrincipal, total);
  }

  /** Runs `wait` with `waitMs`, or at once (waitMs 0) when the principal holds `perPrincipal` waits already, or all principals `total`. */
  async bounded<T>(principalId: string, waitMs: number, wait: (waitMs: number) => Promise<T>): Promise<T> {
    const release = waitMs > 0 ? this.slots.take(principalId) : undefined;
    if (release === undefined) return wait(0);
    try {
      return await wait(waitMs);
    } finally {
      release();
    }
  }

  /** How many waits the principal holds now. */
  holding(principalId: string): number {
    return this.slots.holding(principalId);
  }
}

/** The waits a principal may hold at once at one facade of one process, unless the deployment says otherwise (http.waitsPerPrincipal). */
export const waitsPerPrincipalDefault = 256;

/** The waits all principals may hold at once at the HTTP facade of one process, unless the deployment says otherwise (http.waitsMax). */
export const waitsMaxDefault = 10_000;
