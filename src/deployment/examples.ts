/** The example contract the demo, tests and benchmarks use: a document review by N peers. */
import type { JsonObject } from '../contract/json.js';

export const peerNames = [
  'alfa',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliett',
  'kilo',
  'lima',
  'mike',
  'november',
  'oscar',
  'papa',
];

export function peerIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => peerNames[i] ?? `peer-${i + 1}`);
}

/** A review bundle; `review` overrides merge into the interaction. */
export function reviewBundle(review: JsonObject = {}): JsonObject {
  return {
    profile: '0.2',
    contract: { id: 'lab.review', version: '1.0.0' },
    subjectNamespace: 'demo.v1.lab',
    interactions: {
      review: {
        description: 'A document is reviewed by a frozen set of peers; the rule decides.',
        input: { type: 'object', required: ['document'], properties: { document: { type: 'string', maxLength: 100000 } }, additionalProperties: false },
        result: {
          type: 'object',
          required: ['verdict'],
          properties: { verdict: { enum: ['approve', 'reject', 'retry'] }, note: { type: 'string' } },
          additionalProperties: false,
        },
        output: {
          type: 'object',
          required: ['counts', 'total'],
          properties: { counts: { type: 'object', additionalProperties: { type: 'integer' } }, total: { type: 'integer' } },
        },
        audience: { group: 'reviewers' },
        delivery: 'independent',
        completion: { mode: 'quorum', count: 3 },
        votes: 'distinct-branches',
        success: { pointer: '/verdict', equals: 'approve' },
        retryable: { pointer: '/verdict', equals: 'retry' },
        timeoutMs: 5000,
        onTimeout: 'partial',
        leaseMs: 5000,
        renewIntervalMs: 1000,
        siblings: 'detach',
        aggregate: { kind: 'tally', pointer: '/verdict' },
        ...review,
      },
    },
  };
}
