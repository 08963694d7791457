/**
 * Task execution keys (src/workflow/exec/keys.ts) function by function, on frames and keys built
 * here: the key of a task execution and the frame its body runs in under each scheme, the frames
 * of a loop's iteration, a fork's branch and a try's attempt, the key of an attempt's error
 * handling, the scheme a start records, a key split into its pointer and its markers, which
 * executions ran inside which, and the pointer a key names. task-keys.test runs the schemes
 * through the executor and task-keys-property.test checks over generated nestings that no two
 * executions share a key; this file pins the exact keys, and runs first in the mutation run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AssertionFailure } from '../../src/contract/errors.js';
import {
  attemptFrame,
  attemptStepKey,
  branchFrame,
  iterationFrame,
  keyScheme,
  pointerOfKey,
  ranInside,
  schemeOf,
  splitKey,
  taskKey,
  type KeyFrame,
} from '../../src/workflow/exec/keys.js';

/** A frame as the interpreter's are: the key's parts and whatever else the frame carries (kept by every frame function). */
interface Frame extends KeyFrame {
  readonly signal: string;
}
const top: Frame = { suffix: '', signal: 's' };

test('the scheme of a start: 3 and 2 as recorded, anything else (absent, a log before schemes) 1; new instances 3', () => {
  assert.equal(keyScheme, 3);
  assert.equal(schemeOf({ keys: 3 }), 3);
  assert.equal(schemeOf({ keys: 2 }), 2);
  assert.equal(schemeOf({}), 1);
  assert.equal(schemeOf({ keys: 1 }), 1);
  assert.equal(schemeOf({ keys: 4 }), 1);
});

test('scheme 1: the pointer and the frame’s markers; a revisit appends ~v to the key and to what its body inherits', () => {
  const first = taskKey(1, '/do/0/a', { ...top, suffix: '[2]' }, 0);
  assert.deepEqual(first, { at: '/do/0/a[2]', frame: { suffix: '[2]', signal: 's' } });
  const again = taskKey(1, '/do/0/a', { ...top, suffix: '[2]' }, 3);
  assert.deepEqual(again, { at: '/do/0/a[2]~3', frame: { suffix: '[2]~3', signal: 's' } });
  assert.equal(taskKey(1, '/do/0/a/do/1/b', again.frame, 1).at, '/do/0/a/do/1/b[2]~3~1');
});

test('schemes 2 and 3: a revisit marks the task’s own segment; the body’s frame is scoped to the execution, markers appended', () => {
  for (const scheme of [2, 3] as const) {
    const outer = taskKey(scheme, '/do/0/a', top, 1);
    assert.deepEqual(outer, { at: '/do/0/a~1', frame: { suffix: '', signal: 's', scope: { pointer: '/do/0/a', marked: '/do/0/a~1' } } });
    const inner = taskKey(scheme, '/do/0/a/do/2/b', iterationFrame(outer.frame, 4), 0);
    assert.deepEqual(inner, {
      at: '/do/0/a~1/do/2/b[4]',
      frame: { suffix: '[4]', signal: 's', scope: { pointer: '/do/0/a/do/2/b', marked: '/do/0/a~1/do/2/b' } },
    });
    assert.equal(taskKey(scheme, '/do/0/a/do/2/b/do/0/c', inner.frame, 2).at, '/do/0/a~1/do/2/b/do/0/c~2[4]');
  }
});

test('schemes 2 and 3: a task outside the execution whose frame it is given is an assertion failure', () => {
  const { frame } = taskKey(3, '/do/0/a', top, 0);
  for (const pointer of ['/do/1/b', '/do/0/ab/do/0/c', '/do/0/a', 'do/0/a/do/0/c'])
    assert.throws(() => taskKey(3, pointer, frame, 0), AssertionFailure, pointer);
  assert.throws(() => taskKey(2, 'do/0/a', top, 0), AssertionFailure, 'the root frame holds pointers under /');
  assert.equal(taskKey(2, '/do/0/a/do/0/c', frame, 0).at, '/do/0/a/do/0/c');
});

test('an iteration appends [i] and a branch {i} to the frame’s markers, keeping the rest of the frame', () => {
  const scoped = { ...top, suffix: '{1}', scope: { pointer: '/do/0/f', marked: '/do/0/f~2' } };
  assert.deepEqual(iterationFrame(scoped, 0), { ...scoped, suffix: '{1}[0]' });
  assert.deepEqual(iterationFrame(top, 12), { suffix: '[12]', signal: 's' });
  assert.deepEqual(branchFrame(scoped, 3), { ...scoped, suffix: '{1}{3}' });
  assert.deepEqual(branchFrame(top, 0), { suffix: '{0}', signal: 's' });
});

