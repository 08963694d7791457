/**
 * The deployment config file of `convoke serve`, and the deployment it builds.
 *
 * The file is JSON, parsed with the strict I-JSON parser (a duplicate key in a config is as
 * ambiguous as one in an input) and validated with ajv; every schema error is reported at once,
 * then every semantic error (unreadable bundles, unattested namespaces, example results that do
 * not match their interaction...) at once. Relative paths are relative to the config file.
 *
 * Credentials: the config holds only SHA-256 hashes of bearer tokens, the path of a public JWKS
 * and the names of environment variables holding NATS passwords; bundles never hold credentials
 * (spec: "neither a new principal nor a raw credential value is embedded in the bundle").
 */
import { dirname, isAbsolute, resolve } from 'node:path';
import { BundleRegistry, type CompiledBundle } from '../contract/bundle.js';
import { readBundleFile, readFileBytes, readJsonFile } from './files.js';
import { invalidInput, isAdapterError } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import { subjectSpacesOverlap, tokenSchema } from '../contract/ids.js';
import { deepFrozen, type JsonObject, type JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import { describeErrors, compileChecker } from '../contract/validation.js';
import { StaticDirectory } from '../adapters/directory/static.js';
import { StaticPolicy, policyTtlMsDefault, type PolicyRule } from '../adapters/policy/static.js';
import { jetstreamStorePrefix, openStore } from '../adapters/store/open.js';
import type { EventStore } from '../adapters/store/types.js';
import type { NatsLogin } from '../adapters/transport/nats-creds.js';
import { startupWait } from '../adapters/transport/nats-startup.js';
import { MemoryBus, type MemoryTransport } from '../adapters/transport/memory.js';
import { SubjectNamespaceVerifier, type NamespaceAttestation } from '../adapters/verification/subject.js';
import { createPeer, type Handler, type Peer } from '../peer/peer.js';
import type { Clock } from '../contract/clock.js';
import { Coordinator } from '../runtime/coordinator.js';
import { attestedEffectFencing } from '../runtime/capabilities.js';
import { budgetBytesMin, budgetProblems } from '../runtime/log-budget.js';
import { coordinatorBusPermissions, peerBusPermissions } from './embedded.js';
import { observeStampSources } from '../runtime/metrics.js';
import { admissionRateBounds } from '../runtime/admission-rate.js';
import { retentionEveryMsMax, retentionEveryMsMin, retentionKeepMsMax, retentionKeepMsMin, scheduleRetention } from '../runtime/retention.js';
import { originPattern } from '../contract/origins.js';
import { buildNatsDeployment } from './nats/assembly.js';
import { jetstreamStorePermissions } from './nats/permissions.js';
import { natsTransportSchema } from './nats/settings.js';
import type { DeploymentConfig, DeploymentLog, ExamplePeerConfig, HttpConfig, JwtConfig, RunningDeployment } from './types.js';
import type { Logger } from '../runtime/operation-log.js';
import { workflowEventsDefaults, type WorkflowHostFactory } from '../runtime/workflow-service.js';
import type { HttpSettings } from '../http/settings.js';
import { listingDeps } from './listing.js';
import { waitsMaxDefault, waitsPerPrincipalDefault } from '../runtime/wait-slots.js';

const token = tokenSchema;
const name = { type: 'string', minLength: 1, maxLength: 256 } as const;
const path = { type: 'string', minLength: 1, maxLength: 4096 } as const;
const names = { type: 'array', items: name, maxItems: limits.configPolicyRuleNamesMax } as const;
/** A CloudEvent type, and a subject prefix: dot-separated subject tokens (src/contract/cloudevents.ts). */
const subjectTokens = '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$';
/** Receiving a request's headers, and the whole request, from a slow client. */
export const headersTimeoutMsDefault = 10_000;
export const requestTimeoutMsDefault = 30_000;
/** An idle event stream sends a comment this often, within any proxy's idle timeout (the socket's is set to outlast it by 15 s). */
export const eventHeartbeatMsDefault = 15_000;
export const eventStreamsPerPrincipalDefault = 8;
/** Event streams all principals may hold open at once, unless the deployment says otherwise (http.events.streamsMax). */
export const eventStreamsMaxDefault = 1_024;
/** CloudEvent deliveries (POST /workflow-events) one principal may have in flight at once, unless the deployment says otherwise (http.eventDeliveriesPerPrincipal). */
export const eventDeliveriesPerPrincipalDefault = 64;
/** CloudEvent deliveries all principals may have in flight at once, unless the deployment says otherwise (http.eventDeliveriesMax). */
export const eventDeliveriesMaxDefault = 1_024;

const examplePeerSchema = {
  type: 'object',
  propertyNames: token,
  properties: { delayMs: { type: 'integer', minimum: 0, maximum: limits.examplePeerDelayMsMax } },
  // Every other key is an interaction id whose value is any JSON (checked against the bundle later).
  additionalProperties: {},
} as const;

const transportSchema = {
  type: 'object',
  required: ['kind'],
  properties: { kind: { enum: ['memory', 'nats'] } },
  allOf: [
    {
      if: { properties: { kind: { const: 'memory' } } },
      then: {
        additionalProperties: false,
        properties: {
          kind: {},
          examplePeers: { type: 'object', propertyNames: token, maxProperties: limits.branchesMax, additionalProperties: examplePeerSchema },
        },
      },
    },
    { if: { properties: { kind: { const: 'nats' } } }, then: natsTransportSchema },
  ],
} as const;

const ruleSchema = {
  type: 'object',
  required: ['effect'],
  additionalProperties: false,
  properties: {
    effect: { enum: ['allow', 'deny'] },
    principals: names,
    contracts: names,
    interactions: names,
    peers: names,
    /** Pipeline or workflow names: the rule applies to their starts only (start-workflow). */
    workflows: names,
    actions: { type: 'array', items: { enum: ['invoke', 'deliver', 'admit-result', 'cancel', 'renew', 'start-workflow'] } },
  },
} as const;

const attestationSchema = {
  type: 'object',
  required: ['namespace', 'exclusivePeerPublishers'],
  additionalProperties: false,
  properties: {
    namespace: { type: 'string', minLength: 1, maxLength: 600 },
    exclusivePeerPublishers: { type: 'boolean' },
    effectFencing: { type: 'boolean' },
    exceptions: {
      type: 'array',
      maxItems: limits.configAttestationExceptionsMax,
      items: {
        type: 'object',
        required: ['principal', 'attested'],
        additionalProperties: false,
        properties: { principal: name, attested: { type: 'boolean' }, note: { type: 'string', maxLength: 4096 } },
      },
    },
  },
} as const;

const httpSchema = {
  type: 'object',
  required: ['host', 'port', 'bodyLimitBytes', 'waitMsMax', 'principals'],
  additionalProperties: false,
  properties: {
    host: { type: 'string', minLength: 1, maxLength: 255 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    bodyLimitBytes: { type: 'integer', minimum: 1024, maximum: limits.httpBodyLimitBytesMax },
    waitMsMax: { type: 'integer', minimum: 0, maximum: limits.waitMsMax },
    drainMs: { type: 'integer', minimum: 0, maximum: limits.httpDrainMsMax },
    waitsPerPrincipal: { type: 'integer', minimum: 1, maximum: limits.waitsPerPrincipalMax },
    waitsMax: { type: 'integer', minimum: 1, maximum: limits.httpWaitsMax },
    eventDeliveriesPerPrincipal: { type: 'integer', minimum: 1, maximum: limits.httpEventDeliveriesPerPrincipalMax },
    eventDeliveriesMax: { type: 'integer', minimum: 1, maximum: limits.httpEventDeliveriesMax },
    headersTimeoutMs: { type: 'integer', minimum: limits.httpReceiveTimeoutMsMin, maximum: limits.httpReceiveTimeoutMsMax },
    requestTimeoutMs: { type: 'integer', minimum: limits.httpReceiveTimeoutMsMin, maximum: limits.httpReceiveTimeoutMsMax },
    events: {
      type: 'object',
      additionalProperties: false,
      properties: {
        heartbeatMs: { type: 'integer', minimum: limits.httpEventHeartbeatMsMin, maximum: limits.httpEventHeartbeatMsMax },
        streamsPerPrincipal: { type: 'integer', minimum: 1, maximum: limits.httpEventStreamsPerPrincipalMax },
        streamsMax: { type: 'integer', minimum: 1, maximum: limits.httpEventStreamsMax },
      },
    },
    principals: {
      type: 'array',
      maxItems: limits.configPrincipalsMax,
      items: {
        type: 'object',
        required: ['principalId', 'tokenSha256'],
        additionalProperties: false,
        properties: { principalId: name, tokenSha256: { type: 'string', pattern: '^[0-9a-f]{64}$' }, senderPeerId: token },
      },
    },
    jwt: {
      type: 'object',
      required: ['issuer', 'audience', 'jwksFile'],
      additionalProperties: false,
      properties: {
        issuer: name,
        audience: name,
        jwksFile: path,
        algorithms: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^(RS|PS|ES)(256|384|512)$|^EdDSA$|^Ed25519$' } },
        principalPrefix: name,
      },
    },
  },
} as const;

/** A token bucket per principal (admissionRate, workflows.startRate). */
const rateSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['perSecond', 'burst'],
  properties: {
    perSecond: { type: 'number', minimum: admissionRateBounds.perSecondMin, maximum: admissionRateBounds.perSecondMax },
    burst: { type: 'integer', minimum: admissionRateBounds.burstMin, maximum: admissionRateBounds.burstMax },
  },
} as const;

/** How long past its instant open work waits before it counts as stuck (stuck, workflows.stuck). */
const stuckGraceMs = { type: 'integer', minimum: 0, maximum: limits.timeoutMsMax } as const;

/**
 * The origins a request carrying one workflow secret may go to (each entry read by origins.ts:
 * semanticProblems). Never empty: a secret that may go nowhere is a mistake, and `[]` read as
 * "anywhere" would be a worse one.
 */
const secretOrigins = {
  type: 'array',
  minItems: 1,
  maxItems: limits.workflowHttpAllowMax,
  uniqueItems: true,
  items: { type: 'string', minLength: 1, maxLength: limits.workflowHttpOriginCharsMax },
} as const;

export const deploymentConfigSchema = {
  $id: 'https://convoke.dev/schemas/deployment-config.json',
  type: 'object',
  required: ['store', 'transport', 'bundles', 'directory', 'policy', 'attestations', 'deployment', 'http'],
  additionalProperties: false,
  properties: {
    store: { type: 'string', minLength: 1, maxLength: 4096 },
    resultBatchMs: { type: 'integer', minimum: 0, maximum: limits.resultBatchMsMax },
    workflowSecrets: {
      type: 'object',
      maxProperties: limits.workflowSecretsMax,
      propertyNames: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 },
      additionalProperties: {
        oneOf: [
          {
            type: 'object',
            required: ['env'],
            additionalProperties: false,
            properties: { env: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 256 }, origins: secretOrigins },
          },
          {
            type: 'object',
            required: ['file'],
            additionalProperties: false,
            properties: { file: { type: 'string', minLength: 1, maxLength: 4096 }, origins: secretOrigins },
          },
        ],
      },
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        resultBytesMax: { type: 'integer', minimum: budgetBytesMin.resultBytesMax, maximum: limits.resultBytesMax },
        transitionBytesMax: { type: 'integer', minimum: budgetBytesMin.transitionBytesMax, maximum: limits.transitionBytesMax },
        recordBytesMax: { type: 'integer', minimum: budgetBytesMin.recordBytesMax, maximum: limits.recordBytesMax },
      },
    },
    transport: transportSchema,
    bundles: { type: 'array', minItems: 1, maxItems: limits.configBundlesMax, items: path },
    directory: {
      type: 'object',
      required: ['groups'],
      additionalProperties: false,
      properties: { groups: { type: 'object', propertyNames: token, additionalProperties: { type: 'array', items: token, maxItems: limits.branchesMax } } },
    },
    policy: {
      type: 'object',
      required: ['rules'],
      additionalProperties: false,
      properties: {
        rules: { type: 'array', items: ruleSchema, maxItems: limits.configPolicyRulesMax },
        ttlMs: { type: 'integer', minimum: 1, maximum: limits.leaseMsMax },
      },
    },
    attestations: { type: 'array', items: attestationSchema, maxItems: limits.configAttestationsMax },
    deployment: {
      type: 'object',
      required: ['account', 'system', 'domain'],
      additionalProperties: false,
      properties: { account: name, system: name, domain: name },
    },
    http: httpSchema,
    /** Principals that list every principal's operations (HTTP and NATS `list`); everyone else lists their own. */
    operators: { type: 'array', items: name, maxItems: limits.configOperatorsMax, uniqueItems: true },
    workflows: {
      type: 'object',
      additionalProperties: false,
      properties: {
        leaseMs: { type: 'integer', minimum: limits.workflowLeaseMsMin, maximum: limits.workflowLeaseMsMax },
        /** Running instances one principal may hold (default limits.workflowRunningPerPrincipalDefault); the bound cannot be turned off. */
        runningInstancesPerPrincipal: { type: 'integer', minimum: 1, maximum: limits.workflowRunningPerPrincipalMax },
        /** New instances a principal may start, per worker (src/runtime/admission-rate.ts); unbounded without it. */
        startRate: rateSchema,
        /** jq worker threads (jq.ts); default one per core beside the runtime's, at most 4. */
        jqWorkers: { type: 'integer', minimum: 1, maximum: limits.jqWorkersMax },
        /** When a running instance counts as stuck (docs/workflows-executor.md "Listing instances"); absent fields take the defaults. */
        stuck: {
          type: 'object',
          additionalProperties: false,
          properties: {
            timeoutGraceMs: stuckGraceMs,
            timerGraceMs: stuckGraceMs,
            leaseGraceMs: stuckGraceMs,
          },
        },
        /** The egress policy of workflow HTTP calls (each allow entry read by origins.ts: semanticProblems). */
        http: {
          type: 'object',
          additionalProperties: false,
          properties: {
            allow: {
              type: 'array',
              maxItems: limits.workflowHttpAllowMax,
              uniqueItems: true,
              items: { type: 'string', minLength: 1, maxLength: limits.workflowHttpOriginCharsMax },
            },
            privateNetworks: { type: 'boolean' },
          },
        },
        events: {
          type: 'object',
          additionalProperties: false,
          properties: {
            subjectPrefix: { type: 'string', maxLength: 200, pattern: subjectTokens },
            emitSubjectPrefix: { type: 'string', maxLength: 200, pattern: subjectTokens },
            emit: { enum: ['none', 'nats', 'jetstream'] },
            stream: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
            streamEventsPerPrincipal: { type: 'integer', minimum: 1, maximum: limits.emittedStreamEventsPerPrincipalMax },
            listen: {
              type: 'object',
              additionalProperties: false,
              properties: { queue: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' } },
            },
            http: { type: 'boolean' },
            publishers: {
              type: 'object',
              propertyNames: token,
              maxProperties: limits.configPrincipalsMax,
              additionalProperties: {
                type: 'array',
                minItems: 1,
                maxItems: limits.workflowEventTypesPerPublisherMax,
                uniqueItems: true,
                items: { type: 'string', maxLength: 200, pattern: subjectTokens },
              },
            },
          },
        },
      },
    },
    /** New admissions per principal (src/runtime/admission-rate.ts). */
    admissionRate: rateSchema,
    /** Payload expiry on a schedule (src/runtime/retention.ts). */
    retention: {
      type: 'object',
      additionalProperties: false,
      required: ['keepMs'],
      properties: {
        keepMs: { type: 'integer', minimum: retentionKeepMsMin, maximum: retentionKeepMsMax },
        everyMs: { type: 'integer', minimum: retentionEveryMsMin, maximum: retentionEveryMsMax },
      },
    },
    /** When open work counts as stuck (docs/operations.md "Stuck work"); absent fields take the defaults. */
    stuck: {
      type: 'object',
      additionalProperties: false,
      properties: {
        deadlineGraceMs: stuckGraceMs,
        leaseGraceMs: stuckGraceMs,
        outboxPendingMs: stuckGraceMs,
      },
    },
  },
} as const;

