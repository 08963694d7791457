/**
 * The web console's files: GET /console/ (the page), /console/console.js and /console/console.css,
 * shipped in the package's console/ folder and served as they are (no build step). The page holds
 * no operation data: everything it shows comes from the authenticated API with the bearer token
 * the user types, so an unauthenticated visitor gets an empty shell. The content security policy
 * lets the page run only its own script and talk only to this origin, so a peer's hostile result
 * text can never become markup or script (console.js writes text nodes only, too, with the
 * characters the CLI escapes, control, bidi and invisible ones and the line separators, escaped so
 * that none reorders, hides or breaks what is shown).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { AdapterError } from '../contract/errors.js';
import { routeNotFound } from './errors.js';

const files: Record<string, { name: string; type: string }> = {
  '': { name: 'index.html', type: 'text/html; charset=utf-8' },
  'console.js': { name: 'console.js', type: 'text/javascript; charset=utf-8' },
  'console.css': { name: 'console.css', type: 'text/css; charset=utf-8' },
};

export const consoleHeaders = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/** The package's console/ folder: beside dist/ and src/ at the package root. */
function consoleDirectory(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return existsSync(join(dir, 'console', 'index.html')) ? join(dir, 'console') : undefined;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

export function registerConsoleRoutes(app: FastifyInstance): void {
  const cache = new Map<string, Buffer>();
  const read = (name: string): Buffer => {
    const cached = cache.get(name);
    if (cached) return cached;
    const directory = consoleDirectory();
    if (directory === undefined) throw new AdapterError('unavailable', 'the console files are missing from this installation (console/ beside package.json)');
    const bytes = readFileSync(join(directory, name));
    cache.set(name, bytes);
    return bytes;
  };
  app.get('/console', async (_request, reply) => reply.redirect('/console/', 308));
  app.get<{ Params: { file: string } }>('/console/:file', async (request, reply) => {
    // Only the listed files: a name Object.prototype holds (constructor, toString, __proto__) is not one.
    const file = Object.hasOwn(files, request.params.file) ? files[request.params.file] : undefined;
    if (!file) {
      const missing = routeNotFound(request.method, request.url);
      return reply.code(missing.statusCode).headers(missing.headers).send(missing.body);
    }
    reply.headers(consoleHeaders).type(file.type);
    return read(file.name);
  });
  app.get('/console/', async (_request, reply) => {
    reply.headers(consoleHeaders).type('text/html; charset=utf-8');
    return read('index.html');
  });
}
