/**
 * docs/reference.md, docs/cli.md and docs/operations.md held to the code they describe, read from
 * the code itself: the commands and options the CLI registers (buildProgram), the exit code table
 * (exit-codes.ts), the routes, parameters and statuses of /openapi.json, the NATS command verbs,
 * the keys the serve config's schema accepts and the defaults of a bundle's interaction, and the
 * metrics a serving deployment registers (name, type, labels). A command, option, route, verb,
 * key or metric added without its documentation, or documentation left behind by one removed,
 * fails here, naming it.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { exitCodeOfKind, exitCodes } from '../../src/cli/exit-codes.js';
import { adapterErrorKinds } from '../../src/contract/errors.js';
import { interactionDefaults } from '../../src/contract/schemas.js';
import { deploymentConfigSchema } from '../../src/deployment/config.js';
import { peerConfigSchema } from '../../src/cli/commands/peer.js';
import { durabilityCheckIntervalMsDefault, natsDurableDefaults, natsTransportSchema } from '../../src/deployment/nats/settings.js';
import { commandMetrics, commandQueueDefault, commandVerbs } from '../../src/nats-api/commands.js';
import { workflowCommandVerbs } from '../../src/nats-api/workflow-commands.js';
import { SystemClock } from '../../src/contract/clock.js';
import { workflowStuckBoundsDefault } from '../../src/events/workflow-index.js';
import { observeProcess, observeStampSources } from '../../src/runtime/metrics.js';
import { observeDroppedEmittedEvents } from '../../src/runtime/workflow-emitted-metrics.js';
import { observeRefusedWorkflowStarts } from '../../src/runtime/workflow-start-metrics.js';
import { observeStuckWorkflowInstances } from '../../src/runtime/workflow-stuck-metrics.js';
import { limits } from '../../src/contract/limits.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { policyTtlMsDefault } from '../../src/adapters/policy/static.js';
import { workflowEventsDefaults } from '../../src/runtime/workflow-service.js';
import { repoRoot } from '../support/assertions.js';
import { captureIo } from '../support/cli-io.js';
import { buildFixtureApp, writeHttpFixture } from '../support/http-fixtures.js';

const docs = (name: string) => readFileSync(join(repoRoot(), 'docs', name), 'utf8');
const reference = docs('reference.md');
const cliDoc = docs('cli.md');

/** The text of `markdown` from the heading line starting with `heading` to the next heading of that level or above. */
function section(markdown: string, heading: string): string {
  const start = markdown.split('\n').findIndex((line) => line.startsWith(heading));
  assert.ok(start >= 0, `a section "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  const lines = markdown.split('\n').slice(start);
  const end = lines.findIndex((line, i) => i > 0 && /^#+ /.test(line) && /^#+/.exec(line)![0].length <= level);
  return lines.slice(0, end < 0 ? undefined : end).join('\n');
}

/** The cells of a Markdown table row (`\|` inside a cell is a literal bar). */
const cells = (row: string) =>
  row
    .replaceAll('\\|', '\u0000')
    .split('|')
    .slice(1, -1)
    .map((cell) => cell.trim().replaceAll('\u0000', '|'));

/** The code spans of `text`. */
const spans = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The long options a span of usage names (`--store URL`, `[--json]`), without --help. */
const flagsIn = (text: string) => [...text.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]);

const mentions = (text: string, flag: string) => new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(text);

// ── the command line ────────────────────────────────────────────────────────

/** Every command that runs (no subcommands), by its words: `workflow list`. */
function leafCommands(): Map<string, Command> {
  const program = buildProgram(captureIo({ columns: 200 }), () => {});
  const leaves = new Map<string, Command>();
  const walk = (command: Command, path: string[]) => {
    for (const sub of command.commands) {
      const words = [...path, sub.name()];
      if (sub.commands.length > 0) walk(sub, words);
      else leaves.set(words.join(' '), sub);
    }
  };
  walk(program, []);
  leaves.delete('help');
  return leaves;
}

/**
 * The usage rows documenting commands: reference.md's command table, and cli.md's table of the
 * context commands (each subcommand with its options). A row's first cell may hold several usages.
 */
const usageRows = [
  ...section(reference, '## Commands')
    .split('\n')
    .filter((line) => line.startsWith('| `convoke ')),
  ...section(cliDoc, '## Contexts')
    .split('\n')
    .filter((line) => line.startsWith('| `convoke context ')),
];

/** The usage spans of the rows that name `name` (`convoke workflow get ID …` or, beside another, `workflow get ID …`), with their rows. */
function usagesOf(name: string): { usage: string; row: string }[] {
  const found: { usage: string; row: string }[] = [];
  for (const row of usageRows) {
    const [usage = ''] = cells(row);
    for (const span of spans(usage)) {
      const words = span.replace(/^convoke /, '');
      if (words === name || words.startsWith(`${name} `)) found.push({ usage: span, row });
    }
  }
  return found;
}

/** Options every command that connects takes, documented once in prose rather than in each row. */
const connectionOptions = ['--context', '--contexts', '--creds'];

describe('docs/reference.md: the commands', () => {
  const leaves = leafCommands();

  test('the options every connecting command takes are documented where the rows point', () => {
    assert.ok(mentions(section(reference, '## Commands'), '--context'), 'reference.md: --context NAME');
    assert.ok(mentions(section(reference, '## Commands'), '--creds'), 'reference.md: --creds FILE');
    assert.ok(cliDoc.includes('`--contexts FILE` on any command'), 'cli.md: --contexts FILE');
  });

  test('every command has a row, and the row names every option it takes', () => {
    const problems: string[] = [];
    for (const [name, command] of leaves) {
      const usages = usagesOf(name);
      if (usages.length === 0) {
        problems.push(`${name}: no row`);
        continue;
      }
      const text = usages.map(({ row }) => row).join('\n');
      for (const option of command.options) {
        const flag = option.long!;
        if (!connectionOptions.includes(flag) && !mentions(text, flag)) problems.push(`${name}: ${flag} is not documented`);
      }
      for (const argument of command.registeredArguments)
        if (argument.required && !usages.some(({ usage }) => usage.replace(/^convoke /, '').split(' ').length > name.split(' ').length))
          problems.push(`${name}: its argument <${argument.name()}> is not shown`);
    }
    assert.deepEqual(problems, []);
  });

  test('every option a row shows is one its command takes', () => {
    const problems: string[] = [];
    for (const row of usageRows)
      for (const usage of spans(cells(row)[0] ?? '')) {
        const words = usage.replace(/^convoke /, '').split(' ');
        const name = [2, 1].map((n) => words.slice(0, n).join(' ')).find((candidate) => leaves.has(candidate));
        if (name === undefined) {
          // A group named alone (`context ls|show|rm|select`, `workflow …`) shows no options.
          if (flagsIn(usage).length > 0) problems.push(`\`${usage}\`: no such command`);
          continue;
        }
        const takes = new Set(leaves.get(name)!.options.map((o) => o.long));
        for (const flag of flagsIn(usage)) if (!takes.has(flag)) problems.push(`${name}: ${flag} is documented but not an option`);
      }
    assert.deepEqual(problems, []);
  });
});

test('docs/reference.md and docs/cli.md: the exit code tables are exit-codes.ts', () => {
  for (const [doc, text] of [
    ['reference.md', section(reference, '### Exit codes')],
    ['cli.md', section(cliDoc, '## Exit codes')],
  ] as const) {
    const rows = text
      .split('\n')
      .filter((line) => /^\| \d+ /.test(line))
      .map(cells);
    assert.deepEqual(
      rows.map(([code]) => Number(code)),
      Object.values(exitCodes).sort((a, b) => a - b),
      `${doc}: one row per code`,
    );
    const byCode = new Map(rows.map(([code, meaning]) => [Number(code), meaning ?? '']));
    for (const kind of adapterErrorKinds) assert.ok(byCode.get(exitCodeOfKind(kind))?.includes(`\`${kind}\``), `${doc}: ${exitCodeOfKind(kind)} is ${kind}`);
  }
});

// ── HTTP ────────────────────────────────────────────────────────────────────

describe('docs/reference.md: the HTTP routes of /openapi.json', () => {
  type Operation = { parameters?: { name: string; in: string }[]; responses: Record<string, unknown> };
  /** The document of a deployment serving every route: workflow instances, and CloudEvents over HTTP (`workflows.events.http`). */
  const paths = (openApiDocument({ workflows: true, workflowEvents: true }) as { paths: Record<string, Record<string, Operation>> }).paths;
  const documented = section(reference, '## HTTP') + section(reference, '## The web console');
  /** `/contract-invocations/{operationId}/events` → `/contract-invocations/{}/events`: the docs name parameters `{id}` too. */
  const shape = (path: string) => path.replace(/\{[^}]*\}/g, '{}');
  /** The routes reference.md names, as `METHOD /path` spans, with the query each shows. */
  const named = () =>
    spans(documented)
      .map((span) => /^(GET|POST|PUT|PATCH|DELETE) (\/[^?\s]*)(\?.*)?$/.exec(span))
      .filter((m) => m !== null)
      .map((m) => ({ route: `${m[1]} ${shape(m[2]!)}`, query: m[3] ?? '' }));

  test('every route is named, with the query parameters it takes, and every route named is one', () => {
    const problems: string[] = [];
    const documentedRoutes = named();
    const served = new Set<string>();
    for (const [path, operations] of Object.entries(paths))
      for (const [method, operation] of Object.entries(operations)) {
        const route = `${method.toUpperCase()} ${shape(path)}`;
        served.add(route);
        const queries = documentedRoutes.filter((d) => d.route === route).map((d) => d.query);
        if (queries.length === 0) {
          problems.push(`${route} is not documented`);
          continue;
        }
        for (const parameter of operation.parameters ?? [])
          if (parameter.in === 'query' && !queries.some((q) => q.includes(`${parameter.name}=`) || q === '?<list parameters>'))
            problems.push(`${route}: query parameter ${parameter.name} is not documented`);
      }
    for (const { route } of documentedRoutes) if (!served.has(route)) problems.push(`${route} is documented but not served`);
    assert.deepEqual(problems, []);
  });

  test('every status a route answers is documented', () => {
    const statuses = new Set(Object.values(paths).flatMap((operations) => Object.values(operations).flatMap((o) => Object.keys(o.responses))));
    const missing = [...statuses].filter((status) => !new RegExp(`(?<![\\d.])${status}(?![\\d ]\\d)`).test(documented));
    assert.deepEqual(missing, []);
  });
});

