/**
 * terminalText (src/cli/terminal-text.ts): every character a terminal would act on, or that would
 * reorder what it shows, comes out as its `\uXXXX` escape, and nothing else changes; the tables and
 * lines of src/cli/table.ts show their cells through it, fitted on the escaped text.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { terminalText } from '../../src/cli/terminal-text.js';
import { fitText, heading, labelled, renderTable, ShortId } from '../../src/cli/table.js';

/** The characters terminalText must never let through, listed here on their own (not its pattern). */
function refused(code: number): boolean {
  return (
    (code <= 0x1f && code !== 0x0a) ||
    (code >= 0x7f && code <= 0x9f) ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069) ||
    [0x200e, 0x200f, 0x061c].includes(code) ||
    // Invisible: the zero width space, the word joiner and invisible operators, the deprecated format controls, the zero width no-break space (BOM)
    code === 0x200b ||
    (code >= 0x2060 && code <= 0x2064) ||
    (code >= 0x206a && code <= 0x206f) ||
    code === 0xfeff ||
    // The line and paragraph separators
    code === 0x2028 ||
    code === 0x2029
  );
}

/** The refused characters in `text`, and its lone surrogates, as code unit numbers. */
function refusedIn(text: string): number[] {
  const found: number[] = [];
  for (const c of text) {
    const code = c.codePointAt(0) ?? 0;
    if (refused(code) || (code >= 0xd800 && code <= 0xdfff)) found.push(code);
  }
  return found;
}

const escape = (code: number) => `\\u${code.toString(16).padStart(4, '0')}`;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

const hostile = '\u001b]0;pwned\u0007\u001b[2J\u001b]8;;https://evil.example\u001b\\click\u001b]8;;\u001b\\\u202eevil\u2066';

test('every C0 control but the newline, DEL and every C1 control are shown as their escapes', () => {
  for (const code of [...range(0x00, 0x1f).filter((c) => c !== 0x0a), 0x7f, ...range(0x80, 0x9f)]) {
    assert.equal(terminalText(`a${String.fromCharCode(code)}b`), `a${escape(code)}b`, escape(code));
  }
  assert.equal(terminalText('\u001b[2J'), '\\u001b[2J');
  // CR would write over the line; a tab is escaped too (a table counts it as one column).
  assert.equal(terminalText('shown\rhidden\tx'), 'shown\\u000dhidden\\u0009x');
});

test('the newline is kept: a multi-line text (an error stack) stays on its lines', () => {
  assert.equal(terminalText('Error: x\n    at y\n'), 'Error: x\n    at y\n');
});

test('bidi embeddings, overrides, isolates and marks are shown as their escapes', () => {
  for (const code of [...range(0x202a, 0x202e), ...range(0x2066, 0x2069), 0x200e, 0x200f, 0x061c]) {
    assert.equal(terminalText(`a${String.fromCharCode(code)}b`), `a${escape(code)}b`, escape(code));
  }
});

test('invisible format characters and the line and paragraph separators are shown as their escapes; the joiners scripts and emoji need are kept', () => {
  for (const code of [0x200b, ...range(0x2060, 0x2064), ...range(0x206a, 0x206f), 0xfeff, 0x2028, 0x2029]) {
    assert.equal(terminalText(`a${String.fromCharCode(code)}b`), `a${escape(code)}b`, escape(code));
  }
  // Two ids that look alike on a terminal are told apart.
  assert.notEqual(terminalText('alfa'), terminalText('al\u200bfa'));
  // ZWNJ and ZWJ (Persian, Indic scripts, emoji sequences) and variation selectors are kept.
  for (const text of ['می\u200cخواهم', '👩\u200d👩\u200d👧', '❤\ufe0f']) assert.equal(terminalText(text), text, JSON.stringify(text));
});

test('a table cell holding a zero width space or a line or paragraph separator shows it escaped, on one line', () => {
  const text = renderTable(['peer', 'reason'], [['al\u200bfa', 'approved\u2028rejected\u2029x']]);
  assert.deepEqual(refusedIn(text), []);
  assert.match(text, /^al\\u200bfa {2}approved\\u2028rejected\\u2029x$/m);
});

test('a lone surrogate is shown as its escape; a pair is kept', () => {
  assert.equal(terminalText('a\ud800b'), 'a\\ud800b');
  assert.equal(terminalText('a\udc00'), 'a\\udc00');
  assert.equal(terminalText('\udc00\ud800'), '\\udc00\\ud800');
  assert.equal(terminalText('\ud83d\ude42'), '\ud83d\ude42');
});

