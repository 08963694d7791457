/**
 * Text for a person's terminal. Much of what the CLI prints is not its own: a peer's result or
 * rejection reason, a workflow document's task names, a CloudEvent's data, an error a server
 * relayed. A terminal acts on the control characters in it (ESC starts sequences that set the
 * window title, clear the screen, move the cursor, hide text or make a link; CR writes over the
 * line) and bidi controls reorder what is read (Trojan Source); invisible characters hide what is
 * there (two ids that differ by a zero width space look alike) and the line and paragraph
 * separators break a line where no newline is, so the CLI shows them escaped wherever it writes
 * for a person. `--json` output is left exactly as it is.
 */

// eslint-disable-next-line no-control-regex -- the characters a terminal acts on, or that reorder or hide what it shows, are what the pattern names
const refused = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ud800-\udfff]/gu;

/**
 * `text` with each character a terminal would act on rather than show, or that would reorder or
 * hide what it shows, written as its escape `\uXXXX`, so nothing is hidden and nothing is interpreted: every
 * C0 control but the newline (a tab too: a table counts it as one column), DEL, every C1 control
 * (U+0080–U+009F: some terminals take U+009B as ESC [), the bidi embeddings, overrides and isolates
 * (U+202A–U+202E, U+2066–U+2069), the bidi marks (U+200E, U+200F, U+061C: invisible, and they move
 * the punctuation beside them), the characters that are invisible and join or part nothing a
 * script or an emoji needs (the zero width space U+200B, the word joiner and invisible operators
 * U+2060–U+2064, the deprecated format controls U+206A–U+206F, the zero width no-break space or
 * byte order mark U+FEFF), the line and paragraph separators (U+2028, U+2029), and a lone surrogate
 * (the `u` pattern matches no pair). Any other character, é, 漢 or 🙂, is kept, the zero width
 * non-joiner and joiner (U+200C, U+200D) and the variation selectors among them: scripts and emoji
 * are written with them. The escape is JSON's own, so a JSON text stays the same value.
 * The result holds none of these characters, so escaping it again changes nothing; a `\u001b`
 * written in the data reads as an escaped ESC does (`--json` tells the two apart).
 */
export function terminalText(text: string): string {
  return text.replace(refused, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