// ── NATS ────────────────────────────────────────────────────────────────────

test('docs/reference.md: every NATS command verb, with its body', () => {
  const nats = section(reference, '## NATS subjects');
  const missing = [...commandVerbs, ...workflowCommandVerbs].filter((verb) => !nats.includes(`\`.${verb}\``));
  assert.deepEqual(missing, []);
});

// ── configuration and the bundle ────────────────────────────────────────────

/** Every property path of a JSON Schema: `http.events.heartbeatMs`, `policy.rules[].effect`, `transport.examplePeers.*.delayMs`. */
function propertyPaths(schema: unknown, path = ''): string[] {
  if (schema === null || typeof schema !== 'object') return [];
  if (Array.isArray(schema)) return schema.flatMap((s) => propertyPaths(s, path));
  const s = schema as Record<string, unknown>;
  const found: string[] = [];
  for (const [key, value] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
    const at = path === '' ? key : `${path}.${key}`;
    found.push(at, ...propertyPaths(value, at));
  }
  found.push(...propertyPaths(s.items, `${path}[]`), ...propertyPaths(s.additionalProperties, `${path}.*`));
  for (const key of ['then', 'else', 'allOf', 'anyOf', 'oneOf']) found.push(...propertyPaths(s[key], path));
  return found;
}

