/**
 * The egress policy's rules (src/contract/origins.ts): which addresses are private or
 * special-purpose — in every IPv6 form that carries an IPv4 address — and the allow entries' exact
 * syntax, as `convoke serve` reads it in workflows.http (every bad entry listed, with how to write
 * it) and as `workflow run --http-allow` reads it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isAdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { originMatches, originPattern, originPatterns, specialAddress, type OriginPattern } from '../../src/contract/origins.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

test('private and special-purpose addresses, IPv4 and IPv6, and the IPv6 forms of IPv4 ones, are told from public ones', () => {
  const special = [
    '0.0.0.0',
    '10.1.2.3',
    '100.64.0.1',
    '100.127.255.254',
    '127.0.0.1',
    '127.255.255.255',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.0.0.8',
    '192.0.2.2',
    '192.168.1.1',
    '198.18.0.1',
    '198.51.100.7',
    '203.0.113.9',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    '::ffff:10.0.0.1',
    '::ffff:0:127.0.0.1',
    '::ffff:0:a9fe:a9fe',
    '::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b:1::1',
    '2002:7f00:1::',
    '2002:a9fe:a9fe::1',
    '2001::1',
    '2001:db8::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'fec0::1',
    'ff02::1',
    'not-an-address',
  ];
  for (const address of special) assert.notEqual(specialAddress(address), undefined, `${address} is special`);
  const publicOnes = [
    '1.1.1.1',
    '8.8.8.8',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '169.253.255.255',
    '192.169.0.1',
    '93.184.216.34',
    '223.255.255.255',
    '2606:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '::ffff:0:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ];
  for (const address of publicOnes) assert.equal(specialAddress(address), undefined, `${address} is public`);
  assert.match(specialAddress('169.254.169.254') ?? '', /link-local/);
  assert.match(specialAddress('::ffff:127.0.0.1') ?? '', /IPv4-mapped loopback/);
  assert.match(specialAddress('::ffff:0:127.0.0.1') ?? '', /IPv4-translated loopback/);
});

test('an allow entry is an origin written exactly as a URL writes it; a match is the same scheme, host (or a name under *.) and port', () => {
  const read = (text: string) => originPattern(text) as OriginPattern;
  const patterns = ['https://api.example.com', 'https://*.example.org', 'http://10.1.2.3:8080', 'http://[fd00::1]:81'].map(read);
  for (const pattern of patterns) assert.ok(!('problem' in pattern), JSON.stringify(pattern));
  const yes: [string, string, string][] = [
    ['https:', 'api.example.com', ''],
    ['https:', 'api.example.com', '443'],
    ['https:', 'API.example.com.', ''],
    ['https:', 'a.example.org', ''],
    ['https:', 'a.b.example.org', ''],
    ['http:', '10.1.2.3', '8080'],
    ['http:', 'fd00::1', '81'],
  ];
  for (const [protocol, host, port] of yes) assert.ok(originMatches(patterns, protocol, host, port), `${protocol}//${host}:${port} matches`);
  const no: [string, string, string][] = [
    ['http:', 'api.example.com', ''],
    ['https:', 'api.example.com', '8443'],
    ['https:', 'example.org', ''],
    ['https:', 'evilexample.org', ''],
    ['https:', 'api.example.com.evil.net', ''],
    ['http:', '10.1.2.3', ''],
    ['http:', '10.1.2.30', '8080'],
  ];
  for (const [protocol, host, port] of no) assert.ok(!originMatches(patterns, protocol, host, port), `${protocol}//${host}:${port} does not match`);
});

test('bad allow entries are refused, each with its reason, by the serve config and by --http-allow', () => {
  const bad: [string, RegExp][] = [
    ['api.example.com', /an entry is an origin/],
    ['ftp://api.example.com', /an entry is an origin/],
    ['https://api.example.com/', /an entry is an origin/],
    ['https://api.example.com/v1', /an entry is an origin/],
    ['https://user@api.example.com', /an entry is an origin/],
    ['https://*', /an entry is an origin/],
    ['*', /an entry is an origin/],
    ['https://api.*.com', /an entry is an origin/],
    ['https://*.com', /too wide/],
    ['https://*.10.0.0.1', /not a valid host/],
    ['https://API.example.com', /write it as https:\/\/api\.example\.com/],
    ['https://api.example.com:443', /write it as https:\/\/api\.example\.com /],
    ['http://2130706433', /write it as http:\/\/127\.0\.0\.1/],
    ['http://[0:0:0:0:0:0:0:1]', /write it as http:\/\/\[::1\]/],
    ['https://api.example.com.', /trailing dot/],
    ['https://exa mple.com', /an entry is an origin/],
    ['https://api.example.com:99999', /not a valid host/],
  ];
  for (const [entry, why] of bad) {
    const read = originPattern(entry);
    assert.ok('problem' in read, `${entry} is refused`);
    assert.match(read.problem, why, entry);
  }
  const parse = (http: unknown) =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ workflows: { http } }))), '/tmp').workflows?.http;
  const good = { allow: ['https://api.example.com', 'https://*.example.org', 'http://10.1.2.3:8080'], privateNetworks: true };
  assert.deepEqual(parse(good), good);
  assert.throws(
    () => parse({ allow: ['https://ok.example.com', 'https://API.example.com', 'http://x.example.com/path'] }),
    (e: unknown) =>
      isAdapterError(e) &&
      e.kind === 'invalid-input' &&
      /workflows\.http\.allow\[1\] "https:\/\/API\.example\.com": write it as/.test(e.message) &&
      /workflows\.http\.allow\[2\] "http:\/\/x\.example\.com\/path"/.test(e.message) &&
      !/allow\[0\]/.test(e.message),
  );
  for (const shape of [
    { privateNetworks: 'yes' },
    { allow: 'https://api.example.com' },
    { allow: ['https://a.example.com', 'https://a.example.com'] },
    { deny: [] },
  ])
    assert.throws(
      () => parse(shape),
      (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input',
      JSON.stringify(shape),
    );
  const many = Array.from({ length: limits.workflowHttpAllowMax + 1 }, (_, i) => `https://h${i}.example.com`);
  assert.doesNotThrow(() => parse({ allow: many.slice(1) }));
  assert.throws(
    () => parse({ allow: many }),
    (e: unknown) => isAdapterError(e) && (e.description ?? '').includes('/workflows/http/allow'),
  );
  assert.throws(
    () => originPatterns(['https://ok.example.com', 'https://*.com'], '--http-allow'),
    (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && /--http-allow\[1\] "https:\/\/\*\.com": \*\.com is too wide/.test(e.message),
  );
});
