/**
 * The secrets a deployment gives its workflows (config `workflowSecrets`), read once at start-up:
 * each from an environment variable or an owner-only file (checked as every secret file is), at
 * most limits.workflowSecretBytesMax bytes. A value that is JSON is that JSON value (a
 * `{username, password}` or `{token}` object for an authentication policy's `use`); any other
 * text is the string itself, without a trailing newline. Errors name the variable or the file,
 * never what is in it.
 */
import { readFile } from 'node:fs/promises';
import { invalidInput } from '../contract/errors.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { WorkflowSecretSource } from '../deployment/types.js';
import { checkSecretFile } from './secrets.js';

export async function readWorkflowSecrets(
  sources: Readonly<Record<string, WorkflowSecretSource>> | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Map<string, JsonValue>> {
  const secrets = new Map<string, JsonValue>();
  for (const [name, source] of Object.entries(sources ?? {})) {
    let text: string;
    if ('env' in source) {
      const value = env[source.env];
      if (value === undefined || value === '') throw invalidInput(`workflow secret ${name}: environment variable ${source.env} is not set`);
      if (Buffer.byteLength(value, 'utf8') > limits.workflowSecretBytesMax)
        throw invalidInput(`workflow secret ${name}: environment variable ${source.env} holds more than ${limits.workflowSecretBytesMax} bytes`);
      text = value;
    } else {
      await checkSecretFile(source.file, `workflow secret ${name}'s file`, limits.workflowSecretBytesMax);
      text = (await readFile(source.file, 'utf8')).replace(/\r?\n$/, '');
      if (text === '') throw invalidInput(`workflow secret ${name}: file ${source.file} is empty`);
    }
    secrets.set(name, secretValue(text));
  }
  return secrets;
}

function secretValue(text: string): JsonValue {
  const trimmed = text.trimStart();
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[') && !trimmed.startsWith('"')) return text;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return text;
  }
}
