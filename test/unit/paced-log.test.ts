/** pacedLog: lines about what principals send, at most limits.rejectionLogLinesPerSecondMax a second, the next one saying how many were left out. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { limits } from '../../src/contract/limits.js';
import { pacedLog } from '../../src/deployment/paced-log.js';

test('a flood is cut to the bound a second, and the first line after it counts what was left out', () => {
  let nowMs = 0;
  const written: string[] = [];
  const log = pacedLog(
    () => nowMs,
    (line) => void written.push(line),
  );
  for (let i = 0; i < limits.rejectionLogLinesPerSecondMax + 5; i++) log(`refused ${i}`, 'warn');
  assert.equal(written.length, limits.rejectionLogLinesPerSecondMax);
  nowMs = 999;
  log('still the same second', 'warn');
  assert.equal(written.length, limits.rejectionLogLinesPerSecondMax);
  nowMs = 1000;
  log('next second', 'warn');
  log('and again', 'warn');
  assert.deepEqual(written.slice(-2), ['next second (6 like it left out before this line)', 'and again']);
});
