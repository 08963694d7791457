/**
 * Lines a sender can make a process write (a refused peer message, a refused command) are paced:
 * at most a number a second on an injected clock, so that a flood of them cannot fill the disk
 * through the log. What they report is counted in the metrics all the same; the next line let
 * through says how many were left out before it.
 */
import { limits } from './limits.js';

export class LinePacer {
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private windowLines = 0;
  private leftOut = 0;

  constructor(
    private readonly nowMs: () => number,
    private readonly perSecond: number = limits.rejectionLogLinesPerSecondMax,
  ) {}

  /** Whether a line may be written now: how many were left out since the last one let through, or undefined to leave this one out. */
  take(): number | undefined {
    const nowMs = this.nowMs();
    if (nowMs - this.windowStartMs >= 1000) {
      this.windowStartMs = nowMs;
      this.windowLines = 0;
    }
    if (this.windowLines >= this.perSecond) {
      this.leftOut++;
      return undefined;
    }
    this.windowLines++;
    const leftOut = this.leftOut;
    this.leftOut = 0;
    return leftOut;
  }
}
