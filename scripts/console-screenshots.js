#!/usr/bin/env node
// Takes the README's screenshots of the web console (docs/images/console-*.png): starts
// `convoke serve` on a free port with in-process example peers, runs a few operations, and
// photographs the operations list and an operation page in headless Chromium. Run after a build:
//   npx tsc -p tsconfig.json && node scripts/console-screenshots.js
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const support = (name) => import(join(root, 'dist', 'test', 'support', name));
const { withBrowser } = await support('browser.js');
const { requestBody, sha256Hex, writeHttpFixture } = await support('http-fixtures.js');
const { startServe } = await support('http-server.js');

const operatorToken = 'screenshot-operator';
const fixture = await writeHttpFixture({ peerDelayMs: 100 });
const config = structuredClone(fixture.config);
// Sixteen reviewers with different speeds and verdicts: the decision closes at the second
// approval and the slower reviewers' answers arrive as detached siblings.
const reviewers = Array.from({ length: 16 }, (_, i) => `reviewer${String(i + 1).padStart(2, '0')}`);
for (const [i, id] of reviewers.entries()) {
  const verdict = i % 5 === 3 ? 'reject' : 'approve';
  const answer = { verdict, note: i === 0 ? 'Looks good. <b>markup in a note stays text</b>' : `reviewed by ${id}` };
  config.transport.examplePeers[id] = { delayMs: 150 + i * 60, review: answer, careful: answer, sealed: answer, restricted: answer, stoppable: answer };
}
config.directory.groups.reviewers = reviewers;
config.http.principals.push({ principalId: 'ops', tokenSha256: sha256Hex(operatorToken) });
config.operators = ['ops'];
await writeFile(fixture.configPath, JSON.stringify(config));
const server = await startServe(fixture.configPath);
const post = async (token, body) => {
  const response = await fetch(`${server.url}/contract-invocations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return response.json();
};
try {
  const shown = await post(fixture.tokens.alice, requestBody(fixture, { waitMs: 8000, input: { document: 'RFC 12: adopt convoke' } }));
  await post(fixture.tokens.bob, requestBody(fixture, { interaction: 'careful', waitMs: 8000 }));
  await post(fixture.tokens.alice, requestBody(fixture, { interaction: 'stoppable', waitMs: 0 }));
  await post(fixture.tokens.bob, requestBody(fixture, { waitMs: 8000 }));
  // Let the slow reviewers answer, so the page shows the detached siblings' results too.
  await new Promise((done) => setTimeout(done, 1500));
  await withBrowser(
    async (session) => {
      const page = await session.page();
      const signIn = async (token, path) => {
        await page.goto(`${server.url}${path}`);
        await page.fill('#token', token);
        await page.click('#signin button[type=submit]');
      };
      await signIn(operatorToken, '/console/');
      await page.waitForSelector('#operations tbody tr');
      await page.screenshot({ path: join(root, 'docs', 'images', 'console-list.png') });
      await page.goto(`${server.url}/console/?operation=${shown.operationId}`);
      await page.waitForSelector('#timeline tbody tr');
      await page.screenshot({ path: join(root, 'docs', 'images', 'console-operation.png'), fullPage: true });
      await page.goto(`${server.url}/console/`);
      await page.evaluate(() => sessionStorage.clear());
      await signIn('not-a-token', `/console/?operation=${shown.operationId}`);
      await page.waitForSelector('#status.error');
      await page.screenshot({ path: join(root, 'docs', 'images', 'console-refused.png') });
    },
    { viewport: { width: 1280, height: 760 } },
  );
  console.log('wrote docs/images/console-list.png, console-operation.png, console-refused.png');
} finally {
  await server.stop();
  await fixture.dispose();
}
