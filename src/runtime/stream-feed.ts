/**
 * Live notice that a stream moved, for readers that follow one operation or workflow instance, or
 * all of them (the console's server-sent events): one store watch per feed, opened when the first
 * reader starts and closed with the last, fanned out by stream id — however many readers, one
 * watch (on JetStream, one consumer). A notice carries no state: the reader reads the log again,
 * so nothing it shows depends on which process appended.
 */
export type StreamListener = () => void;

/** A store's watch of the streams one feed tells of (operations, or workflow instances). */
export type WatchStreams = (listener: (streamId: string) => void) => Promise<{ close(): Promise<void> }>;

export class StreamFeed {
  private readonly listeners = new Map<string, Set<StreamListener>>();
  /** Key of the listeners told about every stream. */
  private static readonly all = '*';
  private watching: Promise<{ close(): Promise<void> }> | undefined;

  constructor(private readonly watch: WatchStreams) {}

  /** Calls `listener` after each append to any stream the feed tells of (the caller decides what it may see). */
  followAll(listener: StreamListener): Promise<{ close(): Promise<void> }> {
    return this.follow(StreamFeed.all, listener);
  }

  /** Calls `listener` after each append to the stream, by any client of the store. */
  async follow(streamId: string, listener: StreamListener): Promise<{ close(): Promise<void> }> {
    let set = this.listeners.get(streamId);
    if (!set) this.listeners.set(streamId, (set = new Set()));
    set.add(listener);
    try {
      this.watching ??= this.watch((id) => this.notify(id));
      await this.watching;
    } catch (error) {
      this.watching = undefined;
      this.remove(streamId, listener);
      throw error;
    }
    return { close: () => this.unfollow(streamId, listener) };
  }

  private notify(streamId: string): void {
    for (const listener of this.listeners.get(streamId) ?? []) listener();
    for (const listener of this.listeners.get(StreamFeed.all) ?? []) listener();
  }

  private remove(streamId: string, listener: StreamListener): void {
    const set = this.listeners.get(streamId);
    set?.delete(listener);
    if (set?.size === 0) this.listeners.delete(streamId);
  }

  private async unfollow(streamId: string, listener: StreamListener): Promise<void> {
    this.remove(streamId, listener);
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
