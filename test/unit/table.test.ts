/**
 * renderTable (src/cli/table.ts) as records: a table that cannot fit its width without breaking a
 * header or a word mid-word is drawn one block per row, each field on its own line under aligned
 * headers; a table that fits with its words whole is drawn as a table, as before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderTable, ShortId, wholeId } from '../../src/cli/table.js';

const id = `op${'0123456789abcdef'.repeat(4)}`;
const headers = ['operation', 'interaction', 'completion', 'detail'];
const prose = 'the quick brown fox jumps over the lazy dog and keeps running far away';
const rows = [
  [new ShortId(id), 'review', 'all-successful', prose],
  [wholeId(id), null, 'first-success', 'short'],
];

test('a table that would break a header or a word mid-word is drawn as records: headers aligned, values wrapped under their column, ids shortened as in a table', () => {
  // At 40 columns the headers would break mid-word (10 + 11 + 10 + 7 and the gaps is 44).
  assert.equal(
    renderTable(headers, rows, 40),
    [
      'operation    op0123456789ab…',
      'interaction  review',
      'completion   all-successful',
      'detail       the quick brown fox jumps',
      '             over the lazy dog and keeps',
      '             running far away',
      '',
      // An id shown whole where it fits (wholeId) is, at 27 columns, a prefix as wide as the value column.
      'operation    op0123456789abcdef01234567…',
      'interaction  -',
      'completion   first-success',
      'detail       short',
      '',
    ].join('\n'),
  );
});

test('a table that fits with its words whole, broken after hyphens at most, is still a table', () => {
  // 10 + 11 + 10 (`all-` `successful`) + 7 and the gaps is 44.
  const text = renderTable(headers, rows, 44);
  assert.match(text, /^operation +interaction +completion +detail$/m, text);
  assert.match(text, /^-+ {2}-+ {2}-+ {2}-+$/m, text);
  assert.match(text, /^ +successful +/m, text);
  // Wide, the same table on one line a row.
  assert.equal(renderTable(headers, rows).split('\n').length, 5);
});

test('in a record a field empty in its row is left out; one empty on every row is left out with a note', () => {
  const text = renderTable(
    ['rev', 'event', 'stuck', 'detail'],
    [
      [1, 'operationadmittedwithalongname', '', 'three branches'],
      ['', 'dispatchrecordedwithalongname', '', 'sent'],
    ],
    44,
  );
  assert.equal(
    text,
    [
      'rev     1',
      'event   operationadmittedwithalongname',
      'detail  three branches',
      '',
      'event   dispatchrecordedwithalongname',
      'detail  sent',
      '(stuck: empty on every row, left out)',
      '',
    ].join('\n'),
  );
});

test('a prose last column goes under its row while the other columns fit with words whole; else the table is records with the prose a field', () => {
  const proseHeaders = ['rev', 'committed at', 'event', 'detail'];
  const row = [1, '2026-12-05T19:44:52.123Z', 'operationadmittedwithlongname', '3 branches, threshold 2/3, timeout 30000 ms'];
  // 3 + 10 + 29 and the gaps is 46: at 44 the event would break mid-word.
  assert.equal(
    renderTable(proseHeaders, [row], 44, { proseLast: true }),
    [
      'rev           1',
      'committed at  2026-12-05T19:44:52.123Z',
      'event         operationadmittedwithlongname',
      'detail        3 branches, threshold 2/3,',
      '              timeout 30000 ms',
      '',
    ].join('\n'),
  );
  // At 50 the other columns fit: the detail is written under its row, as before.
  assert.equal(
    renderTable(proseHeaders, [row], 50, { proseLast: true }),
    [
      'rev  committed at    event',
      '    detail',
      '---  --------------  -----------------------------',
      '1    2026-12-05      operationadmittedwithlongname',
      '     T19:44:52.123Z',
      '    3 branches, threshold 2/3, timeout 30000 ms',
      '',
    ].join('\n'),
  );
});
