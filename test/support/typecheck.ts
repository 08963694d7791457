/**
 * The node arguments that type-check one file the way a user's strict Node ESM project would
 * (tsc --strict, nodenext, es2022, Node's types), with the repository's TypeScript.
 */
import { realpath } from 'node:fs/promises';
import { join } from 'node:path';

export async function strictTscArgs(repoRoot: string, file: string): Promise<string[]> {
  const modules = await realpath(join(repoRoot, 'node_modules'));
  return [
    join(modules, 'typescript', 'bin', 'tsc'),
    '--noEmit',
    '--strict',
    '--module',
    'nodenext',
    '--moduleResolution',
    'nodenext',
    '--target',
    'es2022',
    '--typeRoots',
    join(modules, '@types'),
    '--types',
    'node',
    file,
  ];
}