test('a try’s attempt: the first is the try’s own frame; later ones append (n) (schemes 1 and 2) or mark the try’s segment (scheme 3)', () => {
  const { frame } = taskKey(3, '/do/0/t', { ...top, suffix: '[1]' }, 1);
  for (const scheme of [1, 2, 3] as const) assert.equal(attemptFrame(scheme, frame, 1), frame);
  assert.deepEqual(attemptFrame(1, frame, 2), { ...frame, suffix: '[1](2)' });
  assert.deepEqual(attemptFrame(2, frame, 3), { ...frame, suffix: '[1](3)' });
  const third = attemptFrame(3, frame, 3);
  assert.deepEqual(third, { suffix: '[1]', signal: 's', scope: { pointer: '/do/0/t', marked: '/do/0/t~1(3)' } });
  assert.equal(taskKey(3, '/do/0/t/try/0/x', third, 0).at, '/do/0/t~1(3)/try/0/x[1]');
  assert.throws(() => attemptFrame(3, top, 2), AssertionFailure, 'an attempt outside a try execution');
  assert.equal(attemptFrame(3, top, 1), top, 'the first attempt needs no scope');
});

test('the key of an attempt’s error handling: scheme 3 the try’s key and (n), schemes 1 and 2 the try’s key and the frame’s markers', () => {
  const frame = { ...top, suffix: '[1](2)' };
  assert.equal(attemptStepKey(3, '/do/0/t[1]', frame, 2), '/do/0/t[1](2)');
  assert.equal(attemptStepKey(3, '/do/0/t[1]', frame, 1), '/do/0/t[1](1)');
  assert.equal(attemptStepKey(2, '/do/0/t[1]', frame, 2), '/do/0/t[1][1](2)');
  assert.equal(attemptStepKey(1, '/do/0/t[1]', frame, 2), '/do/0/t[1][1](2)');
  assert.equal(attemptStepKey(2, '/do/0/t', top, 1), '/do/0/t');
});

test('splitKey: the segments’ markers (scheme 2 a revisit, scheme 3 a revisit and an attempt) stay with the pointer, the rest is the suffix', () => {
  const ref = '/do/0/t/try/1/x';
  assert.deepEqual(splitKey(3, ref, '/do/0/t~12(10)/try/1/x~2[0]{1}'), { marked: '/do/0/t~12(10)/try/1/x~2', suffix: '[0]{1}' });
  assert.deepEqual(splitKey(3, ref, '/do/0/t(2)/try/1/x'), { marked: '/do/0/t(2)/try/1/x', suffix: '' });
  assert.deepEqual(splitKey(2, ref, '/do/0/t~12/try/1/x~2(3)[0]'), { marked: '/do/0/t~12/try/1/x~2', suffix: '(3)[0]' });
  assert.deepEqual(splitKey(2, '/do/0/t', '/do/0/t(2)'), { marked: '/do/0/t', suffix: '(2)' });
  assert.deepEqual(splitKey(1, ref, `${ref}~2(3)[0]`), { marked: ref, suffix: '~2(3)[0]' });
  // No marker begins with 0: `~0` is the pointer's escape of `~`, `(0)` no attempt.
  assert.deepEqual(splitKey(3, '/do/0/t', '/do/0/t~0(0)'), { marked: '/do/0/t', suffix: '~0(0)' });
  for (const at of ['/do/0/u/try/1/x', '/do/0/t/try/2/x', '/do/0/t~1/try/1/y', '/do/0/t']) assert.throws(() => splitKey(3, ref, at), AssertionFailure, at);
});

test('ranInside: the task is the execution’s or under it, and its key extends the execution’s marked pointer and its markers', () => {
  const loop = { pointer: '/do/0/l', at: '/do/0/l~1[2]' };
  assert.equal(ranInside(3, loop, '/do/0/l', '/do/0/l~1[2]'), true, 'an execution is inside itself');
  assert.equal(ranInside(3, loop, '/do/0/l/do/0/x', '/do/0/l~1/do/0/x[2][0]'), true);
  assert.equal(ranInside(3, loop, '/do/0/l/do/0/x', '/do/0/l/do/0/x[2][0]'), false, 'the first execution of l');
  assert.equal(ranInside(3, loop, '/do/0/l/do/0/x', '/do/0/l~1/do/0/x[3][0]'), false, 'in an enclosing iteration of another index');
  assert.equal(ranInside(3, loop, '/do/0/lx', '/do/0/lx~1[2]'), false, 'a task whose pointer only begins like the execution’s');
  assert.equal(ranInside(3, loop, '/do/1/l', '/do/0/l~1[2]'), false, 'another task');
  // Scheme 3: a try's execution holds each of its attempts; another revisit of the try does not.
  const attempt = { pointer: '/do/0/t', at: '/do/0/t' };
  assert.equal(ranInside(3, attempt, '/do/0/t/try/0/x', '/do/0/t(4)/try/0/x'), true);
  assert.equal(ranInside(3, attempt, '/do/0/t/try/0/x', '/do/0/t~1(4)/try/0/x'), false);
  assert.equal(ranInside(2, { pointer: '/do/0/t', at: '/do/0/t~1' }, '/do/0/t/try/0/x', '/do/0/t~12/try/0/x'), false, 'revisit 12 is not revisit 1');
  assert.equal(ranInside(1, { pointer: '/do/0/t', at: '/do/0/t~1' }, '/do/0/t/try/0/x', '/do/0/t/try/0/x~1(2)'), true);
  assert.equal(ranInside(1, { pointer: '/do/0/t', at: '/do/0/t~1' }, '/do/0/t/try/0/x', '/do/0/t/try/0/x~2'), false);
  assert.equal(ranInside(3, attempt, '/do/0/t/try/0/x', '/do/0/t(12)/try/0/x[0]'), true, 'attempt 12');
  // A task named "t(2)" is not inside t, though its key reads like t's second attempt.
  for (const scheme of [1, 2, 3] as const) assert.equal(ranInside(scheme, attempt, '/do/0/t(2)/try/0/x', '/do/0/t(2)/try/0/x'), false, `scheme ${scheme}`);
});

