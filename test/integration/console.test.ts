/**
 * The web console in a real headless Chromium (Debian's chromium through playwright-core) against
 * a real `convoke serve` child process over a socket: the operation page renders a decided
 * operation and its timeline; a decision arrives on an open page without a reload (server-sent
 * events); a refused token shows nothing of any operation; a peer's result holding markup is shown
 * as text and never runs, and control, bidi and invisible characters and line separators in what
 * a caller or a peer sent are shown escaped; the list filters.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { terminalText } from '../../src/cli/terminal-text.js';
import type { JsonObject } from '../../src/contract/json.js';
import { launchBrowser, type BrowserSession } from '../support/browser.js';
import { requestBody, sha256Hex, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { startServe, type ServeProcess } from '../support/http-server.js';

const hostileNote = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';
/**
 * bravo's note: a right-to-left override (what follows reads reversed), a first-strong isolate, a
 * zero-width mark, a bell, a zero width space (ok and o\u200bk look alike) and a line separator
 * (a line break where no newline is).
 */
const disguisedNote = 'approved \u202eevorppa ton\u2066 \u200fok\u0007 o\u200bk\u2028done';
const operatorToken = 'operator-token-for-the-console-test';

async function invoke(
  base: string,
  token: string,
  body: JsonObject,
): Promise<{ status: number; result: { operationId: string; decision: { outcome: string } | null } }> {
  const response = await fetch(`${base}/contract-invocations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, result: (await response.json()) as { operationId: string; decision: { outcome: string } | null } };
}

async function signIn(page: Page, base: string, token: string, path = '/console/'): Promise<void> {
  await page.goto(`${base}${path}`);
  await page.fill('#token', token);
  await page.click('#signin button[type=submit]');
}

interface Context {
  fixture: HttpFixture;
  base: string;
  browser: BrowserSession;
}

async function decidedPage(ctx: Context): Promise<void> {
  // The caller's key holds markup and a javascript: URL too.
  const invocationKey = `"><svg onload="window.__pwned = 3">javascript:window.__pwned=4-${Date.now()}`;
  const { status, result } = await invoke(ctx.base, ctx.fixture.tokens.alice, requestBody(ctx.fixture, { invocationKey, waitMs: 8000 }));
  assert.equal(status, 200);
  assert.equal(result.decision?.outcome, 'success');
  const page = await ctx.browser.page();
  const dialogs: string[] = [];
  page.on('dialog', (d) => void dialogs.push(d.message()));
  await signIn(page, ctx.base, ctx.fixture.tokens.alice, `/console/?operation=${result.operationId}`);
  await page.waitForSelector('#timeline tbody tr');
  assert.equal((await page.textContent('#outcome'))?.trim(), 'success');
  assert.match((await page.textContent('#h-summary')) ?? '', new RegExp(result.operationId));
  // Three reviewers, each with attempt, fence and lease; the timeline starts with the admission.
  assert.equal(await page.locator('#branches tbody tr').count(), 3);
  const firstBranch = await page.locator('#branches tbody tr').first().locator('td').allTextContents();
  assert.deepEqual(firstBranch.slice(1, 5), ['alfa', 'success', '1', '1'], 'peer, status, attempt, fence');
  assert.match(firstBranch[5]!, /^\+\d+$/);
  const timeline = await page.locator('#timeline tbody tr').allTextContents();
  assert.ok(timeline.length >= 2, 'admission and at least one result');
  assert.match(timeline[0]!, /operation-admitted/);
  assert.match(timeline.join('\n'), /decision-closed/);
  assert.match(await page.locator('#timeline tbody tr').first().locator('td').nth(4).innerText(), /^applied$/);
  // The markup in alfa's note is on the page as text; nothing of it ran or became an element.
  assert.match((await page.textContent('#branches')) ?? '', /<script>window.__pwned = 1<\/script>/);
  assert.equal(await page.evaluate('window.__pwned'), undefined);
  assert.ok((await page.locator('#h-summary + dl dd').allTextContents()).includes(invocationKey), 'the key as text');
  assert.equal(await page.locator('main script, main img, main svg').count(), 0);
  const hrefs = await page.locator('a[href]').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''));
  assert.ok(
    hrefs.every((href) => href.startsWith('./') || href === '#main'),
    JSON.stringify(hrefs),
  );
  assert.deepEqual(dialogs, []);
  await page.close();
}

