/**
 * A small strict JSON parser (RFC 8259) for everything convoke digests or admits.
 *
 * Why hand-written: JSON.parse silently keeps the last of two duplicate keys, and no maintained
 * parser rejects every duplicate (lossless-json only flags duplicates whose values differ;
 * @humanwhocodes/momoa gives an AST to walk). Two readers that disagree on which duplicate wins
 * would see different inputs under one digest, so admission (step 1) rejects them here.
 *
 * Rejected as invalid-input, with the JSON Pointer (RFC 6901) of the offending value or object and
 * the offset in UTF-16 code units of the decoded text:
 *   - any syntax error, a leading byte order mark, invalid UTF-8 (parseStrictBytes);
 *   - duplicate keys, compared after unescaping (`{"a":1,"\u0061":2}` is a duplicate);
 *   - integers written without fraction or exponent beyond ±(2^53−1);
 *   - any number whose value is an integer in 2^53 ≤ |n| < 1e21, however it is written: RFC 8785
 *     would print it as a bare digit string that this parser itself rejects (so `1e16` fails while
 *     `1E30`, printed `1e+30`, passes) — what parses always canonicalizes and re-parses;
 *   - numbers that overflow to ±Infinity (`1e400`);
 *   - nonzero numbers that underflow to 0 (`1e-400`): the value read would not be the value
 *     written (I-JSON, RFC 7493 §2.2); zero itself, however written (`0.0e-400`), is 0;
 *   - lone surrogates, escaped or raw, in keys or strings;
 *   - nesting deeper than limits.jsonDepthMax (or the depth a caller gives: a reply nesting such values).
 *
 * The parser is a loop over an explicit stack (no recursion), so depth costs no call stack.
 */
import { assert, invalidInput } from './errors.js';
import { setMember, type JsonObject, type JsonValue } from './json.js';
import { limits } from './limits.js';

// Facts of the number format and of V8, not policy bounds: they stay here rather than in limits.ts.
/** 2^53: the first integer a double cannot tell from its neighbour. */
const unsafeIntegerMin = 2 ** 53;
/** From here on ECMAScript (so RFC 8785) prints numbers in exponent form. */
const exponentFormMin = 1e21;
/**
 * V8 makes a substring of at least this many chars a view into its parent string. A value read
 * from a message (an operation id, say) would then keep the whole message text alive for as long
 * as the value lives — in a peer's or coordinator's bounded caches, hundreds of bytes per entry.
 */
const slicedStringCharsMin = 13;

/** Whether `n` is an integer that RFC 8785 would print as a digit string beyond 2^53−1. */
export function isAmbiguousInteger(n: number): boolean {
  const magnitude = Math.abs(n);
  return magnitude >= unsafeIntegerMin && magnitude < exponentFormMin && Number.isInteger(n);
}

/**
 * A high surrogate not followed by a low one, or a low one not preceded by a high one. A regular
 * expression (no `u` flag: it sees code units) rather than a loop over charCodeAt: this runs on
 * every part of every identity and every canonicalized string, strings of every representation
 * reach it, and the loop's property loads on them went megamorphic (about 10× slower per part).
 */
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether `s` holds a high surrogate not followed by a low one, or a low one not preceded by a high one. */
export function hasLoneSurrogate(s: string): boolean {
  return loneSurrogate.test(s);
}

