// A StrykerJS ignorer (npm run mutate, docs/mutation.md): leaves out mutants of description
// strings — the human-readable text of errors, assertions and rejection details. No spec rule
// depends on that text; the rejection *reason* codes, event types, subjects and every other string
// are still mutated. Each rule below names exactly which string positions it covers.
import { declareValuePlugin, PluginKind } from '@stryker-mutator/api/plugin';

/** Calls whose every string argument is a description (typed-error helpers). */
const describingCalls = new Set(['invalidInput', 'denied', 'unsupported', 'expired', 'conflict', 'unavailable']);
/** Calls and constructors whose arguments from this index on are descriptions. */
const describingFrom = new Map([
  ['assert', 1],
  ['reject', 1],
  ['AdapterError', 1],
  ['AssertionFailure', 0],
  ['LogBudgetExhausted', 0],
  // The label its parse errors name the input by.
  ['parseStrictBytes', 1],
  // The workflow fold's `once(map, key, what)`: what its "recorded twice" assertion names.
  ['once', 2],
]);
/** Object properties and variables that hold a description. */
const describingNames = new Set(['detail', 'description']);

function calleeName(callee) {
  if (callee.type === 'Identifier') return callee.name;
  if (callee.type === 'MemberExpression' && callee.property.type === 'Identifier') return callee.property.name;
  return undefined;
}

/**
 * The expression a description string is part of: a string that is one branch of a conditional
 * (`cond ? 'text' : \`text\``), an operand of `+`, `??` or `||`, or a value inside a template
 * literal is description text exactly when the whole expression is.
 */
function describedExpression(path) {
  let current = path;
  for (;;) {
    const parent = current.parentPath;
    if (!parent) return current;
    const node = current.node;
    const branch = parent.isConditionalExpression() && (parent.node.consequent === node || parent.node.alternate === node);
    const operand = (parent.isBinaryExpression() && parent.node.operator === '+') || parent.isLogicalExpression();
    if (!branch && !operand && !parent.isTemplateLiteral()) return current;
    current = parent;
  }
}

function isDescription(stringPath) {
  if (!stringPath.isStringLiteral() && !stringPath.isTemplateLiteral()) return false;
  const path = describedExpression(stringPath);
  const parent = path.parentPath;
  if (!parent) return false;
  if (parent.isCallExpression() || parent.isNewExpression()) {
    const name = calleeName(parent.node.callee);
    const index = parent.node.arguments.indexOf(path.node);
    if (name === undefined || index < 0) return false;
    if (describingCalls.has(name)) return true;
    const from = describingFrom.get(name);
    return from !== undefined && index >= from;
  }
  if (parent.isObjectProperty() && parent.node.value === path.node) {
    const key = parent.node.key;
    return key.type === 'Identifier' && describingNames.has(key.name);
  }
  if (parent.isVariableDeclarator() && parent.node.init === path.node) {
    return parent.node.id.type === 'Identifier' && describingNames.has(parent.node.id.name);
  }
  return false;
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'description-strings', {
    shouldIgnore(path) {
      return isDescription(path) ? 'a description string (error, assertion or rejection detail text), not a spec rule' : undefined;
    },
  }),
];
