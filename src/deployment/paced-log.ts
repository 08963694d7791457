/**
 * A deployment log line written for what a principal sends (a refused command): at most
 * limits.rejectionLogLinesPerSecondMax such lines a second, so a principal flooding them cannot
 * fill the disk through the log. The metrics count every one all the same; the next line written
 * says how many were left out before it.
 */
import { limits } from '../contract/limits.js';
import type { DeploymentLog } from './types.js';

export function pacedLog(nowMs: () => number, log: DeploymentLog): DeploymentLog {
  let windowStartMs = Number.NEGATIVE_INFINITY;
  let windowLines = 0;
  let leftOut = 0;
  return (line, level) => {
    const now = nowMs();
    if (now - windowStartMs >= 1000) {
      windowStartMs = now;
      windowLines = 0;
    }
    if (windowLines >= limits.rejectionLogLinesPerSecondMax) {
      leftOut++;
      return;
    }
    windowLines++;
    log(leftOut > 0 ? `${line} (${leftOut} like it left out before this line)` : line, level);
    leftOut = 0;
  };
}
