/**
 * A broker that loses what it acknowledged, on demand: nats-server 2.9 can lose stream writes it
 * acknowledged when it is SIGKILLed, while a consumer's state survives. Tests reproduce that
 * exactly by restoring an older copy of one stream's messages (its `msgs` directory) under the
 * newer consumer state (`obs`), or an older copy of one consumer's state under newer messages,
 * while the server is stopped. Only the server's own files change; nothing in convoke is told.
 */
import { cp, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The directory of a stream in a JetStream store dir (any account). */
export async function streamDir(storeDir: string, stream: string): Promise<string> {
  const root = join(storeDir, 'jetstream');
  for (const account of await readdir(root)) {
    const dir = join(root, account, 'streams', stream);
    if ((await readdir(join(root, account, 'streams')).catch(() => [] as string[])).includes(stream)) return dir;
  }
  throw new Error(`stream ${stream} has no directory under ${root}`);
}

/** A copy of a part of a stream's directory (`msgs`, or `obs/<consumer>`), taken while the server is stopped. */
export interface StoreSnapshot {
  part: string;
  copy: string;
  dispose(): Promise<void>;
}

export async function snapshotStreamPart(storeDir: string, stream: string, part: string): Promise<StoreSnapshot> {
  const copy = await mkdtemp(join(tmpdir(), 'convoke-lost-writes-'));
  await cp(join(await streamDir(storeDir, stream), part), join(copy, 'part'), { recursive: true });
  return { part, copy: join(copy, 'part'), dispose: () => rm(copy, { recursive: true, force: true }) };
}

/** Puts the snapshot back in place of the current files (the server must be stopped). */
export async function restoreStreamPart(storeDir: string, stream: string, snapshot: StoreSnapshot): Promise<void> {
  const target = join(await streamDir(storeDir, stream), snapshot.part);
  await rm(target, { recursive: true, force: true });
  await cp(snapshot.copy, target, { recursive: true });
}

/** nats-server's file store: the first byte of a consumer's state file (o.dat), and the version it writes (2.9 and later alike). */
const consumerStateMagic = 22;
const consumerStateVersion = 2;

/** What a snapshot of a consumer's state holds: its deliveries awaiting acknowledgement, and how many of those were redelivered. */
export interface ConsumerSnapshotState {
  pending: number;
  redelivered: number;
}

/**
 * Reads a snapshot of a consumer's state (`obs/<consumer>`) from its o.dat as nats-server's file
 * store writes it (version 2): magic and version, then varints — the ack floor (consumer, stream), the
 * delivered sequences (consumer, stream), the number of pending deliveries, a base timestamp and
 * three numbers per pending delivery when there are any, then the number of redelivered ones.
 * A test reads it to know what the server will come back with.
 */
export async function consumerSnapshotState(snapshot: StoreSnapshot): Promise<ConsumerSnapshotState> {
  const state = await readFile(join(snapshot.copy, 'o.dat'));
  if (state[0] !== consumerStateMagic || state[1] !== consumerStateVersion)
    throw new Error(`${snapshot.part}/o.dat is not a consumer state nats-server wrote (header ${state[0]} ${state[1]})`);
  let offset = 2;
  // An unsigned varint; a signed one (a timestamp) is only skipped, which reads the same bytes.
  const varint = () => {
    let value = 0;
    for (let shift = 0; offset < state.length; shift += 7) {
      const byte = state.readUInt8(offset++);
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new Error(`${snapshot.part}/o.dat ends inside a number`);
  };
  for (let field = 0; field < 4; field++) varint();
  const pending = varint();
  if (pending > 0) for (let field = 0; field < 1 + 3 * pending; field++) varint();
  return { pending, redelivered: varint() };
}
