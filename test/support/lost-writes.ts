/**
 * A broker that loses what it acknowledged, on demand: nats-server 2.9 can lose stream writes it
 * acknowledged when it is SIGKILLed, while a consumer's state survives. Tests reproduce that
 * exactly by restoring an older copy of one stream's messages (its `msgs` directory) under the
 * newer consumer state (`obs`), or an older copy of one consumer's state under newer messages,
 * while the server is stopped. Only the server's own files change; nothing in convoke is told.
 */
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
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
