/**
 * Plain-text tables for what a person reads (inspect, demo, bench); `--json` is for machines. Every
 * cell, heading and line of text drawn here is shown through terminalText first, and measured and
 * cut in terminal columns (text-width.ts: 漢 and 🙂 take two, an accent none), so the widths are
 * those of what the terminal shows.
 */
import type { CliIo } from './io.js';
import { terminalText } from './terminal-text.js';
import { chunksOf, columnsOf, glyphsOf, padColumns, type Glyph } from './text-width.js';

export type Cell = string | number | boolean | null | undefined | ShortId;

const gap = '  ';

/** The fewest characters of an id a table shows before its `…`: the kind (op, wf) and 7 hex digits, as git's short hashes. */
export const shortIdLengthMin = 9;

/**
 * An id shown as its first characters and `…`: `lengthMax` of them at ease, fewer (down to
 * shortIdLengthMin) when the table must narrow. An operation's prefix is what get, inspect and
 * replay resolve (resolveOperationId, an ambiguous one listing its candidates); every id is whole in
 * `--json`.
 */
export class ShortId {
  constructor(
    readonly id: string,
    readonly lengthMax = 14,
  ) {}

  /** The cell in a column `width` wide (never shorter than shortIdLengthMin and its `…`). */
  text(width: number): string {
    // An id read from a store is shown as any data is.
    const id = terminalText(this.id);
    if (columnsOf(id) <= Math.min(width, this.lengthMax)) return id;
    const length = Math.max(shortIdLengthMin, Math.min(this.lengthMax, width - 1));
    return `${chunksOf(id, length)[0] ?? ''}…`;
  }
}

/** An id shown whole when its column has room, else shortened as any ShortId (replay's rows, one id per row to act on). */
export const wholeId = (id: string) => new ShortId(id, Number.POSITIVE_INFINITY);

export interface TableOptions {
  /**
   * The last column is prose (an event's detail): where the table would leave it narrower than
   * proseWidthMin, it is written under each row instead, indented by proseIndent and wrapped at
   * the table's width, and its header under the headers.
   */
  proseLast?: boolean;
}

/** The narrowest a prose last column (TableOptions.proseLast) is drawn as a column; narrower, it goes under its row. */
export const proseWidthMin = 20;
const proseIndent = '    ';

/**
 * A table no wider than `widthMax`. When the natural width is more, columns narrow in steps, each
 * taking the widest column first and going on only if the table still does not fit: columns of
 * words to their longest word (wrapping at spaces); instants to their date (the time below it, from
 * its `T`) and ids to shortIdLengthMin; then words broken after their hyphens. A prose last column
 * (options.proseLast) that would be left narrower than proseWidthMin goes under each row instead.
 *
 * A table that still does not fit, that would break a header or a word mid-word (`intera` over
 * `ction`, `succe` over `ssful`: a column narrower than a word reads as neither), is drawn as
 * records instead (drawRecords): a block a row, each field on a line of its own, `header  value`,
 * so every word is whole and the width holds any number of columns. A table that fits with its
 * words whole is drawn as a table, whatever its width.
 */
export function renderTable(headers: string[], rows: Cell[][], widthMax = Number.POSITIVE_INFINITY, options: TableOptions = {}): string {
  const cells = rows.map((row) => headers.map((_, i) => row[i]));
  const plan = planTable(headers, cells, widthMax);
  const last = headers.length - 1;
  const prose = options.proseLast === true && last >= 1 && plan.kept[last] === true;
  // The prose column's natural width: its width before any narrowing (columnOf).
  const natural = prose
    ? columnOf(
        headers[last] ?? '',
        cells.map((row) => row[last]),
      ).width
    : 0;
  if (plan.wordsWhole && (!prose || (plan.widths.at(-1) ?? 0) >= Math.min(proseWidthMin, natural)))
    return drawTable(plan.headers, plan.cells, plan.widths) + plan.note;
  if (prose) {
    // Too narrow a column for prose, or the others would break words beside it: the other columns
    // are fitted without it, and it goes under each row.
    const rest = planTable(
      headers.slice(0, last),
      cells.map((row) => row.slice(0, last)),
      widthMax,
    );
    const under = (cell: Cell) => (shownText(cell) === '' ? [] : proseLines(cell, widthMax));
    if (rest.wordsWhole)
      return drawTable(rest.headers, rest.cells, rest.widths, { header: under(headers[last]), rows: cells.map((row) => under(row[last])) }) + rest.note;
  }
  // No rows: nothing to draw as records, the headers stay a table.
  if (cells.length === 0) return drawTable(plan.headers, plan.cells, plan.widths) + plan.note;
  return drawRecords(plan.headers, plan.cells, widthMax) + plan.note;
}

