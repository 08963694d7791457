/**
 * `npm run bench -- json`: how long the strict parser (src/contract/ijson.ts) takes over a 100 KB
 * document, beside JSON.parse over the same text in the same run (the baseline: it rejects nothing
 * the strict parser must). Medians of interleaved runs after a warm-up.
 */
import { parseStrict } from '../src/contract/ijson.js';
import { fixed, printRows } from './stats.js';

/** About 100 KB: 1 300 items with strings, escapes, surrogate pairs, numbers, booleans and nulls. */
function document(): string {
  const items = [];
  for (let i = 0; i < 1300; i++) items.push({ id: `item-${i}`, price: i * 1.25, tags: ['a', 'b\\n', 'é\u{1f600}'], ok: i % 2 === 0, note: null });
  return JSON.stringify({ items });
}

function timedMs(parse: (text: string) => unknown, text: string): number {
  const start = process.hrtime.bigint();
  parse(text);
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export function jsonBench(options: { json: boolean; runs?: number }): void {
  const text = document();
  const runs = options.runs ?? 201;
  for (let i = 0; i < 50; i++) {
    parseStrict(text);
    JSON.parse(text);
  }
  const strict: number[] = [];
  const native: number[] = [];
  for (let i = 0; i < runs; i++) {
    strict.push(timedMs(parseStrict, text));
    native.push(timedMs(JSON.parse, text));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const result = { documentChars: text.length, runs, strictMedianMs: median(strict), jsonParseMedianMs: median(native) };
  printRows(
    options.json,
    `strict JSON parse of a ${Math.round(text.length / 1000)} KB document (median of ${runs} interleaved runs)`,
    ['parser', 'median ms', 'ratio to JSON.parse'],
    [
      ['parseStrict', fixed(result.strictMedianMs), fixed(result.strictMedianMs / result.jsonParseMedianMs)],
      ['JSON.parse (baseline)', fixed(result.jsonParseMedianMs), '1.00'],
    ],
    result,
  );
}
