import { AdapterError, httpStatusOf, isAdapterError, type AdapterErrorBody } from '../contract/errors.js';

/**
 * A missing or hidden operation. The body is an AdapterError like every other, but the status is
 * 404 for both cases, so another principal's operation is indistinguishable from none at all.
 */
export class OperationNotFound extends AdapterError {
  readonly notFound = true;
  constructor(operationId: string, description = `no operation ${operationId} is visible to this principal`) {
    super('invalid-input', description);
  }
}

/** A missing or hidden workflow instance: 404 exactly as an operation (another principal's looks like none). */
export class WorkflowInstanceNotFound extends OperationNotFound {
  constructor(instanceId: string) {
    super(instanceId, `no workflow instance ${instanceId} is visible to this principal`);
  }
}

/**
 * What a request carries is larger than the runtime can record (a CloudEvent past what the store
 * takes in one transition with what records it): invalid-input, answered 413 as a body past its
 * route's bound is, its description naming the limit.
 */
export class ContentTooLarge extends AdapterError {
  constructor(description: string) {
    super('invalid-input', description);
  }
}

export function isNotFound(error: unknown): error is OperationNotFound {
  return error instanceof OperationNotFound;
}

/**
 * The status of an operating failure, shared by every facade (HTTP and NATS commands): a missing or
 * hidden operation is 404, content too large to record 413, any other AdapterError takes its kind's status. Undefined for anything
 * that is not an AdapterError — a bug, answered with `internalError` in the words of the request.
 */
export function adapterErrorStatus(error: unknown): { status: number; body: AdapterErrorBody } | undefined {
  if (isNotFound(error)) return { status: 404, body: error.toJSON() };
  if (error instanceof ContentTooLarge) return { status: 413, body: error.toJSON() };
  if (isAdapterError(error)) return { status: httpStatusOf(error.kind), body: error.toJSON() };
  return undefined;
}

/**
 * What a bug's 500 tells the caller of each request, in the words of what it asked (the NATS
 * command's verb; the HTTP route's, internalErrorOfRoute): no internals, only what is now unknown
 * and how to find out. `stream`: the last event of a live event stream that a bug ended. `other`:
 * a request that changes nothing.
 */
export const internalErrors = {
  invoke: 'internal error; the invocation outcome is unknown, retry with the same invocationKey or look the operation up',
  get: 'internal error; the operation could not be read: ask again, or look the operation up over HTTP',
  cancel: 'internal error; whether the operation was cancelled is unknown: cancel it again or look the operation up',
  list: 'internal error; the operations could not be listed: ask again',
  'workflow-start':
    'internal error; whether the workflow instance started is unknown: start it again with the same invocationKey (it finds the same instance) or look the workflow instance up',
  'workflow-get': 'internal error; the workflow instance could not be read: ask again, or look the workflow instance up over HTTP',
  'workflow-cancel': 'internal error; whether the workflow instance was cancelled is unknown: cancel it again or look the workflow instance up',
  'workflow-list': 'internal error; the workflow instances could not be listed: ask again',
  'workflow-event': 'internal error; whether an instance took the event is unknown: send it again (an instance that took it answers it as taken)',
  stream: 'internal error; this event stream stopped: open it again (it starts from what is stored)',
  other: 'internal error; ask again',
} as const;

export type InternalErrorSubject = keyof typeof internalErrors;

export const internalError = (subject: InternalErrorSubject): AdapterErrorBody => ({ kind: 'unavailable', description: internalErrors[subject] });

/**
 * What a read that failed `unavailable` is answered to a principal. A log the store could not read
 * (the store down, or a stored transition that fails its schema) does not say who may see it, so
 * its owner is taken from what the store wrote beside it: the index row (`row`), which holds the
 * principal. Only a principal the row shows may see it (`visible`) is answered `unavailable`; any
 * other, and anyone when the index holds no row, is answered not found, exactly as for an id that
 * names nothing — an unreadable log tells no other principal that its id exists. An index that
 * cannot answer either is the store failing for every id alike: `unavailable`, which tells nothing
 * of this one. Any other error is answered as it is.
 */
export async function unreadableAnswer(
  error: unknown,
  row: () => Promise<{ principalId: string } | undefined>,
  visible: (principalId: string) => boolean,
  notFound: () => OperationNotFound,
): Promise<unknown> {
  if (!isAdapterError(error) || error.kind !== 'unavailable') return error;
  let owner: { principalId: string } | undefined;
  try {
    owner = await row();
  } catch {
    return error;
  }
  return owner !== undefined && visible(owner.principalId) ? error : notFound();
}

/**
 * A principal's read of an aggregate it may not own, answered without waiting for its log: the
 * log's read (`load`, started by the caller) and the index row's (`row`, which names the owner)
 * run together, and when the row names an owner the reader may not see (`visible`: the owner
 * itself, or an operator where the read allows one) the read is answered not found at once.
 * So a stranger's 404 takes the time of a row lookup whether the id names another principal's
 * aggregate (however long its log) or nothing at all, and tells no timing of a log it may not see.
 * Without a row (none written, none readable, or `row` undefined: the aggregate is in memory here)
 * the load's answer stands, and the caller still checks the owner of what it loaded.
 */
export async function strangerAnsweredFirst<T>(
  load: Promise<T>,
  row: (() => Promise<{ principalId: string } | undefined>) | undefined,
  visible: (owner: string) => boolean,
  notFound: () => Error,
): Promise<T> {
  // Observed from the start: a load that fails while the row is read is not an unhandled rejection.
  const settled = load.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  const owner = row === undefined ? undefined : await row().catch(() => undefined);
  if (owner !== undefined && !visible(owner.principalId)) throw notFound();
  const loaded = await settled;
  if (!loaded.ok) throw loaded.error;
  return loaded.value;
}
