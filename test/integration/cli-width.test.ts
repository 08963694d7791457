/**
 * What a person reads fits a narrow terminal: every human-readable command's output and help,
 * given a 60-column io (tableWidthMin, the narrowest tables are drawn at), has no longer line and
 * loses no cell; `--json` is the same at any width.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { tableWidthMin, type CliIo } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import { labelled, proseWidthMin, renderTable, ShortId } from '../../src/cli/table.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
let dir: string;
let store: string;
let operationId: string;
let instanceId: string;

async function run(columns: number | undefined, ...args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const io: CliIo = { stdout: { write: (s: string) => (out += s) }, stderr: { write: () => true }, readStdin: async () => new Uint8Array(), columns };
  return { code: await main(['node', 'convoke', ...args], io), out };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-width-'));
  process.env.XDG_CONFIG_HOME = join(dir, 'config');
  store = `sqlite:${join(dir, 'ops.db')}`;
  let text = '';
  const io: CliIo = { stdout: { write: (s: string) => (text += s) }, stderr: { write: () => true }, readStdin: async () => new Uint8Array() };
  assert.equal(await demoCommand({ scenario: 'cancel-siblings', store, peers: 8, quorum: 1, json: true, seed: 2, approveRate: 1 }, io), 0);
  operationId = /"operationId":\s*"(op[0-9a-f]{64})"/.exec(text)![1]!;
  text = '';
  assert.equal(await demoCommand({ scenario: 'pipeline', store, peers: 3, quorum: 1, json: true, seed: 2, approveRate: 1 }, io), 0);
  instanceId = (JSON.parse(text) as { instance: { instanceId: string } }).instance.instanceId;
  const contexts = join(dir, 'contexts.json');
  assert.equal(
    (await run(undefined, 'context', 'add', 'a-context-with-a-long-name', '--store', store, '--description', 'x '.repeat(40), '--contexts', contexts)).code,
    0,
  );
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('every human-readable output and help fits 60 columns', async () => {
  const contexts = join(dir, 'contexts.json');
  const commands = [
    ['inspect', operationId, '--store', store],
    // An instance's summary under its transitions: its output and its child operations' ids.
    ['inspect', instanceId, '--store', store],
    ['workflow', 'inspect', instanceId, '--store', store],
    ['get', operationId, '--store', store],
    ['list', '--store', store],
    ['replay', '--store', store],
    ['demo', '--scenario', 'cancel-siblings', '--peers', '8', '--quorum', '1'],
    ['bundle', 'check', join(repoRoot, 'examples', 'review.bundle.json')],
    ['workflow', 'validate', join(repoRoot, 'examples', 'review-publish.bundle.yaml')],
    ['context', 'ls', '--contexts', contexts],
    ['context', 'show', '--contexts', contexts],
    ['--help'],
    ...['invoke', 'get', 'cancel', 'inspect', 'list', 'tail', 'replay', 'demo'].map((command) => [command, '--help']),
    ['context', 'add', '--help'],
  ];
  for (const args of commands) {
    const { code, out } = await run(tableWidthMin, ...args);
    assert.equal(code, 0, args.join(' '));
    for (const line of out.split('\n')) assert.ok(line.length <= tableWidthMin, `convoke ${args.join(' ')}: ${line.length} columns: ${line}`);
  }
});

test('a table narrower than its header words is drawn as records and keeps every character of every cell', () => {
  const headers = ['operation', 'admitted', 'principal', 'interaction', 'state', 'open branches', 'next due', 'stuck'];
  const cells = ['op0123456789ab…', '2026-12-04T18:17:59Z', 'a-principal', 'review', 'settled success complete', 0, '2026-12-04T18:18:29Z', 'past-timeout'];
  const text = renderTable(headers, [cells], tableWidthMin);
  const lines = text.split('\n');
  for (const line of lines) assert.ok(line.length <= tableWidthMin, line);
  // A record a row, a field a line: the headers once each (one row), every cell's characters there.
  assert.match(text, /^operation {6}op0123456789ab…$/m, text);
  const visible = (t: string) => t.replace(/[\s-]/g, '').length;
  assert.equal(visible(text), visible([...headers, ...cells.map(String)].join('')));
});

test('--json is the same whatever the width', async () => {
  for (const args of [
    ['list', '--store', store, '--json'],
    ['inspect', operationId, '--store', store, '--json'],
  ]) {
    assert.equal((await run(tableWidthMin, ...args)).out, (await run(undefined, ...args)).out);
  }
});

/**
 * What breaks a token: a piece of an instant that is not its whole, its date or its time from the
 * `T`; an id (op/wf + hex) that is not whole nor a prefix of at least 7 hex digits and `…`.
 */
