/** What build is running: the package version (`convoke --version`) and, for metrics, the commit it was built from. */
import { readFileSync } from 'node:fs';
import type { BuildInfo } from '../runtime/metrics.js';

/** The installed package's version (package.json sits three levels above dist/src/cli/version.js). */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}

/**
 * The running build for `convoke_build_info`. The commit is known when scripts/build-package.js
 * built the package in a git checkout (it writes dist/src/build-info.json); `unknown` otherwise.
 */
export function buildInfo(): BuildInfo {
  let commit = 'unknown';
  try {
    const written = JSON.parse(readFileSync(new URL('../build-info.json', import.meta.url), 'utf8')) as { commit?: unknown };
    if (typeof written.commit === 'string' && /^[0-9a-f]{7,40}$/.test(written.commit)) commit = written.commit;
  } catch {
    // No build-info.json: compiled by tsc alone (a checkout, the tests).
  }
  return { version: packageVersion(), nodeVersion: process.versions.node, commit };
}
