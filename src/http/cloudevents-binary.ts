/**
 * A CloudEvent in the HTTP binding's binary content mode (CloudEvents HTTP Protocol Binding 1.0.2
 * §3.1), read into the event structured mode carries: each context attribute from its `ce-<name>`
 * header, `datacontenttype` from the content-type, the data from the body. Nothing here is taken
 * on trust: a header given twice, a name that is no attribute, a value that is not what §3.1.3.2
 * writes (printable ASCII, percent-encoded UTF-8, or an older sender's quoted string) is refused
 * naming the header, before the body is read.
 *
 * The binding maps every attribute to its canonical string form and carries no type: an extension
 * read here is a string (`ce-priority: 5` is `"priority": "5"`), which the CloudEvents type system
 * lets a receiver that does not know the extension keep.
 */
import { declaresJson, isMediaType } from '../contract/cloudevents.js';
import { invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonObject } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import { quoted } from '../contract/validation.js';
import { charsetsOf, declaresUtf8 } from './body.js';
import { UnsupportedMediaType } from './errors.js';

export const attributeHeaderPrefix = 'ce-';

/** Attribute names as the runtime takes them (cloudevents.ts): lowercase letters and digits, at most 20. */
const attributeName = /^[a-z0-9]{1,20}$/;
/** A header value as HTTP and the binding allow it: printable US-ASCII and the space (§3.1.3.2). */
const printableAscii = /^[\x20-\x7e]*$/;
/** What a content-type header holds here: printable US-ASCII and the tab (its parameters' characters). */
const headerText = /^[\t\x20-\x7e]*$/;
/** The attributes binary mode requires, in the order an event written here lists them first. */
const requiredAttributes = ['specversion', 'id', 'source', 'type'] as const;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Whether a request's raw headers (name, value, name, value…) carry any `ce-` header: binary mode's mark. */
export function carriesAttributeHeaders(rawHeaders: readonly string[]): boolean {
  for (let at = 0; at < rawHeaders.length; at += 2) if ((rawHeaders[at] ?? '').toLowerCase().startsWith(attributeHeaderPrefix)) return true;
  return false;
}

/**
 * The event's context attributes from its `ce-` headers, decoded; the required ones first. Refused,
 * naming the header: one given more than once (Node joins repeated headers with ", ", which is
 * also a value one header may hold), `ce-data`, `ce-data_base64` and `ce-datacontenttype` (the
 * body and the content-type carry those), a name no attribute has, a value §3.1.3.2 does not write,
 * a required attribute missing, a specversion other than 1.0.
 */
export function binaryAttributes(rawHeaders: readonly string[]): JsonObject {
  const seen = new Map<string, number>();
  const values = new Map<string, string>();
  for (let at = 0; at + 1 < rawHeaders.length; at += 2) {
    const header = (rawHeaders[at] as string).toLowerCase();
    if (!header.startsWith(attributeHeaderPrefix)) continue;
    seen.set(header, (seen.get(header) ?? 0) + 1);
    values.set(attributeOf(header), rawHeaders[at + 1] as string);
  }
  for (const [header, count] of seen)
    if (count > 1)
      throw invalidInput(
        `header ${quoted(header)} appears ${count} times: each attribute is one header, given once (joined, or read first or last, the repeats would make another event)`,
      );
  for (const name of requiredAttributes)
    if (!values.has(name))
      throw invalidInput(`binary mode: header ce-${name} is missing (an event's ce-specversion, ce-id, ce-source and ce-type are required)`);
  const attributes: JsonObject = {};
  for (const name of requiredAttributes) attributes[name] = headerValue(`ce-${name}`, values.get(name) ?? '');
  if (attributes.specversion !== '1.0') throw invalidInput(`header ce-specversion is ${quoted(attributes.specversion)}: this runtime takes CloudEvents 1.0`);
  for (const [name, raw] of values) if (!(name in attributes)) attributes[name] = headerValue(`ce-${name}`, raw);
  return attributes;
}

/** The attribute a `ce-` header (lowercased) carries; refused when it carries none. */
function attributeOf(header: string): string {
  const name = header.slice(attributeHeaderPrefix.length);
  if (name === 'data' || name === 'data_base64')
    throw invalidInput(`header ${header} is not an attribute: in binary mode the body is the event's data, under the content-type`);
  if (name === 'datacontenttype')
    throw invalidInput('header ce-datacontenttype must not be sent: in binary mode the content-type header is the datacontenttype (HTTP binding §3.1.1)');
  if (!attributeName.test(name)) throw invalidInput(`header ${quoted(header)} names no attribute: an attribute's name is 1 to 20 lowercase letters and digits`);
  return name;
}

/**
 * A header's value as the binding writes it (§3.1.3.2), decoded: printable ASCII only; a value that
 * opens with `"` is an older sender's quoted string (RFC 7230 §3.2.6), unescaped first; then one
 * round of percent-decoding, whose bytes must be UTF-8 (an overlong form, a lone surrogate, a
 * truncated sequence refused). A `"` anywhere else is refused: the binding writes it %22.
 */
