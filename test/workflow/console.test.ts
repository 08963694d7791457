/**
 * The console's workflow instance pages in a real headless Chromium (Debian's chromium through
 * playwright-core) against a deployment hosting workflow instances, over a loopback socket: the
 * instances list shows the caller's own instances and takes a new one without a reload (server-sent
 * events); its filters narrow it; the instance page shows status, input and output, the task tree,
 * the timers, the child operations linking to their operation pages, and the event stream; a page
 * opened on a running instance applies each update and shows at its end what /transitions does; a
 * parent's page links its child instances and a child's its parent; another principal's instance
 * shows nothing; a caller's markup in a key, an input, an output, an error and a task's name is
 * shown as text and never runs.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowInspection, WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { launchBrowser, type BrowserSession } from '../support/browser.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';

let fixture: WorkflowFixture;
let hosted: HostedWorkflows;
let browser: BrowserSession & { close(): Promise<void> };

/** Waits long enough for a page to open on it running, calls the review contract, then takes 20 short steps. */
const stepping: JsonObject = {
  document: { dsl: '1.0.3', namespace: 'lab', name: 'stepping', version: '1.0.0' },
  do: [
    { first: { wait: { milliseconds: 2500 } } },
    {
      ask: { call: 'invoke-contract', with: { contract: { id: 'lab.review', version: '1.0.0' }, interaction: 'review', input: '${ {document: .document} }' } },
    },
    { each: { for: { in: '${ [range(0; 20)] }', each: 'i' }, do: [{ pause: { wait: { milliseconds: 20 } } }] } },
  ],
};

/** Markup and a javascript: URL as a caller would send them; `window.__pwned` is set by any of them that runs. */
const hostile = '<img src=x onerror="window.__pwned=1">"><svg onload="window.__pwned=2"></svg><script>window.__pwned=3</script>javascript:window.__pwned=4';
/** A task named with markup; its output is the instance's input, the caller's text, as the instance's output. */
const echoing: JsonObject = {
  document: { dsl: '1.0.3', namespace: 'lab', name: 'echoing', version: '1.0.0' },
  do: [{ '<svg onload="window.__pwned=5">': { set: '${ . }' } }],
};
/** Faults with the caller's text as its error's title and detail. */
const faulting: JsonObject = {
  document: { dsl: '1.0.3', namespace: 'lab', name: 'faulting', version: '1.0.0' },
  do: [{ fail: { raise: { error: { type: 'https://convoke.test/hostile', status: 400, title: '${ .text }', detail: '${ .text }' } } } }],
};

before(async () => {
  fixture = await writeWorkflowFixture({ bundleWorkflows: { stepping, echoing, faulting } });
  hosted = await serveWorkflowFixture(fixture);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await hosted?.close();
  await fixture?.dispose();
});

async function start(token: string, invocationKey: string, input: JsonObject, waitMs: number, workflow = 'review-then-publish'): Promise<WorkflowInstance> {
  const response = await fetch(`${hosted.server.url}/workflow-instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ bundle: { ...fixture.bundle }, workflow, invocationKey, input, waitMs }),
  });
  return (await response.json()) as WorkflowInstance;
}

async function signIn(page: Page, token: string, path: string): Promise<void> {
  await page.goto(`${hosted.server.url}${path}`);
  await page.fill('#token', token);
  await page.click('#signin button[type=submit]');
}

test('the instances list shows the caller its own instances, takes a new one live, and filters', { timeout: 60_000 }, async () => {
  const first = await start(fixture.tokens.alice, 'console-1', { document: 'RFC 40' }, 10_000);
  assert.equal(first.status, 'completed');
  const theirs = await start(fixture.tokens.bob, 'console-bob', { document: 'RFC 41' }, 10_000);
  const page = await browser.page();
  await signIn(page, fixture.tokens.alice, '/console/?view=workflows');
  await page.waitForSelector(`#instances a[title="${first.instanceId}"]`);
  assert.equal(await page.locator(`#instances a[title="${theirs.instanceId}"]`).count(), 0, "another principal's instance is not listed");
  const row = await page.locator('#instances tbody tr').first().locator('td').allTextContents();
  assert.deepEqual([row[1], row[2], row[3]], ['review-then-publish', 'alice', 'completed']);

  // Started while the page is open: it appears without a reload.
  const second = await start(fixture.tokens.alice, 'console-2', { document: 'RFC 42' }, 0);
  await page.waitForSelector(`#instances a[title="${second.instanceId}"]`, { timeout: 15_000 });

  await page.selectOption('#wf-status', 'faulted');
  await page.click('form[aria-label="Filter workflow instances"] button[type=submit]');
  // Locator waits: the console's CSP forbids eval, which a string predicate needs.
  await page.locator('#instances caption', { hasText: /^0 instances/ }).waitFor();
  assert.match(page.url(), /view=workflows&status=faulted/);
  await page.close();
});

