/**
 * Where a CLI command's password comes from: an environment variable (named, never given on the
 * command line) or a password file readable by its owner only. The value is returned to the one
 * connection that needs it and never printed: errors name the variable or the file, not the value.
 */
import { readFile, stat } from 'node:fs/promises';
import { invalidInput } from '../contract/errors.js';
import { octal } from './contexts.js';
import { limits } from '../contract/limits.js';

export type PasswordSource = { kind: 'env'; name: string } | { kind: 'file'; path: string };

export function describeSource(source: PasswordSource): string {
  return source.kind === 'env' ? `environment variable ${source.name}` : `password file ${source.path}`;
}

export async function readPassword(source: PasswordSource, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (source.kind === 'env') {
    const value = env[source.name];
    if (value === undefined || value === '') throw invalidInput(`environment variable ${source.name} (the NATS password) is not set`);
    return value;
  }
  return readPasswordFile(source.path);
}

async function readPasswordFile(path: string): Promise<string> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    throw invalidInput(`cannot read password file ${path} (${(error as { code?: string }).code ?? (error as Error).message})`, error);
  }
  if (!info.isFile()) throw invalidInput(`password file ${path} is not a regular file`);
  if (process.platform !== 'win32' && (info.mode & 0o077) !== 0)
    throw invalidInput(`password file ${path} is readable or writable by group or others (mode ${octal(info.mode)}): chmod 600 it`);
  if (info.size > limits.passwordFileBytesMax) throw invalidInput(`password file ${path} is ${info.size} bytes, more than ${limits.passwordFileBytesMax}`);
  const text = (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
  if (text === '') throw invalidInput(`password file ${path} is empty`);
  if (/[\r\n]/.test(text)) throw invalidInput(`password file ${path} holds more than one line`);
  return text;
}
