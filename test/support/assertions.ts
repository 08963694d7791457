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
