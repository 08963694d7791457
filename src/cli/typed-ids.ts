/**
 * Ids as a person types them into a store command: the full id, or a unique prefix such as the
 * short form a table shows (`op0123456…`, `wf0123456…`: the kind, hex, an ellipsis). A prefix is
 * looked up among the store's ids of that kind; one matching several is refused listing them.
 */
import { invalidInput } from '../contract/errors.js';
import { isWorkflowInstanceId } from '../workflow/ids.js';

/** How many candidates an ambiguous prefix lists. */
const prefixCandidatesMax = 10;
/** Shorter prefixes match too much to be meant: the kind and at least this many hex digits. */
export const prefixHexMin = 4;

/** What was typed, without the ellipsis a table's short form ends with, lower-cased. */
export function typedText(text: string): string {
  return text
    .trim()
    .replace(/(…|\.\.\.)$/, '')
    .toLowerCase();
}

/** Whether `typed` (typedText) is `kind` and 4 to 63 hex digits: a prefix of one id of that kind. */
export function isIdPrefix(typed: string, kind: 'op' | 'wf'): boolean {
  return new RegExp(`^${kind}[0-9a-f]{${prefixHexMin},63}$`).test(typed);
}

/** A workflow instance id or a prefix of one (wf + hex; the `wf` is required), as typed; undefined for anything else. */
export function typedInstanceId(text: string): string | undefined {
  const typed = typedText(text);
  return isWorkflowInstanceId(typed) || isIdPrefix(typed, 'wf') ? typed : undefined;
}

/** The one id of `ids` that starts with `prefix`; undefined when none does; invalid-input naming them when several do. */
export async function uniqueByPrefix(ids: AsyncIterable<string>, prefix: string): Promise<string | undefined> {
  const matches: string[] = [];
  for await (const id of ids) {
    if (!id.startsWith(prefix)) continue;
    matches.push(id);
    if (matches.length > prefixCandidatesMax) break;
  }
  if (matches.length > 1) {
    const shown = matches.slice(0, prefixCandidatesMax);
    const more = matches.length > prefixCandidatesMax ? ' and more' : '';
    throw invalidInput(`${prefix} is ambiguous: it starts ${shown.join(', ')}${more}; type more of the id`);
  }
  return matches[0];
}
