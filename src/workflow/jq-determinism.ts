/**
 * Runtime expressions (jq) that would make a workflow's behaviour depend on more than its input
 * and its recorded history are refused before anything runs: the executor records every
 * evaluation's result so that replay never evaluates jq, and that only holds when evaluating the
 * same expression on the same data gives the same answer.
 *
 * The scan is a small hand-written lexer, not a parser. The one maintained jq for Node (jq-wasm)
 * evaluates programs but exposes no parser or syntax tree, and the jq grammars published on npm
 * are unmaintained; a refused builtin is always an identifier (or the variable `$ENV`), so
 * separating identifiers from string literals, comments, field names (`.now`), object keys
 * (`{now: 1}`, the shorthand `{input}`) and variables is all the check needs. It errs towards refusing: a user function
 * that shadows a refused name is refused too.
 */
import { invalidInput, unsupported } from '../contract/errors.js';
import { limits } from '../contract/limits.js';

/** Builtins whose result depends on the clock, the environment, the process's inputs or its streams. */
export const nondeterministicJq = new Set([
  'now',
  'env',
  'input',
  'inputs',
  'debug',
  'stderr',
  'halt',
  'halt_error',
  'input_filename',
  'input_line_number',
  // The local time zone is the process's environment.
  'localtime',
  'strflocaltime',
  // Module loading reads the file system.
  'import',
  'include',
  'modulemeta',
  'get_search_list',
  'get_prog_origin',
  'get_jq_origin',
]);

/** Variables that read the environment. */
const nondeterministicVariables = new Set(['$ENV', '$__prog_args']);

const identStart = /[A-Za-z_]/;
const identPart = /[A-Za-z0-9_]/;

interface Scan {
  /** The refused names found, in order. */
  refused: string[];
  /** Index just past the closing `}` of a `${ … }`, or the end of the text. */
  end: number;
}

/** The index after the identifier (with `::` module paths) starting at `i`. */
function identifierEnd(text: string, i: number): number {
  let j = i + 1;
  for (;;) {
    while (j < text.length && identPart.test(text.charAt(j))) j++;
    if (text.startsWith('::', j) && identStart.test(text.charAt(j + 2))) j += 3;
    else return j;
  }
}

/** Whether the identifier ending before `j` is an object key (`{now: 1}`): a single `:` follows. */
function isObjectKey(text: string, j: number): boolean {
  let k = j;
  while (k < text.length && /\s/.test(text.charAt(k))) k++;
  return text.charAt(k) === ':' && text.charAt(k + 1) !== ':';
}

/**
 * Scans jq source from `start`. With `closing`, stops at the `}` that closes the enclosing
 * `${`; otherwise scans to the end. Strings are skipped except for their `\( … )` interpolations.
 */
function scanJq(text: string, start: number, closing: boolean): Scan {
  const refused: string[] = [];
  // One entry per open bracket in code; 'string' while inside a literal (interpolations push code).
  const stack: ('(' | '[' | '{' | 'string' | 'interp')[] = [];
  let i = start;
  let previous = '';
  while (i < text.length) {
    const c = text.charAt(i);
    const top = stack[stack.length - 1];
    if (top === 'string') {
      if (c === '\\' && text.charAt(i + 1) === '(') {
        stack.push('interp');
        i += 2;
      } else if (c === '\\') i += 2;
      else {
        if (c === '"') stack.pop();
        i++;
      }
      continue;
    }
    if (c === '#') {
      while (i < text.length && text.charAt(i) !== '\n') i++;
      continue;
    }
    if (c === '"') stack.push('string');
    else if (c === '(' || c === '[' || c === '{') stack.push(c);
    else if (c === ')' && top === 'interp') stack.pop();
    else if (c === ')' || c === ']') stack.pop();
    else if (c === '}') {
      if (top === '{') stack.pop();
      else if (closing && stack.length === 0) return { refused, end: i + 1 };
    } else if (c === '$' && identStart.test(text.charAt(i + 1))) {
      const j = identifierEnd(text, i + 1);
      const name = text.slice(i, j);
      if (nondeterministicVariables.has(name)) refused.push(name);
      previous = name;
      i = j;
      continue;
    } else if (identStart.test(c)) {
      const j = identifierEnd(text, i);
      const name = text.slice(i, j);
      const isField = previous === '.';
      // In an object construction, a name right after `{` or `,` is a key (`{input: 1}`, or the
      // shorthand `{input}` for `{input: .input}`), never a call; so is one a `:` follows there.
      // Elsewhere a `:` after a name is a slice's (`.[now:]`), and the name is a call.
      const isKey = top === '{' && (previous === '{' || previous === ',' || isObjectKey(text, j));
      if (!isField && !isKey && nondeterministicJq.has(name)) refused.push(name);
      previous = name;
      i = j;
      continue;
    }
    if (!/\s/.test(c)) previous = c;
    i++;
  }
  return { refused, end: text.length };
}

/** The refused names in a jq program (no `${ }` delimiters), in order of appearance. */
export function refusedInJq(program: string): string[] {
  return scanJq(program, 0, false).refused;
}

/** The jq programs of every `${ … }` in a string, each with the refused names it uses. */
export function embeddedExpressions(text: string): { source: string; refused: string[] }[] {
  const found: { source: string; refused: string[] }[] = [];
  let from = 0;
  for (let open = text.indexOf('${', from); open !== -1; open = text.indexOf('${', from)) {
    const scan = scanJq(text, open + 2, true);
    found.push({ source: text.slice(open + 2, Math.max(open + 2, scan.end - 1)), refused: scan.refused });
    from = scan.end;
  }
  return found;
}

/** Whether a whole string is one runtime expression (`${ … }`), as the DSL's strict mode requires. */
export function isRuntimeExpression(text: string): boolean {
  return /^\s*\$\{[\s\S]+\}\s*$/.test(text);
}

/**
 * Throws naming `where` when a jq program is too long (invalid-input) or uses a refused builtin
 * (unsupported: valid jq that convoke does not run). The one check of both the bundle's documents
 * and the executor's. `where` may be a function, called only to name a refused program (a walk
 * over every expression of a document builds no pointer for the ones that pass).
 */
export function checkDeterministicJq(program: string, where: string | (() => string)): void {
  const named = () => (typeof where === 'string' ? where : where());
  if (program.length > limits.expressionCharsMax) {
    throw invalidInput(`${named()}: an expression of ${program.length} characters exceeds ${limits.expressionCharsMax}`);
  }
  const refused = refusedInJq(program);
  if (refused.length > 0) throw unsupported(nondeterministicMessage(named(), refused));
}

/** Throws naming `where` when any `${ … }` in the string is too long (invalid-input) or uses a refused builtin (unsupported). */
export function checkDeterministicText(text: string, where: string): void {
  for (const expression of embeddedExpressions(text)) {
    if (expression.source.length > limits.expressionCharsMax) {
      throw invalidInput(`${where}: an expression of ${expression.source.length} characters exceeds ${limits.expressionCharsMax}`);
    }
    if (expression.refused.length > 0) throw unsupported(nondeterministicMessage(where, expression.refused));
  }
}

function nondeterministicMessage(where: string, refused: string[]): string {
  const names = [...new Set(refused)].map((n) => `"${n}"`).join(', ');
  return `${where}: the expression uses ${names}, whose result is not a function of the workflow's data (the clock, the environment or the process's inputs); convoke records each evaluation so replay never runs jq, and refuses what would not evaluate the same twice`;
}
