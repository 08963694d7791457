#!/usr/bin/env node
// npm run mutate [-- [--only <substring>] [stryker options, e.g. --incremental]]
// StrykerJS over the decision, admission, fold and intake code, the listen task's matching rules
// and the workflow executor's worker lease, task execution keys, decider and instance fold
// (stryker.config.json, docs/mutation.md). Each file of the config's `mutate` list is its own
// Stryker run with its own incremental file and JSON report (reports/mutation/<file>.json), so a
// finished file keeps its result when a later one is interrupted; then the score per file and
// overall, from those reports, with the wall time. Not part of npm test (it takes tens of minutes).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const config = JSON.parse(readFileSync(join(root, 'stryker.config.json'), 'utf8'));
const reportDir = join(root, 'reports', 'mutation');

/** Whether a mutated file is workflow code: it runs the workflow test files, and every other file the rest. */
const isWorkflow = (file) => file.startsWith('src/workflow/');

/**
 * A file's name for its report, incremental file and the tables below: its base name, or
 * `workflow-<base name>` for a workflow file whose base name another mutated file has
 * (src/workflow/exec/decide.ts beside src/domain/decide.ts), so neither run overwrites the other's.
 */
const nameOf = (file) => {
  const name = basename(file, '.ts');
  const shared = config.mutate.filter((f) => basename(f, '.ts') === name).length > 1;
  return shared && isWorkflow(file) ? `workflow-${name}` : name;
};
const reportOf = (file) => join(reportDir, `${nameOf(file)}.json`);

/**
 * The test files that kill most mutants of each file, run first: Stryker runs a mutant's covering
 * test files in the order it found them and stops at the first failure, so this order decides
 * most of the run's time. The other files of the config's list follow.
 */
const firstTests = {
  decision: ['completion-rules', 'quorum-fractions', 'results'],
  'completion-rules': ['completion-rules', 'quorum-fractions', 'results'],
  admission: ['admission-plan', 'admission', 'admission-record-budget', 'offline', 'authorization', 'quorum-fractions'],
  intake: ['intake', 'fence-zero', 'results', 'authorization', 'lifecycle'],
  record: ['record', 'record-fold', 'results', 'lifecycle', 'settlement', 'recovery'],
  decide: ['decide', 'intake', 'results', 'lifecycle', 'settlement', 'authorization'],
  'listen-match': ['listen-match-rules', 'listen', 'examples'],
  lease: ['lease-rules', 'parked-lease', 'executor', 'workers'],
  keys: ['key-rules', 'task-keys-property', 'task-keys', 'executor'],
  'workflow-decide': ['decide-rules', 'aggregate', 'steps', 'listen-limits', 'recordable'],
  'workflow-record': ['record-rules', 'aggregate', 'decide-rules', 'lease-rules', 'listen-match-rules', 'steps', 'listen-limits', 'retention'],
};

/**
 * The test files a file's run is limited to, where every executor test reaches the file: the
 * executor decides each step with src/workflow/exec/decide.ts and applies each transition it
 * commits with src/workflow/exec/record.ts, so without a limit a surviving mutant would run every
 * workflow test file of the list, about a minute on the loaded machine.
 */
const onlyTests = {
  'workflow-decide': ['decide-rules', 'aggregate', 'steps', 'listen-limits', 'recordable'],
  'workflow-record': ['record-rules', 'aggregate', 'decide-rules', 'lease-rules', 'listen-match-rules', 'steps', 'listen-limits', 'retention'],
};
/**
 * The test files of the list that run only for the files whose `onlyTests` names them, so they
 * lengthen no other file's run. `lease-rules` and `listen-match-rules` are not among them: they
 * run for lease.ts and listen-match.ts as well.
 */
const limitedTests = new Set(['decide-rules', 'aggregate', 'steps', 'listen-limits', 'recordable', 'retention', 'record-rules']);

const testsOf = (file) => {
  const tests = config.tap.testFiles.filter((f) => f.startsWith('dist/test/workflow/') === isWorkflow(file));
  const only = onlyTests[nameOf(file)];
  const test = (f) => basename(f, '.test.js');
  return only === undefined ? tests.filter((f) => !limitedTests.has(test(f))) : tests.filter((f) => only.includes(test(f)));
};