/** RFC 6901: `~` becomes `~0`, `/` becomes `~1`; the root is the empty pointer. */
export function jsonPointer(segments: readonly (string | number)[]): string {
  let pointer = '';
  for (const segment of segments) {
    pointer += '/' + (typeof segment === 'number' ? String(segment) : segment.replace(/~/g, '~0').replace(/\//g, '~1'));
  }
  return pointer;
}

/**
 * `value` as a JSON log holds it, so that a value kept live and the same value read back from its
 * log are one: `value` itself when every number in it is written as it is, a copy with each -0 as 0
 * otherwise (JSON.stringify writes -0 as 0; JSON.parse reads `-0` as -0, and so does the `yaml`
 * package). Throws invalidInput naming, by its JSON Pointer, the first number JSON cannot write at
 * all: Infinity or NaN, which JSON.stringify writes as null (JSON.parse reads `1e400` as Infinity);
 * and invalidInput for a value nested deeper than limits.jsonDepthMax, which this parser (a NATS
 * client reading a reply, a peer reading its request) would refuse to read back (a jq result, read
 * with JSON.parse, may nest as deep as jq goes). `levels` are those a record adds above the values
 * it holds (a step's results, one level down): each value is held to limits.jsonDepthMax on its
 * own, so the whole to that plus `levels`.
 */
export function asLogged(value: JsonValue, what = 'value', levels = 0): JsonValue {
  let negativeZero = false;
  const stack: JsonValue[] = [value];
  // The depth of each container on the stack, beside it (a number array: no object per entry).
  const depths: number[] = [0];
  while (stack.length > 0) {
    const item = stack.pop() as JsonValue;
    const depth = depths.pop() as number;
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) {
        const first = firstNonFinite(value) ?? { number: item, path: [] };
        throw invalidInput(`${what}: the number ${String(first.number)} at ${describePointer(jsonPointer(first.path))} has no JSON form`);
      }
      if (item === 0 && 1 / item < 0) negativeZero = true;
    } else if (typeof item === 'object' && item !== null) {
      // A container the strict parser would refuse to read back (a client's reply, a store's canonical check).
      if (depth >= limits.jsonDepthMax + levels) throw invalidInput(`${what}: nesting deeper than ${limits.jsonDepthMax}${heldBelow(levels)}`);
      for (const member of Array.isArray(item) ? item : Object.values(item)) {
        stack.push(member);
        depths.push(depth + 1);
      }
    }
  }
  return negativeZero ? (JSON.parse(JSON.stringify(value)) as JsonValue) : value;
}

/** Where a value too deep is, in asLogged's refusal: nothing for the record itself, else the levels above it. */
function heldBelow(levels: number): string {
  return levels === 0 ? '' : ` in a value held ${levels} level${levels === 1 ? '' : 's'} below the root`;
}

/**
 * Why `value` cannot be sent, or undefined: it nests deeper than `depthMax` (limits.jsonDepthMax by
 * default), as the strict parser would refuse it. What a sender checks before it sends a value a
 * reader parses to that depth (a peer's result, which the coordinator reads in its result message;
 * a workflow's contract input, which admission takes).
 */
export function nestingProblem(value: JsonValue, what: string, depthMax: number = limits.jsonDepthMax): string | undefined {
  const stack: JsonValue[] = [value];
  const depths: number[] = [0];
  while (stack.length > 0) {
    const item = stack.pop() as JsonValue;
    const depth = depths.pop() as number;
    if (typeof item !== 'object' || item === null) continue;
    if (depth >= depthMax) return `${what}: nesting deeper than ${depthMax}`;
    for (const member of Array.isArray(item) ? item : Object.values(item)) {
      stack.push(member);
      depths.push(depth + 1);
    }
  }
  return undefined;
}

/** The first number (in document order) JSON has no form for, and where it is. */
function firstNonFinite(value: JsonValue): { number: number; path: (string | number)[] } | undefined {
  const stack: { value: JsonValue; path: (string | number)[] }[] = [{ value, path: [] }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const item = entry.value;
    if (typeof item === 'number' && !Number.isFinite(item)) return { number: item, path: entry.path };
    const members: [string | number, JsonValue][] = Array.isArray(item)
      ? item.map((member, index) => [index, member])
      : typeof item === 'object' && item !== null
        ? Object.entries(item)
        : [];
    for (let i = members.length - 1; i >= 0; i--) {
      const [key, member] = members[i] as [string | number, JsonValue];
      stack.push({ value: member, path: [...entry.path, key] });
    }
  }
  return undefined;
}

/** A pointer for an error description: `root` for the empty pointer, cut short when huge. */
export function describePointer(pointer: string): string {
  if (pointer === '') return 'root';
  return pointer.length > limits.describedPointerCharsMax ? pointer.slice(0, limits.describedPointerCharsMax) + '…' : pointer;
}

function quoteForDescription(s: string): string {
  return JSON.stringify(s.length > limits.describedCharsMax ? s.slice(0, limits.describedCharsMax) + '…' : s);
}

