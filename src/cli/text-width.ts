/**
 * How many terminal columns text takes, for tables and wrapped lines. A string's length counts
 * UTF-16 code units, which is not what a terminal shows: 漢 (one unit) and 🙂 (two) each take two
 * columns, a combining accent (one unit) none, a family emoji (eight units) two. Measured in units,
 * a row of CJK text outgrew the terminal and a cut went through a surrogate pair or between an
 * accent and its letter. Here text is measured and cut by grapheme (a character with the marks,
 * joiners and selectors that go with it), each as wide as a terminal draws it (East Asian Wide and
 * Fullwidth characters and emoji two columns, combining and default-ignorable characters none), as
 * wcwidth and the string-width package count. Which characters are East Asian Wide or Fullwidth
 * comes from get-east-asian-width (Unicode's EastAsianWidth.txt, kept current by its maintainers);
 * Ambiguous characters count one column, as Unicode advises where the context is unknown.
 */
import { eastAsianWidth } from 'get-east-asian-width';

/**
 * A grapheme: a flag (two regional indicators), or a character with the combining marks, skin
 * tones, variation selectors and other default-ignorable characters after it, and what a zero-width
 * joiner joins. A regular expression rather than Intl.Segmenter, whose segments take time growing
 * with the square of the text's length (80 000 CJK characters took 14 s): a peer's result may be
 * that long, and one pass keeps `inspect` as fast as the store.
 */
const grapheme = /\p{Regional_Indicator}{2}|[\s\S](?:\u200d[\s\S]|[\p{Mn}\p{Me}\p{Emoji_Modifier}\p{Default_Ignorable_Code_Point}\u1160-\u11ff])*/gu;

/** Printable ASCII: one column a unit, the common case, measured without segmenting. */
const narrowOnly = /^[\u0020-\u007e]*$/;

/** A grapheme a terminal draws over the character before it, or not at all: combining marks, joiners, variation selectors, Hangul's medial vowels and final consonants. */
const zeroWidth = /^[\p{Mn}\p{Me}\p{Default_Ignorable_Code_Point}\u1160-\u11ff]+$/u;

/** A grapheme drawn as a two-column emoji: one shown as emoji by default, one asked to be (U+FE0F), or a flag (two regional indicators). */
const emoji = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\ufe0f|\p{Regional_Indicator}{2}/u;

/** The columns one grapheme takes: 0, 1 or 2. */
function graphemeColumns(grapheme: string): number {
  if (narrowOnly.test(grapheme)) return grapheme.length;
  if (zeroWidth.test(grapheme)) return 0;
  if (emoji.test(grapheme) || eastAsianWidth(grapheme.codePointAt(0) ?? 0) === 2) return 2;
  return 1;
}

/** A grapheme and the columns it takes. */
export interface Glyph {
  text: string;
  columns: number;
}

/** `text`'s graphemes in order, each with its columns: segmented once, so a long text is measured and cut in one pass. */
export function glyphsOf(text: string): Glyph[] {
  if (narrowOnly.test(text)) return Array.from(text, (c) => ({ text: c, columns: 1 }));
  return Array.from(text.match(grapheme) ?? [], (g) => ({ text: g, columns: graphemeColumns(g) }));
}

/** The columns `text` takes on a terminal. */
export function columnsOf(text: string): number {
  if (narrowOnly.test(text)) return text.length;
  return glyphsOf(text).reduce((sum, g) => sum + g.columns, 0);
}

/**
 * `text` cut into pieces of at most `width` columns, in order, never within a grapheme (a grapheme
 * wider than `width` is a piece alone, so every piece holds at least one).
 */
export function chunksOf(text: string, width: number): string[] {
  const chunks: string[] = [];
  let chunk = '';
  let used = 0;
  for (const g of glyphsOf(text)) {
    if (chunk !== '' && used + g.columns > width) {
      chunks.push(chunk);
      chunk = '';
      used = 0;
    }
    chunk += g.text;
    used += g.columns;
  }
  if (chunk !== '' || chunks.length === 0) chunks.push(chunk);
  return chunks;
}

/** `text` padded with spaces at its end to `width` columns. */
export function padColumns(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - columnsOf(text)));
}