const checkConfigShape = compileChecker<DeploymentConfig>(deploymentConfigSchema, 'deployment config');

// ── reading ──────────────────────────────────────────────────────────────────

/** Reads, strictly parses and validates a config file; relative paths come back absolute. */
export async function readDeploymentConfig(file: string): Promise<DeploymentConfig> {
  return parseDeploymentConfig(await readFileBytes(file, 'deployment config'), dirname(resolve(file)));
}

/** Strict parse + schema (every error listed) + path resolution against baseDir. */
export function parseDeploymentConfig(bytes: Uint8Array, baseDir: string): DeploymentConfig {
  const config = checkConfigShape(parseStrictBytes(bytes, 'deployment config'));
  const problems = semanticProblems(config);
  if (problems.length > 0) throw invalidInput(`deployment config: ${problems.join('; ')}`);
  const at = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const resolved: DeploymentConfig = { ...config, bundles: config.bundles.map(at), http: { ...config.http } };
  if (config.store.startsWith('sqlite:')) resolved.store = `sqlite:${at(config.store.slice('sqlite:'.length))}`;
  if (config.http.jwt) resolved.http.jwt = { ...config.http.jwt, jwksFile: at(config.http.jwt.jwksFile) };
  if (config.transport.kind === 'nats' && config.transport.credsFile !== undefined)
    resolved.transport = { ...config.transport, credsFile: at(config.transport.credsFile) };
  if (config.workflowSecrets)
    resolved.workflowSecrets = Object.fromEntries(
      Object.entries(config.workflowSecrets).map(([name, source]) => [name, 'file' in source ? { ...source, file: at(source.file) } : source]),
    );
  return resolved;
}

