/**
 * Hostile bodies against the facade: ≥ 10 000 through `app.inject` and a few hundred over a real
 * socket. Every response must be a 4xx with a schema-valid AdapterError, the server must keep
 * serving, and afterwards the store must hold no operation at all (nothing here is admissible).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { describeErrors } from '../../src/contract/validation.js';
import { checkErrorShape } from '../../src/http/schemas.js';
import { buildFixtureApp, requestBody, storedOperationIds, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';

const bodyLimitBytes = 8 * 1024;
const injectRuns = 10_000;
const socketRuns = 300;

interface Case {
  kind: string;
  payload: string | Buffer;
  contentType?: string;
  authorization?: string;
  /** Allowed statuses; every one is 4xx. */
  expect: readonly number[];
}

const rejected = [400, 422] as const;

/** A valid request as an object; every case below breaks it in one hostile way. */
function validRequest(fixture: HttpFixture, key: string, document: string): JsonObject {
  return requestBody(fixture, { invocationKey: key, input: { document } });
}

type Base = fc.Arbitrary<JsonObject>;

const json = (value: JsonValue) => JSON.stringify(value);
const at = (text: string, anchor: string, insert: string) => text.replace(anchor, anchor + insert);
const noSurrogates = (s: string) => !/[\ud800-\udfff]/.test(s);

function duplicateKeys(base: Base): fc.Arbitrary<Case> {
  return fc.tuple(base, fc.constantFrom('top', 'contract', 'input', 'escaped')).map(([b, where]): Case => {
    const text = json(b);
    const payload =
      where === 'top'
        ? at(text, '{', '"interaction":"sealed",')
        : where === 'contract'
          ? at(text, '"contract":{', '"id":"other",')
          : where === 'input'
            ? at(text, '"input":{', '"document":"shadow",')
            : at(text, '{', '"\\u0069nteraction":"review",');
    return { kind: `duplicate-${where}`, payload, expect: [400] };
  });
}

/** Beyond jsonDepthMax the parser refuses; below it the interaction's input schema does. */
function deepNesting(base: Base): fc.Arbitrary<Case> {
  return fc.tuple(base, fc.integer({ min: 2, max: 400 }), fc.boolean()).map(([b, depth, arrays]): Case => {
    const open = arrays ? '['.repeat(depth) : '{"a":'.repeat(depth);
    const close = arrays ? ']'.repeat(depth) : '}'.repeat(depth);
    return { kind: 'deep-nesting', payload: json(b).replace(/"input":\{[^}]*\}/, `"input":${open}1${close}`), expect: [400] };
  });
}

function hugeNumbers(base: Base): fc.Arbitrary<Case> {
  const huge = fc.oneof(
    fc.bigInt({ min: 2n ** 53n, max: 10n ** 40n }).map((n) => n.toString()),
    fc.bigInt({ min: -(10n ** 40n), max: -(2n ** 53n) }).map((n) => n.toString()),
    fc.constantFrom('1e400', '-1e400', '1e16', '9007199254740993', '123456789012345678901234567890'),
  );
  return fc.tuple(base, huge, fc.constantFrom('waitMs', 'document', 'extra')).map(([b, n, where]): Case => {
    const text = json(b);
    const payload =
      where === 'waitMs'
        ? at(text, '{', `"waitMs":${n},`)
        : where === 'document'
          ? text.replace(/"document":"(?:[^"\\]|\\.)*"/, `"document":${n}`)
          : at(text, '"input":{', `"n":${n},`);
    return { kind: `huge-number-${where}`, payload, expect: [400] };
  });
}

