/**
 * Result-publisher verification (spec: "Identity, context and authorization"): the received
 * subject's peer token, the expected peer and the payload peer must agree, and the operator must
 * attest that every principal able to publish that namespace maps to the same logical peer.
 * An unattested exception (a wildcard admin publisher, an account import, a subject transform)
 * invalidates the proof. The broker does not tell us who published; the namespace proof does.
 */
export interface NamespaceAttestation {
  namespace: string;
  /** The operator asserts: only peer P's principals can publish `<ns>.*.*.result.P`. */
  exclusivePeerPublishers: boolean;
  /** Known principals beyond the peers that can publish there; any unattested one voids the proof. */
  exceptions?: { principal: string; attested: boolean; note?: string }[];
}

export interface VerificationInput {
  /** The subject the message was received on. */
  subject: string;
  /** That subject's namespace: the attestation consulted is this one's, never the operation's by assumption. */
  namespace: string;
  subjectPeerId: string;
  expectedPeerId: string;
  payloadPeerId: string;
}

export type VerificationOutcome = { accepted: true } | { accepted: false; reason: string };

export interface PublisherVerifier {
  verify(input: VerificationInput): VerificationOutcome;
  /**
   * Why no result published on this namespace could be verified (no attestation, not
   * peer-exclusive, an unattested exception), or undefined when results there can be verified.
   * Admission refuses such a namespace as unsupported: every result would be rejected.
   */
  namespaceProblem(namespace: string): string | undefined;
}

export class SubjectNamespaceVerifier implements PublisherVerifier {
  private readonly byNamespace: Map<string, NamespaceAttestation>;

  constructor(attestations: NamespaceAttestation[]) {
    this.byNamespace = new Map(attestations.map((a) => [a.namespace, a]));
  }

  verify(input: VerificationInput): VerificationOutcome {
    if (!peerSubjectOf(input.subject, input.namespace)) {
      return { accepted: false, reason: `subject ${input.subject} is not a peer subject of namespace ${input.namespace}, whose attestation was asked for` };
    }
    if (input.subjectPeerId !== input.expectedPeerId || input.payloadPeerId !== input.expectedPeerId) {
      return {
        accepted: false,
        reason: `subject peer ${input.subjectPeerId}, expected ${input.expectedPeerId} and payload peer ${input.payloadPeerId} disagree`,
      };
    }
    const problem = this.namespaceProblem(input.namespace);
    return problem === undefined ? { accepted: true } : { accepted: false, reason: problem };
  }

  namespaceProblem(namespace: string): string | undefined {
    const attestation = this.byNamespace.get(namespace);
    if (!attestation) return `namespace ${namespace} has no publisher attestation`;
    if (!attestation.exclusivePeerPublishers) return `namespace ${namespace} is not attested as peer-exclusive`;
    const unattested = (attestation.exceptions ?? []).filter((e) => !e.attested);
    if (unattested.length > 0) return `namespace ${namespace} has unattested publishers: ${unattested.map((e) => e.principal).join(', ')}`;
    return undefined;
  }
}

/** Whether `subject` is `<namespace>.<interaction>.<operationId>.<kind>.<peer>`: the namespace is the subject's own. */
function peerSubjectOf(subject: string, namespace: string): boolean {
  return subject.startsWith(`${namespace}.`) && subject.slice(namespace.length + 1).split('.').length === 4;
}
