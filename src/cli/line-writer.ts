/**
 * Log lines written together: the lines of one event-loop turn go out in one write when the turn
 * ends (setImmediate), instead of a write (a system call on a pipe or file) each. A busy
 * coordinator logs an admission, a decision and a settlement per operation; written one by one
 * that was a twentieth of its CPU.
 *
 * Nothing is lost at an orderly exit: `flush()` writes what is held, and the process's `exit`
 * handler calls it (an uncaught error exits through it too). A process killed outright loses
 * only the lines of the turn it was killed in.
 */
export class LineWriter {
  private held: string[] = [];
  private scheduled = false;

  constructor(
    private readonly write: (text: string) => unknown,
    /** Lines held past this many characters are written at once (a burst never holds much). */
    private readonly heldCharsMax = 64 * 1024,
  ) {
    if (live.size === 0) process.once('exit', flushLive);
    live.add(this);
  }

  private heldChars = 0;

  line(text: string): void {
    this.held.push(text);
    this.heldChars += text.length;
    if (this.heldChars >= this.heldCharsMax) return this.flush();
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Writes every held line now. */
  flush(): void {
    this.scheduled = false;
    if (this.held.length === 0) return;
    const text = this.held.join('');
    this.held = [];
    this.heldChars = 0;
    this.write(text);
  }

  /** Flushes, and leaves the writers flushed at exit (its owner is done with it). */
  close(): void {
    this.flush();
    live.delete(this);
    if (live.size === 0) process.removeListener('exit', flushLive);
  }
}

/** The writers not closed: flushed when the process exits. */
const live = new Set<LineWriter>();

function flushLive(): void {
  for (const writer of live) writer.flush();
}