test('docs/reference.md: every key of the serve config is documented under Configuration', () => {
  const configuration = section(reference, '## Configuration');
  const keys = [...propertyPaths(deploymentConfigSchema), ...propertyPaths(natsTransportSchema, 'transport')];
  assert.ok(keys.includes('http.events.heartbeatMs') && keys.includes('transport.durable.maxMsgs'), keys.join(' '));
  const missing = keys.filter((key) => !new RegExp(`(?<![\\w])${key.split('.').at(-1)!.replace('[]', '')}(?![\\w])`).test(configuration));
  assert.deepEqual(missing, []);
});

test("docs/reference.md: the bundle table's defaults are the interaction's", () => {
  const rows = section(reference, '## The contract bundle')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map(cells);
  const problems: string[] = [];
  for (const [field, value] of Object.entries(interactionDefaults)) {
    const row = rows.find(([names]) => spans(names ?? '').includes(field));
    if (!row) {
      problems.push(`${field}: no row`);
      continue;
    }
    const fields = spans(row[0]!);
    const defaults = spans(row.at(-1)!);
    // `leaseMs`, `renewIntervalMs` | `30000`, `10000`: one default per field, in order.
    const stated = defaults.length === fields.length ? defaults[fields.indexOf(field)] : defaults[0];
    if (stated !== String(value)) problems.push(`${field}: documented ${JSON.stringify(stated)}, default ${JSON.stringify(value)}`);
  }
  assert.deepEqual(problems, []);
});

