/**
 * `convoke peer --config FILE [--context NAME] [--creds FILE]`: an example peer process on NATS, built on the peer SDK
 * (src/peer/peer.ts). It answers one subject namespace's requests with fixed results, optional
 * delays and optional deterministic rules, commits each answer through a fenced effect sink, and
 * acknowledges a request only after its result is stored (durable) or sent (core).
 *
 * Config (JSON, strictly parsed, schema-checked; relative paths are relative to the file):
 *
 *   {
 *     "peerId": "alfa",
 *     "namespace": "demo.v1.lab",
 *     "nats": { "servers": "nats://127.0.0.1:4222", "user": "alfa", "passwordEnv": "CONVOKE_NATS_PASSWORD_ALFA" },
 *     "durable": true,
 *     "effectSink": "sqlite:alfa-effects.db",
 *     "interactions": {
 *       "review": {
 *         "result": { "verdict": "approve" },
 *         "delayMs": 100,
 *         "rules": [
 *           { "when": { "pointer": "/document", "contains": "typo" }, "result": { "verdict": "reject" } },
 *           { "when": { "percentBelow": 20 }, "result": { "verdict": "retry" }, "delayMs": 0 }
 *         ]
 *       }
 *     }
 *   }
 *
 * `effectSink` is `memory:` (the default; `effectSinkKeys` bounds how many operation/branch keys
 * it remembers, 100 000 unless set) or `sqlite:PATH`, which keeps every key across restarts. A
 * sqlite sink another process keeps locked is waited for: each open waits up to the sink's busy
 * timeout (5 s), and the peer tries again until `effectSinkWaitMs` (60 s unless set) has passed
 * before it exits with the `unavailable` error; any other failure to open exits at once (a file
 * that is not an effect sink and holds something, SqliteEffectSink, is `invalid-input`).
 *
 * The first rule whose `when` holds answers, else `result`. `when` is `{pointer, equals}` (the
 * input value at the pointer equals the value), `{pointer, contains}` (a string containing the
 * text, or an array containing the value), or `{percentBelow: N, seed?}`: SHA-256 of
 * seed/operation/branch/peer, first 32 bits mod 100, below N — the same answer for the same
 * branch on every delivery and every process.
 *
 * Durable mode binds the two consumers the coordinator provisioned for this peer (the peer's NATS
 * user may not create consumers) and adopts their max_deliver and ack_wait; it waits, bounded,
 * for them to appear. `faults.crashAfterEffect` (fault tests only) SIGKILLs the process right
 * after an effect commits — before the result is published or the request acknowledged.
 */
import { createHash } from 'node:crypto';
import { dirname, isAbsolute, resolve } from 'node:path';
import { valueAt } from '../../contract/bundle.js';
import { canonicalJson } from '../../contract/canonical.js';
import { AdapterError, invalidInput } from '../../contract/errors.js';
import { readJsonFile } from '../../deployment/files.js';
import { deepFrozen, type JsonValue } from '../../contract/json.js';
import { namespaceSchema, tokenSchema } from '../../contract/ids.js';
import { compileChecker } from '../../contract/validation.js';
import { inboxPrefixFor } from '../../adapters/transport/nats-names.js';
import { connectNats } from '../../adapters/transport/nats.js';
import type { NatsLogin } from '../../adapters/transport/nats-creds.js';
import { resolveConnection } from '../connection.js';
import { readCredsFile, readLogin } from '../secrets.js';
import { MemoryEffectSink, type EffectSink } from '../../peer/effect-sink.js';
import { createNatsPeer } from '../../peer/nats-peer.js';
import type { Handler, HandlerContext, Peer } from '../../peer/peer.js';
import { SqliteEffectSink } from '../../peer/sqlite-effect-sink.js';
import { isSqliteBusy } from '../../adapters/store/sqlite-open.js';
import { SystemClock, pause, type Clock } from '../../contract/clock.js';
import type { CliIo } from '../io.js';
import { limits } from '../../contract/limits.js';

// ── the config ───────────────────────────────────────────────────────────────

export type PeerCondition = { pointer: string; equals: JsonValue } | { pointer: string; contains: JsonValue } | { percentBelow: number; seed?: string };

export interface PeerRule {
  when: PeerCondition;
  result: JsonValue;
  delayMs?: number;
}

export interface PeerInteractionConfig {
  result: JsonValue;
  delayMs?: number;
  rules?: PeerRule[];
}

