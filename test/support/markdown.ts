/**
 * Reading documented steps out of Markdown: the fenced blocks of a document, and a shell block's
 * commands as bash reads them. Used by the tests that run README.md and examples/README.md as
 * written.
 */

/** A fenced block: its info string's language (empty when none) and its text, ending in a newline. */
export interface FencedBlock {
  language: string;
  text: string;
}

/** Every fenced (```) block of `markdown`, in order. */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const blocks: FencedBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`the block opened on line ${i + 1} is not closed`);
    blocks.push({ language: open[1]!, text: lines.slice(i + 1, end).join('\n') + '\n' });
    i = end;
  }
  return blocks;
}

/**
 * Splits a shell block into its commands as bash reads them: lines joined by a trailing `\`,
 * newlines inside quotes or `$( … )` kept, comments dropped.
 */
export function shellCommands(block: string): string[] {
  const commands: string[] = [];
  let current = '';
  let quote: string | null = null;
  let depth = 0;
  for (let i = 0; i < block.length; i++) {
    const ch = block[i]!;
    if (quote !== null) {
      current += ch;
      if (ch === '\\' && quote === '"') current += block[++i] ?? '';
      else if (ch === quote) quote = null;
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      current += ch;
    } else if (ch === '\\' && block[i + 1] === '\n') {
      i++;
      current += ' ';
    } else if (ch === '$' && block[i + 1] === '(') {
      depth++;
      current += '$(';
      i++;
    } else if (ch === ')' && depth > 0) {
      depth--;
      current += ch;
    } else if (ch === '#' && depth === 0 && (current.trim() === '' || /\s$/.test(current))) {
      while (i + 1 < block.length && block[i + 1] !== '\n') i++;
    } else if (ch === '\n' && depth === 0) {
      if (current.trim() !== '') commands.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim() !== '') commands.push(current.trim());
  return commands;
}