/** Rules the schema cannot state; all collected so the operator fixes them in one pass. */
function semanticProblems(config: DeploymentConfig): string[] {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const p of config.http.principals) {
    if (Buffer.byteLength(p.principalId, 'utf8') > limits.principalIdBytesMax)
      problems.push(`principal "${p.principalId.slice(0, 40)}…" exceeds ${limits.principalIdBytesMax} bytes`);
    const other = seen.get(p.tokenSha256);
    if (other !== undefined) problems.push(`principals "${other}" and "${p.principalId}" share one token hash`);
    seen.set(p.tokenSha256, p.principalId);
  }
  if (config.http.principals.length === 0 && !config.http.jwt) problems.push('http: no principal can authenticate (no principals and no jwt)');
  problems.push(...jwtNamespaceProblems(config.http));
  const headersTimeoutMs = config.http.headersTimeoutMs ?? headersTimeoutMsDefault;
  const requestTimeoutMs = config.http.requestTimeoutMs ?? requestTimeoutMsDefault;
  if (headersTimeoutMs > requestTimeoutMs)
    problems.push(`http: headersTimeoutMs (${headersTimeoutMs}) exceeds requestTimeoutMs (${requestTimeoutMs}): the headers are part of the request`);
  problems.push(...totalBoundProblems(config.http));
  if (config.store === 'sqlite:') problems.push('store "sqlite:" needs a path');
  if (config.limits) problems.push(...budgetProblems(config.limits));
  const events = config.workflows?.events;
  if (events && config.transport.kind !== 'nats' && ((events.emit ?? 'none') !== 'none' || events.listen))
    problems.push('workflows.events: emit over NATS and listen need a nats transport');
  if (events?.publishers && !events.listen) problems.push('workflows.events.publishers: publishers need listen (nothing would take their events)');
  // Only the jetstream emit keeps emitted events in a stream: under another emit the stream's settings would be read by nothing.
  for (const field of ['stream', 'streamEventsPerPrincipal'] as const)
    if (events?.[field] !== undefined && events.emit !== 'jetstream')
      problems.push(
        `workflows.events.${field} is set, but emit is ${events.emit ?? 'none'}: only emit: jetstream keeps emitted events in a stream, so it would do nothing; remove it or set emit: jetstream`,
      );
  for (const [index, entry] of (config.workflows?.http?.allow ?? []).entries()) {
    const read = originPattern(entry);
    if ('problem' in read) problems.push(`workflows.http.allow[${index}] ${read.problem}`);
  }
  problems.push(...secretOriginProblems(config));
  problems.push(...policyRuleProblems(config.policy.rules));
  return problems;
}