function brokenTokens(text: string): string[] {
  return text
    .split(/\s+/)
    .filter((token) => /^\d{4}-|^T?\d{2}:|^(op|wf)[0-9a-f]+…?$/.test(token))
    .filter((token) => !/^(\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?|T\d{2}:\d{2}:\d{2}Z|(op|wf)[0-9a-f]{7,}…|(op|wf)[0-9a-f]{64})$/.test(token));
}

/** The words of a table's header lines (those above its rule) that are none of its headers' words. */
function brokenHeaderWords(text: string, headers: string[]): string[] {
  const words = new Set(headers.flatMap((h) => h.split(' ')));
  const rule = text.split('\n').findIndex((line) => /^-+( +-+)*$/.test(line));
  return text
    .split('\n')
    .slice(0, rule)
    .flatMap((line) => line.split(/\s+/).filter((w) => w !== '' && !words.has(w)));
}

test('list and workflow list at 80 columns and at tableWidthMin break no id or instant; at 80 no header word', async () => {
  const tables = [
    { args: ['list', '--store', store], headers: ['operation', 'admitted', 'principal', 'interaction', 'state', 'open', 'next due', 'stuck'] },
    {
      args: ['workflow', 'list', '--store', store],
      headers: ['instance', 'started', 'principal', 'workflow', 'status', 'task', 'next due', 'child ops', 'stuck'],
    },
  ];
  for (const columns of [80, tableWidthMin]) {
    for (const { args, headers } of tables) {
      const { code, out } = await run(columns, ...args);
      assert.equal(code, 0);
      assert.match(out, /\b(op|wf)[0-9a-f]{7,}…/, out);
      assert.match(out, /\d{4}-\d{2}-\d{2}/, out);
      for (const line of out.split('\n')) assert.ok(line.length <= columns, `${args.join(' ')} at ${columns}: ${line}`);
      assert.deepEqual(brokenTokens(out), [], `${args.join(' ')} at ${columns}:\n${out}`);
      if (columns === 80) assert.deepEqual(brokenHeaderWords(out, headers), [], `${args.join(' ')} at ${columns}:\n${out}`);
    }
  }
});

test('replay at 80 columns and at tableWidthMin: ids shorten, whole at ease, and no header word or id breaks', async () => {
  const tables = [
    {
      args: ['replay', '--store', store],
      headers: [
        ['operation', 'transitions', 'phase', 'outcome', 'result'],
        ['workflow instance', 'transitions', 'status', 'result'],
      ],
    },
    { args: ['replay', instanceId, '--store', store], headers: [['workflow instance', 'transitions', 'status', 'result']] },
  ];
  for (const columns of [80, tableWidthMin]) {
    for (const { args, headers } of tables) {
      const { code, out } = await run(columns, ...args);
      assert.equal(code, 0);
      assert.match(out, /^wf[0-9a-f]{7,}…? /m, out);
      for (const line of out.split('\n')) assert.ok(line.length <= columns, `${args.join(' ')} at ${columns}: ${line}`);
      assert.deepEqual(brokenTokens(out), [], `${args.join(' ')} at ${columns}:\n${out}`);
      // Each table's header lines (a replay of the store draws one per kind, a blank line between).
      const drawn = out.split('\n\n').filter((table) => /^-+( +-+)*$/m.test(table));
      assert.equal(drawn.length, headers.length, out);
      drawn.forEach((table, i) => assert.deepEqual(brokenHeaderWords(table, headers[i]!), [], `${args.join(' ')} at ${columns}:\n${out}`));
    }
  }
  // Wide enough, every id is whole: the one to give inspect or replay as it is.
  const { out } = await run(120, 'replay', '--store', store);
  assert.ok(out.includes(instanceId) && out.includes(operationId), out);
});

