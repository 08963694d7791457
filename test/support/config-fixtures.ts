/**
 * The smallest valid `convoke serve` deployment config: a memory store and transport, no bundle
 * content of its own, one static HTTP principal. Tests spread their own keys over it.
 */

export function minimalServeConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    store: 'memory:',
    transport: { kind: 'memory' },
    bundles: ['b.json'],
    directory: { groups: {} },
    policy: { rules: [] },
    attestations: [],
    deployment: { account: 'a', system: 's', domain: 'd' },
    http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 65_536, waitMsMax: 1000, principals: [{ principalId: 'p', tokenSha256: 'a'.repeat(64) }] },
    ...overrides,
  };
}