/**
 * The columns a table keeps, their widths, the note naming the columns left out (empty on every
 * row), and whether its headers and words are whole (fitted in wordsWholeSteps steps or fewer).
 */
function planTable(
  headers: string[],
  cells: Cell[][],
  widthMax: number,
): { headers: string[]; cells: Cell[][]; widths: number[]; kept: boolean[]; note: string; wordsWhole: boolean } {
  const fitted = fitWidths(headers, cells, widthMax);
  // A column empty on every row says nothing a note cannot: left out when words would break otherwise.
  const empty = headers.map((_, i) => cells.length > 0 && cells.every((row) => isEmpty(row[i])));
  if (fitted.steps <= wordsWholeSteps || !empty.includes(true))
    return { headers, cells, widths: fitted.widths, kept: headers.map(() => true), note: '', wordsWhole: fitted.steps <= wordsWholeSteps };
  const keep = <T>(row: T[]) => row.filter((_, i) => !empty[i]);
  const note = `(${headers.filter((_, i) => empty[i]).join(', ')}: empty on every row, left out)`;
  const kept = cells.map(keep);
  const refitted = fitWidths(keep(headers), kept, widthMax);
  return {
    headers: keep(headers),
    cells: kept,
    widths: refitted.widths,
    kept: empty.map((e) => !e),
    note: fitText(note, widthMax),
    wordsWhole: refitted.steps <= wordsWholeSteps,
  };
}

/**
 * Rows as records: a block a row, blocks a blank line apart, each field on a line of its own as its
 * header then its value, the headers in a column as wide as the widest, the values in the column
 * after it, wrapped at spaces within the width (labelled's rule: a word wider than the line is cut).
 * The row's first field (its name or id) leads its block. An id is whole where the value column
 * holds it, else its prefix and `…` (ShortId). A field empty in its row (a continuation row's
 * revision, a blank reason) is left out of its block; `-` (none) is shown.
 */
function drawRecords(headers: string[], cells: Cell[][], widthMax: number): string {
  const labels = headers.map((header) => cellText(header));
  const labelWidth = Math.max(0, ...labels.map(columnsOf));
  const indent = ' '.repeat(labelWidth + gap.length);
  const width = Math.max(columnWidthMin, widthMax - indent.length);
  const blocks = cells.map((row) =>
    row
      .flatMap((cell, i) => {
        const text = cell instanceof ShortId ? cell.text(width) : cellText(cell);
        if (text === '') return [];
        return wrap(text, width).map((line, k) => (k === 0 ? padColumns(labels[i] ?? '', labelWidth) + gap : indent) + line);
      })
      .join('\n'),
  );
  return blocks.join('\n\n') + '\n';
}

/** A cell's text as a table shows it, unwrapped. */
const shownText = (cell: Cell) => (cell instanceof ShortId ? cell.text(Number.POSITIVE_INFINITY) : cellText(cell));

/** A prose cell under its row: indented, wrapped at spaces to the width. */
function proseLines(cell: Cell, widthMax: number): string[] {
  return wrap(shownText(cell), Math.max(columnWidthMin, widthMax - proseIndent.length)).map((line) => proseIndent + line);
}

/** `under`: lines written under the header and under each row (a prose column moved there). */
function drawTable(headers: string[], cells: Cell[][], widths: number[], under?: { header: string[]; rows: string[][] }): string {
  const line = (texts: string[]) =>
    texts
      .map((c, i) => padColumns(c, widths[i] ?? 0))
      .join(gap)
      .trimEnd();
  const lines: string[] = [];
  const push = (row: Cell[]) => {
    const wrapped = row.map((cell, i) => wrapCell(cell, widths[i] ?? Number.POSITIVE_INFINITY));
    const height = Math.max(1, ...wrapped.map((w) => w.length));
    for (let k = 0; k < height; k++) lines.push(line(wrapped.map((w) => w[k] ?? '')));
  };
  push(headers);
  lines.push(...(under?.header ?? []));
  lines.push(line(widths.map((w) => '-'.repeat(w))));
  cells.forEach((row, k) => {
    push(row);
    lines.push(...(under?.rows[k] ?? []));
  });
  return lines.join('\n') + '\n';
}

function cellText(cell: Exclude<Cell, ShortId>): string {
  // A cell is one line: newlines in data would break the rows apart. Other controls are shown escaped.
  return cell === null || cell === undefined ? '-' : terminalText(String(cell).replace(/[\r\n\t]+/g, ' '));
}

/**
 * The narrowest a column gets, at the last narrowing steps, where headers and words break mid-word:
 * a table that needs those steps is drawn as records instead (renderTable), save one with no rows.
 */
export const columnWidthMin = 4;

/** An RFC 3339 instant in UTC, as tables show them: its date, then its time from the `T`. */
const instantPattern = /^(\d{4}-\d{2}-\d{2})(T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)$/;