test('rows of instants, ids and reasons at 80 columns: ids shorten and instants break at their T before anything else breaks', () => {
  const headers = ['operation', 'admitted', 'principal', 'interaction', 'state', 'open', 'next due', 'stuck'];
  const id = `op${'0123456789abcdef'.repeat(4)}`;
  const row = [new ShortId(id), '2026-12-05T19:44:52Z', 'demo-user', 'review', 'active open pending', 2, '2026-12-05T19:45:00Z', ''];
  const text = renderTable(headers, [row, row], 80);
  for (const line of text.split('\n')) assert.ok(line.length <= 80, line);
  assert.deepEqual(brokenTokens(text), [], text);
  assert.deepEqual(brokenHeaderWords(text, headers), [], text);
  assert.match(text, /^op0123456…? +2026-12-05 /m, text);
  assert.match(text, /^ +T19:44:52Z /m, text);
  // Unbounded, the id shows its 14 characters and the instants are whole, as before.
  assert.match(renderTable(headers, [row]), /^op0123456789ab… +2026-12-05T19:44:52Z +demo-user +review +active open pending /m);
  // Every column full: headers and words give way first; ids and instants still do not break.
  const full = ['instance', 'started', 'principal', 'workflow', 'status', 'task', 'next due', 'child ops', 'stuck'];
  const fullRow = [new ShortId(`wf${id.slice(2)}`), row[1], 'local', 'review-then-publish', 'running', 'approve', row[6], 3, 'timer-overdue'];
  const fullText = renderTable(full, [fullRow], 80);
  for (const line of fullText.split('\n')) assert.ok(line.length <= 80, line);
  assert.deepEqual(brokenTokens(fullText), [], fullText);
});

test('at tableWidthMin a column empty on every row is left out, with a note naming it, rather than words breaking', () => {
  const headers = ['operation', 'admitted', 'principal', 'interaction', 'state', 'open', 'next due', 'stuck'];
  const row = [new ShortId(`op${'a'.repeat(64)}`), '2026-12-05T19:44:52Z', 'demo', 'review', 'settled success complete', 0, null, ''];
  const text = renderTable(headers, [row], tableWidthMin);
  assert.doesNotMatch(text.split('\n')[0]!, /next|stuck/);
  assert.match(text, /\(next due, stuck: empty on every row, left out\)/);
  // Wide enough, nothing is left out.
  assert.match(renderTable(headers, [row], 120).split('\n')[0]!, /next due +stuck$/);
});

test("a labelled line's text starts each of its own lines (a newline in data) under the text's column, never at the margin", () => {
  assert.equal(labelled('error ', 'bad\nthing', 80), 'error bad\n      thing');
  assert.equal(
    labelled('child ', `/do/0/a\n${'b '.repeat(40)}`, 60)
      .split('\n')
      .slice(1)
      .filter((line) => !line.startsWith('      ')).length,
    0,
  );
});

test("inspect and workflow inspect at tableWidthMin write an event's detail under its row, across the width, rather than in a column a few characters wide", async () => {
  const inspected = (await run(tableWidthMin, 'inspect', operationId, '--store', store)).out;
  // The admission's detail reads as one line under its row, not cut into pieces of a narrow column.
  assert.match(inspected, /^ {4}8 branches, threshold 1\/8, timeout \d+ ms$/m, inspected);
  assert.match(inspected, /^rev +committed at +\+ms +guard +state +event\n {4}detail\n-{3} /m, inspected);
  for (const args of [
    ['inspect', operationId, '--store', store],
    ['workflow', 'inspect', instanceId, '--store', store],
  ]) {
    const { out } = await run(tableWidthMin, ...args);
    const lines = out.split('\n');
    const table = lines.slice(lines.findIndex((line) => line.startsWith('rev ')));
    const rule = table.find((line) => /^-+( +-+)+$/.test(line)) ?? '';
    // Every column of the rule is one the table drew; none is the detail squeezed to a sliver.
    assert.ok(
      rule.split(/ +/).every((dashes) => dashes.length >= 3),
      `${args.join(' ')}: ${rule}`,
    );
    assert.equal(table[1], '    detail', `${args.join(' ')}:\n${out}`);
  }
  // At 80 columns a detail column beside the others would break a result's JSON mid-word
  // (`"no` over `te"`): the detail is under its row there too, its words whole.
  const at80 = (await run(80, 'inspect', operationId, '--store', store)).out;
  assert.match(at80, /^rev +committed at +\+ms +guard +state +event\n {4}detail\n/m, at80);
  assert.match(at80, /^ {4}alfa: success \{"verdict":"approve","note":"alfa read it in \d+ ms"\}$/m, at80);
  // At 120 the detail keeps its column, as wide as proseWidthMin at least.
  const wide = (await run(120, 'inspect', operationId, '--store', store)).out;
  const header = wide.split('\n').find((line) => line.startsWith('rev')) ?? '';
  assert.match(header, /event +detail$/, wide);
  const ruleAt120 = wide.split('\n').find((line) => /^-+( +-+)+$/.test(line)) ?? '';
  assert.ok((ruleAt120.split(' ').at(-1) ?? '').length >= proseWidthMin, ruleAt120);
});

