// node bench/tools/thread-cpu-reading.mjs <checkout root> [count]
// One reading of a worker thread's CPU time from the main thread, as the jq evaluator takes one
// per evaluation, through the checkout's thread-cpu.js: threadCpuMs (readFileSync of
// /proc/self/task/<tid>/stat) where the checkout has it, else threadCpu's reader (readSync of one
// descriptor kept open, at offset 0). Prints ns per reading.
import { Worker } from 'node:worker_threads';
const [root, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 200_000);
const module = await import(`${root}/dist/src/workflow/exec/thread-cpu.js`);
const worker = new Worker(
  `const { parentPort } = require('node:worker_threads'); const { readlinkSync } = require('node:fs');
   parentPort.postMessage(Number(/task\\/(\\d+)$/.exec(readlinkSync('/proc/thread-self'))[1]));
   setInterval(() => {}, 1000);`,
  { eval: true },
);
const tid = await new Promise((resolve) => worker.once('message', resolve));
const reader = module.threadCpu?.(tid);
const read = reader ? () => reader.readMs() : () => module.threadCpuMs(tid);
for (let i = 0; i < 2000; i++) read();
const started = process.hrtime.bigint();
let readings = 0;
for (let i = 0; i < count; i++) if (read() !== undefined) readings++;
const ns = Number(process.hrtime.bigint() - started) / count;
console.log(JSON.stringify({ how: reader ? 'readSync, one descriptor' : 'readFileSync', count, readings, nsPerReading: Math.round(ns) }));
reader?.close();
await worker.terminate();
