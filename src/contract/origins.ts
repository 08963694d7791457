/**
 * The egress policy's rules, as pure functions (src/workflow/exec/egress.ts enforces them where
 * connections are made): which origins a workflow's HTTP calls may reach (`allow`), and which addresses are private
 * or special-purpose (refused unless `privateNetworks`).
 *
 * An allow entry is an origin written exactly as a URL parser writes one: `http://` or `https://`,
 * a host — a lower-case DNS name, `*.` and a domain of two labels or more (any name under it, not
 * the domain itself), a dotted-decimal IPv4 address or a bracketed IPv6 one — and `:port` when it
 * is not the scheme's default (80, 443); nothing else (no path, user, query, trailing dot, `*`
 * elsewhere). An entry matches a request with the same scheme, host and port (an absent port is the
 * scheme's default).
 */
import { isIPv6 } from 'node:net';
import { invalidInput } from './errors.js';

export interface OriginPattern {
  protocol: 'http:' | 'https:';
  /** A name or an IP address (IPv6 without brackets); for a wildcard, the domain after `*.`. */
  host: string;
  wildcard: boolean;
  /** The port, written out (the scheme's default when the entry gives none). */
  port: string;
}

const defaultPort = (protocol: string): string => (protocol === 'https:' ? '443' : '80');

