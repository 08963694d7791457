#!/usr/bin/env node
// Takes the screenshots of the web console's workflow instance pages
// (docs/images/console-workflows.png, console-instance.png): hosts the workflow tests' deployment
// (test/workflow/instances-fixture.ts: in-process example peers, the review-then-publish bundle)
// on a free port, starts a few instances as two principals, and photographs the instances list as
// an operator and a completed instance's page in headless Chromium. Run after a build:
//   npx tsc -p tsconfig.json && node scripts/console-workflow-screenshots.js
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const { withBrowser } = await import(join(root, 'dist', 'test', 'support', 'browser.js'));
const { serveWorkflowFixture, writeWorkflowFixture } = await import(join(root, 'dist', 'test', 'workflow', 'instances-fixture.js'));

const fixture = await writeWorkflowFixture();
const hosted = await serveWorkflowFixture(fixture);
const start = async (token, workflow, invocationKey, input, waitMs) => {
  const response = await fetch(`${hosted.server.url}/workflow-instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ bundle: { ...fixture.bundle }, workflow, invocationKey, input, waitMs }),
  });
  return response.json();
};
try {
  const { alice, bob, ops } = fixture.tokens;
  await start(bob, 'review-then-publish', 'rfc-38', { document: 'RFC 38: retire the v1 API' }, 10_000);
  await start(alice, 'slow', 'nightly-report', {}, 0);
  await start(bob, 'held', 'rfc-39-hold', { document: 'RFC 39: waiting on a reviewer' }, 0);
  await start(alice, 'review-then-publish', 'rfc-40', { document: 'RFC 40: adopt convoke' }, 10_000);
  const shown = await start(alice, 'review-then-publish', 'rfc-41', { document: 'RFC 41: workflow instances in the console' }, 10_000);
  await withBrowser(
    async (session) => {
      const page = await session.page();
      const signIn = async (token, path) => {
        await page.goto(`${hosted.server.url}${path}`);
        await page.fill('#token', token);
        await page.click('#signin button[type=submit]');
      };
      await signIn(ops, '/console/?view=workflows');
      await page.waitForFunction("document.querySelectorAll('#instances tbody tr').length >= 5");
      await page.screenshot({ path: join(root, 'docs', 'images', 'console-workflows.png') });
      await page.goto(`${hosted.server.url}/console/?instance=${shown.instanceId}`);
      await page.waitForSelector('#timeline tbody tr');
      await page.screenshot({ path: join(root, 'docs', 'images', 'console-instance.png'), fullPage: true });
    },
    { viewport: { width: 1280, height: 760 } },
  );
  console.log('wrote docs/images/console-workflows.png, console-instance.png');
} finally {
  await hosted.close();
  await fixture.dispose();
}
