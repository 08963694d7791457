/**
 * Contract calls over HTTP: what the executor's contract function uses when the contract runtime
 * is another process (`convoke serve`) rather than in this one. POST /contract-invocations with
 * the call's invocation key, then bounded long-polling (GET /contract-invocations/{id}?waitMs=)
 * in chunks until the boundary, or until the task's / workflow's timeout stops the call.
 *
 * The credential is a reference — the name of an environment variable, or a file — read at each
 * call, never a value in a bundle or a document; the principal is whoever it authenticates as.
 *
 * An uncertain answer (the connection failed, a timeout, a 500 or 503, a body that is not an
 * InvocationResult) is never taken as success: the same request is sent again — the same
 * invocation key and input, so the runtime answers with the operation it may already have
 * admitted — with a growing delay, until the retry budget is spent (then `unavailable`, which the
 * workflow sees as a communication error). A definite refusal (a status the facade gives with a
 * kind that status carries) is thrown as its AdapterError kind, which calls.ts maps to distinct DSL
 * errors; a body's kind alone proves nothing.
 */
import { readFile } from 'node:fs/promises';
import { Ajv } from 'ajv';
import { doublingDelayMs, pause, type Clock } from '../../contract/clock.js';
import { AdapterError, adapterErrorKinds, invalidInput, unavailable, type AdapterErrorKind } from '../../contract/errors.js';
import { invocationResultSchema } from '../../contract/schemas.js';
import type { InvocationRequest, WaitFor } from '../../contract/types.js';
import type { InvocationResult } from '../../projections/views.js';
import type { Caller, InvocationService, Invoked } from '../../runtime/service.js';
import { waitForHeader } from '../../runtime/boundary.js';

/**
 * What the interpreter needs of a contract runtime: admit (or find) an operation, wait on it, and
 * read or cancel it (a compete fork's losing branches). An invoke, a read and a cancel may take
 * the signal of the run that asks: one that sends its request again while the answer is uncertain
 * (HttpContracts) stops when the task's or the workflow's timeout stops the call or the release;
 * the coordinator's own calls answer at once.
 */
export type ContractCalls = Pick<InvocationService, 'wait'> & {
  invoke(caller: Caller, request: InvocationRequest, signal?: AbortSignal): Promise<Invoked>;
  get(principalId: string, operationId: string, signal?: AbortSignal): Promise<InvocationResult>;
  cancel(principalId: string, operationId: string, signal?: AbortSignal): Promise<InvocationResult>;
};

export type CredentialReference = { env: string } | { file: string };

export interface HttpContractsOptions {
  /** The base URL of a convoke HTTP facade (`https://convoke.example`); /contract-invocations is appended. */
  endpoint: string;
  credential: CredentialReference;
  clock: Clock;
  fetch?: typeof fetch;
  /** How long one request may take beyond the wait it asks for (default 10 000 ms). */
  requestTimeoutMs?: number;
  /** How long uncertain answers are retried before the call is unavailable (default 30 000 ms). */
  retryBudgetMs?: number;
  /** Where environment variable references are looked up (process.env by default). */
  env?: NodeJS.ProcessEnv;
}

const { $id: _id, ...resultShape } = invocationResultSchema;
const checkResult = new Ajv({ strict: false, allowUnionTypes: true }).compile(resultShape);
/**
 * The refusals the facade gives, each status with the kinds its body can carry (httpStatusByKind;
 * 401, 404, 413 and 415 from src/http/errors.ts). A body whose kind its status does not carry is
 * not the facade's answer (a proxy's, or a server's that speaks another protocol): uncertain,
 * looked up again, so a 410 saying `denied` is neither expired nor denied.
 */
const definite: ReadonlyMap<number, readonly AdapterErrorKind[]> = new Map<number, readonly AdapterErrorKind[]>([
  [400, ['invalid-input']],
  [401, ['denied']],
  [403, ['denied']],
  [404, ['invalid-input']],
  [409, ['conflict', 'protocol-conflict']],
  [410, ['expired']],
  [413, ['invalid-input']],
  [415, ['invalid-input']],
  [422, ['unsupported']],
]);
const retryDelayMs = { first: 100, max: 2000 };

class Uncertain extends Error {}

/** A 200 or 202 answer: its InvocationResult, and the boundary its status speaks of (undefined: not named). */
interface Answer {
  result: InvocationResult;
  boundary: WaitFor | undefined;
}

export class HttpContracts implements ContractCalls {
  private readonly base: string;

