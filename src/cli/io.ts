/** What a CLI command reads and writes: injected so commands are testable without a process. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Reads all of standard input. */
  readStdin(): Promise<Uint8Array>;
  /** Standard error's file descriptor, when it is the process's own (the server log writes it asynchronously). */
  stderrFd?: number;
  /** Whether standard error is a terminal: progress (with `\r`) is drawn only there. Absent: not a terminal. */
  stderrIsTerminal?: boolean;
  /** The width tables are fitted to (unbounded when absent; processIo gives the terminal's). */
  columns?: number;
}

/** Off a terminal without COLUMNS, tables wrap their widest column to this width. */
export const tableWidthDefault = 120;
/** Narrower than this, wrapping would make tables unreadable: they are drawn at this width. */
export const tableWidthMin = 60;

/** The terminal's width, else $COLUMNS, else the default. */
export function outputColumns(stream: { isTTY?: boolean; columns?: number }, env: NodeJS.ProcessEnv = process.env): number {
  const fromEnv = Number(env.COLUMNS);
  const columns = stream.isTTY && stream.columns ? stream.columns : Number.isSafeInteger(fromEnv) && fromEnv > 0 ? fromEnv : tableWidthDefault;
  return Math.max(tableWidthMin, columns);
}

export const processIo: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  stderrFd: process.stderr.fd,
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  },
  stderrIsTerminal: process.stderr.isTTY === true,
  get columns() {
    return outputColumns(process.stdout);
  },
};
