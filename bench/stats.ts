/** Small statistics and output helpers shared by the benchmarks. */
import { renderTable, type Cell } from '../src/cli/table.js';

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  const index = Math.min(sortedMs.length - 1, Math.ceil((p / 100) * sortedMs.length) - 1);
  return sortedMs[Math.max(0, index)]!;
}

export interface Measurement {
  name: string;
  operations: number;
  seconds: number;
  latenciesMs: number[];
}

export function summarize(m: Measurement) {
  const sorted = [...m.latenciesMs].sort((a, b) => a - b);
  return { name: m.name, opsPerSecond: m.operations / m.seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), operations: m.operations };
}

export function printRows(json: boolean, title: string, headers: string[], rows: Cell[][], data: unknown): void {
  if (json) process.stdout.write(JSON.stringify(data, null, 2) + '\n');
  else process.stdout.write(`\n${title}\n${renderTable(headers, rows)}`);
}

/** `--rates 50,150,330`: comma-separated positive operations per second. */
export function parseRates(text: string | undefined): number[] {
  const rates = (text ?? '').split(',').map(Number);
  if (!rates.every((r) => Number.isFinite(r) && r > 0))
    throw new Error(`--rates must be comma-separated positive operations per second (for example 50,150,330), got "${text ?? ''}"`);
  return rates;
}

export const fixed = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** Runs `one` with `concurrency` workers until `seconds` pass; returns per-call latencies. */
export async function closedLoop(
  seconds: number,
  concurrency: number,
  one: (i: number) => Promise<void>,
  onProgress?: (done: number) => void,
): Promise<Measurement & { name: string }> {
  const latenciesMs: number[] = [];
  const start = performance.now();
  const endAt = start + seconds * 1000;
  let next = 0;
  const worker = async () => {
    while (performance.now() < endAt) {
      const i = next++;
      const t0 = performance.now();
      await one(i);
      latenciesMs.push(performance.now() - t0);
      if (onProgress && latenciesMs.length % 5000 === 0) onProgress(latenciesMs.length);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { name: '', operations: latenciesMs.length, seconds: (performance.now() - start) / 1000, latenciesMs };
}