test(
  'the instance page shows status, input, output, tasks, timers, children linking to their operations, and the event stream',
  { timeout: 60_000 },
  async () => {
    const instance = await start(fixture.tokens.alice, 'console-3', { document: 'RFC 43' }, 10_000);
    assert.equal(instance.status, 'completed');
    const page = await browser.page();
    await signIn(page, fixture.tokens.alice, `/console/?instance=${instance.instanceId}`);
    await page.waitForSelector('#timeline tbody tr');
    assert.equal((await page.textContent('#instance-status'))?.trim(), 'completed');
    assert.match((await page.textContent('#h-instance')) ?? '', new RegExp(instance.instanceId));
    assert.deepEqual(JSON.parse((await page.textContent('#instance-input')) ?? 'null'), { document: 'RFC 43' });
    assert.match((await page.textContent('#instance-output')) ?? '', /published/);
    const tasks = await page.locator('#tasks tbody tr').evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-at'), r.children[2]?.textContent]));
    assert.ok(
      tasks.some(([at, state]) => at === '/do/0/review' && state === 'completed'),
      JSON.stringify(tasks),
    );
    const timeline = await page.locator('#timeline tbody tr').first().textContent();
    assert.match(timeline ?? '', /workflow-started/);

    const links = await page.locator('#children a').evaluateAll((as) => as.map((a) => [a.getAttribute('href'), a.getAttribute('title')]));
    assert.equal(links.length, 2, 'the two stages');
    const [href, operationId] = links[0] as [string, string];
    assert.equal(href, `./?operation=${operationId}`);
    await page.click(`#children a[title="${operationId}"]`);
    await page.waitForSelector('#h-summary');
    assert.match((await page.textContent('#h-summary')) ?? '', new RegExp(operationId));
    await page.close();
  },
);

test(
  'an instance page opened while it runs applies each update to what it shows: at its end the page shows what /transitions answers',
  { timeout: 60_000 },
  async () => {
    const instance = await start(fixture.tokens.alice, 'console-stepping', { document: 'RFC 45' }, 0, 'stepping');
    const page = await browser.page();
    // One stream, followed to the end: a page that failed to apply an update would open another (and start from a snapshot).
    const streams: string[] = [];
    page.on('request', (request) => void (request.url().endsWith(`/workflow-instances/${instance.instanceId}/events`) && streams.push(request.url())));
    try {
      await signIn(page, fixture.tokens.alice, `/console/?instance=${instance.instanceId}`);
      await page.waitForSelector('#instance-status');
      assert.equal((await page.textContent('#instance-status'))?.trim(), 'running', 'the page opened before the instance ran its steps');
      await page.locator('#instance-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
      const read = await fetch(`${hosted.server.url}/workflow-instances/${instance.instanceId}/transitions`, {
        headers: { authorization: `Bearer ${fixture.tokens.alice}` },
      });
      const fresh = (await read.json()) as WorkflowInspection;
      // The page takes the updates after the end as they come: wait until it shows every transition stored.
      for (let tries = 0; tries < 100 && (await page.locator('#timeline tbody tr').count()) < fresh.timeline.length; tries++)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const indexes = await page.locator('#timeline tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-index'))));
      assert.deepEqual(
        indexes,
        fresh.timeline.map((t) => t.index),
        'every transition once, in order',
      );
      const tasks = await page.locator('#tasks tbody tr').evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-at'), r.children[2]?.textContent]));
      assert.deepEqual(
        tasks,
        fresh.tasks.map((t) => [t.at, t.state]),
        'every task execution, in the order it started, with its state now',
      );
      const timers = await page.locator('#timers tbody tr').evaluateAll((rows) => rows.map((r) => [r.children[0]?.textContent, r.children[3]?.textContent]));
      assert.deepEqual(
        timers,
        fresh.timers.map((t) => [t.key, t.state]),
      );
      const children = await page.locator('#children a').evaluateAll((as) => as.map((a) => a.getAttribute('title')));
      assert.deepEqual(
        children,
        fresh.children.map((c) => c.operationId),
      );
      assert.deepEqual(JSON.parse((await page.textContent('#instance-output')) ?? 'null'), fresh.instance.output);
      assert.doesNotMatch((await page.textContent('#status')) ?? '', /unavailable|interrupted/, 'no update was missed');
      assert.equal(streams.length, 1, 'the page read one stream from its snapshot to the end');
    } finally {
      await page.close();
    }
  },
);