function loneSurrogates(base: Base): fc.Arbitrary<Case> {
  const surrogate = fc.constantFrom('\\ud800', '\\udfff', '\\udbff\\u0041', 'a\\udc00', '\\ud83d');
  return fc.tuple(base, surrogate, fc.constantFrom('key', 'document', 'name', 'raw')).map(([b, s, where]): Case => {
    const text = json(b);
    if (where === 'raw') {
      // A surrogate encoded directly in UTF-8 (CESU-style bytes) is invalid UTF-8.
      const anchor = '"invocationKey":"';
      const cut = text.indexOf(anchor) + anchor.length;
      return {
        kind: 'lone-surrogate-raw',
        payload: Buffer.concat([Buffer.from(text.slice(0, cut)), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from(text.slice(cut))]),
        expect: [400],
      };
    }
    const payload =
      where === 'key'
        ? text.replace(/"invocationKey":"/, `"invocationKey":"${s}`)
        : where === 'document'
          ? text.replace(/"document":"/, `"document":"${s}`)
          : at(text, '"input":{', `"${s}":1,`);
    return { kind: `lone-surrogate-${where}`, payload, expect: [400] };
  });
}

function wrongTypes(base: Base): fc.Arbitrary<Case> {
  const wrongValue = fc.oneof(
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 3 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
  );
  const field = fc.constantFrom(
    'contract',
    'interaction',
    'invocationKey',
    'input',
    'waitFor',
    'waitMs',
    'contract.id',
    'contract.version',
    'contract.digest',
    'input.document',
  );
  return fc.tuple(base, field, wrongValue, fc.string({ maxLength: 8 })).map(([b, f, v, s]): Case => {
    const copy = structuredClone(b);
    const [outer, inner] = f.split('.') as [string, string | undefined];
    // waitFor must be an enum member and waitMs a non-negative integer ≤ the maximum: make sure the value is not one.
    const value: JsonValue = f === 'waitFor' ? `not-${s}` : f === 'waitMs' && typeof v === 'number' ? (Number.isInteger(v) && v >= 0 ? -1 - v : v) : v;
    if (inner === undefined) copy[outer] = value;
    else (copy[outer] as JsonObject)[inner] = value;
    return { kind: `wrong-type-${f}`, payload: json(copy), expect: rejected };
  });
}

function missingFields(base: Base): fc.Arbitrary<Case> {
  const required = fc.subarray(['contract', 'interaction', 'invocationKey', 'input', 'contract.id', 'contract.version', 'contract.digest', 'input.document'], {
    minLength: 1,
  });
  return fc.tuple(base, required).map(([b, fields]): Case => {
    const copy = structuredClone(b);
    for (const f of fields) {
      const [outer, inner] = f.split('.') as [string, string | undefined];
      if (inner === undefined) delete copy[outer];
      else if (copy[outer] && typeof copy[outer] === 'object') delete (copy[outer] as JsonObject)[inner];
    }
    return { kind: 'missing-fields', payload: json(copy), expect: [400] };
  });
}

function wrongContentTypes(base: Base): fc.Arbitrary<Case> {
  const type = fc.constantFrom(
    'text/plain',
    'application/xml',
    'multipart/form-data; boundary=x',
    'application/x-www-form-urlencoded',
    'application/json; charset=utf-16',
    'application/json; charset=latin1',
    'text/json',
    'application/jsonx',
    'application/octet-stream',
    'image/png',
  );
  return fc.tuple(base, type).map(([b, contentType]): Case => ({ kind: 'content-type', payload: json(b), contentType, expect: [415] }));
}

function oversized(base: Base): fc.Arbitrary<Case> {
  return fc.tuple(base, fc.integer({ min: bodyLimitBytes + 1, max: bodyLimitBytes * 3 })).map(([b, size]): Case => {
    const text = json(b);
    const pad = '"pad":"",';
    return { kind: 'oversized', payload: at(text, '"input":{', `"pad":"${'x'.repeat(Math.max(0, size - text.length - pad.length))}",`), expect: [413] };
  });
}

function garbage(): fc.Arbitrary<Case> {
  return fc.oneof(
    fc.string({ maxLength: 200 }).map((s): Case => ({ kind: 'garbage-text', payload: s, expect: [400] })),
    fc.uint8Array({ maxLength: 200 }).map((bytes): Case => ({ kind: 'garbage-bytes', payload: Buffer.from(bytes), expect: [400] })),
    fc.jsonValue({ maxDepth: 4 }).map((v): Case => ({ kind: 'random-json', payload: JSON.stringify(v) ?? 'null', expect: [400] })),
  );
}

/** Well-formed JSON that admission must still refuse. */
function semantic(base: Base): fc.Arbitrary<Case> {
  return fc
    .tuple(base, fc.constantFrom('undeployed', 'no-interaction', 'weakening', 'extra', 'long-key', 'bad-input', 'wait-too-long'))
    .map(([b, what]): Case => {
      const copy = structuredClone(b);
      if (what === 'undeployed') copy.contract = { ...(copy.contract as JsonObject), digest: `sha256:${'e'.repeat(64)}` };
      if (what === 'no-interaction') copy.interaction = 'nonexistent';
      if (what === 'weakening') Object.assign(copy, { interaction: 'sealed', waitFor: 'decision' });
      if (what === 'extra') copy.principalId = 'bob';
      if (what === 'long-key') copy.invocationKey = 'k'.repeat(257);
      if (what === 'bad-input') copy.input = { document: 'x', admin: true };
      if (what === 'wait-too-long') copy.waitMs = 120_001;
      return { kind: `semantic-${what}`, payload: json(copy), expect: what === 'undeployed' ? [422] : [400] };
    });
}

function badCredentials(base: Base): fc.Arbitrary<Case> {
  const authorization = fc.oneof(
    fc.constant(''),
    fc.string({ maxLength: 40 }).map((s) => `Bearer ${s}`),
    fc.constantFrom('Basic YWxpY2U6eA==', 'Bearer', 'bearer  ', 'Bearer a.b.c'),
  );
  return fc.tuple(base, authorization).map(([b, a]): Case => ({ kind: 'bad-credential', payload: json(b), authorization: a, expect: [401] }));
}

function arbitraries(fixture: HttpFixture): fc.Arbitrary<Case> {
  const key = fc.string({ minLength: 1, maxLength: 40 }).filter(noSurrogates);
  const doc = fc.string({ maxLength: 60 }).filter(noSurrogates);
  const base = fc.tuple(key, doc).map(([k, d]) => validRequest(fixture, k, d));
  return fc.oneof(
    duplicateKeys(base),
    deepNesting(base),
    hugeNumbers(base),
    loneSurrogates(base),
    wrongTypes(base),
    missingFields(base),
    wrongContentTypes(base),
    oversized(base),
    garbage(),
    semantic(base),
    badCredentials(base),
  );
}

function checkResponse(c: Case, status: number, text: string, seen: Map<string, number>): void {
  seen.set(c.kind, (seen.get(c.kind) ?? 0) + 1);
  assert.ok(c.expect.includes(status), `${c.kind}: status ${status} not in ${c.expect.join('/')}: ${text.slice(0, 300)}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    assert.fail(`${c.kind}: body is not JSON: ${text.slice(0, 200)}`);
  }
  assert.ok(checkErrorShape(body), `${c.kind}: not an AdapterError (${describeErrors(checkErrorShape.errors)}): ${text.slice(0, 300)}`);
}

describe('HTTP facade under hostile bodies', () => {
  let fixture: HttpFixture;
  let built: Awaited<ReturnType<typeof buildFixtureApp>>;
  let token: string;
  const headersFor = (c: Case) => {
    const headers: Record<string, string> = { 'content-type': c.contentType ?? 'application/json' };
    const authorization = c.authorization ?? `Bearer ${token}`;
    if (authorization !== '') headers.authorization = authorization;
    return headers;
  };

  before(async () => {
    fixture = await writeHttpFixture({ bodyLimitBytes });
    built = await buildFixtureApp(fixture);
    token = fixture.tokens.alice;
  });
  after(async () => {
    await built.close();
    await fixture.dispose();
  });

  test(`${injectRuns} hostile bodies through inject: all 4xx AdapterErrors, nothing stored`, async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(arbitraries(fixture), async (c) => {
        const response = await built.http.app.inject({ method: 'POST', url: '/contract-invocations', headers: headersFor(c), payload: c.payload });
        checkResponse(c, response.statusCode, response.body, seen);
      }),
      { numRuns: injectRuns },
    );
    const total = [...seen.values()].reduce((a, b) => a + b, 0);
    assert.ok(total >= injectRuns, `${total} cases ran`);
    assert.ok(seen.size >= 20, `case kinds covered: ${[...seen.keys()].join(', ')}`);
    assert.deepEqual(await storedOperationIds(built.deployment), []);
  });

  test(`${socketRuns} hostile bodies over a real socket; the server keeps serving; nothing stored`, async () => {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const agent = new Agent({ connections: 8 });
    const seen = new Map<string, number>();
    try {
      await fc.assert(
        fc.asyncProperty(arbitraries(fixture), async (c) => {
          const response = await request(`${address}/contract-invocations`, { method: 'POST', headers: headersFor(c), body: c.payload, dispatcher: agent });
          checkResponse(c, response.statusCode, await response.body.text(), seen);
        }),
        { numRuns: socketRuns },
      );
      const health = await request(`${address}/healthz`, { dispatcher: agent });
      assert.equal(health.statusCode, 200);
      await health.body.dump();
    } finally {
      await agent.close();
    }
    assert.deepEqual(await storedOperationIds(built.deployment), []);
    assert.match(await built.deployment.coordinator.metrics.registry.getSingleMetricAsString('convoke_admissions_total'), /convoke_admissions_total 0/);
  });
});
