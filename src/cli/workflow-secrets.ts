/**
 * The secrets a deployment gives its workflows (config `workflowSecrets`), read once at start-up:
 * each from an environment variable or an owner-only file (checked as every secret file is), at
 * most limits.workflowSecretBytesMax bytes, each credential in it at least
 * limits.workflowSecretBytesMin (secretValueProblem). A value that is JSON is that JSON value (a
 * `{username, password}` or `{token}` object for an authentication policy's `use`); any other
 * text is the string itself, without a trailing newline. Errors name the variable or the file,
 * never what is in it.
 *
 * Each secret may name the only origins a request carrying it may go to (`origins`, checked when
 * the config is read and again by the executor); one that names none may go wherever the egress
 * policy lets calls go, and `serve` says so at start-up for each (unboundSecrets).
 */
import { readFile } from 'node:fs/promises';
import { invalidInput } from '../contract/errors.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { WorkflowSecretSource } from '../deployment/types.js';
import type { WorkflowHttpConfig } from '../runtime/workflow-service.js';
import { secretValueProblem } from '../workflow/secrets.js';
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
    const value = secretValue(text);
    const problem = secretValueProblem(value);
    if (problem !== undefined)
      throw invalidInput(`workflow secret ${name} (${'env' in source ? `environment variable ${source.env}` : `file ${source.file}`}): ${problem}`);
    secrets.set(name, value);
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

/** The origins each secret that names them may go to (the executor's secretOrigins). */
export function workflowSecretOrigins(sources: Readonly<Record<string, WorkflowSecretSource>> | undefined): Map<string, readonly string[]> {
  return new Map(Object.entries(sources ?? {}).flatMap(([name, source]) => (source.origins ? [[name, source.origins] as const] : [])));
}

/**
 * The secrets that name no origins, each with where it may be sent (the egress policy's reach):
 * a workflow of any deployed bundle that declares one may send it there. A deployment's config
 * refuses such a secret unless workflows.http has an allow list (config.ts): under serve, the
 * reach is always that list's origins.
 */
export function unboundSecrets(
  sources: Readonly<Record<string, WorkflowSecretSource>> | undefined,
  http: WorkflowHttpConfig | undefined,
): { secret: string; reach: string }[] {
  const reach =
    http?.allow !== undefined
      ? `any of the ${http.allow.length} origins of workflows.http.allow`
      : `any ${http?.privateNetworks === true ? '' : 'public '}origin (workflows.http has no allow list)`;
  return Object.entries(sources ?? {}).flatMap(([secret, source]) => (source.origins ? [] : [{ secret, reach }]));
}
