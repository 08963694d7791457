/**
 * What each principal holds of something bounded per principal (a facade's waits, event streams and
 * event deliveries; the NATS intake's events in flight): `take` answers the release of one more slot, or undefined when the principal
 * holds `perPrincipal` already; a release given back twice counts once.
 */
export class PrincipalSlots {
  private readonly held = new Map<string, number>();

  constructor(readonly perPrincipal: number) {}

  take(principalId: string): (() => void) | undefined {
    const holding = this.holding(principalId);
    if (holding >= this.perPrincipal) return undefined;
    this.held.set(principalId, holding + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.holding(principalId) - 1;
      if (left > 0) this.held.set(principalId, left);
      else this.held.delete(principalId);
    };
  }

  holding(principalId: string): number {
    return this.held.get(principalId) ?? 0;
  }
}
