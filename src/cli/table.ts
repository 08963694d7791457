/** Plain-text tables for what a person reads (inspect, demo, bench); `--json` is for machines. */
export type Cell = string | number | boolean | null | undefined;

export function renderTable(headers: string[], rows: Cell[][]): string {
  const text = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '-' : String(cell))));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...text.map(line)].join('\n') + '\n';
}

export function heading(title: string): string {
  return `\n${title}\n`;
}
