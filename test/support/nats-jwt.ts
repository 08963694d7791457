/**
 * A nats-server in operator (JWT) mode for tests: an operator, a system account and an
 * application account minted here with nkeys (the @nats-io/nkeys that nats.js itself depends on,
 * re-exported by @nats-io/transport-node), resolved from memory (`resolver: MEMORY` with the
 * account JWTs preloaded), and users whose `.creds` files carry their permissions — the same
 * decentralized auth `nsc` sets up, without nsc.
 *
 * JWTs are encoded as nats-io/jwt v2 does: header {typ: JWT, alg: ed25519-nkey}, claims with
 * iss/sub/iat/jti and a `nats` object of the given type, signed over `header.claims` by the
 * issuer's key.
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { credsAuthenticator, nkeys } from '@nats-io/transport-node';
import type { NatsPermissions } from '../../src/adapters/transport/nats-permissions.js';
import { startNatsServer, type NatsServer } from './nats-server.js';

type KeyPair = ReturnType<typeof nkeys.createUser>;

const base64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');

function encodeJwt(issuer: KeyPair, subject: string, name: string, nats: Record<string, unknown>): string {
  const claims: Record<string, unknown> = { iat: Math.floor(Date.now() / 1000), iss: issuer.getPublicKey(), name, sub: subject, nats: { ...nats, version: 2 } };
  claims.jti = createHash('sha256').update(JSON.stringify(claims)).digest('base64url');
  const signed = `${base64url(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }))}.${base64url(JSON.stringify(claims))}`;
  return `${signed}.${base64url(issuer.sign(new TextEncoder().encode(signed)))}`;
}

/** A .creds file as nsc writes it: the user JWT, then the user's seed. */
export function formatCreds(jwt: string, user: KeyPair): string {
  return [
    '-----BEGIN NATS USER JWT-----',
    jwt,
    '------END NATS USER JWT------',
    '',
    '************************* IMPORTANT *************************',
    'NKEY Seed printed below can be used to sign and prove identity.',
    '',
    '-----BEGIN USER NKEY SEED-----',
    new TextDecoder().decode(user.getSeed()),
    '------END USER NKEY SEED------',
    '',
  ].join('\n');
}

export interface JwtUser {
  name: string;
  /** Absent: everything allowed. */
  permissions?: NatsPermissions;
}

export interface OperatorModeServer {
  server: NatsServer;
  url: string;
  /** The path of each user's .creds file (mode 0600), by name. */
  creds: Record<string, string>;
  /** A user of an account the server does not know: its login is refused. */
  strangerCreds: string;
  dispose(): Promise<void>;
}

const limitsUnbounded = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
const jetstreamUnbounded = { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 };

/**
 * Starts nats-server trusting a fresh operator, with one JetStream-enabled application account
 * holding `users`, and writes each user's .creds file into `dir`.
 */
export async function startOperatorModeServer(dir: string, users: JwtUser[]): Promise<OperatorModeServer> {
  const operator = nkeys.createOperator();
  const system = nkeys.createAccount();
  const app = nkeys.createAccount();
  const operatorJwt = encodeJwt(operator, operator.getPublicKey(), 'convoke-test', { type: 'operator', system_account: system.getPublicKey() });
  const systemJwt = encodeJwt(operator, system.getPublicKey(), 'SYS', { type: 'account', limits: limitsUnbounded });
  const appJwt = encodeJwt(operator, app.getPublicKey(), 'APP', { type: 'account', limits: { ...limitsUnbounded, ...jetstreamUnbounded } });
  const operatorFile = join(dir, 'operator.jwt');
  await writeFile(operatorFile, operatorJwt);
  const creds: Record<string, string> = {};
  for (const user of users) creds[user.name] = await writeUser(dir, app, user);
  // Signed by an account the server never heard of: the login is refused.
  const strangerCreds = await writeUser(dir, nkeys.createAccount(), { name: 'stranger' });
  const extraConfig = [
    `operator: ${JSON.stringify(operatorFile)}`,
    `system_account: ${system.getPublicKey()}`,
    // A coordinator's JWT carries its whole permission plan: its CONNECT line outgrows the 4 KB default.
    'max_control_line: 65536',
    'resolver: MEMORY',
    `resolver_preload: {\n  ${system.getPublicKey()}: ${JSON.stringify(systemJwt)}\n  ${app.getPublicKey()}: ${JSON.stringify(appJwt)}\n}`,
  ].join('\n');
  // The readiness wait asks JetStream for its account info as a user of the application account.
  const probeCreds = await readFile(await writeUser(dir, app, { name: 'convoke-ready-probe' }));
  const server = await startNatsServer({ jetstream: true, extraConfig, readyLogin: { authenticator: credsAuthenticator(probeCreds) } });
  return { server, url: server.url, creds, strangerCreds, dispose: () => server.dispose() };
}

async function writeUser(dir: string, account: KeyPair, user: JwtUser): Promise<string> {
  const key = nkeys.createUser();
  const permissions = user.permissions ? { pub: { allow: user.permissions.publish }, sub: { allow: user.permissions.subscribe } } : { pub: {}, sub: {} };
  const jwt = encodeJwt(account, key.getPublicKey(), user.name, { type: 'user', ...permissions, subs: -1, data: -1, payload: -1 });
  const path = join(dir, `${user.name}.creds`);
  await writeFile(path, formatCreds(jwt, key), { mode: 0o600 });
  return path;
}
