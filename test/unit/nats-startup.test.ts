import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errors } from '@nats-io/transport-node';
import { AdapterError } from '../../src/contract/errors.js';
import { deniedByNats, jetStreamNotAnswering, retryWhileStarting, type StartupWait } from '../../src/adapters/transport/nats-startup.js';
import { ensureStreamsWhileStarting } from '../../src/deployment/nats/assembly.js';

/** What nats.js rejects a request with when the server refuses the user its subject. */
function refused(line: string): Error {
  const violation = errors.PermissionViolationError.parse(line);
  assert.ok(violation, line);
  return new errors.RequestError(violation.message, { cause: violation });
}

const noResponders = () => new errors.RequestError('no responders', { cause: new errors.NoRespondersError('$JS.API.INFO') });

/** A JetStreamNotEnabled as nats.js makes it (its class is not exported from the public entry point). */
function notEnabled(cause: unknown): Error {
  const error = new Error('jetstream is not enabled', { cause });
  error.name = 'JetStreamNotEnabled';
  return error;
}

/** A wait that ends long after any of these tests: only an answer, never the bound, ends them. */
const longWait = (): StartupWait => ({ fromMs: Date.now(), untilMs: Date.now() + 60_000, nowMs: Date.now });

test('jetStreamNotAnswering: no responder and "not enabled" are waited out, a refused subject is not', () => {
  assert.equal(jetStreamNotAnswering(noResponders()), true);
  assert.equal(jetStreamNotAnswering(notEnabled(noResponders())), true);
  assert.equal(jetStreamNotAnswering(refused('Permissions Violation for Publish to "$JS.API.INFO"')), false);
  assert.equal(jetStreamNotAnswering(notEnabled(refused('Permissions Violation for Publish to "$JS.API.INFO"'))), false);
});

test('deniedByNats: a permission violation anywhere in the cause chain is denied, naming the subject and the fix', () => {
  const publish = deniedByNats(refused('Permissions Violation for Publish to "$JS.API.INFO"'), 'JetStream account info');
  assert.ok(publish instanceof AdapterError);
  assert.equal(publish.kind, 'denied');
  assert.match(publish.description ?? '', /^JetStream account info: .*may not publish to "\$JS\.API\.INFO".*natsPrincipalPlan/);
  const wrapped = deniedByNats(
    new AdapterError('denied', 'x', { cause: refused('Permissions Violation for Publish to "$JS.API.STREAM.INFO.S"') }),
    'JetStream',
  );
  assert.match(wrapped?.description ?? '', /may not publish to "\$JS\.API\.STREAM\.INFO\.S"/);
  const inbox = deniedByNats(refused('Permissions Violation for Subscription to "_INBOX.abc.*"'), 'JetStream');
  assert.match(inbox?.description ?? '', /may not subscribe to "_INBOX\.abc\.\*"/);
  assert.equal(deniedByNats(noResponders(), 'JetStream'), undefined);
  assert.equal(deniedByNats(new Error('Permissions Violation for Publish to "a"'), 'JetStream'), undefined, 'the class, not the text');
});

test('retryWhileStarting: a refused subject ends the wait at its first answer as denied, whatever the predicate', async () => {
  let attempts = 0;
  const attempt = () => {
    attempts++;
    return Promise.reject(refused('Permissions Violation for Publish to "$JS.API.INFO"'));
  };
  await assert.rejects(
    retryWhileStarting('JetStream account info', attempt, () => true, longWait()),
    (error: unknown) => {
      assert.ok(error instanceof AdapterError);
      assert.equal(error.kind, 'denied');
      assert.match(error.description ?? '', /"\$JS\.API\.INFO"/);
      return true;
    },
  );
  assert.equal(attempts, 1);
});

test('retryWhileStarting: a JetStream that does not answer yet is still tried again', async () => {
  let attempts = 0;
  const attempt = () => (++attempts < 3 ? Promise.reject(notEnabled(noResponders())) : Promise.resolve('answered'));
  assert.equal(await retryWhileStarting('JetStream account info', attempt, jetStreamNotAnswering, longWait()), 'answered');
  assert.equal(attempts, 3);
});

test('ensureStreamsWhileStarting: a server starting again while the streams are made is waited out; any other failure ends the start', async () => {
  let attempts = 0;
  const restarting = { ensureStreams: () => (++attempts < 3 ? Promise.reject(notEnabled(noResponders())) : Promise.resolve()) };
  await ensureStreamsWhileStarting(new Map([['e2e.v1', restarting]]), longWait());
  assert.equal(attempts, 3);
  let conflicts = 0;
  const broken = { ensureStreams: () => (conflicts++, Promise.reject(new AdapterError('conflict', 'stream CONVOKE_REQ_x: max_deliver changed'))) };
  await assert.rejects(
    ensureStreamsWhileStarting(new Map([['e2e.v1', broken]]), longWait()),
    (error: unknown) => error instanceof AdapterError && error.kind === 'conflict',
  );
  assert.equal(conflicts, 1, 'a stream that breaks the guarantee is not tried again');
});
