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

/** What a consumer's saved state holds: its deliveries awaiting acknowledgement, and how many of those were redelivered. */
export interface ConsumerSnapshotState {
  pending: number;
  redelivered: number;
}

/**
 * Decodes a consumer's o.dat as nats-server's file store writes it (version 2): magic and
 * version, then varints — the ack floor (consumer, stream), the delivered sequences (consumer,
 * stream), the number of pending deliveries, a base timestamp and three numbers per pending
 * delivery when there are any, the number of redelivered ones and two numbers per redelivered.
 * Throws unless that is the whole file (an empty or torn file is no state).
 */
function decodeConsumerState(state: Buffer, name: string): ConsumerSnapshotState {
  if (state.length < 2 || state[0] !== consumerStateMagic || state[1] !== consumerStateVersion)
    throw new Error(`${name} is not a consumer state nats-server wrote (${state.length} bytes)`);
  let offset = 2;
  // An unsigned varint; a signed one (a timestamp) is only skipped, which reads the same bytes.
  const varint = () => {
    let value = 0;
    for (let shift = 0; offset < state.length; shift += 7) {
      const byte = state.readUInt8(offset++);
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new Error(`${name} ends inside a number`);
  };
  const skip = (count: number) => {
    for (let n = 0; n < count; n++) varint();
  };
  skip(4);
  const pending = varint();
  if (pending > 0) skip(1 + 3 * pending);
  const redelivered = varint();
  skip(2 * redelivered);
  if (offset !== state.length) throw new Error(`${name} has ${state.length - offset} bytes past its state`);
  return { pending, redelivered };
}

/** What a snapshot of a consumer's state (`obs/<consumer>`) holds. */
export async function consumerSnapshotState(snapshot: StoreSnapshot): Promise<ConsumerSnapshotState> {
  return decodeConsumerState(await readFile(join(snapshot.copy, 'o.dat')), `${snapshot.part}/o.dat`);
}

/**
 * A copy of one consumer's state (`obs/<consumer>`) taken while the server runs, and what it
 * holds. nats-server 2.9 rewrites o.dat in place (truncate, then write) from a background flusher
 * and, stopping, does not wait for a write under way: a copy taken after a stop can be empty,
 * and the consumer comes back without its state. A copy taken while it runs is kept only when
 * its o.dat decodes whole; otherwise this answers undefined and the caller copies again.
 */
export async function snapshotRunningConsumer(
  storeDir: string,
  stream: string,
  consumer: string,
): Promise<{ snapshot: StoreSnapshot; state: ConsumerSnapshotState } | undefined> {
  const snapshot = await snapshotStreamPart(storeDir, stream, `obs/${consumer}`);
  try {
    return { snapshot, state: await consumerSnapshotState(snapshot) };
  } catch {
    await snapshot.dispose();
    return undefined;
  }
}
