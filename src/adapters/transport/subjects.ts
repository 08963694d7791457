/**
 * Subject grammar (docs/design.md §5) and NATS-style wildcard matching.
 *   <ns>.<interaction>.<operationId>.request.<peer>
 *   <ns>.<interaction>.<operationId>.result.<peer>
 *   <ns>.<interaction>.<operationId>.cancel.<peer>
 *   <ns>.<interaction>.<operationId>.cancel-result.<peer>
 */
export type SubjectKind = 'request' | 'result' | 'cancel' | 'cancel-result' | 'claim';

export const subjectKinds: readonly SubjectKind[] = ['request', 'result', 'cancel', 'cancel-result', 'claim'];

export interface ParsedSubject {
  namespace: string;
  interaction: string;
  operationId: string;
  kind: SubjectKind;
  peerId: string;
}

export function subjectFor(namespace: string, interaction: string, operationId: string, kind: SubjectKind, peerId: string): string {
  return `${namespace}.${interaction}.${operationId}.${kind}.${peerId}`;
}

/** The pattern a coordinator subscribes to for one kind of peer message of an interaction. */
export function inboundPattern(namespace: string, interaction: string, kind: SubjectKind, peerId = '*'): string {
  return `${namespace}.${interaction}.*.${kind}.${peerId}`;
}

/** Parses a received subject against a known namespace and interaction; undefined if it does not fit. */
export function parseSubject(subject: string, namespace: string, interaction: string): ParsedSubject | undefined {
  const prefix = `${namespace}.${interaction}.`;
  if (!subject.startsWith(prefix)) return undefined;
  const rest = subject.slice(prefix.length).split('.');
  if (rest.length !== 3) return undefined;
  const [operationId, kind, peerId] = rest as [string, string, string];
  if (!(subjectKinds as readonly string[]).includes(kind) || operationId === '' || peerId === '') return undefined;
  return { namespace, interaction, operationId, kind: kind as SubjectKind, peerId };
}

/** NATS wildcard match: `*` one token, `>` one or more trailing tokens. */
export function subjectMatches(pattern: string, subject: string): boolean {
  return tokensMatchSubject(pattern.split('.'), subject);
}

/**
 * The same match with the pattern split once, without splitting the subject: the mux and the
 * in-process bus match every delivered message, and splitting it was most of that cost.
 */
export function tokensMatchSubject(p: readonly string[], subject: string): boolean {
  let start = 0;
  for (let i = 0; i < p.length; i++) {
    // eslint-disable-next-line @typescript-eslint/no-non-null-assertion -- i < p.length
    const token = p[i]!;
    if (start > subject.length) return false; // the subject has fewer tokens
    if (token === '>') return true;
    const dot = subject.indexOf('.', start);
    const end = dot === -1 ? subject.length : dot;
    if (token !== '*' && (end - start !== token.length || !subject.startsWith(token, start))) return false;
    start = end + 1;
  }
  return start > subject.length; // every subject token was consumed
}