test('a prose last column narrower than proseWidthMin goes under its row; wide enough, or not prose, it stays a column', () => {
  const headers = ['rev', 'committed at', 'event', 'detail'];
  const rows = [
    [1, '2026-12-05T19:44:52.123Z', 'operation-admitted', '3 branches, threshold 2/3, timeout 30000 ms'],
    ['', '', 'dispatch-recorded', ''],
  ];
  const under = renderTable(headers, rows, 50, { proseLast: true });
  assert.equal(
    under,
    [
      'rev  committed at              event',
      '    detail',
      '---  ------------------------  ------------------',
      '1    2026-12-05T19:44:52.123Z  operation-admitted',
      '    3 branches, threshold 2/3, timeout 30000 ms',
      '                               dispatch-recorded',
      '',
    ].join('\n'),
  );
  // Without the option the same table squeezes the detail into its column.
  assert.match(renderTable(headers, rows, 50).split('\n')[0]!, /detail/);
  // Wide enough, the detail is a column.
  assert.match(renderTable(headers, rows, 120, { proseLast: true }).split('\n')[0]!, /event +detail$/);
});

/** The ids (op/wf + hex) in a text that are neither whole nor a prefix of at least 7 hex digits and `…`: an id cut across lines. */
function brokenIds(text: string): string[] {
  return text
    .split(/[\s(),:;]+/)
    .filter((token) => /^(op|wf)[0-9a-f]+…?$/.test(token))
    .filter((token) => !/^(op|wf)([0-9a-f]{64}|[0-9a-f]{7,}…)$/.test(token));
}

test('inspect and workflow inspect at 60, 80 and 120 columns: the id on a line of its own, whole where it fits, else a prefix; the count on the next; no id cut', async () => {
  const targets = [
    { args: ['inspect', operationId, '--store', store], label: 'operation', id: operationId, count: /^\d+ transitions \(guard relative to admission, ms\)$/ },
    {
      args: ['inspect', instanceId, '--store', store],
      label: 'workflow instance',
      id: instanceId,
      count: /^\d+ transitions \(instants relative to its start, ms\)$/,
    },
    {
      args: ['workflow', 'inspect', instanceId, '--store', store],
      label: 'workflow instance',
      id: instanceId,
      count: /^\d+ transitions \(instants relative to its start, ms\)$/,
    },
  ];
  for (const columns of [tableWidthMin, 80, 120]) {
    for (const { args, label, id, count } of targets) {
      const { code, out } = await run(columns, ...args);
      assert.equal(code, 0);
      const [first = '', second = ''] = out.split('\n');
      const shown = first.slice(label.length + 1);
      assert.ok(first.startsWith(`${label} `) && first.length <= columns, `${args.join(' ')} at ${columns}: ${first}`);
      // Whole when the line holds it; else a prefix (what inspect and replay resolve), never cut onto the next line.
      assert.ok(label.length + 1 + id.length <= columns ? shown === id : shown.endsWith('…') && id.startsWith(shown.slice(0, -1)), `at ${columns}: ${first}`);
      assert.match(second, count, `${args.join(' ')} at ${columns}:\n${out}`);
      assert.deepEqual(brokenIds(out), [], `${args.join(' ')} at ${columns}:\n${out}`);
      for (const line of out.split('\n')) assert.ok(line.length <= columns, `${args.join(' ')} at ${columns}: ${line}`);
    }
  }
});

