/**
 * The HTTP facade's settings, resolved from the deployment config by src/deployment/config.ts.
 */
import type { JsonObject } from '../contract/json.js';

/** Bearer credentials resolved for the HTTP facade. */
export interface HttpSettings {
  host: string;
  port: number;
  bodyLimitBytes: number;
  waitMsMax: number;
  /** Long-polls one principal holds at once (invocations and workflow instances); past it a wait answers at once (runtime/wait-slots.ts). */
  waitsPerPrincipal: number;
  /** Long-polls all principals hold at once; past it a wait answers at once too. */
  waitsMax: number;
  /** CloudEvent deliveries (POST /workflow-events) one principal has in flight at once; past it a delivery is refused, 503 (workflow-events.ts). */
  eventDeliveriesPerPrincipal: number;
  /** CloudEvent deliveries all principals have in flight at once; past it a delivery is refused, 503. */
  eventDeliveriesMax: number;
  drainMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** Server-sent event streams: the idle heartbeat, how many one principal may hold open, and how many all principals may. */
  events: { heartbeatMs: number; streamsPerPrincipal: number; streamsMax: number };
  principals: { principalId: string; tokenSha256: Buffer; senderPeerId: string | null }[];
  /** `principalPrefix` is resolved: a JWT's principal is it followed by the token's `sub`. */
  jwt: { issuer: string; audience: string; jwks: { keys: JsonObject[] }; algorithms?: string[]; principalPrefix: string } | undefined;
}
