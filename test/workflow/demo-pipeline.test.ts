/**
 * `convoke demo --scenario pipeline`: the embedded pipeline demo runs a quorum review, then a
 * publish stage, as one workflow instance; it prints each stage's decision and the instance's log,
 * and the log it prints folds to the instance it reports.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { main } from '../../src/cli/main.js';
import type { Stored } from '../../src/kernel/types.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { foldWorkflow } from '../../src/workflow/exec/record.js';

async function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (s: string) => ((stdout += s), true) }, stderr: { write: (s: string) => ((stderr += s), true) } };
  const code = await main(['node', 'convoke', ...args], io as never);
  return { code, stdout, stderr };
}

test('demo --scenario pipeline: a quorum review, then a publish stage; each stage decided; the printed log replays to the instance', async () => {
  const { code, stdout, stderr } = await run(['demo', '--scenario', 'pipeline', '--json', '--approve-rate', '1']);
  assert.equal(code, 0, stderr);
  const { instance, log } = JSON.parse(stdout) as { instance: WorkflowInstance; log: Stored<WorkflowTransition>[] };
  assert.equal(instance.status, 'completed', JSON.stringify(instance.error));
  assert.deepEqual(
    instance.stages.map((s) => [s.stage, s.decision?.outcome, s.settlement?.status]),
    [
      ['review', 'success', 'complete'],
      ['publish', 'success', 'complete'],
    ],
  );
  assert.equal(instance.stages[0]?.decision?.threshold, 3);
  const replayed = foldWorkflow(log);
  assert.deepEqual(
    [replayed?.status, replayed?.output, Object.keys(replayed?.children ?? {})],
    [instance.status, instance.output, instance.stages.map((s) => s.at)],
  );
});

test('demo --scenario pipeline prints the stages and the log; the default demo still runs', async () => {
  const pipeline = await run(['demo', '--scenario', 'pipeline', '--approve-rate', '1']);
  assert.equal(pipeline.code, 0, pipeline.stderr);
  assert.match(pipeline.stdout, /stage +review: op[0-9a-f]{64} decision success/);
  assert.match(pipeline.stdout, /stage +publish: op[0-9a-f]{64} decision success/);
  assert.match(pipeline.stdout, /workflow-completed/);
  const plain = await run(['demo']);
  assert.equal(plain.code, 0, plain.stderr);
});

test('demo --scenario pipeline fits its lines to the terminal: stages and log wrapped under their labels', async () => {
  let stdout = '';
  const io = { columns: 72, stdout: { write: (s: string) => ((stdout += s), true) }, stderr: { write: () => true } };
  const code = await main(['node', 'convoke', 'demo', '--scenario', 'pipeline', '--approve-rate', '1'], io as never);
  assert.equal(code, 0);
  const lines = stdout.split('\n');
  const wide = lines.filter((line) => line.length > 72);
  assert.deepEqual(wide, [], 'every line within 72 columns');
  // Wrapped lines keep their label's column: a stage's decision continues under its operation id.
  const stage = lines.findIndex((line) => line.startsWith('stage      review:'));
  assert.ok(stage >= 0 && /^ {11}\S/.test(lines[stage + 1] ?? ''), lines.slice(stage, stage + 2).join('\n'));
  assert.ok(
    lines.some((line) => /^ {16}\S/.test(line)),
    'a log line continues under its events',
  );
  assert.match(stdout, /workflow-completed/);
});
