/**
 * The operation lifecycle as structured log lines: admitted, decided, settled (an indeterminate
 * decision or settlement at warn), and every rejected peer message with its reason. Each line
 * names the operation, its contract and interaction and the invoking principal — never an input,
 * a result, a credential or a message body: what a line carries is chosen here, field by field.
 *
 * The runtime knows only this `Logger` shape (pino's `(fields, message)` call, which a pino
 * logger satisfies); the process that runs a coordinator hands it one (cli/commands/serve.ts).
 */
import { LinePacer } from '../contract/line-pacer.js';
import type { OperationRecord } from '../projections/record.js';

export interface Logger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** A logger that writes nothing (the default of a coordinator built without one). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** What a rejected peer message is known by; the operation when it could be read. */
export interface RejectionContext {
  /** The kind of peer message (result, claim, cancel-result). */
  kind?: string;
  /** The operation the message's subject names (even when it is unknown here). */
  operationId?: string;
  /** The peer its subject names: who claims to have sent it. */
  peerId?: string;
  record?: OperationRecord;
  /** What refused it, where the reason alone does not say (the store's description of a refusal). */
  detail?: string;
}

/** The fields every line about one operation carries. */
export function operationFields(record: OperationRecord): Record<string, string> {
  return {
    operationId: record.operationId,
    contract: `${record.contract.id}@${record.contract.version}`,
    interaction: record.interaction,
    principal: record.principalId,
  };
}

const routineRejections = new Set(['closed', 'authorization-expired', 'claim-authorization-expired', 'cancel-result-authorization-expired']);

export class OperationLog {
  private readonly pacer: LinePacer;

  /**
   * `nowMs` (the coordinator's injected clock) paces the rejection lines: at most
   * limits.rejectionLogLinesPerSecondMax a second, so a flooding peer cannot fill the disk through
   * the log. Every rejection is counted in the metrics all the same; the next line written says
   * how many were left out (`suppressedBefore`).
   */
  constructor(
    private readonly logger: Logger,
    nowMs: () => number,
  ) {
    this.pacer = new LinePacer(nowMs);
  }

  admitted(record: OperationRecord): void {
    this.logger.info(
      { event: 'operation-admitted', ...operationFields(record), branches: Object.keys(record.branches).length, deadlineMs: record.deadlineMs },
      'operation admitted',
    );
  }

  /** A transition this process committed moved the operation: decided, settled, or both. */
  moved(before: OperationRecord, after: OperationRecord): void {
    if (before.decision === null && after.decision !== null) {
      const { outcome, reason, closedAtMs } = after.decision;
      const fields = { event: 'operation-decided', ...operationFields(after), outcome, reason, decisionMs: closedAtMs - after.admittedAtMs };
      if (outcome === 'indeterminate') this.logger.warn(fields, 'operation decided indeterminate');
      else this.logger.info(fields, 'operation decided');
    }
    if (before.settlement.status === 'pending' && after.settlement.status !== 'pending') {
      const fields = { event: 'operation-settled', ...operationFields(after), settlement: after.settlement.status };
      if (after.settlement.status === 'indeterminate') this.logger.warn(fields, 'operation settlement indeterminate');
      else this.logger.info(fields, 'operation settled');
    }
  }

  /**
   * A peer message refused (counted in convoke_result_rejections_total by the same reason). Late
   * results of a closed operation (siblings that answer after a quorum) and messages handed back
   * for a fresh authorization are routine: info. Anything else points at a peer or an attacker: warn.
   */
  rejected(reason: string, context: RejectionContext): void {
    const suppressed = this.pacer.take();
    if (suppressed === undefined) return;
    const about = context.record ? operationFields(context.record) : context.operationId === undefined ? {} : { operationId: context.operationId };
    const fields = {
      event: 'message-rejected',
      reason,
      ...(context.kind === undefined ? {} : { messageKind: context.kind }),
      ...(context.peerId === undefined ? {} : { peer: context.peerId }),
      ...about,
      ...(context.detail === undefined ? {} : { detail: context.detail }),
      ...(suppressed > 0 ? { suppressedBefore: suppressed } : {}),
    };
    if (routineRejections.has(reason)) this.logger.info(fields, 'peer message rejected');
    else this.logger.warn(fields, 'peer message rejected');
  }

  /** A store or transport failure at a stage (counted in convoke_store_errors_total / convoke_transport_errors_total). */
  failed(layer: 'store' | 'transport' | 'policy', stage: string, error?: unknown, record?: OperationRecord): void {
    const message = error instanceof Error ? error.message : error === undefined ? undefined : String(error);
    this.logger.error(
      { event: `${layer}-error`, stage, ...(record ? operationFields(record) : {}), ...(message === undefined ? {} : { error: message }) },
      `${layer} failure`,
    );
  }
}
