/**
 * The package as a user gets it: `npm pack` in a copy of the checkout (its `prepare` builds
 * dist/src afresh there, so the suite's own dist/ is never touched), then the tarball installed
 * into a fresh project from the local npm cache only (`npm ci --offline`, with a lockfile made
 * from this repository's, as an application's own lockfile would pin the same versions). There:
 * `npx convoke --version`, `npx convoke demo`, `convoke workflow validate` and `graph`,
 * `import('convoke/peer')` and a tsc check of its types. The install prints no npm warning (no
 * EBADENGINE on Node 20) and brings no development dependency.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { strictTscArgs } from '../support/typecheck.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const commandTimeoutMs = 240_000;

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string): Run {
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    timeout: commandTimeoutMs,
    env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false', npm_config_update_notifier: 'false' },
  });
  return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
}

function ok(r: Run, what: string): Run {
  assert.equal(r.status, 0, `${what} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** The dependencies a package.json declares for installation (not its devDependencies). */
function installedDependencies(manifest: string): Record<string, string> {
  const parsed = JSON.parse(manifest) as { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
  return { ...parsed.dependencies, ...parsed.optionalDependencies };
}

interface LockEntry {
  version?: string;
  dev?: boolean;
  [key: string]: unknown;
}

/** The application's lockfile: convoke from the tarball, its dependencies exactly as this repository locks them. */
function applicationLock(repoLock: { packages: Record<string, LockEntry> }, tarball: string) {
  const root = repoLock.packages[''];
  assert.ok(root, 'the repository lockfile has a root entry');
  const packages: Record<string, unknown> = {
    '': { name: 'app', dependencies: { convoke: `file:${tarball}` } },
    'node_modules/convoke': {
      version: root.version,
      resolved: `file:${tarball}`,
      license: root['license'],
      dependencies: root['dependencies'],
      bin: root['bin'],
      engines: root['engines'],
    },
  };
  for (const [path, entry] of Object.entries(repoLock.packages)) if (path !== '' && !entry.dev) packages[path] = entry;
  return { name: 'app', lockfileVersion: 3, requires: true, packages };
}

/**
 * npm's warnings and errors: none at all from a clean install on a supported Node, Node 20
 * included — in particular no EBADENGINE (@serverlessworkflow/sdk 1.0.3-alpha1, which declares
 * `engines: node >= 22`, is a development dependency only; the package depends on 1.0.1).
 */
function npmWarnings(text: string): string[] {
  return text.split('\n').filter((line) => /^npm (warn|WARN|error|ERR)|EBADENGINE/.test(line));
}

test(
  'npm pack ships dist/src, bin, README and LICENSE only; the tarball installs offline with no npm warning and no development dependency, runs `convoke --version`, `convoke demo` and `convoke workflow validate|graph`, and convoke/peer imports with its types',
  { timeout: 600_000 },
  async () => {
    const work = await mkdtemp(join(tmpdir(), 'convoke-package-'));
    try {
      const checkout = join(work, 'checkout');
      await mkdir(checkout);
      for (const name of [
        'package.json',
        'package-lock.json',
        'tsconfig.json',
        'tsconfig.build.json',
        'README.md',
        'LICENSE',
        'bin',
        'console',
        'src',
        'scripts',
      ]) {
        await cp(join(repoRoot, name), join(checkout, name), { recursive: true });
      }
      await symlink(await realpath(join(repoRoot, 'node_modules')), join(checkout, 'node_modules'), 'dir');
      const manifest = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as { version: string };

      const packed = ok(run('npm', ['pack', '--json', '--pack-destination', work], checkout), 'npm pack');
      const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
      assert.ok(info);
      const files = info.files.map((f) => f.path).sort();
      for (const required of [
        'LICENSE',
        'README.md',
        'bin/convoke.js',
        'package.json',
        'dist/src/cli/main.js',
        'dist/src/peer/index.js',
        'dist/src/peer/index.d.ts',
        'console/index.html',
        'console/console.js',
        'console/console.css',
        'dist/src/workflow/dsl/schema/workflow-1.0.3.js',
        'dist/src/workflow/dsl/schema/LICENSE',
      ]) {
        assert.ok(files.includes(required), `the tarball has ${required}`);
      }
      const stray = files.filter(
        (f) =>
          !/^(LICENSE|README\.md|package\.json|bin\/convoke\.js|console\/(index\.html|console\.js|console\.css))$/.test(f) &&
          !/^dist\/src\/.+\.(js|d\.ts)$/.test(f) &&
          f !== 'dist/src/build-info.json' &&
          f !== 'dist/src/workflow/dsl/schema/LICENSE',
      );
      assert.deepEqual(stray, [], 'nothing else (no test/, bench/, src/, source maps)');
      const license = await readFile(join(checkout, 'LICENSE'), 'utf8');
      assert.match(license, /Apache License\s+Version 2\.0/);

      const app = join(work, 'app');
      await mkdir(app);
      const tarball = join(work, info.filename);
      const repoLock = JSON.parse(await readFile(join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
      // Every install script is declared (npm warns about undeclared ones). better-sqlite3's builds
      // its native module: offline that is a full compile of SQLite (minutes on a busy machine), so
      // this application declines it and takes the module the repository's install built from the
      // same locked version for the same Node; the repository's own `npm install` runs the script.
      await writeFile(
        join(app, 'package.json'),
        JSON.stringify(
          {
            name: 'app',
            private: true,
            type: 'module',
            dependencies: { convoke: `file:${tarball}` },
            allowScripts: { 'better-sqlite3': false, protobufjs: false },
          },
          null,
          2,
        ),
      );
      await writeFile(join(app, 'package-lock.json'), JSON.stringify(applicationLock(repoLock, tarball), null, 2));
      const installed = ok(run('npm', ['ci', '--offline'], app), 'npm ci --offline');
      assert.deepEqual(npmWarnings(installed.stdout + installed.stderr), [], 'the install prints no warning on this Node');
      const sdkManifest = JSON.parse(await readFile(join(app, 'node_modules', '@serverlessworkflow', 'sdk', 'package.json'), 'utf8')) as { version: string };
      assert.equal(sdkManifest.version, '1.0.1', 'the runtime SDK is 1.0.1 (engines node >= 20)');
      assert.equal(existsSync(join(app, 'node_modules', '@serverlessworkflow', 'sdk-1.0.3')), false, 'the development-only SDK 1.0.3 alias is not installed');
      assert.equal(
        '@serverlessworkflow/sdk-1.0.3' in installedDependencies(await readFile(join(app, 'node_modules', 'convoke', 'package.json'), 'utf8')),
        false,
        'the packed package.json does not depend on the development-only SDK',
      );
      const addon = join('node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
      await mkdir(dirname(join(app, addon)), { recursive: true });
      await cp(join(await realpath(join(repoRoot, 'node_modules')), 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'), join(app, addon));

      assert.equal(ok(run('npx', ['--offline', 'convoke', '--version'], app), 'convoke --version').stdout.trim(), manifest.version);
      // The console's files sit beside package.json, where `convoke serve` looks for them.
      assert.match(await readFile(join(app, 'node_modules', 'convoke', 'console', 'index.html'), 'utf8'), /<script src="console.js" defer>/);
      const demo = ok(run('npx', ['--offline', 'convoke', 'demo', '--json', '--peers', '3', '--quorum', '2', '--approve-rate', '1'], app), 'convoke demo');
      const { result } = JSON.parse(demo.stdout) as { result: { decision: { outcome: string } } };
      assert.equal(result.decision.outcome, 'success');
      const sqliteDemo = ok(
        run('npx', ['--offline', 'convoke', 'demo', '--scenario', 'lease-expiry', '--json', '--peers', '3', '--quorum', '3', '--approve-rate', '1'], app),
        'convoke demo on SQLite',
      );
      assert.match(sqliteDemo.stdout, /"outcome": "success"/);
      // The workflow commands from the tarball: the vendored DSL schema validates, SDK 1.0.1 draws.
      await cp(join(repoRoot, 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), join(app, 'bundle.json'));
      const validated = ok(run('npx', ['--offline', 'convoke', 'workflow', 'validate', 'bundle.json'], app), 'convoke workflow validate');
      assert.match(validated.stdout, /valid +pipeline +review-then-publish/);
      const graph = ok(run('npx', ['--offline', 'convoke', 'workflow', 'graph', 'bundle.json', 'review-then-publish'], app), 'convoke workflow graph');
      assert.match(graph.stdout, /^flowchart TD\n/);

      const imported = ok(
        run(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            "const m = await import('convoke/peer'); console.log([typeof m.createNatsPeer, typeof m.createPeer, typeof m.MemoryEffectSink].join(' '))",
          ],
          app,
        ),
        'import convoke/peer',
      );
      assert.equal(imported.stdout.trim(), 'function function function');

      await writeFile(
        join(app, 'check.ts'),
        [
          "import { createNatsPeer, createPeer, MemoryEffectSink, type Handler, type NatsPeerOptions } from 'convoke/peer';",
          'const handler: Handler = async (input, context) => ({ verdict: "approve", input, aborted: context.signal.aborted });',
          '// @ts-expect-error a handler answers JSON, not a function',
          'const wrong: Handler = async () => () => 1;',
          'const options: Partial<NatsPeerOptions> = {};',
          'void [createNatsPeer, createPeer, new MemoryEffectSink(), handler, wrong, options];',
          '// @ts-expect-error the package exports no such name',
          "import { notExported } from 'convoke/peer';",
          'void notExported;',
          '',
        ].join('\n'),
      );
      ok(run(process.execPath, await strictTscArgs(repoRoot, 'check.ts'), app), 'tsc on an import of convoke/peer');
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  },
);