async function disguised(ctx: Context): Promise<void> {
  // A caller's invocation key and a peer's note, each holding characters that would reverse or hide what is read.
  const invocationKey = `invoice-\u202egpj.exe-${Date.now()}`;
  const { status, result } = await invoke(ctx.base, ctx.fixture.tokens.alice, requestBody(ctx.fixture, { invocationKey, waitMs: 8000 }));
  assert.equal(status, 200);
  const page = await ctx.browser.page();
  await signIn(page, ctx.base, ctx.fixture.tokens.alice, `/console/?operation=${result.operationId}`);
  await page.waitForSelector('#timeline tbody tr');
  const facts = await page.locator('#h-summary + dl dd').allTextContents();
  assert.ok(facts.includes(invocationKey.replace('\u202e', '\\u202e')), facts.join(' | '));
  const branches = (await page.textContent('#branches')) ?? '';
  assert.ok(branches.includes('approved \\u202eevorppa ton\\u2066 \\u200fok\\u0007 o\\u200bk\\u2028done'), branches);
  // Nowhere on the page (the summary, the branches, every event folded in the timeline, the status
  // line) is one of them raw, nor any other character the CLI would escape (its terminalText).
  for (const where of ['main', '#status']) {
    const text = await page.locator(where).evaluate((node) => node.textContent ?? '');
    const raw = [...text].filter((c) => terminalText(c) !== c);
    assert.deepEqual(raw, [], `${where} shows ${JSON.stringify(raw)} raw`);
  }
  await page.close();
}

async function liveDecision(ctx: Context): Promise<void> {
  // stoppable waits for zulu, who never answers: open until the caller cancels it.
  const { status, result } = await invoke(ctx.base, ctx.fixture.tokens.alice, requestBody(ctx.fixture, { interaction: 'stoppable', waitMs: 0 }));
  assert.equal(status, 202);
  const page = await ctx.browser.page();
  await signIn(page, ctx.base, ctx.fixture.tokens.alice, `/console/?operation=${result.operationId}`);
  await page.waitForSelector('#timeline tbody tr');
  assert.equal((await page.textContent('#outcome'))?.trim(), 'open: no decision yet');
  // Marked once: a reload would drop the mark.
  await page.evaluate('window.__mark = 42');
  const cancel = await fetch(`${ctx.base}/contract-invocations/${result.operationId}/cancel`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.fixture.tokens.alice}` },
  });
  assert.equal(cancel.status, 200);
  // The page's content security policy forbids evaluated strings: wait on the element itself.
  await page.waitForSelector('#outcome.outcome-failed', { timeout: 15_000 });
  assert.match((await page.textContent('#h-summary + dl + h3 + dl')) ?? '', /cancelled/);
  assert.equal(await page.evaluate('window.__mark'), 42);
  assert.match((await page.locator('#timeline tbody').textContent()) ?? '', /decision-closed/);
  await page.close();
}

async function refused(ctx: Context): Promise<void> {
  const { result } = await invoke(ctx.base, ctx.fixture.tokens.alice, requestBody(ctx.fixture, { waitMs: 8000 }));
  const page = await ctx.browser.page();
  await signIn(page, ctx.base, 'not-a-token-anyone-has', `/console/?operation=${result.operationId}`);
  await page.waitForSelector('#status.error');
  assert.match((await page.textContent('#status')) ?? '', /Authentication refused/);
  const shown = await page.evaluate<string>('document.body.innerText');
  assert.ok(!shown.includes(result.operationId.slice(2, 14)), 'no part of the operation id is on the page');
  assert.equal(await page.locator('#main table').count(), 0);
  assert.equal(await page.isVisible('#token'), true);
  // Another principal's token: the operation is not visible to it (404), nothing of it is shown.
  await signIn(page, ctx.base, ctx.fixture.tokens.bob, `/console/?operation=${result.operationId}`);
  await page.waitForSelector('#status.error');
  assert.match((await page.textContent('#status')) ?? '', /no operation .* is visible to this principal/);
  assert.equal(await page.locator('#main table').count(), 0);
  await page.close();
}

async function listFilters(ctx: Context): Promise<void> {
  const careful = await invoke(ctx.base, ctx.fixture.tokens.bob, requestBody(ctx.fixture, { interaction: 'careful', waitMs: 8000 }));
  assert.equal(careful.status, 200);
  const page = await ctx.browser.page();
  await signIn(page, ctx.base, ctx.fixture.tokens.bob);
  await page.waitForSelector('#operations tbody tr');
  const bobRows = await page.locator('#operations tbody tr').allTextContents();
  assert.ok(
    bobRows.every((r) => r.includes('bob')),
    'bob sees only his own operations',
  );
  assert.ok(bobRows.some((r) => r.includes('careful')));
  const filtered = async (settlement: string) => {
    await page.selectOption('#f-settlement', settlement);
    await page.click('form.filters button[type=submit]');
    await page.waitForURL(new RegExp(`settlement=${settlement}`));
    // Submitting empties the page; the table is back once the filtered page has arrived.
    await page.waitForSelector('#operations caption');
    return page.locator('#operations tbody tr').allTextContents();
  };
  // careful waits on zulu's cancel reply: decided, settlement pending.
  const pending = await filtered('pending');
  assert.ok(pending.length > 0 && pending.every((r) => r.includes('careful') && r.includes('pending')), pending.join('\n'));
  assert.deepEqual(await filtered('complete'), []);
  assert.match((await page.textContent('#operations caption')) ?? '', /^0 operations/);
  // The operator's list has alice's and bob's operations.
  const ops = await ctx.browser.page();
  await signIn(ops, ctx.base, operatorToken);
  await ops.waitForSelector('#operations tbody tr');
  const rows = await ops.locator('#operations tbody tr').allTextContents();
  assert.ok(rows.some((r) => r.includes('alice')) && rows.some((r) => r.includes('bob')), rows.join('\n'));
  // The interaction filter, given in the address.
  await ops.goto(`${ctx.base}/console/?interaction=review`);
  await ops.waitForSelector('#operations tbody tr');
  const interactions = await ops.locator('#operations tbody tr td:nth-child(2)').allTextContents();
  assert.ok(interactions.length >= 2, interactions.join(', '));
  assert.deepEqual(new Set(interactions), new Set(['review']));
  await ops.close();
  await page.close();
}

async function liveList(ctx: Context): Promise<void> {
  const page = await ctx.browser.page();
  await signIn(page, ctx.base, ctx.fixture.tokens.alice, '/console/?interaction=sealed');
  await page.waitForSelector('#operations caption');
  assert.equal(await page.locator('#operations tbody tr').count(), 0);
  const sealed = await invoke(ctx.base, ctx.fixture.tokens.alice, requestBody(ctx.fixture, { interaction: 'sealed', waitMs: 0 }));
  await page.waitForSelector(`#operations a[title="${sealed.result.operationId}"]`, { timeout: 15_000 });
  await page.close();
}

