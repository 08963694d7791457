/**
 * Text for a person's terminal. Much of what the CLI prints is not its own: a peer's result or
 * rejection reason, a workflow document's task names, a CloudEvent's data, an error a server
 * relayed. A terminal acts on the control characters in it (ESC starts sequences that set the
 * window title, clear the screen, move the cursor, hide text or make a link; CR writes over the
 * line) and bidi controls reorder what is read (Trojan Source), so the CLI shows them escaped
 * wherever it writes for a person. `--json` output is left exactly as it is.
 */

// eslint-disable-next-line no-control-regex -- the characters a terminal acts on, or that reorder what it shows, are what the pattern names
const refused = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]/gu;

/**
 * `text` with each character a terminal would act on rather than show, or that would reorder what
 * it shows, written as its escape `\uXXXX`, so nothing is hidden and nothing is interpreted: every
 * C0 control but the newline (a tab too: a table counts it as one column), DEL, every C1 control
 * (U+0080–U+009F: some terminals take U+009B as ESC [), the bidi embeddings, overrides and isolates
 * (U+202A–U+202E, U+2066–U+2069), the bidi marks (U+200E, U+200F, U+061C: invisible, and they move
 * the punctuation beside them), and a lone surrogate (the `u` pattern matches no pair). Any other
 * character, é, 漢 or 🙂, is kept. The escape is JSON's own, so a JSON text stays the same value.
 * The result holds none of these characters, so escaping it again changes nothing; a `\u001b`
 * written in the data reads as an escaped ESC does (`--json` tells the two apart).
 */
export function terminalText(text: string): string {
  return text.replace(refused, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
