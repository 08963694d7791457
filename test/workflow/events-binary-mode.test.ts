/**
 * POST /workflow-events in the CloudEvents HTTP binding's binary content mode (§3.1): the
 * attributes in `ce-` headers (percent-encoded, §3.1.3.2), `datacontenttype` the content-type, the
 * body the data. Over a real socket (node:http, which sends a header given twice as two header
 * lines), authenticated: an event so sent is the event structured mode sends, checked and delivered
 * as it is, and every header that would leave it open to two readings, or outside the CloudEvents
 * type system, is refused naming the header.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { buildFixtureApp, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { assertReplayEqual, harness, yaml, type Harness } from './support.js';

interface Answer {
  status: number;
  connection?: string;
  body: { status?: string; matched?: string[]; kind?: string; description?: string };
}

type Headers = Record<string, string | string[]>;

/** POSTs to /workflow-events with exactly these headers (a value given as an array is sent as that many header lines). */
function send(address: string, headers: Headers, body?: Buffer | string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${address}/workflow-events`, { method: 'POST', headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          ...(response.headers.connection === 'close' ? { connection: 'close' } : {}),
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
        }),
      );
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** The required attributes of an event, as binary mode's headers. */
const ceHeaders = (id: string, type = 'com.example.approved'): Headers => ({
  'ce-specversion': '1.0',
  'ce-id': id,
  'ce-source': 'https://convoke.dev/test',
  'ce-type': type,
});

const listenFor = (name: string, ...types: string[]) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          all:
${types.map((type) => `            - with: { type: ${type} }`).join('\n')}
`);

interface Served {
  address: string;
  fixture: HttpFixture;
  h: Harness;
  auth: Headers;
  /** Starts an instance of alice's listening for these types, all of them, and waits until it listens. */
  listening(name: string, ...types: string[]): Promise<string>;
  /** The events the instance's listen took so far. */
  taken(instanceId: string): Promise<JsonValue[]>;
}

async function withServer(body: (served: Served) => Promise<void>): Promise<void> {
  const fixture = await writeHttpFixture();
  const h = harness();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const taken = async (instanceId: string) => ((await h.executor.get(instanceId))?.listens['/do/0/wait']?.events ?? []).map((e) => e.event);
    const listening = async (name: string, ...types: string[]) => {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: name, document: listenFor(name, ...types), input: {} });
      while (!(await h.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));
      return instanceId;
    };
    await body({ address, fixture, h, auth: { authorization: `Bearer ${fixture.tokens.alice}` }, listening, taken });
  } finally {
    await built.close();
    await h.close();
    await fixture.dispose();
  }
}

