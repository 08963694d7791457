/**
 * Waiting out a NATS server that is still starting. A freshly started nats-server accepts
 * connections a moment before its JetStream answers: until then every `$JS.API` request finds no
 * responder, which nats.js reports as "jetstream is not enabled". A server restarted together with
 * its clients may not even listen yet. A process starting against it (`convoke serve`, opening a
 * JetStream store) tries again after a doubling backoff within a bound
 * (limits.natsStartupWaitMsMax), and only then fails as unavailable.
 *
 * Only these two cases are waited out: a refused login, a permission, a stream that breaks the
 * guarantee or any other answer from a running JetStream fails at once. A subject the user may not
 * use (the server's `-ERR 'Permissions Violation for Publish to "$JS.API.INFO"'`, which nats.js
 * rejects the request with, as a PermissionViolationError) fails as denied, naming the subject.
 */
import { errors } from '@nats-io/transport-node';
import { doublingDelayMs } from '../../contract/clock.js';
import { AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import { causeChain } from './nats-errors.js';

/**
 * JetStream does not answer (yet): no responder on its API, the server's "not enabled" answer, or
 * no answer in time (a request sent while the connection is being re-established after the
 * server restarted). nats.js exports its JetStreamNotEnabled class only from its internal entry
 * point; its name is what identifies it here.
 */
export function jetStreamNotAnswering(error: unknown): boolean {
  const chain = causeChain(error);
  if (chain.some((e) => e instanceof errors.PermissionViolationError)) return false;
  return chain.some(
    (e) => (e instanceof Error && e.name === 'JetStreamNotEnabled') || e instanceof errors.NoRespondersError || e instanceof errors.TimeoutError,
  );
}

/**
 * The server refused this user a subject (a permission violation anywhere in the cause chain): an
 * AdapterError `denied` naming the subject and the fix; undefined for any other failure.
 */
export function deniedByNats(error: unknown, doing: string): AdapterError | undefined {
  const refused = causeChain(error).find((e) => e instanceof errors.PermissionViolationError);
  if (refused === undefined) return undefined;
  const to = refused.operation === 'publish' ? 'publish to' : 'subscribe to';
  return new AdapterError(
    'denied',
    `${doing}: permissions violation: this NATS user may not ${to} "${refused.subject}"; grant it to the user, as the permissions natsPrincipalPlan renders from the deployment do (docs/operations.md, "NATS users and inboxes")`,
    { cause: error },
  );
}

/** The server could not be reached (yet): anything but a refused login or a bad option. */
export function serverNotListening(error: unknown): boolean {
  const chain = causeChain(error);
  if (chain.some((e) => e instanceof errors.AuthorizationError || e instanceof errors.InvalidArgumentError)) return false;
  return chain.some((e) => e instanceof errors.ConnectionError || (e instanceof Error && 'code' in e && e.code === 'ECONNREFUSED'));
}

export interface StartupWait {
  /** When the wait began, and the instant after which a failure is final (ms, `nowMs`'s clock). */
  fromMs: number;
  untilMs: number;
  nowMs: () => number;
  /** Told before each wait: what failed and how long until the next try. */
  onWaiting?: (what: string, detail: string, waitMs: number) => void;
}

/** A start-up wait of limits.natsStartupWaitMsMax from now. */
export function startupWait(nowMs: () => number = Date.now, onWaiting?: StartupWait['onWaiting']): StartupWait {
  const fromMs = nowMs();
  return { fromMs, untilMs: fromMs + limits.natsStartupWaitMsMax, nowMs, ...(onWaiting ? { onWaiting } : {}) };
}

const describe = (error: unknown) =>
  error instanceof AdapterError ? (error.description ?? error.message) : error instanceof Error ? error.message : String(error);

/**
 * Runs `attempt` until it succeeds, fails in a way `retryable` does not accept, or `wait.untilMs`
 * has passed; the last failure then ends it as unavailable (an AdapterError of another kind is
 * kept); a subject the server refused this user ends it at once as denied (deniedByNats). The
 * backoff doubles from natsStartupBackoffMsMin to natsStartupBackoffMsMax and never sleeps past
 * the bound.
 */
export async function retryWhileStarting<T>(what: string, attempt: () => Promise<T>, retryable: (error: unknown) => boolean, wait: StartupWait): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await attempt();
    } catch (error) {
      const refused = deniedByNats(error, what);
      if (refused !== undefined) throw refused;
      const leftMs = wait.untilMs - wait.nowMs();
      if (!retryable(error)) throw error;
      if (leftMs <= 0) {
        if (error instanceof AdapterError && error.kind !== 'unavailable') throw error;
        throw new AdapterError('unavailable', `${describe(error)} (${what}: still so after waiting ${wait.nowMs() - wait.fromMs} ms at start-up)`, {
          cause: error,
        });
      }
      const sleepMs = Math.min(doublingDelayMs(limits.natsStartupBackoffMsMin, limits.natsStartupBackoffMsMax, failures), leftMs);
      wait.onWaiting?.(what, describe(error), sleepMs);
      await new Promise((resolve) => setTimeout(resolve, sleepMs));
    }
  }
}