export interface PeerConfig {
  peerId: string;
  namespace: string;
  /** passwordEnv or credsFile (relative to the config file) is needed unless the login is given by --creds or --context. */
  nats: { servers: string; user?: string; passwordEnv?: string; credsFile?: string };
  durable: boolean;
  /** `sqlite:PATH` (shared across processes, survives restarts) or `memory:` (the default). */
  effectSink?: string;
  /** The memory sink's bound: how many operation/branch keys it remembers (default 100 000). */
  effectSinkKeys?: number;
  /** The sqlite sink: how long the peer keeps trying to open a file another process keeps locked (default 60 000). */
  effectSinkWaitMs?: number;
  interactions: Record<string, PeerInteractionConfig>;
  /** How long durable mode waits for its consumers to be provisioned before giving up. */
  provisionWaitMs?: number;
  faults?: { crashAfterEffect?: boolean };
}

const token = tokenSchema;
const pointer = { type: 'string', pattern: '^(/([^~/]|~[01])*)*$', maxLength: 1024 } as const;
const delay = { type: 'integer', minimum: 0, maximum: limits.examplePeerRuleDelayMsMax } as const;

const conditionSchema = {
  oneOf: [
    { type: 'object', required: ['pointer', 'equals'], additionalProperties: false, properties: { pointer, equals: {} } },
    { type: 'object', required: ['pointer', 'contains'], additionalProperties: false, properties: { pointer, contains: {} } },
    {
      type: 'object',
      required: ['percentBelow'],
      additionalProperties: false,
      properties: { percentBelow: { type: 'integer', minimum: 0, maximum: 100 }, seed: { type: 'string', maxLength: 256 } },
    },
  ],
} as const;

export const peerConfigSchema = {
  type: 'object',
  required: ['peerId', 'namespace', 'nats', 'durable', 'interactions'],
  additionalProperties: false,
  properties: {
    peerId: token,
    namespace: namespaceSchema,
    nats: {
      type: 'object',
      required: ['servers'],
      additionalProperties: false,
      properties: {
        servers: { type: 'string', minLength: 1, maxLength: 4096 },
        user: { type: 'string', minLength: 1, maxLength: 256 },
        passwordEnv: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' },
        // A NATS credentials file, relative to the config file; not with passwordEnv.
        credsFile: { type: 'string', minLength: 1, maxLength: 4096 },
      },
    },
    durable: { type: 'boolean' },
    effectSink: { type: 'string', pattern: '^(memory:|sqlite:.+)$', maxLength: 4096 },
    effectSinkKeys: { type: 'integer', minimum: 1, maximum: limits.examplePeerEffectSinkKeysMax },
    effectSinkWaitMs: { type: 'integer', minimum: 0, maximum: limits.examplePeerEffectSinkWaitMsMax },
    provisionWaitMs: { type: 'integer', minimum: 0, maximum: limits.examplePeerProvisionWaitMsMax },
    interactions: {
      type: 'object',
      minProperties: 1,
      maxProperties: limits.examplePeerInteractionsMax,
      propertyNames: token,
      additionalProperties: {
        type: 'object',
        required: ['result'],
        additionalProperties: false,
        properties: {
          result: {},
          delayMs: delay,
          rules: {
            type: 'array',
            maxItems: limits.examplePeerRulesMax,
            items: {
              type: 'object',
              required: ['when', 'result'],
              additionalProperties: false,
              properties: { when: conditionSchema, result: {}, delayMs: delay },
            },
          },
        },
      },
    },
    faults: { type: 'object', additionalProperties: false, properties: { crashAfterEffect: { type: 'boolean' } } },
  },
} as const;

const checkPeerConfig = compileChecker<PeerConfig>(peerConfigSchema, 'peer config');

/** Reads, strictly parses and validates a peer config; a relative sqlite path comes back absolute. */
export async function readPeerConfig(file: string): Promise<PeerConfig> {
  const config = checkPeerConfig(await readJsonFile(file, 'peer config'));
  if (config.nats.credsFile !== undefined) {
    if (config.nats.passwordEnv !== undefined) throw invalidInput('peer config: nats.passwordEnv and nats.credsFile name two logins; keep one');
    config.nats.credsFile = isAbsolute(config.nats.credsFile) ? config.nats.credsFile : resolve(dirname(resolve(file)), config.nats.credsFile);
  }
  if (config.effectSink?.startsWith('sqlite:')) {
    if (config.effectSinkKeys !== undefined) throw invalidInput('peer config: effectSinkKeys bounds the memory effect sink; the sqlite sink keeps every key');
    const path = config.effectSink.slice('sqlite:'.length);
    config.effectSink = `sqlite:${isAbsolute(path) ? path : resolve(dirname(resolve(file)), path)}`;
  } else if (config.effectSinkWaitMs !== undefined) {
    throw invalidInput('peer config: effectSinkWaitMs bounds waiting for a locked sqlite effect sink; the memory sink never waits');
  }
  return config;
}

// ── answers ──────────────────────────────────────────────────────────────────