test('get from a store at 60, 80 and 120 columns: the operation row holds the id whole where it fits, else a prefix, never cut across lines', async () => {
  for (const columns of [tableWidthMin, 80, 120]) {
    const { code, out } = await run(columns, 'get', operationId, '--store', store);
    assert.equal(code, 0);
    const row = /^operation +(\S+)$/m.exec(out)?.[1] ?? '';
    assert.ok(row === operationId || (row.endsWith('…') && operationId.startsWith(row.slice(0, -1))), `at ${columns}:\n${out}`);
    if (columns >= 80) assert.equal(row, operationId);
    assert.deepEqual(brokenIds(out), [], `at ${columns}:\n${out}`);
    for (const line of out.split('\n')) assert.ok(line.length <= columns, `at ${columns}: ${line}`);
  }
});

test('prune at 60 and 80 columns: every line fits, and at 60 what each row means reads under it rather than in a sliver of a column', async () => {
  for (const columns of [tableWidthMin, 80]) {
    const { code, out } = await run(columns, 'prune', '--store', store, '--keep', '1h', '--dry-run');
    assert.equal(code, 0);
    for (const line of out.split('\n')) assert.ok(line.length <= columns, `at ${columns}: ${line}`);
    assert.match(out, /workflow\s+instances\s+begun\s+before\s+the\s+cutoff\s+examined/, out);
  }
  const narrow = (await run(tableWidthMin, 'prune', '--store', store, '--keep', '1h', '--dry-run')).out;
  assert.match(narrow, /^ {4}settled \(complete\) or ended before the cutoff: the log$/m, narrow);
  // At 80 the explanation keeps its column.
  assert.match((await run(80, 'prune', '--store', store, '--keep', '1h', '--dry-run')).out, /^ +operations +instances +what$/m);
});

