/**
 * What each principal holds of something bounded per principal (a facade's waits, event streams and
 * event deliveries; the NATS intake's events in flight), and what all principals hold together:
 * `take` answers the release of one more slot, or undefined when the principal holds `perPrincipal`
 * already or all principals hold `total`; a release given back twice counts once. The total is what
 * a per-principal bound alone cannot give where principals are many (every `sub` a JWT issuer
 * signs is one): a bound on what the process holds in all.
 */
export class PrincipalSlots {
  private readonly held = new Map<string, number>();
  private heldTotal = 0;

  constructor(
    readonly perPrincipal: number,
    readonly total: number = Number.POSITIVE_INFINITY,
  ) {}

  take(principalId: string): (() => void) | undefined {
    if (this.full(principalId) !== undefined) return undefined;
    this.held.set(principalId, this.holding(principalId) + 1);
    this.heldTotal += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.heldTotal -= 1;
      const left = this.holding(principalId) - 1;
      if (left > 0) this.held.set(principalId, left);
      else this.held.delete(principalId);
    };
  }

  /** The bound one more slot of the principal's would pass now (its own first), or undefined when `take` would grant it. */
  full(principalId: string): 'principal' | 'total' | undefined {
    if (this.holding(principalId) >= this.perPrincipal) return 'principal';
    return this.heldTotal >= this.total ? 'total' : undefined;
  }

  holding(principalId: string): number {
    return this.held.get(principalId) ?? 0;
  }

  /** What all principals hold now. */
  holdingTotal(): number {
    return this.heldTotal;
  }
}
