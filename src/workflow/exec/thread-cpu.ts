/**
 * The CPU time of one thread of this process, read from Linux's /proc, for the jq evaluator's
 * deadline (jq.ts): it bounds the CPU time its worker thread spends on an evaluation, which the
 * load of the machine does not change, rather than the wall time, which it does. Node 20 has no
 * per-thread CPU clock of its own (process.cpuUsage() is the whole process's). Where /proc cannot
 * be read (another OS, a sandbox without it), each function answers undefined and the evaluator
 * falls back to wall time.
 */
import { closeSync, openSync, readFileSync, readSync, readlinkSync } from 'node:fs';
import { endianness } from 'node:os';

/**
 * The calling thread's id, from /proc/thread-self (a link to `<pid>/task/<tid>`, Linux 3.17 on);
 * undefined where there is none.
 */
export function ownThreadId(): number | undefined {
  try {
    const match = /(?:^|\/)task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/** The auxiliary vector's entry that ends it, and the one giving the unit of /proc's CPU times. */
const AT_NULL = 0;
const AT_CLKTCK = 17;
/** Node's 32-bit Linux architectures, where the auxiliary vector's words are 4 bytes (8 elsewhere). */
const words32 = new Set(['arm', 'ia32', 'mips', 'mipsel', 'ppc']);

/**
 * Clock ticks per second: the unit of the CPU times in /proc/<pid>/task/<tid>/stat, read from
 * AT_CLKTCK in the auxiliary vector the kernel gave this process (what sysconf(_SC_CLK_TCK) and
 * `getconf CLK_TCK` answer; 100 on every architecture Node supports on Linux, read rather than
 * assumed). Undefined where the vector cannot be read or has no such entry.
 */
function readClockTicksPerSecond(): number | undefined {
  try {
    const auxv = readFileSync('/proc/self/auxv');
    const word = words32.has(process.arch) ? 4 : 8;
    const little = endianness() === 'LE';
    const read = (at: number): number =>
      word === 4 ? (little ? auxv.readUInt32LE(at) : auxv.readUInt32BE(at)) : Number(little ? auxv.readBigUInt64LE(at) : auxv.readBigUInt64BE(at));
    for (let at = 0; at + 2 * word <= auxv.length; at += 2 * word) {
      const type = read(at);
      if (type === AT_NULL) return undefined;
      if (type === AT_CLKTCK) {
        const ticks = read(at + word);
        return ticks > 0 ? ticks : undefined;
      }
    }
  } catch {
    // No auxiliary vector to read: not Linux, or /proc is not mounted.
  }
  return undefined;
}

let clockTicks: { perSecond: number | undefined } | undefined;
const clockTicksPerSecond = (): number | undefined => (clockTicks ??= { perSecond: readClockTicksPerSecond() }).perSecond;

/**
 * The CPU time (ms, user and system; in steps of one clock tick, 10 ms at 100 per second) that
 * one thread of this process has used since it started, read through one descriptor of its stat
 * file kept open from `threadCpu` to `close`. The evaluator reads it on its event loop at the
 * start of every evaluation: opening, reading and closing the file each time (readFileSync: five
 * system calls and a new buffer) cost about four times one read of the open descriptor
 * (docs/performance.md, "The jq deadline's CPU reading"). A stat file of /proc is generated
 * again by each read at offset 0.
 */
export interface ThreadCpu {
  /** The CPU time used so far; undefined where it cannot be read (the thread ended, or the reader was closed). */
  readMs(): number | undefined;
  /** Closes the descriptor; later readings answer undefined. */
  close(): void;
}

/** A proc(5) stat line is a few hundred bytes; one that fills this buffer is not taken as whole. */
const statBytesMax = 4096;

/**
 * A reader of thread `tid`'s CPU time (ThreadCpu); undefined where it cannot be read (no /proc,
 * no such thread: one that ended).
 */
export function threadCpu(tid: number): ThreadCpu | undefined {
  const perSecond = clockTicksPerSecond();
  if (perSecond === undefined) return undefined;
  let fd: number | undefined;
  try {
    fd = openSync(`/proc/self/task/${tid}/stat`, 'r');
  } catch {
    return undefined;
  }
  const buffer = Buffer.alloc(statBytesMax);
  const reader: ThreadCpu = {
    readMs: () => {
      // Closed, its number may be another file's by now: never read it again.
      if (fd === undefined) return undefined;
      try {
        const length = readSync(fd, buffer, 0, statBytesMax, 0);
        return length < statBytesMax ? cpuMsOfStat(buffer.toString('latin1', 0, length), perSecond) : undefined;
      } catch {
        // The thread ended: its stat file answers ESRCH.
        return undefined;
      }
    },
    close: () => {
      if (fd === undefined) return;
      const open = fd;
      fd = undefined;
      try {
        closeSync(open);
      } catch {
        // Nothing to do about a descriptor that will not close: it is not read again.
      }
    },
  };
  // A thread that ended between the open and now answers nothing.
  if (reader.readMs() === undefined) return void reader.close();
  return reader;
}

/** utime plus stime of a stat line, in ms; undefined when they are not numbers. */
function cpuMsOfStat(stat: string, perSecond: number): number | undefined {
  // The fields after the command name, which is in parentheses and may hold spaces and parentheses
  // itself: the state (field 3 of proc(5)) first, so utime (14) and stime (15) are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isSafeInteger(ticks) ? (ticks * 1000) / perSecond : undefined;
}
