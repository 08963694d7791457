/**
 * What the tests of the NATS event intake share: a nats-server, a harness and its intake on
 * `test.events.>`, asked by request/reply on an event's type subject; and an evaluator that holds
 * chosen expressions' answers until released.
 */
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import type { AdapterErrorKind } from '../../src/contract/errors.js';
import type { ExpressionEvaluator } from '../../src/workflow/exec/jq.js';
import { startNatsServer } from '../support/nats-server.js';
import { harness, type Harness, type HarnessOptions } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/** The intake's answer to a published event. */
export interface IntakeAnswer {
  status: string;
  count?: number;
  error?: { kind: AdapterErrorKind; message: string };
}

/** Publishes `event` on its type's subject and reads the answer (waiting at most `timeoutMs`). */
export type Ask = (event: CloudEvent, timeoutMs?: number) => Promise<IntakeAnswer>;

/** A nats-server, a harness (its options) and its event intake on `test.events.>`, for `body`; all closed after. */
export async function withIntake(options: HarnessOptions, body: (h: Harness, ask: Ask) => Promise<void>): Promise<void> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const h = harness(options);
  const subscription = serveCloudEvents(nc, 'test.events', h.executor);
  try {
    await subscription.ready();
    const ask: Ask = async (event, timeoutMs = 5000) =>
      (await nc.request(`test.events.${event.type}`, JSON.stringify(event), { timeout: timeoutMs })).json<IntakeAnswer>();
    await body(h, ask);
  } finally {
    await subscription.close();
    await h.close();
    await nc.close();
    await server.dispose();
  }
}

/**
 * An evaluator (harness option `evaluator`) whose answers to the expressions `holds` picks are
 * given only once `release` is called (the others at once); release it in a `finally`.
 */
export function heldEvaluator(holds: (query: string) => boolean): { evaluator: (jq: ExpressionEvaluator) => ExpressionEvaluator; release(): void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const evaluator = (jq: ExpressionEvaluator): ExpressionEvaluator => ({
    evaluate: async (query, input, vars, principal) => {
      const answer = await jq.evaluate(query, input, vars, principal);
      if (holds(query)) await released;
      return answer;
    },
    close: () => jq.close(),
  });
  return { evaluator, release };
}
