/**
 * `convoke workflow graph`'s Mermaid (src/workflow/dsl/mermaid.ts) as Mermaid itself reads it: each
 * chart rendered by Mermaid 11 (the development dependency `mermaid`, its browser bundle) in a real
 * headless Chromium, for every official DSL 1.0.3 example, every lowered pipeline and fixture
 * workflow, and a document whose task names and conditions hold what Mermaid would read as syntax
 * or markup (double quotes, `#`, `<`, `>`, `&`, backticks, spaces). Each renders, and the drawing
 * names each top-level task as the document does. The SDK's own converter's text for the lowered
 * pipeline (a `then` condition holding `"`) is refused by the same harness: what the writer is for.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import type { JsonObject } from '../../src/contract/json.js';
import { mermaidLabel, mermaidOf } from '../../src/workflow/dsl/mermaid.js';
import { withBrowser } from '../support/browser.js';
import { yaml } from './support.js';
import { bundleDocuments, exampleDocuments } from './documents.js';

const mermaidBundle = createRequire(import.meta.url).resolve('mermaid/dist/mermaid.min.js');

/** Mermaid's verdict on a chart: the label texts of its drawing (nodes, subgraphs, edges), or its error. */
type Rendered = { ok: true; labels: string[] } | { ok: false; error: string };

async function render(page: Page, chart: string): Promise<Rendered> {
  return page.evaluate(async (text) => {
    const mermaid = (globalThis as unknown as { mermaid: { render(id: string, text: string): Promise<{ svg: string }> } }).mermaid;
    try {
      const { svg } = await mermaid.render(`chart${Math.floor(Math.random() * 1e9)}`, text);
      // Run in the page, where a DOM parser is: this file's own types know of none.
      const page = globalThis as unknown as {
        DOMParser: new () => { parseFromString(text: string, type: string): { querySelectorAll(selector: string): Iterable<{ textContent: string | null }> } };
      };
      const drawing = new page.DOMParser().parseFromString(svg, 'image/svg+xml');
      const labels = [...drawing.querySelectorAll('.nodeLabel, .cluster-label, .edgeLabel')].map((e) => (e.textContent ?? '').trim());
      return { ok: true as const, labels };
    } catch (error) {
      return { ok: false as const, error: String((error as Error)?.message ?? error).slice(0, 300) };
    }
  }, chart);
}

async function withMermaid(use: (page: Page) => Promise<void>): Promise<void> {
  await withBrowser(async (session) => {
    const page = await session.page();
    await page.setContent('<!doctype html><html><body></body></html>');
    await page.addScriptTag({ path: mermaidBundle });
    await page.evaluate(() =>
      (globalThis as unknown as { mermaid: { initialize(o: object): void } }).mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' }),
    );
    await use(page);
  });
}

const taskNames = (document: JsonObject): string[] => (document.do as JsonObject[]).map((task) => Object.keys(task)[0] as string);

test('every official example, lowered pipeline and fixture workflow renders in Mermaid, naming its top-level tasks', { timeout: 180_000 }, async () => {
  const documents = [...exampleDocuments(), ...bundleDocuments()];
  assert.ok(documents.length > 60, `${documents.length} documents`);
  await withMermaid(async (page) => {
    for (const [label, document] of documents) {
      const rendered = await render(page, await mermaidOf(document));
      assert.ok(rendered.ok, `${label}: ${rendered.ok ? '' : rendered.error}`);
      for (const name of taskNames(document)) assert.ok(rendered.labels.includes(name), `${label}: the drawing names task ${name}`);
    }
  });
});

test(
  'task names and conditions holding quotes, #, markup, backticks and spaces render as written; the SDK converter own text does not',
  { timeout: 60_000 },
  async () => {
    const names = ['say "hi"', 'a#35;b', '<b>bold</b> & co', '`tick`', 'two words'];
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: hostile-names, version: '1.0.0' }
do:
  - ${JSON.stringify(names[0])}:
      switch:
        - quoted:
            when: '\${ .x == "y" }'
            then: ${JSON.stringify(names[2])}
        - otherwise:
            then: ${JSON.stringify(names[1])}
  - ${JSON.stringify(names[1])}:
      set: { a: 1 }
  - ${JSON.stringify(names[2])}:
      do:
        - ${JSON.stringify(names[3])}:
            set: { b: 2 }
  - ${JSON.stringify(names[4])}:
      set: { c: 3 }
`) as JsonObject;
    assert.deepEqual(taskNames(document), [names[0], names[1], names[2], names[4]]);
    const { convertToMermaidCode } = (await import('@serverlessworkflow/sdk')).default;
    await withMermaid(async (page) => {
      const rendered = await render(page, await mermaidOf(document));
      assert.ok(rendered.ok, rendered.ok ? '' : rendered.error);
      for (const name of [...names, 'quoted', 'otherwise'])
        assert.ok(rendered.labels.includes(name), `the drawing names ${name}: ${JSON.stringify(rendered.labels)}`);
      // The harness refuses what Mermaid refuses: the SDK's own text for the same document.
      const raw = await render(page, convertToMermaidCode(structuredClone(document) as Parameters<typeof convertToMermaidCode>[0]));
      assert.equal(raw.ok, false, 'the SDK converter text for names and a condition holding " renders');
    });
  },
);

test('a label is one line with what Mermaid reads inside quotes as entity codes', () => {
  assert.equal(mermaidLabel('a "b" #c <d> & `e`\nf'), 'a #34;b#34; #35;c #60;d#62; #38; #96;e#96; f');
  assert.equal(mermaidLabel('plain-name_1'), 'plain-name_1');
});
