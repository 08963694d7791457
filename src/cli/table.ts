/** Plain-text tables for what a person reads (inspect, demo, bench); `--json` is for machines. */
import type { CliIo } from './io.js';

export type Cell = string | number | boolean | null | undefined;

const gap = '  ';

/**
 * A table no wider than `widthMax`: when the natural width is more, the widest columns are
 * narrowed (to their longest header word first, to columnWidthMin if need be) and their cells and
 * headers wrap onto continuation lines, so nothing is cut off and no line outgrows the terminal.
 * Only more columns than the width can hold at columnWidthMin leave the table wider.
 */
export function renderTable(headers: string[], rows: Cell[][], widthMax = Number.POSITIVE_INFINITY): string {
  const text = rows.map((row) => headers.map((_, i) => cellText(row[i])));
  const widths = fitWidths(headers, text, widthMax);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join(gap)
      .trimEnd();
  const lines: string[] = [];
  const push = (row: string[]) => {
    const wrapped = row.map((cell, i) => wrap(cell, widths[i] ?? cell.length));
    const height = Math.max(1, ...wrapped.map((w) => w.length));
    for (let k = 0; k < height; k++) lines.push(line(wrapped.map((w) => w[k] ?? '')));
  };
  push(headers);
  lines.push(line(widths.map((w) => '-'.repeat(w))));
  for (const row of text) push(row);
  return lines.join('\n') + '\n';
}

function cellText(cell: Cell): string {
  // A cell is one line: newlines in data would break the rows apart.
  return cell === null || cell === undefined ? '-' : String(cell).replace(/[\r\n\t]+/g, ' ');
}

/** The narrowest a column gets when the table cannot fit otherwise: its header then wraps mid-word. */
export const columnWidthMin = 4;

/**
 * Column widths: natural, then the widest narrowed one at a time until the table fits — first
 * down to each column's longest header word (never below 8), and only if that is still too wide,
 * down to columnWidthMin, so a table fits any width from tableWidthMin (io.ts) up.
 */
function fitWidths(headers: string[], text: string[][], widthMax: number): number[] {
  const natural = headers.map((h, i) => Math.max(h.length, ...text.map((r) => (r[i] ?? '').length)));
  const columns = headers.map((h, i) => {
    const width = natural[i] ?? h.length;
    return { width, floor: Math.min(width, Math.max(8, ...h.split(' ').map((word) => word.length))) };
  });
  narrow(columns, widthMax);
  for (const c of columns) c.floor = Math.min(c.width, columnWidthMin);
  narrow(columns, widthMax);
  return columns.map((c) => c.width);
}

/** Narrows the widest column above its floor, one at a time, until the columns fit or none can narrow. */
function narrow(columns: { width: number; floor: number }[], widthMax: number): void {
  const total = () => columns.reduce((sum, c) => sum + c.width, 0) + gap.length * (columns.length - 1);
  while (total() > widthMax) {
    const narrowable = columns.filter((c) => c.width > c.floor);
    if (narrowable.length === 0) return;
    const widest = narrowable.reduce((a, b) => (b.width > a.width ? b : a));
    const others = total() - widest.width;
    widest.width = Math.max(widest.floor, Math.min(widest.width - 1, widthMax - others));
  }
}

/** Breaks a cell into lines of at most `width` characters, at spaces where it can. */
function wrap(cell: string, width: number): string[] {
  if (cell.length <= width) return [cell];
  const lines: string[] = [];
  let rest = cell;
  while (rest.length > width) {
    const space = rest.lastIndexOf(' ', width);
    const cut = space > width / 2 ? space : width;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0) lines.push(rest);
  return lines;
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
 * text's column (the label's length), so a labelled line of any length reads within the width.
 */
export function labelled(label: string, text: string, widthMax = Number.POSITIVE_INFINITY): string {
  const indent = ' '.repeat(label.length);
  const lines = wrap(text, Math.max(20, widthMax - label.length));
  return lines.map((line, i) => (i === 0 ? label : indent) + line).join('\n');
}

/** A line of prose wrapped at spaces to the width (a word longer than the width is cut across lines). */
export function fitText(text: string, widthMax = Number.POSITIVE_INFINITY): string {
  return text
    .split('\n')
    .map((line) => wrap(line, widthMax).join('\n'))
    .join('\n')
    .concat('\n');
}
