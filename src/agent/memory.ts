// The agent process's memory (agent and, in-process, the built-in engine: one pod's data plane).
//
// 1. A small young generation. V8 fixes its heap limits when the process starts, and flags given later make V8
//    reject every code cache (they are checked against the flags), so the agent restarts itself once, first
//    thing, with AGENT_NODE_OPTIONS (src/lib/agent-heap.ts): execve through the native addon keeps the pid, the
//    descriptors and the arguments, and the boot loader then uses code caches the build made under those flags.
//    A user's own --max-semi-space-size / --max-old-space-size in NODE_OPTIONS is left alone (no restart).
// 2. Giving back what start-up used. Start-up (option parsing, bootstrap, the first xDS configuration) leaves a
//    fragmented old generation, freed malloc memory that glibc keeps, and ~45 MB of the executable's pages mapped
//    (Node's start-up code, the V8 snapshot, the chunks and code caches, each read once). When the process is
//    idle and has grown since it last did so, it asks V8 for its memory-pressure GC, glibc for malloc_trim, and
//    the kernel to unmap the executable's clean pages (the addon's releaseMemory and releaseExecutablePages):
//    ~10–30 ms of one thread, only when the event loop was nearly idle for the whole interval. The unmapped
//    pages stay in the page cache, shared with every process of the same file; those still used come back on
//    their next use (a minor fault, no I/O).
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { isSea } from '../lib/sea';
import { AGENT_NODE_OPTIONS, RESTARTED_MARKER } from '../lib/agent-heap';
import { originalDstAddon, type MemoryBinding } from '../native/original-dst';

/** A heap setting of the user's in NODE_OPTIONS: theirs wins, no restart. */
const USER_HEAP_FLAG = /--max-(semi|old)-space-size/;

export type RestartOutcome = { restarted: true } | { restarted: false; reason: string };

/**
 * Restarts this process with AGENT_NODE_OPTIONS unless it is the restarted one (then restores the NODE_OPTIONS
 * it was given). Returns only when no restart happened, with the reason (for a debug line).
 */
export function restartWithSmallHeap(env: NodeJS.ProcessEnv = process.env, exec: (m: MemoryBinding) => number = defaultExec(env)): RestartOutcome {
  if (RESTARTED_MARKER in env) {
    const before = env[RESTARTED_MARKER] ?? '';
    delete env[RESTARTED_MARKER];
    if (before) env['NODE_OPTIONS'] = before;
    else delete env['NODE_OPTIONS'];
    return { restarted: false, reason: 'this is the restarted agent' };
  }
  const user = env['NODE_OPTIONS'] ?? '';
  if (USER_HEAP_FLAG.test(user)) return { restarted: false, reason: `NODE_OPTIONS sets the heap (${user})` };
  const addon = originalDstAddon();
  if (!addon.ok) return { restarted: false, reason: `the native addon is not loaded (${addon.reason})` };
  if (!addon.memory) return { restarted: false, reason: 'this addon build has no execve' };
  const errno = exec(addon.memory);
  return { restarted: false, reason: `execve ${process.execPath} failed: errno ${errno}` };
}

function defaultExec(env: NodeJS.ProcessEnv): (m: MemoryBinding) => number {
  return (m) => {
    const user = env['NODE_OPTIONS'] ?? '';
    const next: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (v !== undefined) next[k] = v;
    next['NODE_OPTIONS'] = `${user} ${AGENT_NODE_OPTIONS}`.trim();
    next[RESTARTED_MARKER] = user;
    // The single executable takes its arguments after argv[1] (a copy of its path); `node mesh.cjs` needs its
    // own Node options and script again. argv0 is kept: the program is chosen by the name it was run as.
    const argv = isSea() ? [process.argv0, ...process.argv.slice(2)] : [process.argv0, ...process.execArgv, ...process.argv.slice(1)];
    return m.execve(process.execPath, argv, Object.entries(next).map(([k, v]) => `${k}=${v}`));
  };
}

export interface MemoryReliefOptions {
  /** How often the process checks whether it is idle (ms). */
  intervalMs?: number;
  /** Event-loop utilisation over one interval under which the process counts as idle. */
  idleUtilisation?: number;
  /** Growth of the RSS since the last release that makes another one worth its pause (bytes). */
  growthBytes?: number;
  /** Called after each release (tests, debug log). */
  onRelease?: (before: number, after: number) => void;
}

/** Starts the idle-time release; stop() ends it. Does nothing when the addon has no releaseMemory. */
export function startMemoryRelief(o: MemoryReliefOptions = {}, memory: MemoryBinding | undefined = addonMemory()): { stop(): void } {
  if (!memory) return { stop: () => undefined };
  const intervalMs = o.intervalMs ?? 2000;
  const idle = o.idleUtilisation ?? 0.05;
  const growth = o.growthBytes ?? 4 * 1024 * 1024;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  let baseline = 0; // RSS right after the last release; 0: none yet (start-up has always grown)
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const used = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (used > idle) return;
    const before = process.memoryUsage.rss();
    if (baseline && before < baseline + growth) return;
    memory.releaseMemory();
    memory.releaseExecutablePages();
    baseline = process.memoryUsage.rss();
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