const document = {
  do: [
    { a: { set: {} } },
    { 'b~c': { do: [{ x: { set: {} } }, { xy: { set: {} } }] } },
    { 't/u': { try: [{ y: { set: {} } }], catch: { do: [{ z: { set: {} } }] } } },
  ],
};

test('pointerOfKey: the innermost task a key names, read with the document, its segments’ markers skipped per scheme', () => {
  assert.equal(pointerOfKey(3, document, '/do/0/a'), '/do/0/a');
  assert.equal(pointerOfKey(3, document, '/do/0/a~2>set'), '/do/0/a');
  assert.equal(pointerOfKey(3, document, '/do/1/b~0c~1/do/1/xy[0]'), '/do/1/b~0c/do/1/xy', 'the longest name read, not x');
  assert.equal(pointerOfKey(3, document, '/do/1/b~0c/do/0/x~1'), '/do/1/b~0c/do/0/x');
  assert.equal(pointerOfKey(3, document, '/do/2/t~1u~1(2)/try/0/y[1]'), '/do/2/t~1u/try/0/y');
  assert.equal(pointerOfKey(3, document, '/do/2/t~1u(3)/catch/do/0/z'), '/do/2/t~1u/catch/do/0/z');
  assert.equal(pointerOfKey(2, document, '/do/2/t~1u~1/try/0/y(2)'), '/do/2/t~1u/try/0/y');
  assert.equal(pointerOfKey(2, document, '/do/2/t~1u(2)/try/0/y'), '/do/2/t~1u', 'scheme 2 has no attempt on a segment');
  assert.equal(pointerOfKey(1, document, '/do/2/t~1u/try/0/y~1(2)'), '/do/2/t~1u/try/0/y');
  assert.equal(pointerOfKey(1, document, '/do/2/t~1u~1/try/0/y'), '/do/2/t~1u', 'scheme 1 has no revisit on a segment');
  // Keys naming none of the document's tasks, or stopping short of one.
  assert.equal(pointerOfKey(3, document, ''), undefined);
  assert.equal(pointerOfKey(3, document, '/do'), undefined);
  assert.equal(pointerOfKey(3, document, '/do/3/a'), undefined);
  assert.equal(pointerOfKey(3, document, '/do/00/a'), undefined, 'no index with a leading zero');
  assert.equal(pointerOfKey(3, document, '/do/0/ab'), undefined, 'a name read must end where a token may end');
  assert.equal(pointerOfKey(3, document, '/do/1/b~0c/do/5/x'), '/do/1/b~0c', 'the innermost task read');
  assert.equal(pointerOfKey(3, document, '/do/0/a/set/x'), '/do/0/a', 'past the document: the innermost task read');
  assert.equal(pointerOfKey(3, document, '/do/a'), undefined, 'a name where a list has indexes');
  assert.equal(pointerOfKey(3, [], '/0'), undefined);
  assert.equal(pointerOfKey(3, null, '/do/0/a'), undefined);
  assert.equal(pointerOfKey(3, { do: ['ab'] }, '/do/0/0'), undefined, 'a list entry that is no object names no task');
});

test('pointerOfKey: of two names both read at one place, the longer, whichever comes first', () => {
  for (const entry of [
    { a: { set: {} }, 'a>b': { set: {} } },
    { 'a>b': { set: {} }, a: { set: {} } },
  ]) {
    const twoNames = { do: [entry] };
    assert.equal(pointerOfKey(3, twoNames, '/do/0/a>b>set'), '/do/0/a>b', Object.keys(entry).join(', '));
    assert.equal(pointerOfKey(3, twoNames, '/do/0/a>c'), '/do/0/a');
  }
});
