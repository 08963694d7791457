/**
 * Where a CLI command's secrets come from: a NATS password in an environment variable (named,
 * never given on the command line) or in a password file; a NATS credentials file (`.creds`: a user
 * JWT and its nkey seed); a bearer token's variable or file. Every file is readable by its owner
 * only, like ssh's keys. A value is returned to the one connection that needs it and never
 * printed: errors name the variable or the file, not what is in it.
 */
import { readFile, stat } from 'node:fs/promises';
import { invalidInput } from '../contract/errors.js';
import type { NatsLogin } from '../adapters/transport/nats-creds.js';
import { octal } from './contexts.js';
import { limits } from '../contract/limits.js';

export type PasswordSource = { kind: 'env'; name: string } | { kind: 'file'; path: string };

/** How a NATS connection logs in: a password (from its source) with a user, or a credentials file. */
export type LoginSource = PasswordSource | { kind: 'creds'; path: string };

export function describeSource(source: LoginSource): string {
  switch (source.kind) {
    case 'env':
      return `environment variable ${source.name}`;
    case 'file':
      return `password file ${source.path}`;
    case 'creds':
      return `credentials file ${source.path}`;
  }
}

export async function readPassword(source: PasswordSource, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (source.kind === 'env') {
    const value = env[source.name];
    if (value === undefined || value === '') throw invalidInput(`environment variable ${source.name} (the NATS password) is not set`);
    return value;
  }
  return readPasswordFile(source.path);
}

/**
 * A file that holds a secret: a regular file, readable and writable by its owner only, at most
 * `bytesMax` bytes. `what` names it in errors ("password file", "credentials file").
 */
export async function checkSecretFile(path: string, what: string, bytesMax: number): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    throw invalidInput(`cannot read ${what} ${path} (${(error as { code?: string }).code ?? (error as Error).message})`, error);
  }
  if (!info.isFile()) throw invalidInput(`${what} ${path} is not a regular file`);
  if (process.platform !== 'win32' && (info.mode & 0o077) !== 0)
    throw invalidInput(`${what} ${path} is readable or writable by group or others (mode ${octal(info.mode)}): chmod 600 it`);
  if (info.size > bytesMax) throw invalidInput(`${what} ${path} is ${info.size} bytes, more than ${bytesMax}`);
}

async function readPasswordFile(path: string): Promise<string> {
  await checkSecretFile(path, 'password file', limits.passwordFileBytesMax);
  const text = (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
  if (text === '') throw invalidInput(`password file ${path} is empty`);
  if (/[\r\n]/.test(text)) throw invalidInput(`password file ${path} holds more than one line`);
  return text;
}

/** A NATS credentials file's contents, checked: owner-only, and a user JWT with its user seed. */
export async function readCredsFile(path: string): Promise<Uint8Array> {
  // Loaded when used: it brings the NATS client, which commands that never connect do not load.
  const { checkCreds } = await import('../adapters/transport/nats-creds.js');
  await checkSecretFile(path, 'credentials file', limits.credsFileBytesMax);
  const bytes = new Uint8Array(await readFile(path));
  checkCreds(bytes, `credentials file ${path}`);
  return bytes;
}

/**
 * The login a source names: the credentials file's contents, or the user with the password read
 * from its source. `needsUser` says who needs the user (for the message when there is none).
 */
export async function readLogin(source: LoginSource, user: string | undefined, needsUser: string, env: NodeJS.ProcessEnv = process.env): Promise<NatsLogin> {
  if (source.kind === 'creds') return { creds: await readCredsFile(source.path) };
  if (user === undefined)
    throw invalidInput(`${needsUser} logs in with a password (${describeSource(source)}), so it needs a user: --user, or a context with one`);
  return { user, pass: await readPassword(source, env) };
}