interface Frame {
  readonly container: JsonValue[] | JsonObject;
  readonly isArray: boolean;
  /** The member being parsed: its key in an object, its index in an array; undefined before the first. */
  key: string | number | undefined;
}

/** Marks "a container was opened; its members come next" as opposed to a finished value. */
const opened: unique symbol = Symbol('opened');
type Step = JsonValue | typeof opened;

const closerOf = (frame: Frame) => (frame.isArray ? 0x5d /* ] */ : 0x7d /* } */);

class StrictParser {
  private pos = 0;
  private readonly stack: Frame[] = [];

  constructor(
    private readonly text: string,
    private readonly what: string,
    private readonly depthMax: number,
    private readonly levels = 0,
  ) {}

  parseDocument(): JsonValue {
    if (this.text.charCodeAt(0) === 0xfeff) this.fail('byte order mark', 0);
    let step: Step = this.beginValue();
    for (;;) {
      const top = this.stack[this.stack.length - 1];
      if (top === undefined) {
        assert(step !== opened, 'an opened container is always on the stack');
        this.skipWhitespace();
        if (this.pos < this.text.length) this.failUnexpected('end of input');
        return step;
      }
      step = step === opened ? this.firstMember(top) : this.nextMember(top, step);
    }
  }

  /** Right after `[` or `{`: closes an empty container or starts its first member. */
  private firstMember(top: Frame): Step {
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === closerOf(top)) return this.close();
    if (top.isArray) {
      top.key = 0;
    } else {
      this.readKey(top);
    }
    return this.beginValue();
  }

  /** Stores a finished member, then reads `,` (and the next member's start) or the closer. */
  private nextMember(top: Frame, value: JsonValue): Step {
    if (top.isArray) {
      (top.container as JsonValue[]).push(value);
    } else {
      setMember(top.container as JsonObject, top.key as string, value);
    }
    this.skipWhitespace();
    const c = this.text.charCodeAt(this.pos);
    if (c === closerOf(top)) return this.close();
    if (c !== 0x2c /* , */) this.failUnexpected(top.isArray ? "',' or ']'" : "',' or '}'", false);
    this.pos++;
    if (top.isArray) {
      top.key = (top.container as JsonValue[]).length;
    } else {
      this.skipWhitespace();
      this.readKey(top);
    }
    return this.beginValue();
  }

  private close(): JsonValue {
    this.pos++;
    const frame = this.stack.pop();
    assert(frame !== undefined, 'close() runs only with an open container');
    return frame.container;
  }

  /** Reads `"key" :`, rejecting a key the object already has. */
  private readKey(top: Frame): void {
    const start = this.pos;
    if (this.text.charCodeAt(start) !== 0x22 /* " */) this.failUnexpected('a string key', false);
    const key = this.readString('key', false);
    if (Object.hasOwn(top.container, key)) {
      this.fail(`duplicate key ${quoteForDescription(key)}`, start, false);
    }
    top.key = key;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) !== 0x3a /* : */) this.failUnexpected("':'", false);
    this.pos++;
  }

  /** Reads a scalar, or opens a container and returns `opened`. */
  private beginValue(): Step {
    this.skipWhitespace();
    const c = this.text.charCodeAt(this.pos);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) return this.open(c === 0x5b);
    if (c === 0x22) return this.readString('string', true);
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) return this.readNumber();
    if (c === 0x74 /* t */) return this.readLiteral('true', true);
    if (c === 0x66 /* f */) return this.readLiteral('false', false);
    if (c === 0x6e /* n */) return this.readLiteral('null', null);
    return this.failUnexpected('a value');
  }

  private open(isArray: boolean): typeof opened {
    if (this.stack.length >= this.depthMax) {
      this.fail(this.tooDeep(), this.pos);
    }
    this.stack.push({ container: isArray ? [] : {}, isArray, key: undefined });
    this.pos++;
    return opened;
  }

  /**
   * What a container past depthMax is refused for: a document read to the depth of the values it
   * holds `levels` below its root names the value the container is in and the depth values are held to.
   */
  private tooDeep(): string {
    if (this.levels === 0) return `nesting deeper than ${this.depthMax}`;
    const holder = jsonPointer(this.stack.slice(0, this.levels).map((frame) => frame.key as string | number));
    return `the value at ${describePointer(holder)} nests deeper than ${this.depthMax - this.levels}`;
  }

  private readLiteral<T extends boolean | null>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.pos)) this.failUnexpected('a value');
    this.pos += word.length;
    return value;
  }

  private readNumber(): number {
    const text = this.text;
    const start = this.pos;
    let i = start;
    if (text.charCodeAt(i) === 0x2d) i++;
    const first = text.charCodeAt(i);
    if (first === 0x30) {
      i++;
    } else if (first >= 0x31 && first <= 0x39) {
      i = skipDigits(text, i + 1);
    } else {
      this.fail('invalid number: a digit must follow', i);
    }
    let isIntegerLiteral = true;
    if (text.charCodeAt(i) === 0x2e /* . */) {
      isIntegerLiteral = false;
      i = this.requireDigits(i + 1, 'invalid number: a digit must follow the decimal point');
    }
    const mantissaEnd = i;
    const e = text.charCodeAt(i);
    if (e === 0x65 || e === 0x45 /* e E */) {
      isIntegerLiteral = false;
      i++;
      const sign = text.charCodeAt(i);
      if (sign === 0x2b || sign === 0x2d) i++;
      i = this.requireDigits(i, 'invalid number: a digit must follow the exponent');
    }
    const value = Number(text.slice(start, i));
    this.checkNumber(value, isIntegerLiteral, start);
    // Only a literal with a fraction or an exponent can underflow; a nonzero digit before the exponent says it was no 0.
    if (value === 0 && !isIntegerLiteral && hasNonzeroDigit(text, start, mantissaEnd)) this.fail('nonzero number underflows to 0', start);
    this.pos = i;
    // -0 and 0 are one JSON value (RFC 8785 writes both as 0): folding to 0 here keeps live state
    // and state replayed from any store's JSON identical.
    return value === 0 ? 0 : value;
  }

  private checkNumber(value: number, isIntegerLiteral: boolean, start: number): void {
    if (!Number.isFinite(value)) this.fail('number overflows to infinity', start);
    if (isIntegerLiteral && !Number.isSafeInteger(value)) {
      this.fail('integer beyond ±(2^53−1)', start);
    }
    if (isAmbiguousInteger(value)) {
      this.fail('number is an integer beyond ±(2^53−1) below 1e21', start);
    }
  }

  private requireDigits(i: number, message: string): number {
    const c = this.text.charCodeAt(i);
    if (!(c >= 0x30 && c <= 0x39)) this.fail(message, i);
    return skipDigits(this.text, i + 1);
  }

  /**
   * Reads a string starting at its opening quote. Unescaped runs are sliced, not copied char by
   * char, which keeps a 100 KB document in the low milliseconds.
   */
  private readString(what: 'key' | 'string', isValue: boolean): string {
    const text = this.text;
    const start = this.pos;
    let i = start + 1;
    let runStart = i;
    let out = '';
    let sawSurrogate = false;
    for (;;) {
      if (i >= text.length) this.fail(`unterminated ${what}`, start, isValue);
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c /* \ */) {
        out += text.slice(runStart, i);
        const unit = this.readEscape(i, isValue);
        if (unit >= 0xd800 && unit <= 0xdfff) sawSurrogate = true;
        out += String.fromCharCode(unit);
        i += text.charCodeAt(i + 1) === 0x75 /* u */ ? 6 : 2;
        runStart = i;
        continue;
      }
      if (c < 0x20) this.fail(`unescaped control character in ${what}`, i, isValue);
      if (c >= 0xd800 && c <= 0xdfff) sawSurrogate = true;
      i++;
    }
    out += text.slice(runStart, i);
    if (out.length >= slicedStringCharsMin && out.length * 2 < text.length) out = detached(out);
    // Pairs are checked on the decoded text: an escaped high surrogate followed by an escaped low
    // one is one character, as RFC 8259 §7 says.
    if (sawSurrogate && hasLoneSurrogate(out)) this.fail(`lone surrogate in ${what}`, start, isValue);
    this.pos = i + 1;
    return out;
  }

  /** Decodes the escape at `i` (a backslash) to one UTF-16 code unit. */
  private readEscape(i: number, isValue: boolean): number {
    const c = this.text.charCodeAt(i + 1);
    switch (c) {
      case 0x22:
        return 0x22;
      case 0x5c:
        return 0x5c;
      case 0x2f:
        return 0x2f;
      case 0x62:
        return 0x08; // \b
      case 0x66:
        return 0x0c; // \f
      case 0x6e:
        return 0x0a; // \n
      case 0x72:
        return 0x0d; // \r
      case 0x74:
        return 0x09; // \t
      case 0x75: {
        // \uXXXX
        let unit = 0;
        for (let k = i + 2; k < i + 6; k++) {
          const digit = hexValue(this.text.charCodeAt(k));
          if (digit < 0) this.fail('invalid \\u escape: four hex digits must follow', k, isValue);
          unit = unit * 16 + digit;
        }
        return unit;
      }
      default:
        return this.fail('invalid escape', i, isValue);
    }
  }

  private skipWhitespace(): void {
    const text = this.text;
    let i = this.pos;
    for (;;) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    this.pos = i;
  }

  private failUnexpected(expected: string, atValue = true): never {
    if (this.pos >= this.text.length) return this.fail(`unexpected end of input, expected ${expected}`, this.pos, atValue);
    const found = String.fromCodePoint(this.text.codePointAt(this.pos) ?? 0);
    return this.fail(`unexpected character ${JSON.stringify(found)}, expected ${expected}`, this.pos, atValue);
  }

  /**
   * Throws invalid-input. `atValue` says whether the pointer names the member being parsed
   * (a bad value) or only its container (a bad or duplicate key, a syntax error between members).
   */
  private fail(message: string, offset: number, atValue = true): never {
    const segments: (string | number)[] = [];
    const last = this.stack.length - 1;
    for (let d = 0; d <= last; d++) {
      const key = this.stack[d]?.key;
      if (key === undefined || (d === last && !atValue)) break;
      segments.push(key);
    }
    throw invalidInput(`${this.what}: ${message} at ${describePointer(jsonPointer(segments))} (offset ${offset})`);
  }
}

