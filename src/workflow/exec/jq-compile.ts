/**
 * Every jq expression of a workflow document compiled once, before anything runs: one jq does not
 * compile (a syntax error, a function or a variable that is not defined) is refused with
 * `invalid-input` naming its JSON Pointer and jq's message, where an instance would otherwise
 * fault only on reaching it, after the tasks before it had acted.
 *
 * jq-wasm exposes no parser, so each expression is compiled by the evaluator (jq.ts: a worker
 * thread, under its deadline and memory bounds) inside a branch that never runs,
 * `if false then (EXPR) else empty end`, with every variable the executor may bind bound to null:
 * jq compiles the whole program and evaluates nothing of EXPR, so only a compile error is
 * reported — a runtime error (`error("x")`, `.a` of a number) is not one, and is left to the run.
 *
 * An expression could close the parenthesis it is put in and write code of its own after it
 * (`1) else (…) end | if false then (2`): the program would then compile, and run, what was not
 * the expression. So each is first scanned (balanced, below); one whose brackets close one that
 * is not open is not valid jq, and is compiled as it is, alone, for jq's own message. Its
 * evaluation, were the scan and jq ever to disagree, is bounded as any evaluation is, and it has
 * passed the determinism check (jq-determinism.ts) first.
 *
 * The check is asynchronous (the evaluator is): checkDocument (document.ts), synchronous, does not
 * make it. `convoke workflow run` makes it for its documents, and a bundle's workflows get it where
 * a command or `serve` reads the bundle (src/cli/runnable.ts). Programs that compiled are kept
 * (keyed by the variables bound), so a document read again is not compiled again.
 */
import { invalidInput } from '../../contract/errors.js';
import { isObject, type JsonObject, type JsonValue } from '../../contract/json.js';
import { escapePointer, forEachExpression, pointerOf, programOf } from './expressions.js';
import { ExpressionFailure, type ExpressionEvaluator } from './jq.js';

/**
 * The variables the executor binds for expressions wherever they are (interpreter.ts `vars`:
 * $context, $workflow, $runtime, the task's $task, $input and $output, calls' $secrets; and
 * listen-match.ts: $event). The names a document chooses — `for.each`/`for.at`, a listen's
 * `foreach.item`/`foreach.at`, `catch.as` — are added from the document (documentExpressions).
 */
const executorVariables = ['context', 'workflow', 'runtime', 'task', 'input', 'output', 'secrets', 'event'];

/** A document's expressions, by JSON Pointer (in the order found), and every variable name the executor may bind for them. */
export interface DocumentExpressions {
  expressions: Map<string, string>;
  variables: Set<string>;
}

/**
 * Every expression of a document: each `${ … }` string the executor may evaluate (not the
 * header's metadata nor a data schema's text, which it never evaluates), and each field the DSL
 * reads as bare jq (document.ts checks the same places for determinism).
 */
export function documentExpressions(document: JsonObject): DocumentExpressions {
  const found: DocumentExpressions = { expressions: new Map(), variables: new Set(executorVariables) };
  forEachExpression(document, (program, path) => {
    if (path[0] !== 'document' && !path.some((key, i) => key === 'schema' && path[i + 1] === 'document')) found.expressions.set(pointerOf(path), program);
  });
  for (const [key, member] of transformFields) bare(found, isObject(document[key]) ? document[key][member] : undefined, `/${key}/${member}`);
  const retries = isObject(document.use) && isObject(document.use.retries) ? document.use.retries : {};
  for (const [name, policy] of Object.entries(retries)) retryExpressions(found, policy, `/use/retries/${escapePointer(name)}`);
  const lists: [JsonValue | undefined, string][] = [[document.do, '/do']];
  for (let next = lists.pop(); next !== undefined; next = lists.pop()) {
    const [items, base] = next;
    if (!Array.isArray(items)) continue;
    items.forEach((item, index) => {
      for (const [name, task] of Object.entries(isObject(item) ? item : {}))
        if (isObject(task)) lists.push(...taskExpressions(found, task, `${base}/${index}/${escapePointer(name)}`));
    });
  }
  return found;
}

const transformFields = [
  ['input', 'from'],
  ['output', 'as'],
  ['export', 'as'],
] as const;

/** A field read as jq with or without its `${ }`. */
function bare(found: DocumentExpressions, value: JsonValue | undefined, pointer: string): void {
  if (typeof value === 'string') found.expressions.set(pointer, programOf(value));
}

function variable(found: DocumentExpressions, name: JsonValue | undefined, otherwise: string): void {
  found.variables.add(typeof name === 'string' ? name : otherwise);
}

