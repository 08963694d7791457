/**
 * Live notice that an operation's stream moved, for readers that follow one operation (the
 * console's server-sent events): one store watch, opened when the first reader starts and closed
 * with the last, fanned out by operation id. A notice carries no state: the reader reads the log
 * again, so nothing it shows depends on which process appended.
 */
import type { EventStore } from '../adapters/store/types.js';

export type OperationListener = () => void;

export class OperationFeed {
  private readonly listeners = new Map<string, Set<OperationListener>>();
  /** Key of the listeners told about every operation. */
  private static readonly all = '*';
  private watching: Promise<{ close(): Promise<void> }> | undefined;

  constructor(private readonly store: () => EventStore) {}

  /** Calls `listener` after each append to any operation's stream (the caller decides what it may see). */
  followAll(listener: OperationListener): Promise<{ close(): Promise<void> }> {
    return this.follow(OperationFeed.all, listener);
  }

  /** Calls `listener` after each append to the operation's stream, by any client of the store. */
  async follow(operationId: string, listener: OperationListener): Promise<{ close(): Promise<void> }> {
    let set = this.listeners.get(operationId);
    if (!set) this.listeners.set(operationId, (set = new Set()));
    set.add(listener);
    try {
      this.watching ??= this.store().watch((id) => this.notify(id));
      await this.watching;
    } catch (error) {
      this.watching = undefined;
      this.remove(operationId, listener);
      throw error;
    }
    return { close: () => this.unfollow(operationId, listener) };
  }

  private notify(operationId: string): void {
    for (const listener of this.listeners.get(operationId) ?? []) listener();
    for (const listener of this.listeners.get(OperationFeed.all) ?? []) listener();
  }

  private remove(operationId: string, listener: OperationListener): void {
    const set = this.listeners.get(operationId);
    set?.delete(listener);
    if (set?.size === 0) this.listeners.delete(operationId);
  }

  private async unfollow(operationId: string, listener: OperationListener): Promise<void> {
    this.remove(operationId, listener);
    if (this.listeners.size > 0 || !this.watching) return;
    const watching = this.watching;
    this.watching = undefined;
    await (await watching).close();
  }

  /** Stops the store watch; listeners get no further notice. */
  async close(): Promise<void> {
    this.listeners.clear();
    const watching = this.watching;
    this.watching = undefined;
    if (watching) await (await watching.catch(() => ({ close: async () => {} }))).close();
  }
}
