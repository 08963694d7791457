/**
 * Bounded fan-out for store requests: `fn` over `items`, at most `width` in flight at a time
 * (one batch after another), answers in the items' order. Used where a store reads or writes many
 * small things at once (recovery's reads and marks, index pages) without flooding the server.
 */
export async function inBatches<T, R>(items: readonly T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const answers: R[] = [];
  for (let at = 0; at < items.length; at += width) answers.push(...(await Promise.all(items.slice(at, at + width).map(fn))));
  return answers;
}