  constructor(private readonly options: HttpContractsOptions) {
    let url: URL;
    try {
      url = new URL(options.endpoint);
    } catch {
      throw invalidInput(`contract endpoint ${JSON.stringify(options.endpoint)} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidInput(`contract endpoint ${options.endpoint}: http or https only`);
    this.base = url.toString().replace(/\/+$/, '');
  }

  /** The principal is the credential's; `caller` names who the instance expects it to be (calls.ts checks the operation id). */
  /** The boundary is the facade's answer (its `convoke-wait-for` header): the request's waitFor, or the interaction's when it names none. */
  async invoke(_caller: Caller, request: InvocationRequest, signal?: AbortSignal): Promise<Invoked> {
    const body = JSON.stringify({ ...request, waitMs: 0 });
    const url = `${this.base}/contract-invocations`;
    const { result, boundary } = await this.withRetries(signal, (attempt) => this.send('POST', url, body, 0, attempt));
    if (boundary === undefined) throw new AdapterError('protocol-conflict', `POST ${url}: the answer does not name its boundary (${waitForHeader})`);
    return { result, created: false, boundary };
  }

  async wait(
    _principalId: string,
    operationId: string,
    boundary: WaitFor,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ result: InvocationResult; reached: boolean }> {
    const url = `${this.base}/contract-invocations/${encodeURIComponent(operationId)}?waitFor=${boundary}&waitMs=${Math.max(0, Math.floor(waitMs))}`;
    const { result } = await this.withRetries(signal, (attempt) => this.send('GET', url, undefined, waitMs, attempt));
    const reached = boundary === 'settled' ? result.settlement.status !== 'pending' : result.decision !== null;
    return { result, reached };
  }

  async get(_principalId: string, operationId: string, signal?: AbortSignal): Promise<InvocationResult> {
    const url = `${this.base}/contract-invocations/${encodeURIComponent(operationId)}`;
    return (await this.withRetries(signal, (attempt) => this.send('GET', url, undefined, 0, attempt))).result;
  }

  /** Caller cancellation; sent again while uncertain (cancelling twice answers the same decision). */
  async cancel(_principalId: string, operationId: string, signal?: AbortSignal): Promise<InvocationResult> {
    const url = `${this.base}/contract-invocations/${encodeURIComponent(operationId)}/cancel`;
    return (await this.withRetries(signal, (attempt) => this.send('POST', url, undefined, 0, attempt))).result;
  }

  /**
   * Sends until a definite answer; an uncertain one is sent again after a growing delay, within the
   * retry budget. `signal` stops it at once, between tries too: the delay ends with it, and nothing
   * is sent once it has aborted (unavailable: the call was stopped).
   */
  private async withRetries(signal: AbortSignal | undefined, attempt: (signal: AbortSignal) => Promise<Answer>): Promise<Answer> {
    const clock = this.options.clock;
    const until = clock.nowMs() + (this.options.retryBudgetMs ?? 30_000);
    for (let failures = 0; ; failures++) {
      if (signal?.aborted) throw unavailable(`the contract call to ${this.base} was stopped`);
      const delay = doublingDelayMs(retryDelayMs.first, retryDelayMs.max, failures);
      const controller = new AbortController();
      const stop = () => controller.abort(signal?.reason);
      signal?.addEventListener('abort', stop, { once: true });
      try {
        return await attempt(controller.signal);
      } catch (error) {
        if (!(error instanceof Uncertain)) throw error;
        if (signal?.aborted) throw unavailable(`the contract call was stopped: ${error.message}`);
        if (clock.nowMs() + delay > until) throw unavailable(`the contract runtime at ${this.base} gave no definite answer: ${error.message}`);
      } finally {
        signal?.removeEventListener('abort', stop);
      }
      await pause(clock, delay, signal);
    }
  }

  private async send(method: 'GET' | 'POST', url: string, body: string | undefined, waitMs: number, signal: AbortSignal): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${await this.token()}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    let text: string;
    try {
      const timeout = AbortSignal.timeout(waitMs + (this.options.requestTimeoutMs ?? 10_000));
      response = await (this.options.fetch ?? fetch)(url, { method, headers, body, signal: AbortSignal.any([signal, timeout]) });
      text = await response.text();
    } catch (error) {
      throw new Uncertain(`${method} ${url}: ${error instanceof Error ? error.message : String(error)}`);
    }
    const parsed = parseJson(text);
    if (response.status === 200 || response.status === 202) {
      if (!checkResult(parsed)) throw new Uncertain(`${method} ${url}: ${response.status} with a body that is not an InvocationResult`);
      const boundary = response.headers.get(waitForHeader);
      return { result: parsed as unknown as InvocationResult, boundary: boundary === 'decision' || boundary === 'settled' ? boundary : undefined };
    }
    const refusal = adapterErrorOf(parsed);
    if (refusal && definite.get(response.status)?.includes(refusal.kind))
      throw new AdapterError(refusal.kind, `${method} ${url}: ${response.status}: ${refusal.description}`);
    throw new Uncertain(`${method} ${url}: ${response.status}${refusal ? ` ${refusal.kind}: ${refusal.description}` : ''}`);
  }

  private async token(): Promise<string> {
    const reference = this.options.credential;
    let token: string | undefined;
    if ('env' in reference) token = (this.options.env ?? process.env)[reference.env];
    else {
      try {
        token = (await readFile(reference.file, 'utf8')).trim();
      } catch (error) {
        throw new AdapterError('unavailable', `the contract credential file ${reference.file} cannot be read: ${(error as Error).message}`);
      }
    }
    if (!token)
      throw new AdapterError(
        'denied',
        `no contract credential: ${'env' in reference ? `environment variable ${reference.env} is not set` : `${reference.file} is empty`}`,
      );
    return token;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function adapterErrorOf(value: unknown): { kind: AdapterErrorKind; description: string } | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { kind, description } = value as { kind?: unknown; description?: unknown };
  if (typeof kind !== 'string' || !(adapterErrorKinds as readonly string[]).includes(kind)) return undefined;
  return { kind: kind as AdapterErrorKind, description: typeof description === 'string' ? description : '' };
}