/** An instant's date and its time from the `T`, the two lines it breaks into; undefined for any other text. */
function instantParts(text: string): [string, string] | undefined {
  const [, date, time] = instantPattern.exec(text) ?? [];
  return date === undefined || time === undefined ? undefined : [date, time];
}

/** A cell in a column `width` wide, as the lines it takes. */
function wrapCell(cell: Cell, width: number): string[] {
  if (cell instanceof ShortId) return wrapWords(cell.text(width), width);
  const text = cellText(cell);
  const instant = instantParts(text);
  if (text.length > width && instant !== undefined && instant.every((part) => part.length <= width)) return instant;
  return wrapWords(text, width);
}

interface Column {
  width: number;
  floor: number;
  /** The widths it narrows to at each step (fitWidths). */
  floors: readonly number[];
  /** The width its cells and header take when wrapped at `width` (at most `width`). */
  used(width: number): number;
}

/**
 * Column widths: natural, then narrowed a step at a time (renderTable) until the table fits, and
 * the steps that took: more than wordsWholeSteps, and a header or a word breaks mid-word.
 */
function fitWidths(headers: string[], cells: Cell[][], widthMax: number): { widths: number[]; steps: number } {
  const columns = headers.map((header, i) =>
    columnOf(
      header,
      cells.map((row) => row[i]),
    ),
  );
  const steps = columns[0]?.floors.length ?? 0;
  let step = 0;
  for (; step < steps && tableWidth(columns) > widthMax; step++) {
    for (const c of columns) c.floor = Math.min(c.width, c.floors[step] ?? columnWidthMin);
    narrow(columns, widthMax);
  }
  return { widths: columns.map((c) => c.width), steps: step };
}

/** How many narrowing steps (columnOf's floors) break no header, word, id or instant mid-token. */
const wordsWholeSteps = 3;

const isEmpty = (cell: Cell) => !(cell instanceof ShortId) && ['', '-'].includes(cellText(cell));

/** A column's natural width and its floor at each narrowing step (renderTable). */
function columnOf(header: string, cells: Cell[]): Column {
  const texts = cells.map(shownText);
  const longest = (parts: string[]) => Math.max(0, ...parts.map(columnsOf));
  // The longest piece a cell breaks into cleanly: a word, an instant's date or time, an id's shortest prefix.
  const pieces = cells.flatMap((cell, k) => {
    if (cell instanceof ShortId) return [cell.text(0)];
    const text = texts[k] ?? '';
    return instantParts(text) ?? text.split(' ');
  });
  const piece = longest(pieces);
  const headerWord = longest(header.split(' '));
  const token = cells.some((cell) => cell instanceof ShortId) || texts.some((text) => instantParts(text) !== undefined);
  const natural = longest([header, ...texts]);
  const clean = Math.max(headerWord, piece);
  const whole = Math.max(columnWidthMin, piece);
  const hyphenated = longest(pieces.flatMap((p) => p.split(hyphenBreak)));
  const floors = token
    ? [natural, clean, clean, whole, whole, columnWidthMin]
    : [clean, clean, Math.max(headerWord, hyphenated), Math.max(columnWidthMin, hyphenated), columnWidthMin, columnWidthMin];
  const used = (width: number) => longest([header, ...cells].flatMap((cell) => wrapCell(cell, width)));
  return { width: natural, floor: natural, floors, used };
}

/** The width the columns take side by side, with the gaps between them. */
function tableWidth(columns: readonly Column[]): number {
  return columns.reduce((sum, c) => sum + c.width, 0) + gap.length * (columns.length - 1);
}

/** Narrows the widest column above its floor, one at a time, until the columns fit or none can narrow. */
function narrow(columns: Column[], widthMax: number): void {
  while (tableWidth(columns) > widthMax) {
    const narrowable = columns.filter((c) => c.width > c.floor);
    if (narrowable.length === 0) return;
    const widest = narrowable.reduce((a, b) => (b.width > a.width ? b : a));
    const others = tableWidth(columns) - widest.width;
    // What its cells take at that width: an instant narrower than itself takes its date's width.
    widest.width = Math.max(widest.floor, widest.used(Math.max(widest.floor, Math.min(widest.width - 1, widthMax - others))));
  }
}

/** Where a word may break besides spaces: after a hyphen between letters (`review-` `then-publish`). */
const hyphenBreak = /(?<=[A-Za-z]-)(?=[A-Za-z])/;

