/**
 * CloudEvents on NATS, structured mode (the JSON event is the payload, `content-type:
 * application/cloudevents+json`), on the subject `<prefix>.<type>`.
 *
 * - The sink publishes an emitted event: on core NATS (flushed: the server has it), or on
 *   JetStream with `Nats-Msg-Id` = the event's id, so a republish after a crash is dropped by the
 *   stream's duplicate window and, past it, by any consumer that keys on the id.
 * - The intake subscription takes events for waiting `listen` tasks on `<prefix>.>`: an event is
 *   parsed strictly (I-JSON, as POST /workflow-events parses it) and checked (its subject must be
 *   its type's subject: a publisher allowed one subject cannot pass for another type), handed to
 *   the intake, and answered — when the message has a reply subject — only after the intake's
 *   append committed: `{status: "accepted", matched}`, `{status: "no-match"}` (nothing stored),
 *   or `{status: "rejected", error}`.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { cloudEventProblem, cloudEventSubject, type CloudEvent, type CloudEventIntake, type CloudEventSink } from '../../contract/cloudevents.js';
import { AdapterError, invalidInput, isAdapterError } from '../../contract/errors.js';
import { parseStrictBytes } from '../../contract/ijson.js';
import type { JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { classifyNatsError } from './nats-errors.js';

export const cloudEventsContentType = 'application/cloudevents+json';

/** Subject tokens: the prefix is one or more tokens without wildcards. */
const prefixPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

function checkPrefix(prefix: string): void {
  if (!prefixPattern.test(prefix)) throw invalidInput(`CloudEvents subject prefix ${JSON.stringify(prefix)} is not a sequence of subject tokens`);
}

export interface NatsCloudEventSinkOptions {
  subjectPrefix: string;
  /** Publish through JetStream (a stream must capture `<prefix>.>`), with Nats-Msg-Id = event id. */
  jetstream?: boolean;
}

export class NatsCloudEventSink implements CloudEventSink {
  private readonly js: JetStreamClient | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsCloudEventSinkOptions,
  ) {
    checkPrefix(options.subjectPrefix);
    this.js = options.jetstream ? jetstream(nc) : undefined;
  }

  async publish(event: CloudEvent): Promise<void> {
    const problem = cloudEventProblem(event);
    if (problem !== undefined) throw invalidInput(`not a publishable CloudEvent: ${problem}`);
    const subject = cloudEventSubject(this.options.subjectPrefix, event.type);
    const data = new TextEncoder().encode(JSON.stringify(event));
    const headers = natsHeaders();
    headers.set('content-type', cloudEventsContentType);
    try {
      if (this.js) await this.js.publish(subject, data, { msgID: event.id, headers });
      else {
        this.nc.publish(subject, data, { headers });
        await this.nc.flush();
      }
    } catch (error) {
      const failure = classifyNatsError(error);
      if (failure.kind === 'permission') throw new AdapterError('denied', `publishing ${subject}: ${failure.detail}`, { cause: error });
      throw new AdapterError('unavailable', `publishing ${subject}: ${failure.detail}`, { cause: error });
    }
  }
}

export interface CloudEventSubscription {
  readonly subject: string;
  close(): Promise<void>;
}

export interface ServeCloudEventsOptions {
  /** A queue group: each event goes to one subscriber of the group (several hosts take it once). */
  queue?: string;
  /**
   * Whether an answer may go to this reply subject for an event received on `subject`; refused
   * ones are delivered but not answered (the default answers any).
   */
  answers?: (subject: string, reply: string) => boolean;
}

/** Subscribes `<prefix>.>` and delivers each event to the intake; answers after the append. */
export function serveCloudEvents(
  nc: NatsConnection,
  subjectPrefix: string,
  intake: CloudEventIntake,
  options: ServeCloudEventsOptions = {},
): CloudEventSubscription {
  checkPrefix(subjectPrefix);
  const subject = `${subjectPrefix}.>`;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const answer = (msg: Msg, reply: JsonValue) => {
    if (msg.reply && (options.answers?.(msg.subject, msg.reply) ?? true)) msg.respond(new TextEncoder().encode(JSON.stringify(reply)));
  };
  const subscription: Subscription = nc.subscribe(subject, {
    ...(options.queue === undefined ? {} : { queue: options.queue }),
    callback: (error, msg) => {
      if (error) return;
      if (inFlight >= limits.cloudEventsInFlightMax) return answer(msg, rejected(new AdapterError('unavailable', 'too many events in flight; publish again')));
      inFlight++;
      const work = receive(msg, subjectPrefix, intake)
        .then((reply) => answer(msg, reply))
        .finally(() => {
          inFlight--;
          pending.delete(work);
        });
      pending.add(work);
    },
  });
  return {
    subject,
    close: async () => {
      subscription.unsubscribe();
      await Promise.allSettled([...pending]);
    },
  };
}

function rejected(error: unknown): JsonValue {
  const kind = isAdapterError(error) ? error.kind : 'unavailable';
  const message = error instanceof Error ? error.message : String(error);
  return { status: 'rejected', error: { kind, message: message.slice(0, 2048) } };
}

async function receive(msg: Msg, prefix: string, intake: CloudEventIntake): Promise<JsonValue> {
  try {
    if (msg.data.length > limits.cloudEventBytesMax) throw invalidInput(`the event is ${msg.data.length} bytes; at most ${limits.cloudEventBytesMax}`);
    // The strict I-JSON parser, as POST /workflow-events: JSON.parse would keep the last of two
    // duplicate keys, read 1e400 as Infinity (stored as null) and round unsafe integers, so the
    // log would hold another event than the one taken, and a deep enough nesting would exhaust a
    // recursive reader later and be answered "unavailable" instead of refused.
    const event = parseStrictBytes(msg.data, 'CloudEvent');
    const problem = cloudEventProblem(event);
    if (problem !== undefined) throw invalidInput(`not a CloudEvent: ${problem}`);
    const typed = event as CloudEvent;
    if (msg.subject !== cloudEventSubject(prefix, typed.type))
      throw invalidInput(`an event of type ${typed.type} belongs on ${cloudEventSubject(prefix, typed.type)}, not ${msg.subject}`);
    const delivery = await intake.deliver(typed, null);
    return delivery.matched.length === 0 ? { status: 'no-match' } : { status: 'accepted', matched: delivery.matched };
  } catch (error) {
    return rejected(error);
  }
}