/**
 * Rules that could match nothing (static.ts applies): one naming workflows and contracts,
 * interactions or peers (a workflow start has none, a contract action no workflow); one naming
 * workflows whose actions leave out start-workflow; one naming contracts, interactions or peers
 * whose actions are start-workflow alone.
 */
function policyRuleProblems(rules: readonly PolicyRule[]): string[] {
  const problems: string[] = [];
  for (const [index, rule] of rules.entries()) {
    const contractScoped = ['contracts', 'interactions', 'peers'].filter((field) => rule[field as 'contracts' | 'interactions' | 'peers'] !== undefined);
    const at = `policy.rules[${index}]`;
    if (rule.workflows !== undefined && contractScoped.length > 0)
      problems.push(`${at} names workflows and ${contractScoped.join(', ')}: a workflow start has no contract, interaction or peer, so it would match nothing`);
    else if (rule.workflows !== undefined && rule.actions !== undefined && !rule.actions.includes('start-workflow'))
      problems.push(`${at} names workflows, but its actions leave out start-workflow: it would match nothing`);
    else if (contractScoped.length > 0 && rule.actions !== undefined && rule.actions.length > 0 && rule.actions.every((action) => action === 'start-workflow'))
      problems.push(
        `${at} names ${contractScoped.join(', ')}, but its only action is start-workflow: a workflow start has none of them, so it would match nothing`,
      );
  }
  return problems;
}

/**
 * Each secret's origins, read; and every secret confined somewhere: by its own origins or by the
 * egress allow list. A secret confined by neither could be sent to any (public) origin a workflow
 * names — one whose endpoint a caller's input chooses included — so it stops the load, naming
 * what to add. One confined by the allow list alone is warned of at start-up (serve).
 */
