/**
 * How many terminal columns text takes, for tables and wrapped lines. A string's length counts
 * UTF-16 code units, which is not what a terminal shows: 漢 (one unit) and 🙂 (two) each take two
 * columns, a combining accent (one unit) none, a family emoji (eight units) two. Measured in units,
 * a row of CJK text outgrew the terminal and a cut went through a surrogate pair or between an
 * accent and its letter. Here text is measured and cut by grapheme (a character with the marks,
 * joiners and selectors that go with it), each as wide as a terminal draws it (East Asian Wide and
 * Fullwidth characters and emoji two columns, combining and default-ignorable characters none), as
 * wcwidth and the string-width package count.
 */

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

/** The East Asian Wide and Fullwidth blocks (Unicode's EastAsianWidth.txt, W and F), as [first, last] code points. */
const wideRanges: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f], // Hangul Jamo initial consonants
  [0x2329, 0x232a], // angle brackets
  [0x2e80, 0x303e], // CJK radicals, Kangxi radicals, ideographic description, CJK symbols and punctuation
  [0x3041, 0x3247], // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, CJK strokes, enclosed CJK
  [0x3250, 0x4dbf], // enclosed CJK, CJK compatibility, CJK extension A
  [0x4e00, 0xa4cf], // CJK unified ideographs, Yi
  [0xa960, 0xa97f], // Hangul Jamo extended A
  [0xac00, 0xd7a3], // Hangul syllables
  [0xf900, 0xfaff], // CJK compatibility ideographs
  [0xfe10, 0xfe19], // vertical forms
  [0xfe30, 0xfe6f], // CJK compatibility forms, small form variants
  [0xff00, 0xff60], // fullwidth forms
  [0xffe0, 0xffe6], // fullwidth signs
  [0x16fe0, 0x16fe4], // ideographic symbols
  [0x17000, 0x18cff], // Tangut
  [0x1b000, 0x1b2ff], // Kana supplement and extensions, Nushu
  [0x1f200, 0x1f2ff], // enclosed ideographic supplement
  [0x20000, 0x3fffd], // CJK extensions B and on, the supplementary and tertiary ideographic planes
];

function isWide(codePoint: number): boolean {
  return wideRanges.some(([first, last]) => codePoint >= first && codePoint <= last);
}

/** The columns one grapheme takes: 0, 1 or 2. */
function graphemeColumns(grapheme: string): number {
  if (narrowOnly.test(grapheme)) return grapheme.length;
  if (zeroWidth.test(grapheme)) return 0;
  if (emoji.test(grapheme) || isWide(grapheme.codePointAt(0) ?? 0)) return 2;
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
