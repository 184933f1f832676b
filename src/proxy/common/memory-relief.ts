// The agent process's memory (agent and, in-process, the built-in engine: one pod's data plane): giving back what
// start-up used. Each engine worker thread runs its own release too (worker/thread.ts): the memory-pressure GC
// works on the calling thread's isolate only, and a worker's isolate grows as the main thread's does. Start-up (option parsing, bootstrap, the first xDS configuration) leaves V8's young generation
// grown to its 16 MB semi-spaces, a fragmented old generation, freed malloc memory that glibc keeps, and ~45 MB of
// the executable's pages mapped (Node's start-up code, the V8 snapshot, the chunks and code caches, each read
// once). When the process is idle and has grown since it last did so, it asks V8 for its memory-pressure GC
// (which compacts and shrinks the young generation back), glibc for malloc_trim, and the kernel to unmap the
// executable's clean pages (the addon's releaseMemory and releaseExecutablePages): ~10–30 ms of one thread,
// only when the event loop was nearly idle (< 1 %) for three intervals in a row. The unmapped pages stay in the page cache,
// shared with every process of the same file; those still used come back on their next use (a minor fault).
//
// Not done: a smaller young generation (--max-semi-space-size, fixed at process start, so only by restarting
// with NODE_OPTIONS and code caches built for those flags). Measured with footprint.mjs: 8 MB changed nothing
// at 1000 rps over 40 s against Node's 16 MB (80.0 vs 80.1 MB), 4 MB saved ~9 MB but cost 8–13 % of saturated
// requests per core-second, and the restart added ~0.1–0.3 s to the agent's start.
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { originalDstAddon, type MemoryBinding } from '../../native/original-dst';

export interface MemoryReliefOptions {
  /** How often the process checks whether it is idle (ms). */
  intervalMs?: number;
  /** Event-loop utilisation over one interval under which the process counts as idle. */
  idleUtilisation?: number;
  /** Idle intervals in a row before a release: light traffic must not pay a compacting GC's pause. */
  quietIntervals?: number;
  /** Growth of the RSS since the last release that makes another one worth its pause (bytes). */
  growthBytes?: number;
  /** Called after each release (tests, debug log). */
  onRelease?: (before: number, after: number) => void;
}

/** Starts the idle-time release; stop() ends it. Does nothing when the addon has no releaseMemory. */
export function startMemoryRelief(o: MemoryReliefOptions = {}, memory: MemoryBinding | undefined = addonMemory()): { stop(): void } {
  if (!memory) return { stop: () => undefined };
  const intervalMs = o.intervalMs ?? 2000;
  // 1 %: at 1000 requests per second the in-process engine keeps the loop ~4 % busy, and a release under that
  // load (a compacting GC every time the RSS grew) tripled the p99 latency of the footprint bench's 1000 rps run.
  const idle = o.idleUtilisation ?? 0.01;
  const quietNeeded = o.quietIntervals ?? 3;
  let quiet = 0;
  const growth = o.growthBytes ?? 4 * 1024 * 1024;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  let baseline = 0; // RSS right after the last release; 0: none yet (start-up has always grown)
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const used = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (used > idle) {
      quiet = 0;
      return;
    }
    if (++quiet < quietNeeded) return;
    const before = process.memoryUsage.rss();
    if (baseline && before < baseline + growth) return;
    memory.releaseMemory();
    memory.releaseExecutablePages();
    baseline = process.memoryUsage.rss();
    quiet = 0;
    o.onRelease?.(before, baseline);
    last = performance.eventLoopUtilization();
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

function addonMemory(): MemoryBinding | undefined {
  const a = originalDstAddon();
  return a.ok ? a.memory : undefined;
}