/**
 * The watchdog's limit per test file (scripts/mutation-watchdog.cjs): the workflow test files run
 * real executors (listen.test takes 12 s unmutated on a loaded machine), so theirs is longer.
 */
const fileLimitMs = (file) => process.env.CONVOKE_MUTATION_FILE_MS ?? (isWorkflow(file) ? '45000' : '20000');

/** The config for one file's run: stryker.config.json with that file's test files, in its order (written under reports/). */
function configFor(file) {
  const name = nameOf(file);
  const tests = testsOf(file);
  const path = (test) => tests.find((f) => basename(f) === `${test}.test.js`);
  const first = (firstTests[name] ?? []).map(path).filter((f) => f !== undefined);
  const ordered = {
    ...config,
    tap: { ...config.tap, testFiles: [...first, ...tests.filter((f) => !first.includes(f))] },
    // Each file's report is its own: runs of two files at once do not overwrite each other's.
    jsonReporter: { fileName: join('reports', 'mutation', `${name}.json`) },
  };
  const configPath = join(root, 'reports', `stryker-${name}.config.json`);
  writeFileSync(configPath, `${JSON.stringify(ordered, null, 2)}\n`);
  return configPath;
}

/** Stryker's score: detected (killed, timed out) over detected plus undetected (survived, no coverage). */
export function scores(reports) {
  const rows = [];
  const total = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0, errors: 0 };
  for (const report of reports) {
    for (const [file, { mutants }] of Object.entries(report.files)) {
      const row = { file, killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0, errors: 0 };
      for (const m of mutants) {
        const key = { Killed: 'killed', Timeout: 'timeout', Survived: 'survived', NoCoverage: 'noCoverage', Ignored: 'ignored' }[m.status] ?? 'errors';
        row[key]++;
        total[key]++;
      }
      rows.push(row);
    }
  }
  rows.push({ file: 'all', ...total });
  for (const row of rows) {
    const detected = row.killed + row.timeout;
    const valid = detected + row.survived + row.noCoverage;
    row.score = valid === 0 ? 100 : (100 * detected) / valid;
  }
  return rows;
}

function print(rows) {
  const header = ['file', 'score %', 'killed', 'timeout', 'survived', 'no cov', 'ignored', 'errors'];
  const lines = rows.map((r) => [r.file, r.score.toFixed(2), r.killed, r.timeout, r.survived, r.noCoverage, r.ignored, r.errors].map(String));
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const format = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(format(header));
  for (const line of lines) console.log(format(line));
}

function main(args) {
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? args[onlyAt + 1] : undefined;
  const strykerArgs = onlyAt >= 0 ? [...args.slice(0, onlyAt), ...args.slice(onlyAt + 2)] : args;
  const files = config.mutate.filter((f) => only === undefined || f.includes(only));
  mkdirSync(reportDir, { recursive: true });
  const startMs = Date.now();
  for (const file of files) {
    const fileStartMs = Date.now();
    const incrementalFile = join('reports', 'incremental', `${nameOf(file)}.json`);
    const run = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules', '@stryker-mutator', 'core', 'bin', 'stryker.js'),
        'run',
        configFor(file),
        '--mutate',
        file,
        '--incrementalFile',
        incrementalFile,
        ...strykerArgs,
      ],
      { cwd: root, stdio: 'inherit', env: { ...process.env, CONVOKE_MUTATION_FILE_MS: fileLimitMs(file) } },
    );
    if (run.status !== 0) {
      console.error(`stryker failed on ${file} (exit ${run.status ?? run.signal})`);
      process.exit(run.status ?? 1);
    }
    console.log(`${file}: ${Math.round((Date.now() - fileStartMs) / 1000)} s`);
  }
  const wallS = Math.round((Date.now() - startMs) / 1000);
  const reports = config.mutate.filter((f) => existsSync(reportOf(f))).map((f) => JSON.parse(readFileSync(reportOf(f), 'utf8')));
  console.log(
    `\nmutation score (${new Date().toISOString().slice(0, 10)}; this run ${Math.floor(wallS / 60)} min ${wallS % 60} s wall; files not run now are from their last report):`,
  );
  print(scores(reports));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
