/**
 * AdapterError: the one typed failure every adapter, the runtime, the CLI and the HTTP facade
 * speak. The seven kinds are the profile's; the HTTP status of each kind is mapped here and
 * nowhere else.
 */
export const adapterErrorKinds = ['invalid-input', 'denied', 'unavailable', 'conflict', 'expired', 'unsupported', 'protocol-conflict'] as const;

export type AdapterErrorKind = (typeof adapterErrorKinds)[number];

export interface AdapterErrorBody {
  kind: AdapterErrorKind;
  description?: string;
}

export class AdapterError extends Error {
  override readonly name = 'AdapterError';
  readonly kind: AdapterErrorKind;
  readonly description: string | undefined;

  constructor(kind: AdapterErrorKind, description?: string, options?: { cause?: unknown }) {
    super(description === undefined ? kind : `${kind}: ${description}`, options);
    this.kind = kind;
    this.description = description;
  }

  toJSON(): AdapterErrorBody {
    return this.description === undefined ? { kind: this.kind } : { kind: this.kind, description: this.description };
  }

  static from(body: AdapterErrorBody): AdapterError {
    return new AdapterError(body.kind, body.description);
  }
}

export const invalidInput = (description: string, cause?: unknown) => new AdapterError('invalid-input', description, { cause });
export const denied = (description: string) => new AdapterError('denied', description);
export const unavailable = (description: string, cause?: unknown) => new AdapterError('unavailable', description, { cause });
export const conflict = (description: string) => new AdapterError('conflict', description);
export const expired = (description: string) => new AdapterError('expired', description);
export const unsupported = (description: string) => new AdapterError('unsupported', description);
export const protocolConflict = (description: string) => new AdapterError('protocol-conflict', description);

export function isAdapterError(value: unknown): value is AdapterError {
  return value instanceof AdapterError;
}

/** The one place where an error kind becomes an HTTP status (spec: "Workflows and the execution boundary"). */
export const httpStatusByKind = {
  'invalid-input': 400,
  denied: 403,
  'not-found': 404,
  conflict: 409,
  'protocol-conflict': 409,
  expired: 410,
  unsupported: 422,
  unavailable: 503,
} as const satisfies Record<AdapterErrorKind | 'not-found', number>;

export function httpStatusOf(kind: AdapterErrorKind): number {
  return httpStatusByKind[kind];
}

/** A broken invariant is a bug, never an operating failure: it throws, it is not returned. */
export class AssertionFailure extends Error {
  override readonly name = 'AssertionFailure';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionFailure(message);
}