test('a parent instance page links its child instances, and a child instance page links its parent', { timeout: 60_000 }, async () => {
  const parent = await start(fixture.tokens.alice, 'console-parent', {}, 0, 'delegating');
  assert.equal(parent.status, 'running');
  const page = await browser.page();
  await signIn(page, fixture.tokens.alice, `/console/?instance=${parent.instanceId}`);
  // The child appears once the parent's task has bound and started it (the page is live).
  const link = page.locator('#child-instances tbody a');
  await link.waitFor();
  const childId = await link.getAttribute('title');
  assert.ok(childId && childId !== parent.instanceId);
  assert.equal(await link.getAttribute('href'), `./?instance=${childId}`);
  const cells = await page.locator('#child-instances tbody tr').first().locator('td').allTextContents();
  assert.deepEqual([cells[0], cells[2]], ['/do/0/delegate', 'slow']);
  assert.match((await page.textContent('#h-instance')) ?? '', new RegExp(parent.instanceId));
  await link.click();
  await page.locator('#h-instance', { hasText: childId }).waitFor();
  const back = page.locator('#instance-parent');
  assert.equal(await back.getAttribute('title'), parent.instanceId);
  assert.equal(await back.getAttribute('href'), `./?instance=${parent.instanceId}`);
  assert.equal(await page.locator('#child-instances tbody tr').count(), 0, 'the child has no children of its own');
  await back.click();
  await page.locator('#h-instance', { hasText: parent.instanceId }).waitFor();
  await page.close();
  await hosted.host.service.cancel('alice', parent.instanceId);
});

test("another principal's instance page shows nothing of it", { timeout: 60_000 }, async () => {
  const instance = await start(fixture.tokens.alice, 'console-4', { document: 'RFC 44' }, 10_000);
  const page = await browser.page();
  await signIn(page, fixture.tokens.bob, `/console/?instance=${instance.instanceId}`);
  await page.locator('#status.error').waitFor();
  assert.match((await page.textContent('#status')) ?? '', /is visible to this principal/);
  assert.equal(await page.locator('#instance-status').count(), 0);
  assert.doesNotMatch((await page.content()) ?? '', /RFC 44/);
  await page.close();
});

test(
  "a caller's markup and javascript: text in an instance's key, input, output, error and a task's name is shown as text: no element made of it, nothing run, every link the console's own",
  { timeout: 60_000 },
  async () => {
    const echoed = await start(fixture.tokens.alice, `${hostile}-echo`, { text: hostile }, 10_000, 'echoing');
    assert.equal(echoed.status, 'completed');
    const faulted = await start(fixture.tokens.alice, `${hostile}-fault`, { text: hostile }, 10_000, 'faulting');
    assert.equal(faulted.status, 'faulted');
    const page = await browser.page();
    const dialogs: string[] = [];
    page.on('dialog', (d) => void dialogs.push(d.message()));
    const inert = async (where: string) => {
      assert.equal(await page.evaluate('window.__pwned'), undefined, `${where}: something ran`);
      assert.equal(await page.locator('main img, main svg, main script, main iframe, main object').count(), 0, `${where}: an element made of text`);
      const hrefs = await page.locator('a[href]').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''));
      assert.ok(
        hrefs.every((href) => href.startsWith('./') || href === '#main'),
        `${where}: ${JSON.stringify(hrefs)}`,
      );
      assert.deepEqual(dialogs, [], where);
    };
    try {
      await signIn(page, fixture.tokens.alice, '/console/?view=workflows');
      await page.waitForSelector(`#instances a[title="${faulted.instanceId}"]`);
      // The list's last error shows the fault's title, as text.
      assert.ok(((await page.textContent('#instances')) ?? '').includes(hostile), 'the title is on the list as text');
      await inert('the instances list');

      await page.click(`#instances a[title="${echoed.instanceId}"]`);
      await page.waitForSelector('#timeline tbody tr');
      const facts = (await page.textContent('#h-instance + dl')) ?? '';
      assert.ok(facts.includes(`${hostile}-echo`), `the key as text: ${facts}`);
      assert.deepEqual(JSON.parse((await page.textContent('#instance-input')) ?? 'null'), { text: hostile });
      assert.deepEqual(JSON.parse((await page.textContent('#instance-output')) ?? 'null'), { text: hostile });
      assert.ok(((await page.textContent('#tasks')) ?? '').includes('<svg onload="window.__pwned=5">'), 'the task name as text');
      assert.ok(((await page.textContent('#timeline')) ?? '').includes('<svg onload'), 'the events as text');
      await inert("the echoing instance's page");

      await page.goto(`${hosted.server.url}/console/?instance=${faulted.instanceId}`);
      await page.waitForSelector('#instance-error');
      const error = JSON.parse((await page.textContent('#instance-error')) ?? 'null') as { title: string; detail: string };
      assert.deepEqual([error.title, error.detail], [hostile, hostile]);
      await inert("the faulted instance's page");
    } finally {
      await page.close();
    }
  },
);
