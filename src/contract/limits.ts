/**
 * Every bound convoke enforces, in one place. Units are in the names, last. Relations between
 * bounds are asserted at load so a bad edit fails at start-up, not in production.
 */
import { assert } from './errors.js';

export const limits = {
  /** Spec: admission has a fixed 10000 ms budget from the trusted request-start clock. */
  admissionBudgetMs: 10_000,
  /** Spec: authorization attempts are in 1..16. */
  attemptsMax: 16,
  branchesMax: 256,
  peerIdBytesMax: 64,
  branchIdBytesMax: 64,
  invocationKeyBytesMax: 256,
  principalIdBytesMax: 256,
  inputBytesMax: 256 * 1024,
  resultBytesMax: 256 * 1024,
  /** The serialized size of one stored transition. */
  transitionBytesMax: 1024 * 1024,
  /** The serialized size of a whole operation record (its admission transition checked before create). */
  recordBytesMax: 4 * 1024 * 1024,
  transitionsPerOperationMax: 4096,
  /** Rejected result messages recorded in an operation's stream; beyond this they are only counted. */
  rejectionsRecordedMax: 64,
  /** Protocol conflicts (a different terminal result for an accepted attempt) recorded per operation; beyond this, counted. */
  protocolConflictsRecordedMax: 16,
  timeoutMsMax: 7 * 24 * 3600 * 1000,
  timeoutMsMin: 1,
  leaseMsMax: 24 * 3600 * 1000,
  retryBackoffMsMax: 3600 * 1000,
  cancelTimeoutMsMax: 3600 * 1000,
  settlementGraceMsMax: 24 * 3600 * 1000,
  waitMsMax: 120_000,
  /** Bounds of the HTTP facade's configurable receive timeouts (headers; whole request). */
  httpReceiveTimeoutMsMin: 100,
  httpReceiveTimeoutMsMax: 300_000,
  jsonDepthMax: 64,
  bundleBytesMax: 1024 * 1024,
  interactionsMax: 64,
  quorumDenominatorMax: 1_000_000,
} as const;

assert(limits.attemptsMax >= 1 && limits.attemptsMax <= 16, 'attemptsMax within the profile range 1..16');
assert(limits.inputBytesMax < limits.transitionBytesMax, 'an input must fit in its admission transition');
assert(limits.resultBytesMax < limits.transitionBytesMax, 'a result must fit in its transition');
assert(limits.transitionBytesMax <= limits.recordBytesMax, 'a transition fits in a record');
assert(limits.rejectionsRecordedMax + limits.protocolConflictsRecordedMax < limits.transitionsPerOperationMax / 2, 'rejections and conflicts cannot exhaust a stream');
assert(Number.isSafeInteger(limits.timeoutMsMax + limits.settlementGraceMsMax + limits.cancelTimeoutMsMax), 'time sums are safe integers');

export type Limits = typeof limits;
