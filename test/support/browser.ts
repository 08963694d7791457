/**
 * A real headless Chromium for the browser tests: Debian's /usr/bin/chromium (installed by
 * scripts/ensure-test-tools.sh from `pretest`), driven by playwright-core, which never downloads a
 * browser of its own. Every launch gets a fresh user-data-dir and the flags that keep Chromium off
 * the network it would otherwise probe (updates, sync, QUIC, background fetches); `withBrowser`
 * always closes it and removes the directory, whatever the test did.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const chromiumPath = '/usr/bin/chromium';

export const chromiumFlags = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface BrowserSession {
  context: BrowserContext;
  /** A new page (tab) in the session. */
  page(): Promise<Page>;
}

/** Launches Chromium with a fresh profile; the caller must close it (withBrowser does). */
export async function launchBrowser(options: { viewport?: { width: number; height: number } } = {}): Promise<BrowserSession & { close(): Promise<void> }> {
  if (!existsSync(chromiumPath)) throw new Error(`${chromiumPath} is missing: run scripts/ensure-test-tools.sh (npm test's pretest does)`);
  const userDataDir = mkdtempSync(join(tmpdir(), 'convoke-chromium-'));
  let context: BrowserContext;
  try {
    // playwright-core passes --user-data-dir itself (it refuses the flag in args), here the fresh directory.
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: chromiumPath,
      headless: true,
      args: chromiumFlags,
      viewport: options.viewport ?? { width: 1280, height: 800 },
      timeout: 60_000,
    });
  } catch (error) {
    rmSync(userDataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    context,
    page: () => context.newPage(),
    close: async () => {
      try {
        await context.close();
      } finally {
        rmSync(userDataDir, { recursive: true, force: true });
      }
    },
  };
}

/** Runs `use` with a launched browser and closes it afterwards, also when `use` throws. */
export async function withBrowser<T>(use: (session: BrowserSession) => Promise<T>, options?: { viewport?: { width: number; height: number } }): Promise<T> {
  const session = await launchBrowser(options);
  try {
    return await use(session);
  } finally {
    await session.close();
  }
}
