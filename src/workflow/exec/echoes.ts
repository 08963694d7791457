/**
 * Finding a secret a service echoes back in another form than its own, in the bytes of an answer
 * before anything decodes them (calls.ts records the answer with each `[redacted]`).
 *
 * The forms are those a service that reflects a request writes without meaning to leak it — a
 * debugging endpoint answering the headers it got, an error page quoting the request, an API that
 * stores and returns what it was sent:
 *
 * - **as written, percent-encoded or JSON-escaped**, any mix of them character by character: each
 *   byte of its UTF-8 as itself or as `%XX` (either case; a space also as `+`, as forms write it),
 *   each character also as JSON writes it (`\"`, `\\`, `\/`, `\n`…, or `\uXXXX` in either case, a
 *   pair of them past U+FFFF). A URL-encoded echo, a JSON body that escapes `"`, `\` or non-ASCII
 *   (PHP's and Python's encoders do), and the value as is are all one pattern.
 * - **hex** of its UTF-8 bytes, either case (a hash-like dump of what was received).
 * - **base64 and base64url** of its UTF-8 bytes, at each of the three alignments it can have in a
 *   longer encoded text (`Authorization: Basic` is base64 of `username:password`, so the password
 *   sits one byte in): the characters all of whose bits are the value's, and the partial character
 *   on either side where its bits that are the value's match (so not even part of a character is
 *   left). A `/` in it may be written `\/` (a JSON encoder's). Padding (`=`) tells nothing but the
 *   length and is left.
 *
 * Not found: double encodings (a JSON-escaped percent-encoding), base64 broken into lines, HTML
 * entities, and any form a service chooses to hide the value in — a service the secret is sent to
 * has it already; what is guarded against is a careless echo landing in the instance's log.
 */
import { redacted } from '../secrets.js';

/** `bytes` with every form (above) of each hidden string replaced by `[redacted]`'s UTF-8. */
export function scrubEchoes(bytes: Buffer, hidden: readonly string[]): Buffer {
  if (hidden.length === 0) return bytes;
  // Latin-1 maps each byte to one character and back, so a pattern over bytes is a RegExp over this text.
  const text = bytes.toString('latin1');
  let out = text;
  for (const pattern of patternsOf(hidden)) out = out.replace(pattern, redacted);
  return out === text ? bytes : Buffer.from(out, 'latin1');
}

/** `text` with every form of each hidden string replaced (a value already decoded: a JSON answer's strings). */
export function scrubEchoesText(text: string, hidden: readonly string[]): string {
  if (hidden.length === 0) return text;
  const bytes = Buffer.from(text, 'utf8');
  const out = scrubEchoes(bytes, hidden);
  return out === bytes ? text : out.toString('utf8');
}

const compiled = new WeakMap<readonly string[], readonly RegExp[]>();

/**
 * The characters a pattern is made of at most: a longer string's patterns are its pieces' (a
 * pattern of thousands of groups overflows the RegExp compiler's stack). Each piece is long
 * enough never to be found by chance, and every piece replaced is the whole string replaced.
 */
const pieceCharactersMax = 256;

/** `secret` in equal pieces of at most pieceCharactersMax characters (each at least half that: none found by chance). */
function piecesOf(secret: string): string[] {
  const characters = [...secret];
  const size = Math.ceil(characters.length / Math.ceil(characters.length / pieceCharactersMax));
  const pieces: string[] = [];
  for (let at = 0; at < characters.length; at += size) pieces.push(characters.slice(at, at + size).join(''));
  return pieces;
}

/** The patterns of each hidden string (longest first, as given), made once per list. */
function patternsOf(hidden: readonly string[]): readonly RegExp[] {
  let patterns = compiled.get(hidden);
  if (patterns === undefined) {
    patterns = hidden.flatMap(piecesOf).flatMap((secret) => {
      const bytes = Buffer.from(secret, 'utf8');
      return [textPattern(secret), hexPattern(bytes), ...base64Patterns(bytes)].map((source) => new RegExp(source, 'g'));
    });
    compiled.set(hidden, patterns);
  }
  return patterns;
}

const byte = (value: number): string => `\\x${value.toString(16).padStart(2, '0')}`;
/** A hex digit in either case. */
const hexDigit = (digit: string): string => (/[a-f]/i.test(digit) ? `[${digit.toLowerCase()}${digit.toUpperCase()}]` : digit);
const hexOf = (value: number, width: number): string => [...value.toString(16).padStart(width, '0')].map(hexDigit).join('');

const jsonShort: Readonly<Record<string, string>> = {
  '"': '\\\\"',
  '\\': '\\\\\\\\',
  '/': '\\\\/',
  '\b': '\\\\b',
  '\f': '\\\\f',
  '\n': '\\\\n',
  '\r': '\\\\r',
  '\t': '\\\\t',
};

/** Each character as itself, percent-encoded or JSON-escaped. */
function textPattern(secret: string): string {
  const parts: string[] = [];
  for (const character of secret) {
    const written = [...Buffer.from(character, 'utf8')].map((value) => `(?:${byte(value)}|%${hexOf(value, 2)})`).join('');
    const units = [...Array(character.length).keys()].map((index) => `\\\\u${hexOf(character.charCodeAt(index), 4)}`).join('');
    const alternatives = [written, units, jsonShort[character], character === ' ' ? '\\+' : undefined].filter((item) => item !== undefined);
    parts.push(`(?:${alternatives.join('|')})`);
  }
  return parts.join('');
}

function hexPattern(bytes: Buffer): string {
  return [...bytes].map((value) => hexOf(value, 2)).join('');
}

const standard = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const urlSafe = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A base64 character in a pattern: `/` also as JSON's `\/`. */
const base64Character = (character: string): string => (character === '/' ? '\\\\?\\/' : character === '+' ? '\\+' : character);

/** The characters of `alphabet` whose bits under `mask` are `value`'s, as a class. */
function partialClass(alphabet: string, value: number, mask: number): string {
  const matching = [...alphabet].filter((_character, index) => (index & mask) === (value & mask));
  return `[${matching.map((character) => (character === '/' || character === '+' || character === '-' ? `\\${character}` : character)).join('')}]`;
}

/** The value's base64 and base64url at each alignment: its whole characters, and the partial ones on either side. */
function base64Patterns(bytes: Buffer): string[] {
  const patterns: string[] = [];
  for (const alphabet of [standard, urlSafe])
    for (const shift of [0, 1, 2]) {
      const encoded = Buffer.concat([Buffer.alloc(shift), bytes])
        .toString('base64')
        .replace(/=+$/, '');
      const values = [...encoded].map((character) => standard.indexOf(character));
      const first = Math.ceil((8 * shift) / 6);
      const end = Math.floor((8 * (shift + bytes.length)) / 6);
      const leadBits = 6 * first - 8 * shift;
      const trailBits = 8 * (shift + bytes.length) - 6 * end;
      const core = values.slice(first, end).map((value) => base64Character(alphabet[value] as string));
      const lead = leadBits > 0 ? `${partialClass(alphabet, values[first - 1] as number, (1 << leadBits) - 1)}?` : '';
      const trail = trailBits > 0 ? `${partialClass(alphabet, values[end] as number, ((1 << trailBits) - 1) << (6 - trailBits))}?` : '';
      patterns.push(`${lead}${core.join('')}${trail}`);
    }
  return patterns;
}