test('demo (an operation, a pipeline) at 60, 80 and 120 columns: no id is cut across lines, the operation whole where it fits', async () => {
  for (const columns of [tableWidthMin, 80, 120]) {
    for (const scenario of ['default', 'pipeline']) {
      const { code, out } = await run(columns, 'demo', '--scenario', scenario);
      assert.equal(code, 0);
      for (const line of out.split('\n')) assert.ok(line.length <= columns, `${scenario} at ${columns}: ${line}`);
      assert.deepEqual(brokenIds(out), [], `${scenario} at ${columns}:\n${out}`);
      if (scenario === 'default' && columns >= 80) assert.match(out, /^operation op[0-9a-f]{64}$/m, out);
      // The log's heading reads as one line, its instance named on the instance line above it.
      if (scenario === 'pipeline') assert.match(out, /^the instance's log: \d+ transitions$/m, `at ${columns}:\n${out}`);
    }
  }
});

test("bundle check at 60 and 80 columns: the digest and subjects wrap under their value's column, never back to the margin", async () => {
  for (const columns of [tableWidthMin, 80]) {
    const { code, out } = await run(columns, 'bundle', 'check', join(repoRoot, 'examples', 'review.bundle.json'));
    assert.equal(code, 0);
    const head = out.split('\n\n')[0]!.split('\n');
    assert.ok(head.length > 3, `wraps at ${columns}:\n${out}`);
    for (const line of head) assert.match(line, /^(contract |digest {3}|subjects | {9})\S/, `at ${columns}:\n${out}`);
  }
});

/**
 * The words of a narrow output that are not words of the same output drawn unbounded: a header or a
 * value broken mid-word (`intera` `ction`, `succe` `ssful`). A word may still break after a hyphen
 * between letters (`all-` `successful`), so any run of a word's hyphenated pieces is whole. Words
 * with digits (ids, instants, the milliseconds a demo takes, different on each run) and a table's
 * rule are not compared; nor the pieces of a word wider than half the width (a JSON value, a path),
 * which a labelled line or a record's value column (never narrower than that) cuts as it must.
 */
function brokenWords(narrow: string, wide: string, columns: number): string[] {
  const whole = new Set<string>();
  const long: string[] = [];
  for (const word of wide.split(/\s+/)) {
    if (word.length > columns / 2) long.push(word);
    const pieces = word.split(/(?<=[A-Za-z]-)(?=[A-Za-z])/);
    for (let i = 0; i < pieces.length; i++) for (let j = i + 1; j <= pieces.length; j++) whole.add(pieces.slice(i, j).join(''));
  }
  return narrow.split(/\s+/).filter((word) => word !== '' && !/\d|^-+$/.test(word) && !whole.has(word) && !long.some((w) => w.includes(word)));
}

test('bundle check at 80 and 60 columns: no header or word of its table is broken mid-word, and every line fits', async () => {
  const file = join(repoRoot, 'examples', 'review.bundle.json');
  // Its table, below the labelled head (whose digest, one long token, is cut at the width by design).
  const table = (out: string) => out.split('\n\n').slice(1).join('\n\n');
  const wide = (await run(undefined, 'bundle', 'check', file)).out;
  for (const columns of [80, tableWidthMin]) {
    const { code, out } = await run(columns, 'bundle', 'check', file);
    assert.equal(code, 0);
    for (const line of out.split('\n')) assert.ok(line.length <= columns, `at ${columns}: ${line}`);
    assert.deepEqual(brokenWords(table(out), table(wide), columns), [], `at ${columns}:\n${out}`);
    // Every header and value is still there.
    for (const word of ['interaction', 'attempts', 'independent', 'all-successful', 'first-success', 'distinct-branches'])
      assert.match(out, new RegExp(`\\b${word}\\b`), `at ${columns}:\n${out}`);
  }
});

test("every command's tables at 60, 80 and 120 columns: no header or word broken mid-word, every line within the width", async () => {
  const contexts = join(dir, 'contexts.json');
  const commands = [
    ['bundle', 'check', join(repoRoot, 'examples', 'review.bundle.json')],
    ['bundle', 'check', join(repoRoot, 'examples', 'review-publish.bundle.yaml')],
    ...['default', 'one-eligible-failover', 'lease-expiry', 'cancel-siblings', 'revocation', 'pipeline'].map((scenario) => ['demo', '--scenario', scenario]),
    ['list', '--store', store],
    ['workflow', 'list', '--store', store],
    ['replay', '--store', store],
    ['replay', instanceId, '--store', store],
    ['inspect', operationId, '--store', store],
    ['inspect', instanceId, '--store', store],
    ['workflow', 'inspect', instanceId, '--store', store],
    ['get', operationId, '--store', store],
    ['prune', '--store', store, '--keep', '1h', '--dry-run'],
    ['context', 'ls', '--contexts', contexts],
    ['context', 'show', '--contexts', contexts],
  ];
  // A labelled head's value wider than its line (a digest, a subject pattern) is cut at the width by
  // design, and the note naming columns left out is there only when narrow: neither is a table's word.
  const tables = (out: string) => out.replace(/^(digest|subjects) .*\n( {9}.*\n)*/gm, '').replace(/^\(.*: empty on every row, left out\)$/gm, '');
  // These two demos run on 400 ms leases in real time: which branches expire, and so which events and
  // results a run prints, differs from run to run on a loaded machine, so a run's words cannot be
  // compared with another run's. Their lines are still held to the width.
  const timed = (args: readonly string[]) => args[0] === 'demo' && (args[2] === 'lease-expiry' || args[2] === 'one-eligible-failover');
  for (const args of commands) {
    const wide = (await run(undefined, ...args)).out;
    for (const columns of [tableWidthMin, 80, 120]) {
      const { code, out } = await run(columns, ...args);
      assert.equal(code, 0, args.join(' '));
      for (const line of out.split('\n')) assert.ok(line.length <= columns, `convoke ${args.join(' ')} at ${columns}: ${line}`);
      if (!timed(args)) assert.deepEqual(brokenWords(tables(out), tables(wide), columns), [], `convoke ${args.join(' ')} at ${columns}:\n${out}`);
    }
  }
});