async function tokenNeverInAddress(ctx: Context): Promise<void> {
  // The sign-in form submitted before (or without) console.js: the browser's own submission.
  const page = await ctx.browser.page();
  const requested: string[] = [];
  page.on('request', (request) => void requested.push(request.url()));
  await page.route('**/console/console.js', (route) => route.abort());
  await page.goto(`${ctx.base}/console/`);
  await page.fill('#token', ctx.fixture.tokens.alice);
  await Promise.all([page.waitForEvent('load'), page.press('#token', 'Enter')]);
  assert.ok(!page.url().includes(ctx.fixture.tokens.alice), `the token is in the address: ${page.url()}`);
  assert.deepEqual(
    requested.filter((url) => url.includes(ctx.fixture.tokens.alice)),
    [],
    'no request carried the token in its URL',
  );
  await page.close();
}

describe('the web console in headless Chromium', { timeout: 120_000 }, () => {
  let fixture: HttpFixture;
  let server: ServeProcess;
  let browser: BrowserSession & { close(): Promise<void> };
  const ctx = {} as Context;

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 300 });
    // alfa answers with markup in its note; an operator principal sees every operation.
    const config = structuredClone(fixture.config) as {
      transport: { examplePeers: Record<string, JsonObject> };
      http: { principals: JsonObject[] };
      operators?: string[];
    };
    const alfa = config.transport.examplePeers.alfa!;
    config.transport.examplePeers.alfa = { ...alfa, review: { verdict: 'approve', note: hostileNote } };
    config.transport.examplePeers.bravo = { ...config.transport.examplePeers.bravo!, review: { verdict: 'approve', note: disguisedNote } };
    config.http.principals.push({ principalId: 'ops', tokenSha256: sha256Hex(operatorToken) });
    config.operators = ['ops'];
    await writeFile(fixture.configPath, JSON.stringify(config));
    server = await startServe(fixture.configPath);
    browser = await launchBrowser();
    Object.assign(ctx, { fixture, base: server.url, browser });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await fixture?.dispose();
  });

  test('the operation page renders a decided operation, its branches and its timeline; hostile result text is inert', () => decidedPage(ctx));
  test("control, bidi and invisible characters and line separators in a caller's key and a peer's result are shown as \\uXXXX escapes, never raw", () =>
    disguised(ctx));
  test('a decision arrives on an open page without a reload', () => liveDecision(ctx));
  test('a refused token shows nothing of any operation', () => refused(ctx));
  test('the token never goes into an address, also when the form is submitted without the script', () => tokenNeverInAddress(ctx));
  test("the list shows the caller its own operations, filters them, and the operator sees every principal's", () => listFilters(ctx));
  test('a new operation appears in an open list without a reload', () => liveList(ctx));
});