function secretOriginProblems(config: DeploymentConfig): string[] {
  const problems: string[] = [];
  const http = config.workflows?.http;
  for (const [name, source] of Object.entries(config.workflowSecrets ?? {})) {
    if (source.origins === undefined && http?.allow === undefined)
      problems.push(
        `workflowSecrets.${name} names no origins and workflows.http has no allow list: a workflow that declares it could send it to ` +
          `any ${http?.privateNetworks === true ? '' : 'public '}origin; give it "origins" (the only origins a request carrying it may go to)`,
      );
    for (const [index, entry] of (source.origins ?? []).entries()) {
      const read = originPattern(entry);
      if ('problem' in read) problems.push(`workflowSecrets.${name}.origins[${index}] ${read.problem}`);
    }
  }
  return problems;
}

/** The JWT principal namespace: `principalPrefix`, by default `jwt:<issuer>:`. */
export function jwtPrincipalPrefix(jwt: Pick<JwtConfig, 'issuer' | 'principalPrefix'>): string {
  return jwt.principalPrefix ?? `jwt:${jwt.issuer}:`;
}

/**
 * Each authentication source has its own principal namespace: a static principal whose id
 * starts with the JWT prefix could be spoken for by a JWT subject (and the other way round), and a
 * prefix of subject-token characters alone would let a JWT subject name a NATS command principal.
 */
function jwtNamespaceProblems(http: HttpConfig): string[] {
  if (!http.jwt) return [];
  const prefix = jwtPrincipalPrefix(http.jwt);
  const problems: string[] = [];
  if (Buffer.byteLength(prefix, 'utf8') >= limits.principalIdBytesMax)
    problems.push(
      `http.jwt: the principal prefix ${JSON.stringify(prefix.slice(0, 40))} leaves no room for a subject within ${limits.principalIdBytesMax} bytes`,
    );
  // NATS command principals are subject tokens (convoke.cmd.<principal>.…): a JWT principal must never be one.
  if (/^[A-Za-z0-9_-]*$/.test(prefix))
    problems.push(
      `http.jwt: the principal prefix ${JSON.stringify(prefix.slice(0, 40))} is made of subject-token characters only, so a JWT subject could name a NATS command principal; put a character such as ":" or "/" in it`,
    );
  for (const p of http.principals) {
    if (p.principalId.startsWith(prefix))
      problems.push(
        `principal "${p.principalId.slice(0, 80)}" lies in the JWT principal namespace ${JSON.stringify(prefix)}: a JWT subject could speak for it`,
      );
  }
  return problems;
}

// ── building ─────────────────────────────────────────────────────────────────

export interface BuildOptions {
  clock: Clock;
  /** Operational log lines (durability lost/regained, exhausted deliveries); JSON lines on stderr in `convoke serve`. */
  log?: DeploymentLog;
  /** Where the coordinator logs the operation lifecycle (runtime/operation-log.ts); silent without one. */
  logger?: Logger;
  /** Where `passwordEnv` names are looked up; process.env by default. */
  env?: NodeJS.ProcessEnv;
  /**
   * The coordinator's NATS login, when the caller resolved it (serve's --creds, a context's password
   * file or credentials): used in place of transport.passwordEnv, and by a jetstream: store that
   * borrows the transport's login.
   */
  natsLogin?: NatsLogin;
  /** Hosts workflow instances beside the coordinator (HTTP /workflow-instances, the NATS workflow commands); none without it. */
  workflows?: WorkflowHostFactory;
}

/**
 * Builds the coordinator and its adapters from a validated config (see readDeploymentConfig): the
 * in-process bus and example peers for a memory transport, nats/assembly.ts for a nats one.
 */
