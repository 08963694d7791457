/** DSL durations: `{days, hours, minutes, seconds, milliseconds}` (integers) or an ISO 8601 duration (days to seconds). */
import type { JsonValue } from '../../contract/json.js';

const dayMs = 86_400_000;
const hourMs = 3_600_000;
const minuteMs = 60_000;
/** The inline duration's keys (the DSL 1.0.3 schema's `duration`: these, lowercase, and no other). */
const units: ReadonlyMap<string, number> = new Map([
  ['days', dayMs],
  ['hours', hourMs],
  ['minutes', minuteMs],
  ['seconds', 1000],
  ['milliseconds', 1],
]);
const iso = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** What a duration is, as a refusal says it (the document's check, a wait's computed duration). */
export const durationForm =
  'ISO 8601 PnDTnHnMnS, or at least one of the lowercase keys days, hours, minutes, seconds, milliseconds, each a non-negative integer';

/**
 * Milliseconds, or undefined when the value is not a duration the DSL 1.0.3 schema allows (or one
 * longer than a safe integer of milliseconds): an ISO 8601 string of days to seconds, or an
 * object of at least one of the lowercase keys days, hours, minutes, seconds, milliseconds, each
 * a non-negative integer. The same whether the document holds it or an expression computed it.
 */
export function durationMs(value: JsonValue | undefined): number | undefined {
  if (typeof value === 'string') {
    const match = iso.exec(value);
    if (!match || value === 'P' || value.endsWith('T')) return undefined;
    const [, d, h, m, s] = match;
    const total = Math.round(Number(d ?? 0) * dayMs + Number(h ?? 0) * hourMs + Number(m ?? 0) * minuteMs + Number(s ?? 0) * 1000);
    return Number.isSafeInteger(total) ? total : undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const entries = Object.entries(value);
  if (entries.length === 0) return undefined;
  let total = 0;
  for (const [key, amount] of entries) {
    const unit = units.get(key);
    if (unit === undefined || typeof amount !== 'number' || !Number.isInteger(amount) || amount < 0) return undefined;
    total += amount * unit;
  }
  return Number.isSafeInteger(total) ? total : undefined;
}