/** An allow entry read, or why it is refused (as the config's problems list says it). */
export function originPattern(text: string): OriginPattern | { problem: string } {
  const shape = /^(https?):\/\/(\*\.)?([^/?#@\\\s*]+)$/.exec(text);
  const refused = (why: string) => ({ problem: `${JSON.stringify(text)}: ${why}` });
  if (!shape)
    return refused(
      'an entry is an origin: http:// or https://, a host (or *. and a domain), and :port when it is not the scheme\'s default; no path, user, query or other "*"',
    );
  const [, scheme, star, rest] = shape as unknown as [string, string, string | undefined, string];
  let url: URL;
  try {
    url = new URL(`${scheme}://${star ? 'x.' : ''}${rest}`);
  } catch {
    return refused('not a valid host and port');
  }
  const written = `${url.protocol}//${star ? `*.${url.host.slice(2)}` : url.host}`;
  if (written !== text)
    return refused(`write it as ${written} (lower case, the port only when it is not the scheme's default, an IP address in its usual form)`);
  const host = urlHost(url);
  if (host.endsWith('.')) return refused('a host without a trailing dot');
  if (star) {
    // (A domain after *. that reads as an address is no valid host: the URL parser refused it above.)
    const domain = host.slice(2);
    if (!domain.includes('.')) return refused(`*.${domain} is too wide: give a domain of two labels or more`);
    return { protocol: url.protocol as OriginPattern['protocol'], host: domain, wildcard: true, port: url.port || defaultPort(url.protocol) };
  }
  return { protocol: url.protocol as OriginPattern['protocol'], host, wildcard: false, port: url.port || defaultPort(url.protocol) };
}

/** The allow entries read, or an invalid-input error listing every refused one (`where`: how the entries are named). */
export function originPatterns(allow: readonly string[], where: string): OriginPattern[] {
  const read = allow.map((entry) => originPattern(entry));
  const problems = read.flatMap((entry, index) => ('problem' in entry ? [`${where}[${index}] ${entry.problem}`] : []));
  if (problems.length > 0) throw invalidInput(problems.join('; '));
  return read as OriginPattern[];
}

/**
 * Whether a request to this origin matches an allow entry. `hostname` is the URL's host (an IPv6
 * address without brackets); a trailing dot is the same name; `port` '' is the scheme's default.
 */
export function originMatches(patterns: readonly OriginPattern[], protocol: string, hostname: string, port: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  const actualPort = port || defaultPort(protocol);
  return patterns.some(
    (pattern) => pattern.protocol === protocol && pattern.port === actualPort && (pattern.wildcard ? host.endsWith(`.${pattern.host}`) : host === pattern.host),
  );
}

/** A URL's host as originMatches and originText take it: an IPv6 address without its brackets. */
export function urlHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** The origin as a URL writes it (IPv6 bracketed, the port when given). */
export function originText(protocol: string, hostname: string, port: string): string {
  return `${protocol}//${isIPv6(hostname) ? `[${hostname}]` : hostname}${port ? `:${port}` : ''}`;
}

// ── addresses ────────────────────────────────────────────────────────────

function ipv4Value(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((part) => /^(0|[1-9]\d{0,2})$/.test(part) && Number(part) <= 255)) return undefined;
  return parts.reduce((value, part) => value * 256 + Number(part), 0);
}

function ipv6Value(text: string): bigint | undefined {
  let address = text.split('%')[0] as string;
  const last = address.slice(address.lastIndexOf(':') + 1);
  if (last.includes('.')) {
    const v4 = ipv4Value(last);
    if (v4 === undefined) return undefined;
    address = `${address.slice(0, address.length - last.length)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const words = (part: string) => (part === '' ? [] : part.split(':'));
  const head = words(halves[0] as string);
  const tail = halves.length === 2 ? words(halves[1] as string) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (!all.every((word) => /^[0-9a-fA-F]{1,4}$/.test(word))) return undefined;
  return all.reduce((value, word) => (value << 16n) | BigInt(parseInt(word, 16)), 0n);
}

const v4 = (dotted: string): number => ipv4Value(dotted) as number;

/** IPv4 special-purpose blocks (RFC 6890 and its registry), each with what it is. */
const ipv4Blocks: readonly (readonly [number, number, string])[] = [
  [v4('0.0.0.0'), 8, 'unspecified ("this network")'],
  [v4('10.0.0.0'), 8, 'private (RFC 1918)'],
  [v4('100.64.0.0'), 10, 'shared (CGNAT, RFC 6598)'],
  [v4('127.0.0.0'), 8, 'loopback'],
  [v4('169.254.0.0'), 16, 'link-local (cloud metadata)'],
  [v4('172.16.0.0'), 12, 'private (RFC 1918)'],
  [v4('192.0.0.0'), 24, 'IETF protocol assignments'],
  [v4('192.0.2.0'), 24, 'documentation'],
  [v4('192.88.99.0'), 24, '6to4 relay'],
  [v4('192.168.0.0'), 16, 'private (RFC 1918)'],
  [v4('198.18.0.0'), 15, 'benchmarking'],
  [v4('198.51.100.0'), 24, 'documentation'],
  [v4('203.0.113.0'), 24, 'documentation'],
  [v4('224.0.0.0'), 4, 'multicast'],
  [v4('240.0.0.0'), 4, 'reserved or broadcast'],
];

const v6 = (text: string): bigint => ipv6Value(text) as bigint;

/**
 * IPv6 special-purpose blocks, the most specific first. `embeds`: the block carries an IPv4
 * address (its low 32 bits, or bits 16–47 for 6to4) that a connection reaches or is translated to:
 * that address is judged instead.
 */
const ipv6Blocks: readonly (readonly [bigint, number, string, 'low' | '6to4' | undefined])[] = [
  [v6('::'), 128, 'unspecified', undefined],
  [v6('::1'), 128, 'loopback', undefined],
  [v6('::ffff:0:0'), 96, 'IPv4-mapped', 'low'],
  // RFC 2765's translated form (SIIT): not routed to IPv4 by Linux, but a translator may: judged as the address it carries.
  [v6('::ffff:0:0:0'), 96, 'IPv4-translated', 'low'],
  [v6('::'), 96, 'IPv4-compatible (deprecated)', undefined],
  [v6('64:ff9b::'), 96, 'NAT64', 'low'],
  [v6('64:ff9b:1::'), 48, 'local NAT64', undefined],
  [v6('100::'), 64, 'discard-only', undefined],
  [v6('2001:db8::'), 32, 'documentation', undefined],
  [v6('2001::'), 23, 'IETF protocol assignments (Teredo included)', undefined],
  [v6('2002::'), 16, '6to4', '6to4'],
  [v6('3fff::'), 20, 'documentation', undefined],
  [v6('fc00::'), 7, 'unique local', undefined],
  [v6('fe80::'), 10, 'link-local', undefined],
  [v6('fec0::'), 10, 'site-local (deprecated)', undefined],
  [v6('ff00::'), 8, 'multicast', undefined],
];

const inBlock4 = (value: number, base: number, bits: number): boolean => Math.floor(value / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits));

/**
 * What kind of private or special-purpose address `address` is (an IPv4 or IPv6 address in text
 * form), or undefined for a public one. An IPv6 form of an IPv4 address (mapped, NAT64, 6to4) is
 * the IPv4 address's kind; anything that is not an IP address is judged special.
 */
export function specialAddress(address: string): string | undefined {
  const four = ipv4Value(address);
  if (four !== undefined) return ipv4Blocks.find(([base, bits]) => inBlock4(four, base, bits))?.[2];
  const six = ipv6Value(address);
  if (six === undefined) return 'not an IP address';
  for (const [base, bits, kind, embeds] of ipv6Blocks) {
    if (six >> BigInt(128 - bits) !== base >> BigInt(128 - bits)) continue;
    if (embeds === undefined) return kind;
    const inner = Number(embeds === 'low' ? six & 0xffffffffn : (six >> 80n) & 0xffffffffn);
    const innerKind = ipv4Blocks.find(([base4, bits4]) => inBlock4(inner, base4, bits4))?.[2];
    return innerKind === undefined ? undefined : `${kind} ${innerKind}`;
  }
  return undefined;
}

// ── refusals ─────────────────────────────────────────────────────────────

/** A connection the egress policy refuses; its message names the origin and the rule, never a resolved address. */
export class EgressRefused extends Error {
  override readonly name = 'EgressRefused';
}

/** The EgressRefused that caused `error` (a fetch failure's cause chain), if any. */
export function egressRefusalOf(error: unknown): EgressRefused | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof EgressRefused) return current;
    current = current.cause;
  }
  return undefined;
}