export async function buildDeployment(config: DeploymentConfig, options: BuildOptions): Promise<RunningDeployment> {
  const { clock } = options;
  const transport = config.transport;
  const compiled = await loadBundles(config.bundles);
  const bundles = new BundleRegistry();
  for (const b of compiled) bundles.add(b);
  const examplePeers = transport.kind === 'memory' ? (transport.examplePeers ?? {}) : {};
  const problems = [
    ...attestationProblems(compiled, config.attestations),
    ...examplePeerProblems(compiled, examplePeers),
    ...storeSubjectProblems(compiled, config.store),
    ...eventSubjectProblems(compiled, config),
  ];
  if (problems.length > 0) throw invalidInput(`deployment config: ${problems.join('; ')}`);
  const http = await resolveHttp(config.http);
  if (transport.kind === 'nats') {
    // The NATS assembly opens the store itself: a jetstream: store may share the transport's credentials.
    const built = await buildNatsDeployment(config, transport, {
      clock,
      bundles,
      compiled,
      http,
      log: options.log ?? (() => {}),
      env: options.env ?? process.env,
      ...(options.natsLogin ? { login: options.natsLogin } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.workflows ? { workflows: options.workflows } : {}),
    });
    return withRetention(config, built, options.log);
  }
  // The store is opened last among the checks: nothing above can leave it open.
  // A jetstream: store's server may still be starting: waited out within the start-up wait, in
  // real time (it waits on a real server; an injected clock that stands still must not make it endless).
  const store = await openStore(config.store, {
    clock,
    startup: startupWait(),
    ...(options.log ? { notice: (line: string) => options.log?.(line) } : {}),
  });
  try {
    const built = await assemble(config, {
      clock,
      bundles,
      compiled,
      store,
      http,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.workflows ? { workflows: options.workflows } : {}),
    });
    return withRetention(config, built, options.log);
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * The deployment with its scheduled payload expiry (config `retention`), stopped before the rest
 * closes: a prune under way ends after the operation it is at, then the store closes. Each prune
 * is one notice (warn when some operations could not be pruned) and counted in the metrics.
 */
function withRetention(config: DeploymentConfig, deployment: RunningDeployment, log: DeploymentLog | undefined): RunningDeployment {
  const retention = config.retention;
  if (retention === undefined) return deployment;
  const metrics = deployment.coordinator.metrics;
  const workflows = deployment.workflows;
  const schedule = scheduleRetention({
    store: deployment.store,
    clock: deployment.clock,
    keepMs: retention.keepMs,
    ...(retention.everyMs === undefined ? {} : { everyMs: retention.everyMs }),
    ...(workflows?.prune ? { instances: workflows.prune.bind(workflows) } : {}),
    // What this process holds of a pruned stream goes: its reads (get, a same-key start) meet the tombstone, not a cached payload.
    onPruned: (kind, id) => (kind === 'operation' ? deployment.coordinator.forgetPruned(id) : workflows?.forget?.(id)),
    onPrune: ({ operations, instances }, stopped, error) => {
      metrics.pruned.inc({ kind: 'operation' }, operations.pruned);
      if (instances) metrics.pruned.inc({ kind: 'workflow-instance' }, instances.pruned);
      const failures = [
        ...operations.failures.map((f) => `${f.operationId} ${f.kind}`),
        ...(instances?.failures ?? []).map((f) => `${f.instanceId} ${f.kind}`),
      ];
      metrics.pruneRuns.inc({ result: error !== undefined ? 'error' : failures.length > 0 ? 'failed' : 'ok' });
      const kept = operations.open + operations.indeterminate + operations.recent;
      const ofInstances = instances ? `; ${instances.pruned} workflow instances pruned, ${instances.running + instances.recent + instances.needed} kept` : '';
      const failed = failures.length > 0 ? `; ${failures.length} could not be (first: ${failures[0]})` : '';
      const broke = error === undefined ? '' : `; then it stopped (${error instanceof Error ? error.message : String(error)}): the next runs on schedule`;
      log?.(
        `retention: ${operations.pruned} operations settled before ${new Date(operations.cutoffMs).toISOString()} pruned, ${kept} kept${ofInstances}${failed}${stopped ? '; stopped by shutdown' : ''}${broke}`,
        failures.length > 0 || error !== undefined ? 'warn' : 'info',
      );
    },
    onError: (error) => {
      metrics.pruneRuns.inc({ result: 'error' });
      log?.(`retention: the scheduled prune could not run (${error instanceof Error ? error.message : String(error)}); the next runs on schedule`, 'warn');
    },
  });
  const close = deployment.close;
  return {
    ...deployment,
    close: async () => {
      await schedule.close();
      await close.call(deployment);
    },
  };
}

interface Parts {
  clock: Clock;
  bundles: BundleRegistry;
  compiled: CompiledBundle[];
  store: EventStore;
  http: HttpSettings;
  logger?: Logger;
  workflows?: WorkflowHostFactory;
}

/** Wires the coordinator to the in-process bus with its permissions, then starts the example peers. */
async function assemble(config: DeploymentConfig, parts: Parts): Promise<RunningDeployment> {
  const { clock, bundles, compiled, store, http } = parts;
  const namespaces = [...new Set(compiled.map((b) => b.bundle.subjectNamespace))];
  const bus = new MemoryBus();
  const connection = bus.connect('coordinator', coordinatorBusPermissions(namespaces));
  const coordinator = new Coordinator({
    store,
    transport: connection,
    directory: new StaticDirectory({ groups: config.directory.groups }),
    policy: new StaticPolicy({ rules: config.policy.rules, ttlMs: config.policy.ttlMs ?? policyTtlMsDefault }, clock),
    verifier: new SubjectNamespaceVerifier(config.attestations),
    effectFencing: attestedEffectFencing(config.attestations),
    clock,
    bundles,
    deployment: { account: config.deployment.account, system: config.deployment.system, domain: config.deployment.domain },
    ...(config.resultBatchMs === undefined ? {} : { resultBatchMs: config.resultBatchMs }),
    ...(config.limits === undefined ? {} : { budgets: config.limits }),
    ...(config.admissionRate === undefined ? {} : { admissionRate: config.admissionRate }),
    ...(parts.logger ? { logger: parts.logger } : {}),
    ...listingDeps(config),
  });
  observeStampSources(coordinator.metrics, store);
  const peers = await startExamplePeers(bus, compiled, config.transport.kind === 'memory' ? (config.transport.examplePeers ?? {}) : {}, clock);
  // Other coordinators may share the store: follow their appends to the operations held here.
  await coordinator.watchStore();
  // A durable store may hold operations a previous process left open: resume them before serving.
  await coordinator.recover();
  const workflows = parts.workflows
    ? await parts.workflows({
        coordinator,
        bundles,
        store,
        clock,
        settings: config.workflows ?? {},
        listing: { operators: new Set(config.operators ?? []) },
        metrics: coordinator.metrics.registry,
        authorizeStart: (principalId, bundle, workflow) => coordinator.authorizeWorkflowStart(principalId, bundle, workflow),
      })
    : undefined;
  return {
    coordinator,
    bundles,
    store,
    clock,
    http,
    bus,
    peers: peers.map((p) => p.peer),
    ...(workflows ? { workflows: workflows.service } : {}),
    ...(workflows?.events ? { workflowEvents: workflows.events } : {}),
    close: async () => {
      await workflows?.close();
      await coordinator.close();
      for (const { peer, transport } of peers) {
        await peer.close();
        await transport.close();
      }
      await connection.close();
      await store.close();
    },
  };
}

async function loadBundles(files: string[]): Promise<CompiledBundle[]> {
  const problems: string[] = [];
  const compiled: CompiledBundle[] = [];
  for (const file of files) {
    try {
      compiled.push(await readBundleFile(file));
    } catch (error) {
      problems.push(isAdapterError(error) ? `bundle ${file}: ${error.description ?? error.kind}` : `bundle ${file}: ${(error as Error).message}`);
    }
  }
  if (problems.length > 0) throw invalidInput(`deployment config: ${problems.join('; ')}`);
  return compiled;
}

/** A namespace nobody attested would reject every result: that is a config mistake, said at start. */
function attestationProblems(bundles: CompiledBundle[], attestations: NamespaceAttestation[]): string[] {
  const attested = new Set(attestations.map((a) => a.namespace));
  return [...new Set(bundles.map((b) => b.bundle.subjectNamespace))]
    .filter((ns) => !attested.has(ns))
    .map((ns) => `subject namespace "${ns}" has no publisher attestation, so every result on it would be rejected`);
}

/**
 * A jetstream: store's subjects (`<prefix>.op.>` and its siblings) must not overlap a bundle's
 * namespace: a peer may publish `<ns>.*.*.result.<peer>`, and a stream captures whatever lands on
 * its subjects, whoever published it.
 */
function storeSubjectProblems(bundles: CompiledBundle[], store: string): string[] {
  const prefix = jetstreamStorePrefix(store);
  if (prefix === undefined) return [];
  return [...new Set(bundles.map((b) => b.bundle.subjectNamespace))]
    .filter((ns) => subjectSpacesOverlap(ns, prefix))
    .map((ns) => `subject namespace "${ns}" overlaps the jetstream store's subjects under "${prefix}": a peer's results could land in the store's streams`);
}

/**
 * Workflow events travel on `<subjectPrefix>.<type>`, and their publishers may publish there: the
 * prefix must not reach a bundle's namespace (a publisher could forge a peer's result), the
 * store's subjects, the command API or the inboxes. Emitted events travel on
 * `<emitSubjectPrefix>.<principal>.<type>`, where the coordinator publishes them: that prefix must
 * not reach those either (a workflow could write there), nor the publishers' space in either
 * direction (a publisher could pass for a principal's workflow, or a workflow for a publisher).
 */
function eventSubjectProblems(bundles: CompiledBundle[], config: DeploymentConfig): string[] {
  if (config.workflows?.events === undefined) return [];
  const prefix = config.workflows.events.subjectPrefix ?? workflowEventsDefaults.subjectPrefix;
  const emitPrefix = config.workflows.events.emitSubjectPrefix ?? workflowEventsDefaults.emitSubjectPrefix;
  const store = jetstreamStorePrefix(config.store) ?? 'convoke';
  const taken = [
    ...new Set(bundles.map((b) => b.bundle.subjectNamespace)),
    // Every subject the store writes, from the one list its user's permissions are made of.
    ...jetstreamStorePermissions({ prefix: store })
      .publish.filter((subject) => !subject.startsWith('$'))
      .map((subject) => subject.replace(/\.>$/, '')),
    'convoke.cmd',
    '_INBOX',
  ];
  const spaces = [
    ['subjectPrefix', prefix, 'an event publisher could publish there'],
    ['emitSubjectPrefix', emitPrefix, "a workflow's emitted event could be published there"],
  ] as const;
  const problems = spaces.flatMap(([key, space, why]) =>
    taken.filter((subjects) => subjectSpacesOverlap(subjects, space)).map((subjects) => `workflows.events.${key} "${space}" overlaps "${subjects}": ${why}`),
  );
  if (subjectSpacesOverlap(prefix, emitPrefix))
    problems.push(
      `workflows.events.emitSubjectPrefix "${emitPrefix}" overlaps workflows.events.subjectPrefix "${prefix}": an event publisher could pass for a principal's workflow, or a workflow for an event publisher`,
    );
  return problems;
}

/** The HTTP facade's bounds per principal as set, else their defaults (the totals' checks and resolveHttp read the same). */
function perPrincipalBounds(http: HttpConfig): { waits: number; streams: number; deliveries: number } {
  return {
    waits: http.waitsPerPrincipal ?? waitsPerPrincipalDefault,
    streams: http.events?.streamsPerPrincipal ?? eventStreamsPerPrincipalDefault,
    deliveries: http.eventDeliveriesPerPrincipal ?? eventDeliveriesPerPrincipalDefault,
  };
}

/**
 * A total set below its per-principal bound could never let one principal reach its own: the
 * operator raises the total or lowers the bound. A total left out is at least the per-principal
 * bound (totalOf), so a config that sets only the per-principal bound loads as it did.
 */
function totalBoundProblems(http: HttpConfig): string[] {
  const bound = perPrincipalBounds(http);
  const pairs: [string, number, string, number | undefined][] = [
    ['waitsPerPrincipal', bound.waits, 'waitsMax', http.waitsMax],
    ['events.streamsPerPrincipal', bound.streams, 'events.streamsMax', http.events?.streamsMax],
    ['eventDeliveriesPerPrincipal', bound.deliveries, 'eventDeliveriesMax', http.eventDeliveriesMax],
  ];
  return pairs
    .filter(([, perPrincipal, , total]) => total !== undefined && perPrincipal > total)
    .map(
      ([perName, perPrincipal, totalName, total]) =>
        `http: ${perName} (${perPrincipal}) exceeds http.${totalName} (${total}), the most all principals hold together: raise http.${totalName} or lower ${perName}`,
    );
}

/** A total as set, else its default, raised to the per-principal bound where that is larger. */
export const totalOf = (total: number | undefined, totalDefault: number, perPrincipal: number): number => total ?? Math.max(totalDefault, perPrincipal);

/** Each example result must name a deployed interaction and match its result schema in every bundle that has it. */
function examplePeerProblems(bundles: CompiledBundle[], examplePeers: Record<string, ExamplePeerConfig>): string[] {
  const problems: string[] = [];
  for (const [peerId, entry] of Object.entries(examplePeers)) {
    for (const [interaction, result] of exampleResults(entry)) {
      const found = bundles.flatMap((b) => b.interactions.get(interaction) ?? []);
      if (found.length === 0) problems.push(`examplePeers.${peerId}.${interaction}: no deployed bundle has this interaction`);
      for (const compiled of found) {
        if (!compiled.validateResult(result))
          problems.push(
            `examplePeers.${peerId}.${interaction}: result does not match the interaction's result schema: ${describeErrors(compiled.validateResult.errors)}`,
          );
      }
    }
  }
  return problems;
}

function exampleResults(entry: ExamplePeerConfig): [string, JsonValue][] {
  return Object.entries(entry).filter((e): e is [string, JsonValue] => e[0] !== 'delayMs' && e[1] !== undefined);
}

async function resolveHttp(config: HttpConfig): Promise<HttpSettings> {
  const bound = perPrincipalBounds(config);
  const settings: HttpSettings = {
    host: config.host,
    port: config.port,
    bodyLimitBytes: config.bodyLimitBytes,
    waitMsMax: config.waitMsMax,
    waitsPerPrincipal: bound.waits,
    waitsMax: totalOf(config.waitsMax, waitsMaxDefault, bound.waits),
    eventDeliveriesPerPrincipal: bound.deliveries,
    eventDeliveriesMax: totalOf(config.eventDeliveriesMax, eventDeliveriesMaxDefault, bound.deliveries),
    drainMs: config.drainMs ?? 0,
    headersTimeoutMs: config.headersTimeoutMs ?? headersTimeoutMsDefault,
    requestTimeoutMs: config.requestTimeoutMs ?? requestTimeoutMsDefault,
    events: {
      heartbeatMs: config.events?.heartbeatMs ?? eventHeartbeatMsDefault,
      streamsPerPrincipal: bound.streams,
      streamsMax: totalOf(config.events?.streamsMax, eventStreamsMaxDefault, bound.streams),
    },
    principals: config.principals.map((p) => ({
      principalId: p.principalId,
      tokenSha256: Buffer.from(p.tokenSha256, 'hex'),
      senderPeerId: p.senderPeerId ?? null,
    })),
    jwt: undefined,
  };
  if (config.jwt) {
    const jwks = await readJwks(config.jwt.jwksFile);
    settings.jwt = { issuer: config.jwt.issuer, audience: config.jwt.audience, jwks, principalPrefix: jwtPrincipalPrefix(config.jwt) };
    if (config.jwt.algorithms) settings.jwt.algorithms = config.jwt.algorithms;
  }
  return settings;
}

async function readJwks(file: string): Promise<{ keys: JsonObject[] }> {
  let document: JsonValue;
  try {
    document = await readJsonFile(file, `jwks ${file}`);
  } catch (error) {
    throw isAdapterError(error) ? error : invalidInput(`jwks ${file}: ${(error as Error).message}`, error);
  }
  const keys = (document as JsonObject | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || !keys.every((k) => k !== null && typeof k === 'object' && !Array.isArray(k))) {
    throw invalidInput(`jwks ${file}: expected {"keys": [ ...at least one JWK object... ]}`);
  }
  // A private key in the verifier's file would be a credential at rest: refuse it.
  if (keys.some((k) => typeof k === 'object' && k !== null && ('d' in k || 'k' in k)))
    throw invalidInput(`jwks ${file}: holds private or symmetric key material; give only public keys`);
  return { keys: keys as JsonObject[] };
}

/**
 * One in-process peer per (namespace, peer id), connected with the peer permissions a NATS user
 * would get: its own requests in, its own peer-bearing results out.
 */
async function startExamplePeers(
  bus: MemoryBus,
  bundles: CompiledBundle[],
  examplePeers: Record<string, ExamplePeerConfig>,
  clock: Clock,
): Promise<{ peer: Peer; transport: MemoryTransport }[]> {
  const peers: { peer: Peer; transport: MemoryTransport }[] = [];
  for (const [peerId, entry] of Object.entries(examplePeers)) {
    const delayMs = entry.delayMs ?? 0;
    for (const bundle of bundles) {
      const handlers: Record<string, Handler> = {};
      for (const [interaction, result] of exampleResults(entry)) {
        if (bundle.interactions.has(interaction)) handlers[interaction] = fixedResultHandler(result, delayMs, clock);
      }
      if (Object.keys(handlers).length === 0) continue;
      const namespace = bundle.bundle.subjectNamespace;
      const transport = bus.connect(`peer:${peerId}@${namespace}`, peerBusPermissions(namespace, peerId));
      peers.push({ peer: await createPeer({ transport, namespace, peerId, handlers }), transport });
    }
  }
  return peers;
}

function fixedResultHandler(result: JsonValue, delayMs: number, clock: Clock): Handler {
  const answer = deepFrozen(result); // handed out as is: nothing that receives it can change it
  return async (_input, context) => {
    if (delayMs > 0) await new Promise<void>((done) => clock.at(clock.nowMs() + delayMs, done));
    // Through the fenced sink, like a real peer's business effect: at most once per branch.
    return context.effect(() => answer);
  };
}
