// node bench/tools/callgrind-split.mjs <callgrind.out> <perf-PID.map> [operations] [top]
// Splits a callgrind profile of bench/tools/fixed-ops.mjs (docs/performance.md, memory mode) two ways:
// - by symbol: what TurboFan's compiler, the garbage collector and everything else (JS code,
//   builtins, the runtime, JSON, libc) executed, by each function's own instructions (exclusive
//   cost). JIT code, which callgrind names by address, is named through the `--perf-basic-prof`
//   map; the last entry mapped at an address wins, so names of code that was moved or freed can
//   be wrong. Allocation and copying done for the compiler (malloc, memset) count as the rest.
// - by thread (callgrind_annotate's inclusive costs): V8's worker threads (TurboFan's jobs and the
//   concurrent and parallel collector), the main thread's garbage collection, and the rest of the
//   main thread (the measured work, with the compiler's main-thread finalization and lazy
//   bytecode compilation).
// With `operations` (default 400) the rests are also given per operation; with `top` the
// costliest functions of the first rest are listed.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const [outPath, mapPath, opsArg, topArg] = process.argv.slice(2);
if (!outPath || !mapPath) {
  process.stderr.write('usage: callgrind-split.mjs <callgrind.out> <perf-PID.map> [operations] [top]\n');
  process.exit(2);
}

const compiler =
  /compiler::|maglev|OptimizingCompileDispatcher|v8::internal::Zone::|ZoneList|turboshaft|RegisterAllocat|InstructionSelector|SourcePositionTable|TranslationArrayBuilder|v8::internal::wasm/;
const collector = new RegExp(
  [
    'Heap::|heap::|Scaveng|MarkCompact|Marking|Sweeper|Evacuat|MemoryAllocator|GCTracer|cppgc|MemoryChunk|ConcurrentMark|PagedSpace|NewSpace',
    'SemiSpace|LocalHeap|RememberedSet|SlotSet|WeakObjects|Ephemeron|LargeObjectSpace|TypedSlot|ObjectStatsCollector|ArrayBufferSweeper',
    'EmbedderStack|IncrementalMarking|MinorMC|PointersUpdating|Compactor|OldToNew|YoungGeneration|FreeList|SizeFromMap|PretenuringHandler',
    'LiveObjectRange|RecordMigratedSlot|PostGarbageCollection|IterateObjectCache|GlobalHandles|MarkingBarrier|Evacuation|UpdateTypedSlot',
    'RootsReferencesExtractor|StringTable::Data::IterateElements|ExternalStringTable|StringForwardingTable',
  ].join('|'),
);
const groupOf = (name) => (compiler.test(name) ? 'compiler' : collector.test(name) ? 'gc' : 'rest');

/** Start address → [size, name] of every JIT code object the map names, and the sorted starts. */
function readMap(path) {
  const entries = new Map();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const [start, size, ...name] = line.split(' ');
    if (name.length > 0) entries.set(Number.parseInt(start, 16), [Number.parseInt(size, 16), name.join(' ')]);
  }
  return { entries, starts: [...entries.keys()].sort((a, b) => a - b) };
}

function jitName({ entries, starts }, address) {
  let lo = 0;
  let hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid] <= address) lo = mid + 1;
    else hi = mid;
  }
  const start = starts[lo - 1];
  if (start === undefined) return 'JIT (unknown)';
  const [size, name] = entries.get(start);
  return address < start + size ? `JIT ${name}` : 'JIT (unknown)';
}

/** Exclusive instructions per function name (callgrind's compressed names; a call's inclusive cost line skipped). */
function exclusiveCosts(path, map) {
  const names = new Map();
  const cost = new Map();
  let current;
  let skipNext = false;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const fn = /^(c?)fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (fn) {
      if (fn[3] !== undefined) names.set(fn[2], fn[3]);
      if (fn[1] === '') current = fn[2];
      continue;
    }
    if (line.startsWith('calls=')) {
      skipNext = true;
      continue;
    }
    if (!/^[0-9+*-]/.test(line)) continue;
    if (skipNext) {
      skipNext = false;
      continue;
    }
    const instructions = Number(line.split(' ')[1] ?? 0);
    if (current !== undefined) cost.set(current, (cost.get(current) ?? 0) + instructions);
  }
  const byName = new Map();
  for (const [id, instructions] of cost) {
    let name = names.get(id) ?? id;
    if (name.startsWith('0x')) name = jitName(map, Number.parseInt(name.split("'")[0], 16));
    byName.set(name, (byName.get(name) ?? 0) + instructions);
  }
  return byName;
}

const byName = exclusiveCosts(outPath, readMap(mapPath));
const groups = { compiler: 0, gc: 0, rest: 0 };
for (const [name, instructions] of byName) groups[groupOf(name)] += instructions;
const operations = Number(opsArg ?? 400);
const m = (n) => `${(n / 1e6).toFixed(1)} M`;
const total = groups.compiler + groups.gc + groups.rest;
console.log(
  `total ${m(total)}  compiler ${m(groups.compiler)}  gc ${m(groups.gc)}  rest ${m(groups.rest)} = ${(groups.rest / operations / 1e6).toFixed(3)} M per operation`,
);
const top = [...byName].filter(([name]) => groupOf(name) === 'rest').sort((a, b) => b[1] - a[1]);
for (const [name, instructions] of top.slice(0, Number(topArg ?? 0))) console.log(`${m(instructions).padStart(9)}  ${name.slice(0, 140)}`);

/** Inclusive instructions of the thread roots and the main thread's collections, from callgrind_annotate. */
function threadSplit(path) {
  const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', path], { encoding: 'utf8', maxBuffer: 1 << 28 });
  const inclusive = new Map();
  let total = 0;
  for (const line of text.split('\n')) {
    const fn = /^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\?\?\?:(.*?) \[/.exec(line);
    if (fn && !inclusive.has(fn[2])) inclusive.set(fn[2], Number(fn[1].replaceAll(',', '')));
    const totals = /^\s*([\d,]+)\s+\(100.0%\)\s+PROGRAM TOTALS/.exec(line);
    if (totals) total = Number(totals[1].replaceAll(',', ''));
  }
  const sum = (prefixes) => [...inclusive].filter(([name]) => prefixes.some((p) => name.startsWith(p))).reduce((n, [, cost]) => n + cost, 0);
  const workers = sum(['node::(anonymous namespace)::PlatformWorkerThread']);
  const mainGc = sum([
    'v8::internal::Heap::CollectGarbage(',
    'v8::internal::IncrementalMarkingJob::Task::RunInternal',
    'v8::internal::MemoryReducer::TimerTask::RunInternal',
    'v8::internal::ScavengeJob::Task::RunInternal',
  ]);
  return { total, workers, mainGc, rest: total - workers - mainGc };
}

const threads = threadSplit(outPath);
console.log(
  `by thread: workers ${m(threads.workers)}  main-thread gc ${m(threads.mainGc)}  main thread else ${m(threads.rest)} = ${(threads.rest / operations / 1e6).toFixed(3)} M per operation`,
);