function holds(condition: PeerCondition, input: JsonValue, context: HandlerContext, peerId: string): boolean {
  if ('percentBelow' in condition) {
    const { operationId, branchId } = context.request;
    const digest = createHash('sha256')
      .update(`${condition.seed ?? ''}\u0000${operationId}\u0000${branchId}\u0000${peerId}`)
      .digest();
    return digest.readUInt32BE(0) % 100 < condition.percentBelow;
  }
  const value = valueAt(input, condition.pointer);
  if (value === undefined) return false;
  if ('equals' in condition) return canonicalJson(value) === canonicalJson(condition.equals);
  const wanted = condition.contains;
  if (typeof value === 'string') return typeof wanted === 'string' && value.includes(wanted);
  return Array.isArray(value) && value.some((item) => canonicalJson(item) === canonicalJson(wanted));
}

/** The first matching rule's answer, else the interaction's. */
export function answerFor(config: PeerInteractionConfig, input: JsonValue, context: HandlerContext, peerId: string): { result: JsonValue; delayMs: number } {
  const rule = config.rules?.find((r) => holds(r.when, input, context, peerId));
  return { result: rule?.result ?? config.result, delayMs: rule?.delayMs ?? config.delayMs ?? 0 };
}

function handlerFor(config: PeerInteractionConfig, peerId: string, clock: Clock, crashAfterEffect: boolean): Handler {
  // The configured answers, frozen once: each request hands one out as is instead of a copy.
  const answers: PeerInteractionConfig = {
    ...config,
    result: deepFrozen(config.result),
    ...(config.rules && { rules: config.rules.map((r) => ({ ...r, result: deepFrozen(r.result) })) }),
  };
  return async (input, context) => {
    const { result, delayMs } = answerFor(answers, input, context, peerId);
    if (delayMs > 0) await sleepUnlessAborted(clock, delayMs, context);
    // The answer is the business effect, committed through the fenced sink: at most once per branch.
    const value = await context.effect(() => result);
    if (crashAfterEffect) process.kill(process.pid, 'SIGKILL');
    return value;
  };
}

