/** Assertion helpers shared by the test files. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAdapterError } from '../../src/contract/errors.js';

/** The repository root: the first directory up from this file holding package.json (works from dist/ too). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    assert.notEqual(parent, dir, 'no package.json above the test file');
    dir = parent;
  }
  return dir;
}

/** Asserts `run` throws invalid-input whose description contains every fragment; returns the description. */
export function assertInvalid(run: () => unknown, ...fragments: string[]): string {
  let caught: unknown;
  try {
    run();
  } catch (err) {
    caught = err;
  }
  assert.ok(isAdapterError(caught), `expected an AdapterError, got ${String(caught)}`);
  assert.equal(caught.kind, 'invalid-input');
  const description = caught.description ?? '';
  for (const fragment of fragments) {
    assert.ok(description.includes(fragment), `${JSON.stringify(description)} should contain ${JSON.stringify(fragment)}`);
  }
  return description;
}

/**
 * Every page of `query` that `page` answers, following its cursor (at most 30): each must equal
 * `reference`'s page at that cursor. The operations and workflow instances index views share it.
 */
export function assertEveryPage<Q extends { after?: unknown }, P extends { next?: Q['after'] | null }>(
  page: (query: Q) => P,
  reference: (query: Q) => P,
  query: Omit<Q, 'after'>,
): void {
  let after: Q['after'] | undefined;
  for (let index = 0; index < 30; index++) {
    const q = { ...query, ...(after ? { after } : {}) } as Q;
    const got = page(q);
    assert.deepEqual(got, reference(q), `page ${index} of ${JSON.stringify(q)}`);
    if (!got.next) break;
    after = got.next;
  }
}