/** A task's bare expressions and the variables it binds; answers its task lists, each with its pointer. */
function taskExpressions(found: DocumentExpressions, task: JsonObject, pointer: string): [JsonValue | undefined, string][] {
  const lists: [JsonValue | undefined, string][] = [];
  bare(found, task.if, `${pointer}/if`);
  for (const [key, member] of transformFields) bare(found, isObject(task[key]) ? task[key][member] : undefined, `${pointer}/${key}/${member}`);
  if (isObject(task.for)) {
    bare(found, task.for.in, `${pointer}/for/in`);
    bare(found, task.while, `${pointer}/while`);
    variable(found, task.for.each, 'item');
    variable(found, task.for.at, 'index');
  }
  if (Array.isArray(task.switch))
    task.switch.forEach((item, index) => {
      for (const [name, branch] of Object.entries(isObject(item) ? item : {}))
        if (isObject(branch)) bare(found, branch.when, `${pointer}/switch/${index}/${escapePointer(name)}/when`);
    });
  if (isObject(task.catch)) {
    const handler = task.catch;
    bare(found, handler.when, `${pointer}/catch/when`);
    bare(found, handler.exceptWhen, `${pointer}/catch/exceptWhen`);
    variable(found, handler.as, 'error');
    retryExpressions(found, handler.retry, `${pointer}/catch/retry`);
    lists.push([handler.do, `${pointer}/catch/do`]);
  }
  if (isObject(task.listen) && isObject(task.listen.to)) listenExpressions(found, task.listen.to, `${pointer}/listen/to`);
  if (isObject(task.foreach)) {
    const foreach = task.foreach;
    bare(found, isObject(foreach.output) ? foreach.output.as : undefined, `${pointer}/foreach/output/as`);
    variable(found, foreach.item, 'item');
    variable(found, foreach.at, 'index');
    lists.push([foreach.do, `${pointer}/foreach/do`]);
  }
  lists.push([task.do, `${pointer}/do`], [task.try, `${pointer}/try`], [isObject(task.fork) ? task.fork.branches : undefined, `${pointer}/fork/branches`]);
  return lists;
}

/** An inline retry policy's `when` and `exceptWhen` (a named one is checked where use.retries declares it). */
function retryExpressions(found: DocumentExpressions, policy: JsonValue | undefined, pointer: string): void {
  if (!isObject(policy)) return;
  bare(found, policy.when, `${pointer}/when`);
  bare(found, policy.exceptWhen, `${pointer}/exceptWhen`);
}

/** A listen's `until` (an expression, or a strategy of its own) and each event filter's correlation `from`. */
function listenExpressions(found: DocumentExpressions, to: JsonObject, pointer: string): void {
  const strategies: [JsonObject, string][] = [[to, pointer]];
  if (typeof to.until === 'string') bare(found, to.until, `${pointer}/until`);
  else if (isObject(to.until)) strategies.push([to.until, `${pointer}/until`]);
  for (const [strategy, at] of strategies) {
    const filters: [JsonValue, string][] = isObject(strategy.one) ? [[strategy.one, `${at}/one`]] : [];
    for (const group of ['any', 'all']) {
      const list = strategy[group];
      if (Array.isArray(list)) list.forEach((filter, index) => filters.push([filter, `${at}/${group}/${index}`]));
    }
    for (const [filter, where] of filters) {
      const correlate = isObject(filter) && isObject(filter.correlate) ? filter.correlate : {};
      for (const [name, spec] of Object.entries(correlate))
        bare(found, isObject(spec) ? spec.from : undefined, `${where}/correlate/${escapePointer(name)}/from`);
    }
  }
}

/** What goes before an expression on its first line; jq's columns there are counted from its start. */
const openBranch = 'if false then (';
/**
 * After it: two line ends, so that a comment the expression ends with — even one continued onto
 * the next line by a final backslash, as jq 1.8 reads it — ends before the parenthesis.
 */
const closing = '\n\n)';
const closeBranch = `${closing} else empty end`;

/** Programs that compiled, keyed by the variables bound and the program; at most compiledKeptMax, the oldest dropped first. */
const compiled = new Set<string>();
const compiledKeptMax = 4096;

/** The most characters of expressions compiled together in one evaluation (each is at most limits.expressionCharsMax). */
const batchCharsMax = 256 * 1024;

/** The principal the evaluator queues these compilations under (jq.ts shares its workers by principal). */
const checkPrincipal = 'convoke:jq-compile';

/**
 * Throws invalid-input naming the first expression of the document (in the order they are found)
 * that jq does not compile: `<prefix><pointer>: not a valid jq expression: <jq's message>`.
 * The balanced ones are first compiled together, a batch in one evaluation, `(E1), (E2), …` in the
 * branch; each is compiled alone only when its batch does not compile, to name the one that does not.
 */
