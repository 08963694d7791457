/**
 * The nats transport of a deployment config: its schema, defaults and the durable settings
 * resolved from the deployed bundles (the duplicate window each interaction needs).
 */
import type { CompiledBundle } from '../../contract/bundle.js';
import { invalidInput } from '../../contract/errors.js';
import { tokenPattern, tokenSchema } from '../../contract/ids.js';
import { compileChecker } from '../../contract/validation.js';
import type { DurableConfig } from '../../adapters/transport/nats.js';
import { commandQueueDefault } from '../../nats-api/commands.js';
import { limits } from '../../contract/limits.js';
import type { NatsDurableSettings, NatsTransportConfig } from '../types.js';

/**
 * Defaults of durable mode; the duplicate window defaults to what the deployed interactions require.
 * ack_wait is short because live work never waits it out (subscribers send in-progress acks, see
 * nats-consumers.ts): it is how soon a stopped process's unacknowledged messages go to another.
 */
export const natsDurableDefaults = { maxDeliver: 5, ackWaitMs: 5_000 } as const;
export const durabilityCheckIntervalMsDefault = 5_000;

export interface ResolvedNatsTransport {
  servers: string;
  user: string;
  /** Absent when the login is handed in (BuildOptions.natsLogin: serve's --creds or context). */
  passwordEnv?: string;
  mode: 'core' | 'durable';
  coordinatorId: string;
  durable: Required<Pick<NatsDurableSettings, 'duplicateWindowMs' | 'maxDeliver' | 'ackWaitMs'>> & Pick<NatsDurableSettings, 'maxMsgs' | 'maxMsgBytes'>;
  manageStreams: boolean;
  durabilityCheckIntervalMs: number;
  commandQueue: string;
  commandSenders: Record<string, string>;
}

const positiveMs = (max: number, min = 1) => ({ type: 'integer', minimum: min, maximum: max }) as const;

/**
 * The `{"kind":"nats"}` transport of the deployment config (config.ts embeds it in its schema;
 * it lives here so config.ts can import it without an import cycle at load).
 */
export const natsTransportSchema = {
  type: 'object',
  required: ['kind', 'servers', 'user', 'mode'],
  additionalProperties: false,
  properties: {
    kind: { const: 'nats' },
    servers: { type: 'string', minLength: 1, maxLength: 4096 },
    user: { type: 'string', minLength: 1, maxLength: 256 },
    passwordEnv: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' },
    credsFile: { type: 'string', minLength: 1, maxLength: 4096 },
    mode: { enum: ['core', 'durable'] },
    coordinatorId: tokenSchema,
    durable: {
      type: 'object',
      additionalProperties: false,
      properties: {
        duplicateWindowMs: positiveMs(limits.timeoutMsMax + limits.settlementGraceMsMax + limits.cancelTimeoutMsMax),
        maxMsgs: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        maxMsgBytes: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        // Accepted by the schema only to be refused with its reason (checkNatsTransport).
        maxBytes: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        maxDeliver: { type: 'integer', minimum: 1, maximum: limits.natsMaxDeliverMax },
        ackWaitMs: positiveMs(limits.leaseMsMax, limits.natsAckWaitMsMin),
      },
    },
    manageStreams: { type: 'boolean' },
    durabilityCheckIntervalMs: positiveMs(limits.durabilityCheckIntervalMsMax, limits.durabilityCheckIntervalMsMin),
    commandQueue: tokenSchema,
    commandSenders: { type: 'object', propertyNames: tokenSchema, maxProperties: limits.natsCommandSendersMax, additionalProperties: tokenSchema },
  },
} as const;

const checkTransportShape = compileChecker<NatsTransportConfig>(natsTransportSchema, 'transport');

/**
 * Checks a nats transport (again: configs built in code skip the file's schema) and fills in the
 * defaults. Every problem is reported at once.
 */
