/**
 * A memory store whose log reads of chosen ids wait until released: what a read answers while a
 * log is still being read (a long log, a slow store) is then observable without timing.
 */
import { MemoryEventStore } from '../../src/adapters/store/memory.js';

export class HeldReadsStore extends MemoryEventStore {
  private readonly held = new Map<string, Promise<void>>();
  private readonly releases: (() => void)[] = [];
  /** The reads of held ids begun so far. */
  readsHeld = 0;

  /** Log reads of `id` wait from now until release(). */
  hold(id: string): void {
    this.held.set(id, new Promise<void>((resolve) => this.releases.push(resolve)));
  }

  release(): void {
    for (const resolve of this.releases.splice(0)) resolve();
    this.held.clear();
  }

  override async read(id: string): ReturnType<MemoryEventStore['read']> {
    const gate = this.held.get(id);
    if (gate !== undefined) {
      this.readsHeld++;
      await gate;
    }
    return super.read(id);
  }
}

/** How a read came out within `ms`: `not found`, `found`, another error's message, or `still waiting` (a held log it waited for). */
export async function answerWithin(read: Promise<unknown>, ms: number): Promise<string> {
  const answer = read.then(
    () => 'found',
    (error: unknown) => ((error as { notFound?: boolean }).notFound === true ? 'not found' : String(error)),
  );
  let timer: NodeJS.Timeout | undefined;
  const waiting = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still waiting'), ms)));
  try {
    return await Promise.race([answer, waiting]);
  } finally {
    clearTimeout(timer);
  }
}