function hasNonzeroDigit(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x31 && c <= 0x39) return true;
  }
  return false;
}

function skipDigits(text: string, i: number): number {
  let c = text.charCodeAt(i);
  while (c >= 0x30 && c <= 0x39) c = text.charCodeAt(++i);
  return i;
}

/**
 * A copy of `s` that does not share the parser's text. Concatenation and a slice make V8 flatten
 * into a new string of `s.length + 1` chars; the view returned shares only that.
 */
function detached(s: string): string {
  return (' ' + s).slice(1);
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** Parses `text` as strict JSON; every rejection is invalid-input prefixed with `what`. */
export function parseStrict(text: string, what = 'input', depthMax: number = limits.jsonDepthMax): JsonValue {
  return new StrictParser(text, what, depthMax).parseDocument();
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Decodes UTF-8 strictly (no replacement characters, no byte order mark), then parses. `depthMax`
 * is limits.jsonDepthMax but for a reader of a message that nests values held to it (a command's reply).
 */
export function parseStrictBytes(data: Uint8Array, what = 'input', depthMax: number = limits.jsonDepthMax): JsonValue {
  return new StrictParser(decodeStrict(data, what), what, depthMax).parseDocument();
}

/**
 * A request body whose values (an invocation's or a workflow start's input) sit `levels` below its
 * root: parsed as parseStrictBytes does, to limits.jsonDepthMax + `levels`, so that a value as deep
 * as admission takes is read; one deeper is refused naming the value it is in and the depth values
 * are held to (`the value at /input nests deeper than 64`), not the body's own bound. Whoever takes
 * the value still holds it to limits.jsonDepthMax (admission, a workflow start): a body member other
 * than the value, as deep, is refused there.
 */
export function parseStrictBody(data: Uint8Array, what: string, levels: number): JsonValue {
  return new StrictParser(decodeStrict(data, what), what, limits.jsonDepthMax + levels, levels).parseDocument();
}

function decodeStrict(data: Uint8Array, what: string): string {
  if (data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf) {
    throw invalidInput(`${what}: byte order mark at root (offset 0)`);
  }
  let text: string;
  try {
    text = utf8.decode(data);
  } catch (cause) {
    throw invalidInput(`${what}: not valid UTF-8`, cause);
  }
  return text;
}