test('binary mode: a JSON data event wakes a listen, recorded exactly as the same event in structured mode, which is then answered as taken; an empty body is an event with no data', async () => {
  await withServer(async ({ address, h, auth, listening, taken }) => {
    const id = await listening('binary-json', 'com.example.approved', 'com.example.closed');
    const data = { ok: true, items: [1, 2.5, 'three', null], nested: { é: 'ü' } };
    const first = await send(address, { ...auth, ...ceHeaders('b1'), 'content-type': 'application/json' }, JSON.stringify(data));
    assert.equal(first.status, 202, JSON.stringify(first.body));
    assert.deepEqual(first.body, { status: 'accepted', matched: [id] });
    const structured: CloudEvent = {
      specversion: '1.0',
      id: 'b1',
      source: 'https://convoke.dev/test',
      type: 'com.example.approved',
      datacontenttype: 'application/json',
      data,
    };
    assert.deepEqual(await taken(id), [structured]);
    // The same event in structured mode is the one taken: answered as taken, nothing appended.
    const again = await send(address, { ...auth, 'content-type': 'application/cloudevents+json' }, JSON.stringify(structured));
    assert.deepEqual(again, { status: 202, body: { status: 'accepted', matched: [id] } });
    assert.equal((await taken(id)).length, 1);

    // No body, no content-type: an event without data (nor datacontenttype).
    const bare = await send(address, { ...auth, ...ceHeaders('c1', 'com.example.closed') });
    assert.equal(bare.status, 202, JSON.stringify(bare.body));
    const record = await h.executor.wait(id, 5000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual((await taken(id))[1], { specversion: '1.0', id: 'c1', source: 'https://convoke.dev/test', type: 'com.example.closed' });
    await assertReplayEqual(h, id);
  });
});

test('binary mode: text data is its UTF-8 string, any other media type data_base64, and header values are percent-decoded (binding §3.1.3.2)', async () => {
  await withServer(async ({ address, auth, listening, taken }) => {
    const id = await listening('binary-kinds', 'com.example.note', 'com.example.scan', 'com.example.tagged');
    const note = await send(address, { ...auth, ...ceHeaders('n1', 'com.example.note'), 'content-type': 'text/plain; charset=utf-8' }, 'héllo "world"\n');
    assert.equal(note.status, 202, JSON.stringify(note.body));
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    const scan = await send(address, { ...auth, ...ceHeaders('s1', 'com.example.scan'), 'content-type': 'application/octet-stream' }, bytes);
    assert.equal(scan.status, 202, JSON.stringify(scan.body));
    const tagged = await send(address, {
      ...auth,
      ...ceHeaders('t1', 'com.example.tagged'),
      // The binding's own example, lower-case escapes, an escape of a character that needs none, and an older sender's quoted string.
      'ce-subject': 'Euro%20%E2%82%AC%20%f0%9f%98%80',
      'ce-source': '%2Fscanners%2f7',
      'CE-Tenant': '"acme \\"east\\" 100%25"',
      // An extension's value is its canonical string form: binary mode carries no type, so it stays a string.
      'ce-priority': '5',
      'ce-time': '2018-04-05T03:56:24Z',
    });
    assert.equal(tagged.status, 202, JSON.stringify(tagged.body));
    assert.deepEqual(await taken(id), [
      { ...structuredOf('n1', 'com.example.note'), datacontenttype: 'text/plain; charset=utf-8', data: 'héllo "world"\n' },
      { ...structuredOf('s1', 'com.example.scan'), datacontenttype: 'application/octet-stream', data_base64: 'AAEC+v8=' },
      {
        ...structuredOf('t1', 'com.example.tagged'),
        source: '/scanners/7',
        subject: 'Euro € 😀',
        tenant: 'acme "east" 100%',
        priority: '5',
        time: '2018-04-05T03:56:24Z',
      },
    ]);
  });
});

const structuredOf = (id: string, type: string) => ({ specversion: '1.0', id, source: 'https://convoke.dev/test', type });

test('binary mode: each hostile header or body is refused with its status, naming the header, and nothing is taken', async () => {
  await withServer(async ({ address, auth, listening, taken }) => {
    const id = await listening('binary-hostile', 'com.example.approved');
    const json = { 'content-type': 'application/json' };
    const cases: [string, Headers, string | Buffer | undefined, number, RegExp][] = [
      ['a repeated attribute header', { ...ceHeaders('h1'), 'ce-subject': ['a', 'b'] }, undefined, 400, /ce-subject.*2 times/],
      ['a repeated required header', { ...ceHeaders('h1'), 'ce-id': ['h1', 'h2'] }, undefined, 400, /ce-id.*2 times/],
      ['a repeated content-type', { ...ceHeaders('h1'), 'content-type': ['application/json', 'text/plain'] }, '{}', 400, /one content-type header, not 2/],
      ['ce-data', { ...ceHeaders('h1'), 'ce-data': '{}' }, undefined, 400, /ce-data\b.*not an attribute/],
      ['ce-data_base64', { ...ceHeaders('h1'), 'ce-data_base64': 'AAEC' }, undefined, 400, /ce-data_base64.*not an attribute/],
      ['ce-datacontenttype', { ...ceHeaders('h1'), 'ce-datacontenttype': 'application/json' }, undefined, 400, /ce-datacontenttype.*content-type/],
      ['an attribute name outside a-z0-9', { ...ceHeaders('h1'), 'ce-trace-id': 'x' }, undefined, 400, /ce-trace-id/],
      ['an attribute name past 20 characters', { ...ceHeaders('h1'), 'ce-abcdefghijklmnopqrstu': 'x' }, undefined, 400, /ce-abcdefghijklmnopqrstu/],
      ['a malformed escape', { ...ceHeaders('h1'), 'ce-subject': 'a%2' }, undefined, 400, /ce-subject.*%/],
      ['an escape of no hex digits', { ...ceHeaders('h1'), 'ce-subject': 'a%ZZb' }, undefined, 400, /ce-subject.*%/],
      ['an overlong encoding', { ...ceHeaders('h1'), 'ce-subject': '%C0%A0' }, undefined, 400, /ce-subject.*UTF-8/],
      ['a truncated sequence', { ...ceHeaders('h1'), 'ce-subject': '%E2%82' }, undefined, 400, /ce-subject.*UTF-8/],
      ['a raw byte outside ASCII', { ...ceHeaders('h1'), 'ce-subject': 'caf\u00e9' }, undefined, 400, /ce-subject.*printable ASCII/],
      ['a control character escaped', { ...ceHeaders('h1'), 'ce-subject': 'a%00b' }, undefined, 400, /ce-subject holds U\+0000/],
      ['an unterminated quoted string', { ...ceHeaders('h1'), 'ce-subject': '"abc' }, undefined, 400, /ce-subject.*quoted/],
      ['a double quote inside a value', { ...ceHeaders('h1'), 'ce-subject': 'a"b"' }, undefined, 400, /ce-subject.*%22/],
      ['a time outside RFC 3339', { ...ceHeaders('h1'), 'ce-time': 'yesterday' }, undefined, 400, /ce-time must match pattern/],
      ['a source not a URI-reference', { ...ceHeaders('h1'), 'ce-source': 'not%20a%20uri' }, undefined, 400, /ce-source must match format/],
      ['another specversion', { ...ceHeaders('h1'), 'ce-specversion': '0.3' }, undefined, 400, /ce-specversion.*1\.0/],
      ['a missing ce-id', { 'ce-specversion': '1.0', 'ce-source': '/s', 'ce-type': 'com.example.approved' }, undefined, 400, /ce-id/],
      ['ce- headers without ce-specversion', { 'ce-id': 'h1', 'ce-source': '/s', 'ce-type': 'com.example.approved', ...json }, '{}', 400, /ce-specversion/],
      ['the batched mode', { ...ceHeaders('h1'), 'content-type': 'application/cloudevents-batch+json' }, '[]', 415, /batch/],
      ['a JSON charset other than UTF-8', { ...ceHeaders('h1'), 'content-type': 'application/json; charset=latin1' }, '{}', 415, /content-type.*UTF-8/],
      ['a text charset other than UTF-8', { ...ceHeaders('h1'), 'content-type': 'text/plain; charset=iso-8859-1' }, 'x', 415, /content-type.*UTF-8/],
      ['data without a content-type', ceHeaders('h1'), 'x', 415, /content-type/],
      ['JSON data that is not JSON', { ...ceHeaders('h1'), ...json }, '{ok: true}', 400, /the body/],
      ['JSON data with a duplicate key', { ...ceHeaders('h1'), ...json }, '{"ok":true,"ok":false}', 400, /duplicate/],
      ['JSON data nested past the bound', { ...ceHeaders('h1'), ...json }, '['.repeat(64) + ']'.repeat(64), 400, /nesting deeper/],
      ['text data that is not UTF-8', { ...ceHeaders('h1'), 'content-type': 'text/plain' }, Buffer.from([0x61, 0xff]), 400, /the body.*UTF-8/],
      ['base64 past the event bound', { ...ceHeaders('h1'), 'content-type': 'application/octet-stream' }, Buffer.alloc(200 * 1024), 413, /bytes/],
    ];
    for (const [what, headers, body, status, says] of cases) {
      const refused = await send(address, { ...auth, ...headers }, body);
      assert.equal(refused.status, status, `${what}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.kind, 'invalid-input', what);
      assert.match(refused.body.description ?? '', says, what);
    }
    assert.equal((await send(address, { ...ceHeaders('h1'), ...json }, '{}')).status, 401, 'authentication first');
    // Refused before the body is read: the connection closes, as after a 401, rather than wait for the rest of the body.
    const early = await send(address, { ...auth, ...ceHeaders('h1'), 'ce-subject': ['a', 'b'], ...json }, '{}');
    assert.deepEqual([early.status, early.connection], [400, 'close']);
    assert.deepEqual(await taken(id), [], 'no refused event was taken');
    // The same bound as structured mode: data nested one level less than the event (limits.jsonDepthMax) is taken.
    const deepest = '['.repeat(limits.jsonDepthMax - 1) + ']'.repeat(limits.jsonDepthMax - 1);
    assert.equal((await send(address, { ...auth, ...ceHeaders('h2', 'com.example.unheard'), ...json }, deepest)).status, 404);
  });
});

test('an event over limits.cloudEventBytesMax once read, its body within it, is 413 in either mode, and nothing is taken', async () => {
  await withServer(async ({ address, auth, listening, taken }) => {
    const id = await listening('grown', 'com.example.approved');
    // 1e-6 is 4 bytes sent and 8 written as JSON (0.000001): the body is within the bound, the event read from it is not.
    const data = `[${Array.from({ length: 45_000 }, () => '1e-6').join(',')}]`;
    const structured = `{"specversion":"1.0","id":"g1","source":"https://convoke.dev/test","type":"com.example.approved","data":${data}}`;
    assert.ok(Buffer.byteLength(structured) < limits.cloudEventBytesMax);
    const sent: [string, Headers, string][] = [
      ['binary', { ...auth, ...ceHeaders('g1'), 'content-type': 'application/json' }, data],
      ['structured', { ...auth, 'content-type': 'application/cloudevents+json' }, structured],
    ];
    for (const [mode, headers, body] of sent) {
      const refused = await send(address, headers, body);
      assert.equal(refused.status, 413, `${mode}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.kind, 'invalid-input', mode);
      assert.match(refused.body.description ?? '', new RegExp(`at most ${limits.cloudEventBytesMax} \\(limits\\.cloudEventBytesMax\\)`), mode);
    }
    assert.deepEqual(await taken(id), [], 'no refused event was taken');
  });
});

test('content-type application/cloudevents+json is structured mode whatever ce- headers say: the body is the event, the headers are not read', async () => {
  await withServer(async ({ address, auth, listening, taken }) => {
    const id = await listening('structured-wins', 'com.example.approved');
    const event = { ...structuredOf('s1', 'com.example.approved'), data: { ok: true } };
    const answer = await send(
      address,
      { ...auth, ...ceHeaders('other', 'com.example.other'), 'ce-subject': ['x', 'y'], 'content-type': 'application/cloudevents+json' },
      JSON.stringify(event),
    );
    assert.deepEqual(answer, { status: 202, body: { status: 'accepted', matched: [id] } });
    assert.deepEqual(await taken(id), [event]);
  });
});

test('/openapi.json describes both modes: the binary mode headers, any media type as the data, batched mode refused', async () => {
  await withServer(async ({ address }) => {
    const doc = (await (await fetch(`${address}/openapi.json`)).json()) as {
      paths: Record<
        string,
        {
          post: {
            parameters: { name: string; in: string }[];
            requestBody: { content: Record<string, unknown> };
            responses: Record<string, { description: string }>;
          };
        }
      >;
    };
    const post = doc.paths['/workflow-events']?.post;
    assert.ok(post, 'an app with an event intake names POST /workflow-events');
    assert.deepEqual(
      post.parameters.map((p) => `${p.in}:${p.name}`),
      ['header:ce-specversion', 'header:ce-id', 'header:ce-source', 'header:ce-type'],
    );
    assert.deepEqual(Object.keys(post.requestBody.content), ['application/cloudevents+json', '*/*']);
    assert.match(post.responses['415']?.description ?? '', /batched mode/);
  });
});
