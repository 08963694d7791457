/**
 * Runtime expressions (DSL "Runtime Expressions"): in a value (set, with, body…) only a string
 * wholly enclosed in `${ }` is an expression; a field that *is* an expression (input.from,
 * output.as, export.as, if, for.in, while, switch `when`, catch `when`) may omit the `${ }`.
 *
 * jq programs whose result is not a function of their input are refused before anything runs:
 * their results could not be replayed from the log as the same values.
 */
import { AssertionFailure } from '../../contract/errors.js';
import { setMember, type JsonValue } from '../../contract/json.js';

const enclosed = /^\s*\$\{([\s\S]*)\}\s*$/;

export function isExpression(value: unknown): value is string {
  return typeof value === 'string' && enclosed.test(value);
}

/** The jq program of an expression field, with or without its `${ }`. */
export function programOf(expression: string): string {
  return enclosed.exec(expression)?.[1] ?? expression;
}

/**
 * Calls `visit` with every expression inside a value and the path to it; the path array is the
 * walk's own (push and pop), so a caller builds a pointer from it only when it needs one.
 */
export function forEachExpression(value: unknown, visit: (program: string, path: readonly string[]) => void, path: string[] = []): void {
  if (typeof value === 'string') {
    if (isExpression(value)) visit(programOf(value), path);
  } else if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      path.push(String(index));
      forEachExpression(value[index], visit, path);
      path.pop();
    }
  } else if (typeof value === 'object' && value !== null) {
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      path.push(key);
      forEachExpression((value as Record<string, unknown>)[key], visit, path);
      path.pop();
    }
  }
}

/** Every string a value holds (its members' and items', not its keys), in document order. */
export function* stringsOf(value: JsonValue): Generator<string> {
  if (typeof value === 'string') yield value;
  else if (Array.isArray(value)) for (const item of value) yield* stringsOf(item);
  else if (typeof value === 'object' && value !== null) for (const key in value) if (Object.hasOwn(value, key)) yield* stringsOf(value[key] as JsonValue);
}

/** The JSON Pointer (RFC 6901) of a path. */
export const pointerOf = (path: readonly string[]): string => path.map((token) => `/${escapePointer(token)}`).join('');

export function escapePointer(token: string): string {
  return token.includes('~') || token.includes('/') ? token.replace(/~/g, '~0').replace(/\//g, '~1') : token;
}

/**
 * A value with every enclosed expression replaced by its result (`evaluate` runs one program, in
 * document order); a part without any is kept as it is (not copied).
 */
export async function evaluateValue(value: JsonValue, evaluate: (program: string) => Promise<JsonValue>): Promise<JsonValue> {
  const filled = withResults(value, await expressionResults(value, evaluate));
  if (filled === undefined) throw new AssertionFailure("a value filled with its own expressions' results has one result per expression");
  return filled;
}

/** Whether a value holds any expression (a constant needs no step in the log); its plan is kept (planOf). */
export const hasExpression = (value: JsonValue): boolean => planOf(value) !== null;

/**
 * Where a value's expressions are: null for a part without any (kept as it is), a program for an
 * expression, and for an object or array that holds some, each member's plan in evaluateValue's
 * order. Made once per object and kept (a WeakMap): a call's `with` is the document's, which
 * nothing changes once it is checked (a copy made per call — secrets redacted, a named policy in
 * place — is a new object, planned anew).
 */
type Plan = null | string | { items: Plan[] } | { members: [string, Plan][] };

const plans = new WeakMap<object, Plan>();

function planOf(value: JsonValue): Plan {
  if (typeof value === 'string') return isExpression(value) ? programOf(value) : null;
  if (typeof value !== 'object' || value === null) return null;
  const known = plans.get(value);
  if (known !== undefined) return known;
  let any = false;
  let plan: Plan;
  if (Array.isArray(value)) {
    const items: Plan[] = [];
    for (const item of value) {
      const inner = planOf(item);
      if (inner !== null) any = true;
      items.push(inner);
    }
    plan = any ? { items } : null;
  } else {
    const members: [string, Plan][] = [];
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      const inner = planOf(value[key] as JsonValue);
      if (inner !== null) any = true;
      members.push([key, inner]);
    }
    plan = any ? { members } : null;
  }
  plans.set(value, plan);
  return plan;
}

/**
 * The results of a value's enclosed expressions, in the order evaluateValue evaluates them: what a
 * call's `with` records (log format 2) — the rest of the value is the document's, which the start
 * holds. `withResults` puts them back.
 */
export async function expressionResults(value: JsonValue, evaluate: (program: string) => Promise<JsonValue>): Promise<JsonValue[]> {
  const results: JsonValue[] = [];
  await collectResults(planOf(value), evaluate, results);
  return results;
}

async function collectResults(plan: Plan, evaluate: (program: string) => Promise<JsonValue>, results: JsonValue[]): Promise<void> {
  if (plan === null) return;
  if (typeof plan === 'string') results.push(await evaluate(plan));
  else if ('items' in plan) {
    for (const inner of plan.items) if (inner !== null) await collectResults(inner, evaluate, results);
  } else for (const [, inner] of plan.members) if (inner !== null) await collectResults(inner, evaluate, results);
}

/**
 * What evaluateValue answers for `value` when its expressions evaluate to `results` (in its order),
 * built alike — each part without an expression kept as it is; undefined when `results` are not
 * exactly one per expression.
 */
export function withResults(value: JsonValue, results: readonly JsonValue[]): JsonValue | undefined {
  const next = { at: 0 };
  const filled = fillResults(planOf(value), value, results, next);
  return filled === undefined || next.at !== results.length ? undefined : filled;
}

function fillResults(plan: Plan, value: JsonValue, results: readonly JsonValue[], next: { at: number }): JsonValue | undefined {
  if (plan === null) return value;
  if (typeof plan === 'string') return next.at < results.length ? results[next.at++] : undefined;
  if ('items' in plan) {
    const items = value as JsonValue[];
    const out: JsonValue[] = [];
    for (let index = 0; index < plan.items.length; index++) {
      const filled = fillResults(plan.items[index] as Plan, items[index] as JsonValue, results, next);
      if (filled === undefined) return undefined;
      out.push(filled);
    }
    return out;
  }
  const members = value as Record<string, JsonValue>;
  const out: Record<string, JsonValue> = {};
  for (const [key, inner] of plan.members) {
    const filled = fillResults(inner, members[key] as JsonValue, results, next);
    if (filled === undefined) return undefined;
    // A member named __proto__ (the strict parser and the yaml package make it an own member) stays one.
    setMember(out, key, filled);
  }
  return out;
}
