/**
 * Text a terminal draws two columns wide (CJK, emoji) or not at all (a combining accent) in what
 * hostile parties put in a store: a principal's name, a peer's result. `list` and `inspect` fit it
 * to the terminal in columns, not UTF-16 units, and wrap it between graphemes: no line outgrows
 * the width, no emoji is cut into the halves of its surrogate pair, no accent leaves its letter.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.js';
import { fitText, renderTable } from '../../src/cli/table.js';
import { chunksOf, columnsOf } from '../../src/cli/text-width.js';
import { captureIo } from '../support/cli-io.js';
import { settledNotedReview } from '../support/noted-review.js';

const principal = '漢字漢字漢字漢字漢字漢字漢字プリンシパル';
const note = `${'漢字'.repeat(30)} ${'🙂'.repeat(30)} ${'e\u0301'.repeat(40)}`;

/**
 * The columns a line of this test's text takes, counted apart from the code under test: its CJK
 * and emoji code points two each, the combining accent none, every other one (ASCII, the table's
 * box-drawing-free rules) one.
 */
function columns(line: string): number {
  return [...line].reduce((sum, c) => {
    const code = c.codePointAt(0) ?? 0;
    return sum + (code === 0x0301 ? 0 : code >= 0x3000 ? 2 : 1);
  }, 0);
}

let dir = '';
let store = '';
let operationId = '';

async function convoke(width: number, ...args: string[]) {
  const io = captureIo({ columns: width });
  const code = await main(['node', 'convoke', ...args], io);
  return { code, out: io.out() };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-wide-text-'));
  process.env.XDG_CONFIG_HOME = join(dir, 'config');
  store = `sqlite:${join(dir, 'ops.db')}`;
  operationId = await settledNotedReview(join(dir, 'ops.db'), principal, note);
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** What is wrong with a command's output at `width`: lines wider, surrogate halves, accents at a line's start. */
function problemsOf(out: string, width: number): string[] {
  return out
    .split('\n')
    .flatMap((line) => [
      ...(columns(line) > width ? [`${columns(line)} columns: ${line}`] : []),
      ...(/\p{Surrogate}/u.test(line) || line.includes('\ufffd') ? [`a cut surrogate pair: ${line}`] : []),
      ...(/^\s*\u0301/u.test(line) ? [`an accent apart from its letter: ${line}`] : []),
    ]);
}

test('list and inspect fit wide and combining text to the terminal in columns, cutting no character', async () => {
  for (const width of [60, 80, 100]) {
    for (const args of [
      ['list', '--store', store],
      ['inspect', operationId, '--store', store],
    ]) {
      const { code, out } = await convoke(width, ...args);
      assert.equal(code, 0, args.join(' '));
      assert.deepEqual(problemsOf(out, width), [], `convoke ${args.join(' ')} at ${width}:\n${out}`);
      // Nothing is left out: every character is there, wrapped or not (inspect shows both peers' notes and, in its heading, the principal).
      const count = (text: string, part: string) => text.split(part).length - 1;
      const shown = args[0] === 'list' ? principal : note.repeat(2) + principal;
      for (const part of ['漢', 'ル', '🙂', 'e\u0301']) assert.equal(count(out, part), count(shown, part), `${part} in:\n${out}`);
    }
  }
});

test('a table of wide cells keeps its columns aligned: each row starts its cells at the columns its header does', () => {
  const text = renderTable(
    ['who', 'what', 'n'],
    [
      [principal, 'review', 1],
      ['svc-a', '漢字review', 2],
    ],
    80,
  );
  const lines = text.split('\n').filter((line) => line !== '');
  // The columns at which a line's cells start: its first character, and any after two spaces.
  const starts = (line: string) => {
    const at: number[] = [];
    let column = 0;
    let spaces = 2;
    for (const c of line) {
      if (c !== ' ' && spaces >= 2) at.push(column);
      spaces = c === ' ' ? spaces + 1 : 0;
      column += columns(c);
    }
    return at;
  };
  assert.equal(lines.length, 4, text);
  for (const line of lines.slice(1)) assert.deepEqual(starts(line), starts(lines[0] ?? ''), text);
});

test('columnsOf counts what a terminal draws; chunksOf never cuts within a grapheme', () => {
  assert.equal(columnsOf('abc'), 3);
  assert.equal(columnsOf('漢字'), 4);
  assert.equal(columnsOf('🙂'), 2);
  assert.equal(columnsOf('e\u0301'), 1);
  assert.equal(columnsOf('👨‍👩‍👧'), 2);
  assert.equal(columnsOf('🇯🇵'), 2);
  assert.equal(columnsOf('\u200b'), 0);
  // East Asian Wide beyond the common CJK blocks (Tai Xuan Jing symbols, Kana Extended-B, the Tangut
  // supplement); halfwidth katakana and an Ambiguous character (±) stay one column.
  assert.equal(columnsOf('\u{1d300}\u{1aff0}\u{18d00}'), 6);
  assert.equal(columnsOf('\uff71±'), 2);
  assert.deepEqual(chunksOf('漢字漢', 3), ['漢', '字', '漢']);
  assert.deepEqual(chunksOf('a🙂b', 2), ['a', '🙂', 'b']);
  assert.deepEqual(chunksOf('e\u0301e\u0301', 1), ['e\u0301', 'e\u0301']);
  // A grapheme wider than the width is a piece alone: every cut moves on.
  assert.deepEqual(chunksOf('漢a', 1), ['漢', 'a']);
});

test('a cell of 100 000 CJK characters is measured and wrapped in one pass, not in time growing with its square', () => {
  const started = Date.now();
  const text = renderTable(['a', 'detail'], [['x', '漢'.repeat(100_000)]], 60) + fitText('漢字 '.repeat(30_000), 60);
  // Segmenting each cut again, or with Intl.Segmenter, took minutes.
  assert.ok(Date.now() - started < 10_000, `${Date.now() - started} ms`);
  assert.deepEqual(problemsOf(text, 60), []);
});
