/** The aggregate kernel: one commit pipeline for any event-sourced aggregate (kernel.ts). */
export { Kernel, newStream, storeError, dueRetryMs, dueRetryMaxMs, type KernelHooks, type KernelOptions, type LoadedLog, type Stream } from './kernel.js';
export type {
  Aggregate,
  AppendOutcome,
  Decide,
  GuardedTransition,
  ReadOutcome,
  RecordAfter,
  Stored,
  StoreFailure,
  StreamStore,
  TailOutcome,
  Waiter,
} from './types.js';