/** Cooperative: a cancelled request stops waiting and throws, so the SDK answers `stopped`. */
function sleepUnlessAborted(clock: Clock, delayMs: number, context: HandlerContext): Promise<void> {
  return new Promise((resolveSleep, reject) => {
    const signal = context.signal;
    const timer = clock.at(clock.nowMs() + delayMs, () => {
      signal.removeEventListener('abort', onAbort);
      resolveSleep();
    });
    const onAbort = () => {
      timer.cancel();
      reject(new AdapterError('unavailable', 'cancelled'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

// ── the process ──────────────────────────────────────────────────────────────

export interface PeerCommandOptions {
  config: string;
  /** A context (only one named here: peer never takes the selected one) and its file. */
  context?: string;
  contexts?: string;
  /** A NATS credentials file the peer logs in with (wins over the context's login and nats.passwordEnv). */
  creds?: string;
  /** Stops the peer like a signal would (in-process use and tests). */
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export async function peerCommand(options: PeerCommandOptions, io: CliIo): Promise<number> {
  const config = await readPeerConfig(options.config);
  const { servers, user, login } = await peerConnection(config, options);
  const nc = await connectNats({
    servers,
    ...login,
    name: `convoke-peer-${config.peerId}`,
    inboxPrefix: inboxPrefixFor('peer', config.peerId),
  });
  let sink: EffectSink | undefined;
  let peer: Peer | undefined;
  try {
    const clock = new SystemClock();
    sink = await openEffectSinkWaiting(config, {
      clock,
      waitMs: config.effectSinkWaitMs ?? effectSinkWaitMsDefault,
      onWaiting: (message) => io.stderr.write(`convoke peer ${config.peerId}: ${message}\n`),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    const handlers = Object.fromEntries(
      Object.entries(config.interactions).map(([id, c]) => [id, handlerFor(c, config.peerId, clock, config.faults?.crashAfterEffect === true)]),
    );
    peer = await createNatsPeer({
      nc,
      identity: user,
      namespace: config.namespace,
      peerId: config.peerId,
      handlers,
      durable: config.durable,
      sink,
      clock,
      ...(config.provisionWaitMs === undefined ? {} : { provisionWaitMs: config.provisionWaitMs }),
      onWaiting: (message) => io.stderr.write(`convoke peer ${config.peerId}: ${message}\n`),
    });
    io.stdout.write(
      `convoke peer ${config.peerId} ready: ${config.namespace} (${config.durable ? 'durable' : 'core'}), interactions ${Object.keys(handlers).join(', ')}\n`,
    );
    const reason = await nextStop(options.signal);
    io.stderr.write(`convoke peer ${config.peerId}: ${reason}, stopping\n`);
    const stats = peer.stats;
    await peer.close();
    peer = undefined;
    io.stderr.write(`convoke peer ${config.peerId}: stopped ${JSON.stringify(stats)}\n`);
    return 0;
  } finally {
    await peer?.close().catch(() => undefined);
    if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    (sink as { close?: () => void } | undefined)?.close?.();
  }
}

/**
 * Where the peer connects and how it logs in: --creds, else the context --context names (its
 * servers, user, password or credentials), else the config's nats block; a flag or context value
 * wins over the config's. `user` names the peer's connection (the config's, else the peer id).
 */
async function peerConnection(config: PeerConfig, options: PeerCommandOptions): Promise<{ servers: string; user: string; login: NatsLogin }> {
  const env = options.env ?? process.env;
  const c = await resolveConnection({ context: options.context, contexts: options.contexts, creds: options.creds }, env, { command: 'peer', user: 'peer' });
  const servers = c.nats ?? config.nats.servers;
  const user = c.user ?? config.nats.user ?? config.peerId;
  if (c.loginNamed) return { servers, user, login: await readLogin(c.login, user, 'peer', env) };
  if (config.nats.credsFile !== undefined) return { servers, user, login: { creds: await readCredsFile(config.nats.credsFile) } };
  const variable = config.nats.passwordEnv;
  if (variable === undefined)
    throw invalidInput('peer config: nats.passwordEnv or nats.credsFile is needed (or give convoke peer --creds, or a context with a password or credentials)');
  const pass = env[variable];
  if (pass === undefined || pass === '') throw invalidInput(`peer config: environment variable ${variable} (nats.passwordEnv) is not set`);
  return { servers, user, login: { user, pass } };
}

/** The sink a peer config names: memory (bounded by effectSinkKeys) or sqlite. */
export function openEffectSink(config: Pick<PeerConfig, 'effectSink' | 'effectSinkKeys'>, busyTimeoutMs?: number): EffectSink {
  const url = config.effectSink;
  if (url === undefined || url === 'memory:') return new MemoryEffectSink(config.effectSinkKeys);
  return new SqliteEffectSink({ path: url.slice('sqlite:'.length), ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) });
}

const effectSinkWaitMsDefault = 60_000;
/** Between two attempts to open a locked sqlite sink (each attempt itself waits up to the busy timeout). */
const effectSinkRetryPauseMs = 1000;

export interface EffectSinkWait {
  clock: Clock;
  /** Keep trying while the file stays locked until this much time has passed (an attempt under way finishes). */
  waitMs: number;
  /** Told once, when the first attempt finds the file locked. */
  onWaiting?: (message: string) => void;
  /** Stops waiting: the last attempt's error is thrown. */
  signal?: AbortSignal;
  /** The sink's busy timeout (tests shorten it); the sink's default otherwise. */
  busyTimeoutMs?: number;
}

/**
 * Opens the configured sink, waiting (bounded) while another process keeps a sqlite sink locked:
 * a peer restarted next to siblings that share its file, or started with them on a new file, must
 * not exit on a lock they release a moment later. Any other failure to open is thrown at once.
 */
export async function openEffectSinkWaiting(config: Pick<PeerConfig, 'effectSink' | 'effectSinkKeys'>, wait: EffectSinkWait): Promise<EffectSink> {
  const deadlineMs = wait.clock.nowMs() + wait.waitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return openEffectSink(config, wait.busyTimeoutMs);
    } catch (error) {
      if (!(error instanceof AdapterError) || error.kind !== 'unavailable' || !isSqliteBusy(error.cause)) throw error;
      if (wait.signal?.aborted) throw error;
      const nowMs = wait.clock.nowMs();
      if (nowMs >= deadlineMs)
        throw new AdapterError('unavailable', `the effect sink stayed locked for ${wait.waitMs} ms (effectSinkWaitMs): ${error.description ?? ''}`, {
          cause: error,
        });
      if (attempt === 0) wait.onWaiting?.(`waiting for the effect sink, locked by another process: ${error.description ?? ''}`);
      await pause(wait.clock, Math.min(effectSinkRetryPauseMs, deadlineMs - nowMs), wait.signal);
    }
  }
}

const stopSignals = ['SIGINT', 'SIGTERM'] as const;

function nextStop(signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolveStop) => {
    const listeners = stopSignals.map((name) => [name, () => finish(name)] as const);
    const onAbort = () => finish('aborted');
    const finish = (reason: string) => {
      for (const [name, listener] of listeners) process.off(name, listener);
      signal?.removeEventListener('abort', onAbort);
      resolveStop(reason);
    };
    for (const [name, listener] of listeners) process.once(name, listener);
    if (signal?.aborted) return finish('aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
