/**
 * Task execution keys over generated nestings (src/workflow/exec/keys.ts): documents of `do`,
 * `try` (with retried attempts and a `catch.do`), `for`, `fork` and leaf tasks, every task of a
 * list visited once or more (flow directives back to it), names that hold the pointer's escapes
 * and the markers' brackets. Every execution is enumerated as the executor runs it — its key from
 * `taskKey`, its body's frame from the same frame functions tasks.ts uses — with the try's step
 * and timer keys of each attempt. Under scheme 3 no two executions (nor steps) share a key; under
 * scheme 2 they do, and only where a try runs in another try's list with no loop or fork between
 * them (test/workflow/task-keys.test.ts runs that case through the executor).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attemptFrame, attemptStepKey, branchFrame, iterationFrame, taskKey, type KeyFrame, type KeyScheme } from '../../src/workflow/exec/keys.js';

type Node =
  | { kind: 'leaf' }
  | { kind: 'do'; list: Entry[] }
  | { kind: 'try'; attempts: number; list: Entry[]; handler: Entry[] }
  | { kind: 'for'; iterations: number; list: Entry[] }
  | { kind: 'fork'; branches: Entry[] };

/** A task in a list: its name, how many times one run of the list visits it, what it is. */
interface Entry {
  name: string;
  visits: number;
  node: Node;
}

const names = fc.constantFrom('a', 'b', 'a~b', 'a/b', 'x(2)', 'y[1]', 'z{0}', 'w~1', '2');

const { list: documents } = fc.letrec<{ node: Node; list: Entry[]; entry: Entry }>((tie) => ({
  node: fc.oneof(
    { maxDepth: 4, depthIdentifier: 'nesting' },
    fc.constant({ kind: 'leaf' as const }),
    fc.record({ kind: fc.constant('do' as const), list: tie('list') }),
    fc.record({
      kind: fc.constant('try' as const),
      attempts: fc.integer({ min: 1, max: 3 }),
      list: tie('list'),
      handler: fc.oneof(fc.constant<Entry[]>([]), tie('list')),
    }),
    fc.record({ kind: fc.constant('for' as const), iterations: fc.integer({ min: 0, max: 2 }), list: tie('list') }),
    fc.record({ kind: fc.constant('fork' as const), branches: tie('list') }),
  ),
  list: fc.array(tie('entry'), { minLength: 1, maxLength: 2 }),
  entry: fc.record({ name: names, visits: fc.integer({ min: 1, max: 2 }), node: tie('node') }),
}));

const escape = (name: string): string => name.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Every key recorded for the document's executions, each with the execution (or step) it names:
 * the path of choices that led to it (a task's visit, a loop's iteration, a try's attempt).
 */
function keysOf(scheme: KeyScheme, list: Entry[]): [key: string, execution: string][] {
  const keys: [string, string][] = [];
  const runList = (entries: Entry[], base: string, frame: KeyFrame, path: string) =>
    entries.forEach((entry, index) => {
      for (let visit = 0; visit < entry.visits; visit++) runTask(entry, `${base}/${index}/${escape(entry.name)}`, frame, visit, path);
    });
  const runTask = (entry: Entry, pointer: string, outer: KeyFrame, visit: number, path: string) => {
    const { at, frame } = taskKey(scheme, pointer, outer, visit);
    const self = `${path} ${pointer}#${visit}`;
    keys.push([at, self]);
    const node = entry.node;
    if (node.kind === 'do') runList(node.list, `${pointer}/do`, frame, self);
    if (node.kind === 'for')
      for (let index = 0; index < node.iterations; index++) runList(node.list, `${pointer}/do`, iterationFrame(frame, index), `${self}[${index}]`);
    if (node.kind === 'fork')
      node.branches.forEach((branch, index) => runTask(branch, `${pointer}/fork/branches/${index}/${escape(branch.name)}`, branchFrame(frame, index), 0, self));
    if (node.kind === 'try') {
      let last = frame;
      for (let attempt = 1; attempt <= node.attempts; attempt++) {
        last = attemptFrame(scheme, frame, attempt);
        runList(node.list, `${pointer}/try`, last, `${self}(${attempt})`);
        keys.push([`${attemptStepKey(scheme, at, last, attempt)}>catch.when`, `${self}(${attempt}) catch.when`]);
        if (attempt < node.attempts) keys.push([`${at}(${attempt})>retry`, `${self}(${attempt}) retry`]);
      }
      runList(node.handler, `${pointer}/catch/do`, last, `${self} catch`);
    }
  };
  runList(list, '/do', { suffix: '' }, '');
  return keys;
}

/** The first key two distinct executions share, if any. */
function shared(scheme: KeyScheme, list: Entry[]): string | undefined {
  const seen = new Map<string, string>();
  for (const [key, execution] of keysOf(scheme, list)) {
    const earlier = seen.get(key);
    if (earlier !== undefined && earlier !== execution) return `${key}: ${earlier} and ${execution}`;
    seen.set(key, execution);
  }
  return undefined;
}

/** Whether a try runs in another try's list (or its catch.do) with no loop or fork between them. */
function tryInTry(list: Entry[], inTry = false): boolean {
  return list.some(({ node }) => {
    if (node.kind === 'leaf') return false;
    if (node.kind === 'try') return inTry || tryInTry(node.list, true) || tryInTry(node.handler, true);
    if (node.kind === 'do') return tryInTry(node.list, inTry);
    return tryInTry(node.kind === 'for' ? node.list : node.branches, false);
  });
}

test('scheme 3: no two executions of generated nestings of do, try, for, fork and revisits share a key', () => {
  fc.assert(
    fc.property(documents, (list) => shared(3, list) === undefined),
    { numRuns: 400 },
  );
});

test('scheme 2: executions share a key, and only where a try runs directly in another try', () => {
  const found = fc.check(
    fc.property(documents, (list) => shared(2, list) === undefined),
    { numRuns: 400, seed: 20261205 },
  );
  assert.ok(found.failed, 'a generated nesting where two executions share a key under scheme 2');
  const [counterexample] = found.counterexample ?? [];
  assert.ok(counterexample && tryInTry(counterexample), JSON.stringify(counterexample));
  fc.assert(
    fc.property(documents, (list) => tryInTry(list) || shared(2, list) === undefined),
    { numRuns: 400 },
  );
});

test('the nested try of the brief, by hand: scheme 2 gives two executions one key, scheme 3 does not', () => {
  const leaf: Node = { kind: 'leaf' };
  const nested: Entry[] = [
    {
      name: 'outer',
      visits: 1,
      node: {
        kind: 'try',
        attempts: 2,
        handler: [],
        list: [{ name: 'inner', visits: 1, node: { kind: 'try', attempts: 2, handler: [], list: [{ name: 'ping', visits: 1, node: leaf }] } }],
      },
    },
  ];
  assert.match(shared(2, nested) ?? '', /^\/do\/0\/outer\/try\/0\/inner\/try\/0\/ping\(2\): /);
  assert.equal(shared(3, nested), undefined);
  const pings = keysOf(3, nested)
    .map(([key]) => key)
    .filter((key) => key.endsWith('/ping'));
  assert.deepEqual(pings, [
    '/do/0/outer/try/0/inner/try/0/ping',
    '/do/0/outer/try/0/inner(2)/try/0/ping',
    '/do/0/outer(2)/try/0/inner/try/0/ping',
    '/do/0/outer(2)/try/0/inner(2)/try/0/ping',
  ]);
});
