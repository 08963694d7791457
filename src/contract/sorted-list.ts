/**
 * A sorted sequence kept as a list of sorted chunks of at most `chunkItemsMax` items each (the
 * layout of Python's sortedcontainers): an insert or delete is a binary search over the chunks'
 * last items, a binary search inside one chunk and a splice of at most `chunkItemsMax` slots; a
 * seek is the same two searches, and reading on from it walks the items in order (`from`) or
 * back (`backFrom`). So an update
 * costs O(log n + chunkItemsMax) and a seek O(log n), where one sorted array would move up to n
 * slots per update. Counting the items before a position (`countBefore`) adds the sizes of the
 * chunks before it: O(n / chunkItemsMax).
 *
 * Items are unique under `compare` (a tie is the same item: insert replaces it). Not safe to
 * modify while iterating.
 */
import { assert } from './errors.js';

export class SortedList<T> {
  private chunks: T[][] = [];
  private items = 0;

  constructor(
    private readonly compare: (a: T, b: T) => number,
    private readonly chunkItemsMax = 512,
  ) {
    assert(Number.isSafeInteger(chunkItemsMax) && chunkItemsMax >= 4, 'a SortedList chunk holds at least 4 items');
  }

  get size(): number {
    return this.items;
  }

  /** Adds `item`, or replaces the item it ties with. */
  insert(item: T): void {
    const last = this.chunks.length - 1;
    if (last < 0) {
      this.chunks.push([item]);
      this.items = 1;
      return;
    }
    const tail = this.chunks[last] as T[];
    if (this.compare(tail[tail.length - 1] as T, item) < 0) {
      // After every item (the common case: newer items sort last): one comparison, nothing moves.
      tail.push(item);
      this.items++;
      if (tail.length > this.chunkItemsMax) this.chunks.push(tail.splice(tail.length >> 1));
      return;
    }
    // The first chunk whose last item is not before `item`; past the end, the last chunk.
    const c = Math.min(this.chunkFor(item), last);
    const chunk = this.chunks[c] as T[];
    const i = this.indexIn(chunk, item);
    if (i < chunk.length && this.compare(chunk[i] as T, item) === 0) {
      chunk[i] = item;
      return;
    }
    // Appending (the common case: newer items sort last) moves nothing.
    if (i === chunk.length) chunk.push(item);
    else chunk.splice(i, 0, item);
    this.items++;
    if (chunk.length > this.chunkItemsMax) this.chunks.splice(c + 1, 0, chunk.splice(chunk.length >> 1));
  }

  /**
   * Fills an empty list with `items` at once: sorted (a sequence already in order costs one pass)
   * and cut into half-full chunks, in place of one insert per item. Items must be unique under
   * `compare`.
   */
  load(items: readonly T[]): void {
    assert(this.items === 0, 'a SortedList is loaded only while empty');
    const sorted = items.slice().sort(this.compare);
    const width = Math.max(1, this.chunkItemsMax >> 1);
    for (let at = 0; at < sorted.length; at += width) this.chunks.push(sorted.slice(at, at + width));
    this.items = sorted.length;
  }

  /** Removes the item that ties with `item`; answers whether there was one. */
  delete(item: T): boolean {
    const c = this.chunkFor(item);
    const chunk = this.chunks[c];
    if (chunk === undefined) return false;
    const i = this.indexIn(chunk, item);
    if (i >= chunk.length || this.compare(chunk[i] as T, item) !== 0) return false;
    if (i === chunk.length - 1) chunk.pop();
    else chunk.splice(i, 1);
    this.items--;
    if (chunk.length === 0) this.chunks.splice(c, 1);
    else if (chunk.length < this.chunkItemsMax >> 2) this.mergeWithNext(c);
    return true;
  }

  /**
   * The items from the first one for which `before` is false, in order. `before` must be true
   * for a prefix of the sequence and false after it (a seek key, e.g. "sorts before the cursor").
   */
  *from(before: (item: T) => boolean): Generator<T, void, undefined> {
    const c = this.chunkAt((last) => before(last));
    const first = this.chunks[c];
    if (first === undefined) return;
    for (let i = firstIndex(first, before); i < first.length; i++) yield first[i] as T;
    for (let k = c + 1; k < this.chunks.length; k++) yield* this.chunks[k] as T[];
  }

  /**
   * The items for which `after` is false, last first: from the last one before the first item
   * `after` holds for, back to the first item. `after` must be false for a prefix and true after it.
   */
  *backFrom(after: (item: T) => boolean): Generator<T, void, undefined> {
    const c = Math.min(
      this.chunkAt((last) => !after(last)),
      this.chunks.length - 1,
    );
    const first = this.chunks[c];
    if (first === undefined) return;
    for (let i = firstIndex(first, (x) => !after(x)) - 1; i >= 0; i--) yield first[i] as T;
    for (let k = c - 1; k >= 0; k--) {
      const chunk = this.chunks[k] as T[];
      for (let i = chunk.length - 1; i >= 0; i--) yield chunk[i] as T;
    }
  }

  /** How many items `before` holds for (the prefix `from` skips). */
  countBefore(before: (item: T) => boolean): number {
    const c = this.chunkAt((last) => before(last));
    let count = 0;
    for (let k = 0; k < c && k < this.chunks.length; k++) count += (this.chunks[k] as T[]).length;
    const chunk = this.chunks[c];
    return chunk === undefined ? count : count + firstIndex(chunk, before);
  }

  *[Symbol.iterator](): Generator<T, void, undefined> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /** The first chunk whose last item `before` is false for; chunks.length when none. */
  private chunkAt(before: (last: T) => boolean): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const chunk = this.chunks[mid] as T[];
      if (before(chunk[chunk.length - 1] as T)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** chunkAt for "sorts before `item`", without a closure per call (inserts and deletes are the hot path). */
  private chunkFor(item: T): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const chunk = this.chunks[mid] as T[];
      if (this.compare(chunk[chunk.length - 1] as T, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first index of `chunk` whose item does not sort before `item`. */
  private indexIn(chunk: readonly T[], item: T): number {
    let lo = 0;
    let hi = chunk.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.compare(chunk[mid] as T, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Joins a small chunk with its successor (splitting again if that overflows): chunks stay few. */
  private mergeWithNext(c: number): void {
    const next = this.chunks[c + 1];
    if (next === undefined) return;
    const joined = (this.chunks[c] as T[]).concat(next);
    if (joined.length > this.chunkItemsMax) this.chunks.splice(c, 2, joined.slice(0, joined.length >> 1), joined.slice(joined.length >> 1));
    else this.chunks.splice(c, 2, joined);
  }
}

/** The first index of `sorted` for which `before` is false (binary search; `before` true on a prefix). */
function firstIndex<T>(sorted: readonly T[], before: (item: T) => boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (before(sorted[mid] as T)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