test('ordinary text and Unicode are kept as they are', () => {
  for (const text of ['', 'plain ascii ~!@#$%^&*()', 'é', '漢字', '🙂', '👩‍👩‍👧', '❤️', 'שלום עולם', 'مرحبا', 'Ωmega—“quoted”…', 'a\u00a0b', 'C:\\path\\u001b']) {
    assert.equal(terminalText(text), text, JSON.stringify(text));
  }
});

test('escaping is idempotent: an escaped text is escaped again to itself (so a literal \\u001b and an escaped ESC read alike)', () => {
  const once = terminalText(hostile);
  assert.equal(terminalText(once), once);
  assert.equal(terminalText('\\u001b'), terminalText('\u001b'));
});

test('property: the output holds no refused character nor lone surrogate, and is idempotent', () => {
  // Any UTF-16 code units (lone surrogates included), with the refused characters likely.
  const unit = fc.oneof(
    fc.integer({ min: 0, max: 0xffff }),
    fc.constantFrom(0x1b, 0x07, 0x0a, 0x0d, 0x7f, 0x85, 0x9b, 0x202e, 0x2066, 0x200b, 0x2028, 0x2029, 0xfeff, 0xd800, 0xdc00),
  );
  const text = fc.oneof(
    fc.array(unit, { maxLength: 40 }).map((codes) => String.fromCharCode(...codes)),
    fc.string({ unit: 'binary', maxLength: 40 }),
  );
  fc.assert(
    fc.property(text, (t) => {
      const shown = terminalText(t);
      assert.deepEqual(refusedIn(shown), []);
      assert.equal(terminalText(shown), shown);
    }),
  );
});

test('property: JSON text escaped is still JSON of the same value (the escape is JSON’s own)', () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 3 }), (value) => {
      const text = JSON.stringify(value, null, 2);
      assert.deepEqual(JSON.parse(terminalText(text)), JSON.parse(text));
    }),
  );
  assert.equal(JSON.parse(terminalText(JSON.stringify({ title: hostile }))).title, hostile);
});

test('a table cell with ESC and bidi controls is shown escaped, its column as wide as the escaped text', () => {
  const text = renderTable(['field', 'value'], [['reason', hostile]]);
  assert.deepEqual(refusedIn(text), []);
  const shown = terminalText(hostile);
  assert.ok(text.includes(shown), text);
  // The rule under the header is as wide as the escaped cell: widths are those of what is shown.
  assert.match(text, new RegExp(`^-{6} {2}-{${shown.length}}$`, 'm'));
});

test('a table of hostile cells still fits its width, with nothing dropped', () => {
  const headers = ['name', 'reason', 'detail'];
  const rows = [
    ['a', hostile, `${hostile} ${hostile}`],
    ['\u202eb', 'rejected', 'plain'],
  ];
  const text = renderTable(headers, rows, 60);
  assert.deepEqual(refusedIn(text), []);
  for (const line of text.split('\n')) assert.ok(line.length <= 60, `${line.length}: ${line}`);
  // Too long to fit as a table with its words whole, it is drawn as records: each escaped cell wraps
  // under its value's column, so with the spaces taken out every one reads whole after its header.
  const joined = text.replace(/\s/g, '');
  assert.match(text, /^name {4}a$/m, text);
  for (const row of rows)
    assert.ok(
      joined.includes(
        headers
          .map((header, i) => header + terminalText(row[i] ?? ''))
          .join('')
          .replace(/\s/g, ''),
      ),
      text,
    );
  // An id read from a store is shown escaped too, shortened on the escaped text.
  const id = renderTable(['id'], [[new ShortId(`op\u001b[2J${'0'.repeat(60)}`)]]);
  assert.deepEqual(refusedIn(id), []);
  assert.match(id, /^op\\u001b\[2J000…$/m);
});

test('fitText, heading and labelled show their text escaped and wrap it at the width', () => {
  for (const shown of [fitText(`operation ${hostile}`, 40), heading(`Output: ${hostile}`, 40), labelled('error  ', hostile, 40)]) {
    assert.deepEqual(refusedIn(shown), []);
    assert.match(shown, /\\u001b\]0;pwned/);
    for (const line of shown.split('\n')) assert.ok(line.length <= 40, `${line.length}: ${line}`);
  }
  // Its own lines stay lines.
  assert.equal(fitText('contract x\ndigest y'), 'contract x\ndigest y\n');
});