/** Breaks a cell into lines of at most `width` columns: at spaces, else after a hyphen in a word, else (a piece wider than the width) within it, between graphemes. */
function wrapWords(text: string, width: number): string[] {
  if (columnsOf(text) <= width) return [text];
  const lines: string[] = [];
  let line = '';
  let used = 0;
  for (const word of text.split(' ').filter((w) => w !== '')) {
    word.split(hyphenBreak).forEach((part, j) => {
      const columns = columnsOf(part);
      const space = line !== '' && j === 0 ? 1 : 0;
      if ((line === '' ? columns : used + space + columns) <= width) {
        line += (space === 1 ? ' ' : '') + part;
        used += space + columns;
        return;
      }
      if (line !== '') lines.push(line);
      // A piece wider than a line is cut; its last cut begins the next line.
      const pieces = columns > width ? chunksOf(part, width) : [part];
      lines.push(...pieces.slice(0, -1));
      line = pieces.at(-1) ?? '';
      used = columnsOf(line);
    });
  }
  if (line !== '' || lines.length === 0) lines.push(line);
  return lines;
}

/**
 * Breaks prose into lines of at most `width` columns, at spaces: a word is cut (between graphemes)
 * only when it is wider than a line (an id after a short label moves to the next line whole, not
 * cut at the width). The text is segmented once, so a long one wraps in one pass.
 */
function wrap(cell: string, width: number): string[] {
  if (columnsOf(cell) <= width) return [cell];
  const glyphs = glyphsOf(cell);
  const text = (from: number, to: number) => glyphs.slice(from, to).reduce((line, g) => line + g.text, '');
  const lines: string[] = [];
  let start = 0;
  while (start < glyphs.length) {
    let end = start;
    for (let used = 0; end < glyphs.length && (end === start || used + (glyphs[end]?.columns ?? 0) <= width); end++) used += glyphs[end]?.columns ?? 0;
    if (end === glyphs.length) {
      lines.push(text(start, end));
      break;
    }
    const cut = lineEnd(glyphs, start, end, width);
    lines.push(text(start, cut).trimEnd());
    for (start = cut; glyphs[start]?.text === ' '; start++);
  }
  return lines;
}

/**
 * Where a line of `glyphs` from `start` ends, `end` being the first glyph past the width: at the
 * space there or the line's last space, when the word after it fits a line of its own; else at `end`.
 */
function lineEnd(glyphs: readonly Glyph[], start: number, end: number, width: number): number {
  let space = end;
  while (space > start && glyphs[space]?.text !== ' ') space--;
  if (space === start) return end;
  let word = 0;
  for (let k = space + 1; k < glyphs.length && glyphs[k]?.text !== ' ' && word <= width; k++) word += glyphs[k]?.columns ?? 0;
  return word <= width ? space : end;
}

/** The width a command's tables get: the process's (processIo: the terminal's, $COLUMNS or the default); unbounded for an io that names none. */
export function widthOf(io: CliIo): number {
  return io.columns ?? Number.POSITIVE_INFINITY;
}

/** A heading, wrapped at spaces to the width. */
export function heading(title: string, widthMax = Number.POSITIVE_INFINITY): string {
  return `\n${fitText(title, widthMax)}`;
}

/**
 * `label` then `text`, wrapped at spaces to the width with every further line indented to the
 * text's column (the label's length), so a labelled line of any length reads within the width. A
 * newline in the text (data may hold one) starts a line under the text's column too.
 */
export function labelled(label: string, text: string, widthMax = Number.POSITIVE_INFINITY): string {
  const indent = ' '.repeat(label.length);
  const width = labelledWidth(label, widthMax);
  const lines = terminalText(text)
    .split('\n')
    .flatMap((line) => wrap(line, width));
  return lines.map((line, i) => (i === 0 ? label : indent) + line).join('\n');
}

/** The columns a labelled line's text wraps at: the width less the label, never below 20. */
const labelledWidth = (label: string, widthMax: number) => Math.max(20, widthMax - label.length);

/**
 * An id in a labelled line's text: whole when a line of the text's column holds it, else its
 * prefix and `…` (as wholeId in a table), which get, inspect and replay resolve. labelled then
 * moves it whole onto a line of its own when the words before it leave no room, where an id wider
 * than the column would be cut across two lines, neither of which a person can copy.
 */
export function labelledId(label: string, id: string, widthMax = Number.POSITIVE_INFINITY): string {
  return wholeId(id).text(labelledWidth(label, widthMax));
}

/** A line naming an id under its label (labelled, labelledId): the id whole where the line holds it, else its prefix. */
export function idLine(label: string, id: string, widthMax = Number.POSITIVE_INFINITY): string {
  return labelled(label, labelledId(label, id, widthMax), widthMax);
}

/**
 * A line of prose wrapped at spaces to the width (a word wider than the width is cut across
 * lines), its controls shown escaped (terminalText): the prose often carries data.
 */
export function fitText(text: string, widthMax = Number.POSITIVE_INFINITY): string {
  return terminalText(text)
    .split('\n')
    .map((line) => wrap(line, widthMax).join('\n'))
    .join('\n')
    .concat('\n');
}
