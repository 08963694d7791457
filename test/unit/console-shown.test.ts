/**
 * The web console (console/console.js, served as it is, no build step) escapes with its own copy
 * of the CLI's pattern: its shown() must escape exactly what terminalText (src/cli/terminal-text.ts)
 * escapes, and write the same escape, so a character the CLI refuses to show raw is never raw on
 * the page either. shown() is taken from the shipped file and run here on every code unit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { terminalText } from '../../src/cli/terminal-text.js';

/** console.js's shown(), evaluated from its own two lines (the pattern and the function). */
function consoleShown(): (text: string) => string {
  // dist/test/unit/ → the package root.
  const source = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'console', 'console.js'), 'utf8');
  const hidden = /^\s*(const hidden = \/.*\/gu;)$/m.exec(source)?.[1];
  const shown = /^\s*(const shown = \(text\) => .*;)$/m.exec(source)?.[1];
  assert.ok(hidden && shown, 'console.js defines hidden and shown on one line each');
  return runInNewContext(`${hidden}\n${shown}\nshown`) as (text: string) => string;
}

test("the console's shown() escapes every code unit exactly as the CLI's terminalText does", () => {
  const shown = consoleShown();
  const differ: string[] = [];
  for (let code = 0; code <= 0xffff; code++) {
    const c = String.fromCharCode(code);
    for (const text of [c, `a${c}b`]) {
      if (shown(text) !== terminalText(text)) differ.push(`U+${code.toString(16).padStart(4, '0')}`);
    }
  }
  assert.deepEqual([...new Set(differ)], []);
  // Pairs are kept whole; a pair split either way is two lone surrogates, both escaped.
  for (const text of ['🙂', 'x\ud83d', '\ude42x', '\ude42\ud83d', 'e\u0301', 'a\u200db', '漢\ufe0f']) {
    assert.equal(shown(text), terminalText(text), JSON.stringify(text));
  }
  assert.equal(shown('id\u200bx \u2028 \ufeff'), 'id\\u200bx \\u2028 \\ufeff');
});
