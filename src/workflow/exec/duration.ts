/** DSL durations: `{days, hours, minutes, seconds, milliseconds}` or an ISO 8601 duration (days to seconds). */
import type { JsonValue } from '../../contract/json.js';

const dayMs = 86_400_000;
const hourMs = 3_600_000;
const minuteMs = 60_000;
const units: Readonly<Record<string, number>> = { days: dayMs, hours: hourMs, minutes: minuteMs, seconds: 1000, milliseconds: 1 };
const iso = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Milliseconds, or undefined when the value is not a duration (or one longer than a safe integer of milliseconds). */
export function durationMs(value: JsonValue | undefined): number | undefined {
  if (typeof value === 'string') {
    const match = iso.exec(value);
    if (!match || value === 'P' || value.endsWith('T')) return undefined;
    const [, d, h, m, s] = match;
    const total = Math.round(Number(d ?? 0) * dayMs + Number(h ?? 0) * hourMs + Number(m ?? 0) * minuteMs + Number(s ?? 0) * 1000);
    return Number.isSafeInteger(total) ? total : undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  let total = 0;
  for (const [key, amount] of Object.entries(value)) {
    const unit = units[key.toLowerCase()];
    if (unit === undefined || typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) return undefined;
    total += amount * unit;
  }
  return Number.isSafeInteger(Math.round(total)) ? Math.round(total) : undefined;
}