export function checkNatsTransport(transport: NatsTransportConfig, compiled: CompiledBundle[]): ResolvedNatsTransport {
  const t = checkTransportShape(transport);
  const problems: string[] = [];
  const coordinatorId = t.coordinatorId ?? t.user;
  if (!tokenPattern.test(coordinatorId)) problems.push(`transport.coordinatorId is needed: user ${JSON.stringify(t.user)} is not a token-safe id`);
  if (t.passwordEnv !== undefined && t.credsFile !== undefined) problems.push('transport: passwordEnv and credsFile name two logins; keep one');
  if (t.mode === 'core' && t.durable !== undefined) problems.push('transport.durable is only for mode "durable"');
  const requiredWindowMs = requiredDuplicateWindowMs(compiled);
  const durable = {
    duplicateWindowMs: t.durable?.duplicateWindowMs ?? requiredWindowMs,
    maxDeliver: t.durable?.maxDeliver ?? natsDurableDefaults.maxDeliver,
    ackWaitMs: t.durable?.ackWaitMs ?? natsDurableDefaults.ackWaitMs,
    ...(t.durable?.maxMsgs === undefined ? {} : { maxMsgs: t.durable.maxMsgs }),
    ...(t.durable?.maxMsgBytes === undefined ? {} : { maxMsgBytes: t.durable.maxMsgBytes }),
  };
  if (t.durable?.maxBytes !== undefined) {
    problems.push(
      "transport.durable.maxBytes is not supported: nats-server 2.9 evicts a stored message when a small one lands at a stream's byte limit, even under discard new; bound bytes with maxMsgs and maxMsgBytes instead",
    );
  }
  if (t.mode === 'durable') problems.push(...duplicateWindowProblems(compiled, durable.duplicateWindowMs));
  if (problems.length > 0) throw invalidInput(`deployment config: ${problems.join('; ')}`);
  return {
    servers: t.servers,
    user: t.user,
    ...(t.passwordEnv === undefined ? {} : { passwordEnv: t.passwordEnv }),
    mode: t.mode,
    coordinatorId,
    durable,
    manageStreams: t.manageStreams ?? false,
    durabilityCheckIntervalMs: t.durabilityCheckIntervalMs ?? durabilityCheckIntervalMsDefault,
    commandQueue: t.commandQueue ?? commandQueueDefault,
    commandSenders: t.commandSenders ?? {},
  };
}

/**
 * What an interaction needs the duplicate window to cover: requests are republished with the same
 * Msg-Id until the deadline, cancels until the cancel timeout after closure, and business results
 * are recorded until the settlement grace ends — closure is at the deadline at the latest.
 */
export function interactionWindowMs(spec: { timeoutMs: number; settlementGraceMs: number; cancelTimeoutMs: number }): number {
  return spec.timeoutMs + Math.max(spec.settlementGraceMs, spec.cancelTimeoutMs);
}

export function requiredDuplicateWindowMs(compiled: CompiledBundle[]): number {
  let windowMs = 1;
  for (const b of compiled) for (const i of b.interactions.values()) windowMs = Math.max(windowMs, interactionWindowMs(i.spec));
  return windowMs;
}

export function duplicateWindowProblems(compiled: CompiledBundle[], duplicateWindowMs: number): string[] {
  const problems: string[] = [];
  for (const b of compiled) {
    for (const i of b.interactions.values()) {
      const needMs = interactionWindowMs(i.spec);
      if (needMs > duplicateWindowMs) {
        problems.push(
          `transport.durable.duplicateWindowMs ${duplicateWindowMs} does not cover ${b.ref.id}/${i.id}: timeoutMs + max(settlementGraceMs, cancelTimeoutMs) = ${needMs}`,
        );
      }
    }
  }
  return problems;
}

/**
 * Every peer each namespace can address: members of the directory groups its interactions name,
 * static audiences, and explicit branch peers. Sorted, for stable provisioning and configs.
 */
export function peersByNamespace(compiled: CompiledBundle[], groups: Record<string, string[]>): Map<string, string[]> {
  const byNamespace = new Map<string, Set<string>>();
  for (const b of compiled) {
    const peers = byNamespace.get(b.bundle.subjectNamespace) ?? new Set<string>();
    byNamespace.set(b.bundle.subjectNamespace, peers);
    for (const i of b.interactions.values()) {
      const audience = i.spec.audience;
      for (const p of 'peers' in audience ? audience.peers : (groups[audience.group] ?? [])) peers.add(p);
      for (const branch of i.spec.branches ?? []) peers.add(branch.peerId);
    }
  }
  return new Map([...byNamespace].map(([ns, peers]) => [ns, [...peers].sort()]));
}

export function durableConfigFor(namespace: string, settings: ResolvedNatsTransport['durable'], peers: readonly string[]): DurableConfig {
  const config: DurableConfig = {
    namespace,
    peers,
    duplicateWindowMs: settings.duplicateWindowMs,
    maxDeliver: settings.maxDeliver,
    ackWaitMs: settings.ackWaitMs,
  };
  if (settings.maxMsgs !== undefined) config.maxMsgs = settings.maxMsgs;
  if (settings.maxMsgBytes !== undefined) config.maxMsgBytes = settings.maxMsgBytes;
  return config;
}

/** A URL, or undefined for text that is not one. */
export function safeUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}