// ── metrics and logs (docs/operations.md) ──────────────────────────────────

const operationsDoc = docs('operations.md');

/** The text of every TypeScript file under src/. */
const sources = () =>
  (readdirSync(join(repoRoot(), 'src'), { recursive: true }) as string[])
    .filter((file) => file.endsWith('.ts'))
    .map((file) => readFileSync(join(repoRoot(), 'src', file), 'utf8'));

/** `\`status\` (\`complete\`, \`indeterminate\`)` → status: [complete, indeterminate]; a label without a list maps to null. */
function documentedLabels(cell: string): Map<string, string[] | null> {
  const labels = new Map<string, string[] | null>();
  for (const m of cell.matchAll(/`([a-z_]+)`(?: \(([^)]*)\))?/g)) labels.set(m[1]!, m[2] === undefined ? null : spans(m[2]).filter((v) => !v.includes('…')));
  return labels;
}

/** The documented rows: name → type, labels. */
const metricRows = new Map(
  section(operationsDoc, '## Metrics')
    .split('### ')[0]!
    .split('\n')
    .filter((line) => line.startsWith('| `convoke_'))
    .map(cells)
    .map(([name, type, labels]) => [spans(name!)[0]!, { type: type!, labels: documentedLabels(labels!) }]),
);
/** Every metric name the code writes: a `'convoke_…'` string anywhere in src. */
const metricNames = new Set(sources().flatMap((text) => [...text.matchAll(/['"`](convoke_[a-z0-9_]+)['"`]/g)].map((m) => m[1]!)));

/**
 * What a serving deployment registers, held to the rows: type, label names, and the label values
 * the code sets before anything happens (each must be among those a row lists).
 */
async function metricProblems(): Promise<string[]> {
  const fixture = await writeHttpFixture();
  const built = await buildFixtureApp(fixture);
  try {
    const { coordinator, store } = built.deployment;
    const registry = coordinator.metrics.registry;
    // What serve and a deployment hosting workflows register beside the coordinator's own (and the HTTP app's).
    observeProcess(coordinator.metrics, { version: '0.0.0', nodeVersion: process.versions.node, commit: 'unknown' });
    observeStampSources(coordinator.metrics, { stampSources: { fed: 0, readBack: 0 } });
    commandMetrics(registry);
    observeStuckWorkflowInstances(registry, () => store.workflowIndex, new SystemClock(), workflowStuckBoundsDefault);
    observeDroppedEmittedEvents(registry);
    observeRefusedWorkflowStarts(registry);
    const registered = registry.getMetricsAsArray().filter((metric) => metric.name.startsWith('convoke_'));
    assert.deepEqual(
      [...metricNames].filter((name) => !registered.some((metric) => metric.name === name)),
      [],
      'a metric this test does not register: call what registers it above',
    );
    const problems: string[] = [];
    for (const metric of registered) {
      const row = metricRows.get(metric.name);
      if (row === undefined) continue; // reported by the test above
      const { type, labelNames = [] } = metric as unknown as { type: string; labelNames?: string[] };
      if (row.type !== type) problems.push(`${metric.name}: documented a ${row.type}, is a ${type}`);
      if ([...row.labels.keys()].sort().join() !== [...labelNames].sort().join())
        problems.push(`${metric.name}: documented labels ${[...row.labels.keys()].join(', ') || 'none'}, has ${labelNames.join(', ') || 'none'}`);
    }
    for (const metric of await registry.getMetricsAsJSON())
      for (const { labels } of metric.name.startsWith('convoke_') ? metric.values : [])
        for (const [label, value] of Object.entries(labels)) {
          const values = metricRows.get(metric.name)?.labels.get(label);
          if (values && !values.includes(String(value))) problems.push(`${metric.name}{${label}="${value}"}: not among the documented ${values.join(', ')}`);
        }
    return problems;
  } finally {
    await built.close();
    await fixture.dispose();
  }
}

describe('docs/operations.md: the metrics table is the metrics the code registers', () => {
  test('every metric name in src has a row, and every row is a metric in src', () => {
    assert.ok(metricNames.has('convoke_admissions_total') && metricNames.has('convoke_nats_command_replies_total'), [...metricNames].join(' '));
    assert.deepEqual([...metricNames].filter((name) => !metricRows.has(name)).sort(), [], 'registered but not documented');
    assert.deepEqual([...metricRows.keys()].filter((name) => !metricNames.has(name)).sort(), [], 'documented but not registered');
  });

  test("each metric's type, label names and the label values the code sets at start are the documented ones", async () => {
    assert.deepEqual(await metricProblems(), []);
  });

  test('every convoke_ name the documents mention is a metric, or one the renames table lists as gone', () => {
    const renamed = section(operationsDoc, '### Renamed metrics')
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => /`([a-z_]+)/.exec(cells(line)[0]!)![1]!);
    const documents = [
      'README.md',
      ...readdirSync(join(repoRoot(), 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const problems = documents.flatMap((doc) =>
      [...readFileSync(join(repoRoot(), doc), 'utf8').matchAll(/\bconvoke_[a-z0-9_]+/g)]
        .map((m) => m[0])
        .filter((name) => !metricNames.has(name) && !renamed.includes(name))
        .map((name) => `${doc}: ${name}`),
    );
    assert.deepEqual([...new Set(problems)], []);
  });
});

test('docs/operations.md: the Logs table names every event the code logs, and only those', () => {
  const documented = section(operationsDoc, '## Logs')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .slice(1) // the header, `event`
    .flatMap((line) => spans(cells(line)[0]!));
  const texts = sources();
  const logged = new Set(texts.flatMap((text) => [...text.matchAll(/\bevent: '([a-z-]+)'/g)].map((m) => m[1]!)));
  // The operation log's failures: `${layer}-error`, one event per layer its signature allows.
  const layers = texts.flatMap((text) => [...text.matchAll(/failed\(layer: ((?:'[a-z]+'(?: \| )?)+),/g)].flatMap((m) => spans(m[1]!.replaceAll("'", '`'))));
  assert.ok(layers.includes('store'), 'the layers of OperationLog.failed');
  for (const layer of layers) logged.add(`${layer}-error`);
  assert.ok(logged.has('http-request') && logged.has('deployment'), [...logged].join(' '));
  assert.deepEqual([...logged].filter((event) => !documented.includes(event)).sort(), [], 'logged but not documented');
  assert.deepEqual(documented.filter((event) => !logged.has(event)).sort(), [], 'documented but never logged');
});

test('docs/reference.md: the Environment table names every variable the code reads by name, and only those', () => {
  const documented = section(reference, '### Environment')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => spans(cells(line)[0]!))
    .filter((name) => /^[A-Z][A-Z0-9_]*$/.test(name));
  // `env.NAME`, `env['NAME']` (process.env or the env a function is handed), and the NATS password's default variable.
  const read = new Set(
    sources().flatMap((text) => [
      ...[...text.matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]*)\b/g)].map((m) => m[1]!),
      ...[...text.matchAll(/\bpasswordEnvDefault = '([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!),
    ]),
  );
  assert.ok(read.has('CONVOKE_CONTEXTS') && read.has('CONVOKE_NATS_PASSWORD'), [...read].join(' '));
  assert.deepEqual([...read].filter((name) => !documented.includes(name)).sort(), [], 'read but not documented');
  assert.deepEqual(documented.filter((name) => !read.has(name)).sort(), [], 'documented but never read');
});

/**
 * The keys a span of the Configuration section names: its first cells (`durable.maxMsgs`), and
 * in a span that writes an object or a list of them (`{"perSecond", "burst"}`, `{host, port (0 = free), …}`) each
 * name that opens it or follows a comma. Capitalized names (`PEER`, `NAME`) are placeholders.
 */
function configKeysIn(markdown: string): string[] {
  const keys: string[] = [];
  for (const line of markdown.split('\n').filter((l) => l.startsWith('| `'))) {
    const [first = '', ...rest] = cells(line);
    for (const span of spans(first).map((s) => s.replace(/\.<[^>]*>/g, ''))) if (/^[a-z][A-Za-z.]*$/.test(span)) keys.push(...span.split('.'));
    for (const span of spans(rest.join(' ')).filter((s) => /^\[?\{/.test(s)))
      for (const m of span.matchAll(/(?:\{|,)\s*"?([a-z][A-Za-z0-9]*)"?\??\s*(?=[:,}"?(]|\s\()/g)) keys.push(m[1]!);
  }
  return keys;
}

test('docs/reference.md: every key the Configuration section names is one the serve config takes', () => {
  const known = new Set(
    [...propertyPaths(deploymentConfigSchema), ...propertyPaths(natsTransportSchema, 'transport')].flatMap((path) => path.split(/[.[\]*]+/)),
  );
  const named = configKeysIn(section(reference, '## Configuration'));
  assert.ok(
    ['heartbeatMs', 'perSecond', 'exclusivePeerPublishers', 'tokenSha256', 'timerGraceMs'].every((key) => named.includes(key)),
    named.join(' '),
  );
  assert.deepEqual([...new Set(named.filter((key) => !known.has(key)))], []);
});

test("docs/reference.md: the example peer's config table is the peer config's schema", () => {
  const table = section(reference, '## The example peer');
  const documented = new Set(configKeysIn(table));
  const keys = propertyPaths(peerConfigSchema).filter((path) => !path.includes('.') || path.startsWith('nats.') || path.startsWith('faults.'));
  const names = keys.map((path) => path.split('.').at(-1)!);
  assert.deepEqual(
    names.filter((name) => !documented.has(name) && !table.includes(`"${name}"`)),
    [],
    'taken but not documented',
  );
  const known = new Set(propertyPaths(peerConfigSchema).flatMap((path) => path.split(/[.[\]*]+/)));
  assert.deepEqual(
    [...documented].filter((key) => !known.has(key)),
    [],
    'documented but not taken',
  );
});

test("docs/reference.md: the defaults the serve config's tables state are the code's", () => {
  const configuration = section(reference, '## Configuration');
  /** The default cell of the first row whose first cell names `field` (its code spans), in the table after the line starting `table`. */
  const stated = (field: string, table = '') => {
    const row = configuration
      .slice(configuration.indexOf(`\n${table}`))
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map(cells)
      .find(([names]) => spans(names ?? '').includes(field));
    return row === undefined ? [`no row for ${field}`] : spans(row.at(-1)!);
  };
  const events = '`workflows.events` (';
  const expected: [string, string, string?][] = [
    ['durable.maxMsgs', String(limits.durableStreamMsgsDefault)],
    ['durable.maxDeliver', String(natsDurableDefaults.maxDeliver)],
    ['durable.ackWaitMs', String(natsDurableDefaults.ackWaitMs)],
    ['durabilityCheckIntervalMs', String(durabilityCheckIntervalMsDefault)],
    ['commandQueue', commandQueueDefault],
    ['manageStreams', 'false'],
    ['subjectPrefix', workflowEventsDefaults.subjectPrefix, events],
    ['emitSubjectPrefix', workflowEventsDefaults.emitSubjectPrefix, events],
    ['stream', workflowEventsDefaults.stream, events],
    ['streamEventsPerPrincipal', String(workflowEventsDefaults.streamEventsPerPrincipal), events],
    ['listen', workflowEventsDefaults.queue, events],
    ['emit', 'none', events],
    ['http', 'false', events],
    ['privateNetworks', 'false', '`workflows.http` ('],
  ];
  assert.deepEqual(
    expected
      .filter(([field, value, table]) => !stated(field, table).includes(value))
      .map(([field, value, table]) => `${field}: ${stated(field, table).join(', ')}, the code ${value}`),
    [],
  );
  assert.ok(configuration.includes(`${limits.durableMsgBytesDefault / 1024} KiB`), 'durable.maxMsgBytes');
  /** 60000 → `60 000`, as the prose writes numbers. */
  const written = (n: number) => String(n).replace(/\B(?=(\d{3})+$)/g, ' ');
  const policy = configuration.split('\n').find((line) => line.startsWith('| `policy`')) ?? '';
  assert.ok(
    policy.includes(`\`ttlMs\` (1 to ${written(limits.leaseMsMax)}, default ${written(policyTtlMsDefault)}`),
    `policy.ttlMs: 1 to ${written(limits.leaseMsMax)}, default ${written(policyTtlMsDefault)}`,
  );
});

test("docs/reference.md: the Defaults table is every option's default, and names only options that have it", () => {
  const rows = section(reference, '### Defaults')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map(cells)
    .map(([option, value]) => ({ option: spans(option!)[0]!, value: spans(value!)[0] }));
  const problems: string[] = [];
  const defaults = new Map<string, string>();
  for (const [name, command] of leafCommands())
    for (const option of command.options) {
      const value: unknown = option.defaultValue;
      if (value === undefined || value === false || (Array.isArray(value) && value.length === 0)) continue;
      defaults.set(`${name} ${option.long!}`, typeof value === 'string' ? value : JSON.stringify(value));
    }
  for (const [option, value] of defaults) {
    const row = rows.find((r) => r.option === option);
    if (row === undefined) problems.push(`${option}: default ${value} has no row`);
    else if (row.value !== value) problems.push(`${option}: documented ${row.value}, default ${value}`);
  }
  for (const { option } of rows) if (!defaults.has(option)) problems.push(`${option}: documented, but no option has a default by that name`);
  assert.deepEqual(problems, []);
});

test("README.md: the Reference section's command table names every command", () => {
  const table = section(readFileSync(join(repoRoot(), 'README.md'), 'utf8'), '## Reference')
    .split('\n')
    .filter((line) => line.startsWith('| `convoke '))
    .map((line) => cells(line)[0]!)
    .join(' ');
  const missing = [...leafCommands().keys()]
    .map((name) => name.split(' ')[0]!)
    .filter((word, i, all) => all.indexOf(word) === i && !new RegExp(`(\`convoke |, \`)${word}\\b`).test(table));
  assert.deepEqual(missing, []);
});