export async function checkExpressionsCompile(document: JsonObject, evaluator: ExpressionEvaluator, prefix = ''): Promise<void> {
  const { expressions, variables } = documentExpressions(document);
  const names = [...variables].sort();
  const vars: Record<string, JsonValue> = Object.fromEntries(names.map((name) => [name, null]));
  const keyOf = (program: string): string => `${names.join('\u0000')}\u0001${program}`;
  const pending = [...new Set(expressions.values())].filter((program) => !compiled.has(keyOf(program)));
  const done = new Set<string>();
  for (const batch of batches(pending.filter(balanced)))
    if (batch.length > 1 && (await compile(branch(batch.map((program) => `(${program}${closing}`).join(', ')), vars, evaluator)) === true)
      for (const program of batch) done.add(program);
  for (const [pointer, program] of expressions) {
    if (done.has(program) || compiled.has(keyOf(program))) continue;
    const wrapped = balanced(program);
    const outcome = await compile(wrapped ? branch(program) : program, vars, evaluator);
    if (typeof outcome === 'string')
      throw invalidInput(`${prefix}${pointer}: not a valid jq expression: ${inProgram(outcome, program, wrapped ? openBranch.length : 0)}`);
    // Failing otherwise — at a bound of the evaluator (its deadline, its memory) — is not a compile error, nor kept as compiled.
    if (outcome) done.add(program);
  }
  for (const program of done) {
    if (compiled.size >= compiledKeptMax) compiled.delete(compiled.values().next().value as string);
    compiled.add(keyOf(program));
  }
}

/** Programs in consecutive batches of at most batchCharsMax characters (one longer alone). */
function batches(programs: readonly string[]): string[][] {
  const out: string[][] = [];
  let chars = batchCharsMax;
  for (const program of programs) {
    if (chars + program.length > batchCharsMax) {
      out.push([]);
      chars = 0;
    }
    (out[out.length - 1] as string[]).push(program);
    chars += program.length;
  }
  return out;
}

const branch = (source: string): string => `${openBranch}${source}${closeBranch}`;

/** true when `source` compiled (and ran); jq's message when it does not compile; false when it failed otherwise (a bound of the evaluator, a runtime error). */
async function compile(source: string, vars: Readonly<Record<string, JsonValue>>, evaluator: ExpressionEvaluator): Promise<true | string | false> {
  try {
    await evaluator.evaluate(source, null, vars, checkPrincipal);
    return true;
  } catch (error) {
    if (!(error instanceof ExpressionFailure)) throw error;
    return /\bcompile errors?\s*$/.test(error.message) ? error.message : false;
  }
}

/**
 * The first line of jq's message (the rest quotes the program), its location moved into the
 * expression (`shift`: the columns before it on its first line), or said to be past its end —
 * where only the branch's closing is.
 */
function inProgram(message: string, program: string, shift: number): string {
  const line = (message.split('\n')[0] ?? message).replace(/^jq: error: /, '').replace(/:$/, '');
  const at = / at <top-level>, line (\d+), column (\d+)$/.exec(line);
  if (at === null) return line;
  const what = line.slice(0, at.index);
  const [row, column] = [Number(at[1]), Number(at[2])];
  if (row > program.split('\n').length)
    return /^syntax error\b/.test(what) ? 'syntax error: unexpected end of the expression' : `${what} at the end of the expression`;
  return `${what} at line ${row}, column ${row === 1 ? column - shift : column}`;
}

/**
 * Whether every bracket of a jq program closes one it opened, scanning as jq's lexer does: string
 * literals (whose `\( … )` interpolations are code again, and whose other backslashes escape one
 * character), comments to the end of the line (a backslash escapes the next character there too,
 * a line end included). Brackets left open are left to jq: they cannot reach past the branch.
 */
export function balanced(program: string): boolean {
  const open: string[] = [];
  const closes: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let i = 0;
  while (i < program.length) {
    const c = program.charAt(i);
    if (open[open.length - 1] === '"') {
      if (c === '\\' && program.charAt(i + 1) === '(') open.push('\\(');
      else if (c === '"') open.pop();
      i += c === '\\' ? 2 : 1;
      continue;
    }
    if (c === '#') {
      while (i < program.length && program.charAt(i) !== '\n') i += program.charAt(i) === '\\' ? 2 : 1;
      continue;
    }
    if (c === '"' || c === '(' || c === '[' || c === '{') open.push(c);
    const opener = closes[c];
    if (opener !== undefined) {
      const top = open.pop();
      if (top !== opener && !(c === ')' && top === '\\(')) return false;
    }
    i++;
  }
  return true;
}