export function headerValue(header: string, raw: string): string {
  if (!printableAscii.test(raw)) {
    const at = raw.search(/[^\x20-\x7e]/);
    throw invalidInput(
      `header ${header} holds U+${(raw.codePointAt(at) ?? 0).toString(16).toUpperCase().padStart(4, '0')} at index ${at}, outside printable ASCII: ` +
        'the binding writes every other character as the percent-encoding of its UTF-8 (HTTP binding §3.1.3.2)',
    );
  }
  const text = raw.startsWith('"') ? unquoted(header, raw) : raw;
  if (!raw.startsWith('"') && raw.includes('"'))
    throw invalidInput(`header ${header} holds a double quote at index ${raw.indexOf('"')} outside a quoted string: the binding writes it %22`);
  return percentDecoded(header, text);
}

/** A quoted string's content: `\x` is `x`; the closing quote ends the value. */
function unquoted(header: string, raw: string): string {
  let text = '';
  for (let at = 1; at < raw.length; at++) {
    const char = raw[at] as string;
    if (char === '"') {
      if (at !== raw.length - 1) throw invalidInput(`header ${header}: text after its quoted string's closing double quote, at index ${at + 1}`);
      return text;
    }
    if (char === '\\') {
      at++;
      if (at >= raw.length) break;
    }
    text += raw[at] as string;
  }
  throw invalidInput(`header ${header}: a quoted string without its closing double quote`);
}

function percentDecoded(header: string, text: string): string {
  if (!text.includes('%')) return text;
  const bytes: number[] = [];
  for (let at = 0; at < text.length; at++) {
    if (text[at] !== '%') {
      bytes.push(text.charCodeAt(at));
      continue;
    }
    const hex = text.slice(at + 1, at + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex))
      throw invalidInput(`header ${header}: the % at index ${at} is not followed by two hexadecimal digits (a % itself is written %25)`);
    bytes.push(Number.parseInt(hex, 16));
    at += 2;
  }
  try {
    return utf8.decode(Uint8Array.from(bytes));
  } catch (cause) {
    throw invalidInput(`header ${header}: its percent-encoded bytes are not UTF-8 (an overlong form, a surrogate or a cut sequence)`, cause);
  }
}

/**
 * Refuses, before the body is read, a content-type binary mode cannot read the data under (415): not
 * a media type, or JSON or text (read as UTF-8) in another charset. An absent one is an event with
 * no datacontenttype, whose body must then be empty (binaryEvent).
 */
export function checkBinaryContentType(contentType: string | undefined): void {
  if (contentType === undefined) return;
  if (!headerText.test(contentType) || !isMediaType(contentType))
    throw new UnsupportedMediaType(undefined, `binary mode: content-type ${quoted(contentType)} is not a media type; it is the event's datacontenttype`);
  if (!declaresJson(contentType) && !isText(contentType)) return;
  const charsets = charsetsOf(contentType);
  if (charsets.length > 1) throw new UnsupportedMediaType(undefined, `binary mode: content-type names one charset, not ${charsets.length}`);
  if (!declaresUtf8(charsets))
    throw new UnsupportedMediaType(undefined, `binary mode: content-type ${quoted(contentType)}: JSON and text data are read as UTF-8, and no other charset`);
}

const isText = (contentType: string): boolean => /^text\//i.test(contentType);

/**
 * The event binary mode sent: its attributes, `datacontenttype` the content-type, and the body as
 * its data — under a JSON type parsed strictly, as structured mode's body is, to one level less than
 * the event (so that the event is bounded as structured mode's is); under `text/*` its UTF-8 text;
 * under any other type `data_base64`. An empty body is an event without data. Its size, written as
 * JSON (base64 and escapes grow it), is bounded where either mode's event is (workflow-events.ts).
 */
export function binaryEvent(attributes: JsonObject, contentType: string | undefined, body: Buffer | undefined): JsonObject {
  const event: JsonObject = { ...attributes };
  if (contentType !== undefined) event.datacontenttype = contentType;
  if (body !== undefined && body.length > 0) {
    if (contentType === undefined) throw new UnsupportedMediaType(undefined, 'binary mode: a body (the event data) declares its media type in content-type');
    if (declaresJson(contentType)) event.data = parseStrictBytes(body, "the body (the event's JSON data)", limits.jsonDepthMax - 1);
    else if (isText(contentType)) event.data = textOf(body);
    else event.data_base64 = body.toString('base64');
  }
  return event;
}

function textOf(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch (cause) {
    throw invalidInput("the body (the event's text data) is not UTF-8", cause);
  }
}

/** How a refusal of the event names what it read from binary mode: the header, or the body. */
export function binaryMemberName(pointer: string): string {
  const name = pointer.slice(1);
  if (name === 'datacontenttype') return 'header content-type';
  if (name === 'data' || name === 'data_base64') return 'the body';
  return `header ce-${name}`;
}
