/**
 * A deployment log line written for what a principal sends (a refused command), paced by a
 * LinePacer (limits.rejectionLogLinesPerSecondMax a second): a principal flooding them cannot fill
 * the disk through the log. The metrics count every one all the same; the next line written says
 * how many were left out before it.
 */
import { LinePacer } from '../contract/line-pacer.js';
import type { DeploymentLog } from './types.js';

export function pacedLog(nowMs: () => number, log: DeploymentLog): DeploymentLog {
  const pacer = new LinePacer(nowMs);
  return (line, level) => {
    const leftOut = pacer.take();
    if (leftOut === undefined) return;
    log(leftOut > 0 ? `${line} (${leftOut} like it left out before this line)` : line, level);
  };
}
