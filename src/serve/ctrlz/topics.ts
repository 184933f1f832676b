// The data behind ControlZ's topics (Istio's pkg/ctrlz/topics), in the JSON shapes of its `/<topic>j/` API.
// Where Istio reports Go runtime values (MemStats, goroutines), the Node.js/V8 equivalents are reported.
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { buildInfo, type BuildInfo } from '../../lib/buildinfo';
import { getScopes, type LevelName, type ScopeInfo, setLogCallers, setOutputLevel, setStackTraceLevel } from '../../lib/log';
import { registry } from '../../lib/metrics';

export interface Topic {
  title: string;
  /** URL prefix: the page is `/<prefix>z/`, the JSON API `/<prefix>j/`. */
  prefix: string;
}

/** Istio's core topics in its order, plus the metrics topic. */
export const TOPICS: readonly Topic[] = [
  { title: 'Logging Scopes', prefix: 'scope' },
  { title: 'Memory Usage', prefix: 'mem' },
  { title: 'Environment Variables', prefix: 'env' },
  { title: 'Process Info', prefix: 'proc' },
  { title: 'Command-Line Arguments', prefix: 'arg' },
  { title: 'Version Info', prefix: 'version' },
  { title: 'Metrics', prefix: 'metric' },
  { title: 'Signals', prefix: 'signal' },
];

// ---- scopes -------------------------------------------------------------------------------------------

/** Istio's scopeInfo JSON. */
export interface ScopeJson {
  name: string;
  description: string;
  output_level: string;
  stack_trace_level: string;
  log_callers: boolean;
}

export function scopeJson(s: ScopeInfo): ScopeJson {
  return {
    name: s.name,
    description: s.description,
    output_level: s.outputLevel,
    stack_trace_level: s.stackTraceLevel,
    log_callers: s.logCallers,
  };
}

export function allScopes(): ScopeJson[] {
  return getScopes().map(scopeJson);
}

export function findScopeJson(name: string): ScopeJson | undefined {
  const s = getScopes().find((x) => x.name === name);
  return s ? scopeJson(s) : undefined;
}

const SETTABLE_LEVELS: ReadonlySet<string> = new Set<LevelName>(['debug', 'info', 'warn', 'error', 'fatal', 'none']);

/**
 * Istio's putScope: a known level name in output_level / stack_trace_level is applied, anything else in
 * those fields is ignored, and log_callers is always applied (absent = false). False for an unknown scope.
 */
export function applyScopeUpdate(name: string, update: Partial<ScopeJson>): boolean {
  if (!findScopeJson(name)) return false;
  const out = update.output_level;
  if (typeof out === 'string' && SETTABLE_LEVELS.has(out)) setOutputLevel(name, out as LevelName);
  const stack = update.stack_trace_level;
  if (typeof stack === 'string' && SETTABLE_LEVELS.has(stack)) setStackTraceLevel(name, stack as LevelName);
  setLogCallers(name, update.log_callers === true);
  return true;
}

// ---- process, args, env, version -------------------------------------------------------------------------

function threadCount(): number {
  try {
    const m = /^Threads:\s+(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Istio's procInfo keys (goroutines have no Node.js equivalent), plus uptime and runtime versions. */
export function procInfo(): Record<string, unknown> {
  const hasIds = typeof process.getuid === 'function';
  return {
    egid: hasIds ? process.getegid!() : -1,
    euid: hasIds ? process.geteuid!() : -1,
    gid: hasIds ? process.getgid!() : -1,
    groups: typeof process.getgroups === 'function' ? process.getgroups() : [],
    pid: process.pid,
    ppid: process.ppid,
    uid: hasIds ? process.getuid!() : -1,
    wd: process.cwd(),
    hostname: os.hostname(),
    tempdir: os.tmpdir(),
    threads: threadCount(),
    uptime: process.uptime(),
    versions: { ...process.versions },
  };
}

export function argsInfo(): string[] {
  return [...process.argv];
}

/** Istio's env topic: every variable, sorted as `NAME=value` strings sort. */
export function envInfo(env: NodeJS.ProcessEnv = process.env): Array<{ name: string; value: string }> {
  return Object.entries(env)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => ({ name, value, key: `${name}=${value}` }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ name, value }) => ({ name, value }));
}

export function versionInfo(): BuildInfo {
  return buildInfo();
}

// ---- memory --------------------------------------------------------------------------------------------

let gcCount = 0;
let gcObserver: PerformanceObserver | undefined;

/** Starts counting garbage collections (for NumGC on the home page). */
export function startGcCounting(): void {
  if (gcObserver) return;
  gcObserver = new PerformanceObserver((list) => {
    gcCount += list.getEntries().length;
  });
  gcObserver.observe({ entryTypes: ['gc'] });
}

export function stopGcCounting(): void {
  gcObserver?.disconnect();
  gcObserver = undefined;
}

/** The memory topic: process.memoryUsage(), V8 heap statistics and heap spaces, GCs seen. */
export function memInfo(): Record<string, unknown> {
  return {
    memoryUsage: process.memoryUsage(),
    heapStatistics: v8.getHeapStatistics(),
    heapSpaces: v8.getHeapSpaceStatistics(),
    numGC: gcCount,
  };
}

let gcFunction: (() => void) | undefined;

/** PUT /memj/forcecollection: a full garbage collection (Go's runtime.GC()). */
export function forceCollection(): void {
  if (!gcFunction) {
    // `gc` is only exposed with --expose-gc; turning the flag on at run time and fetching it from a fresh
    // context is the documented way to get it without restarting.
    v8.setFlagsFromString('--expose-gc');
    gcFunction = runInNewContext('gc') as () => void;
  }
  gcFunction();
}

/** The home page data (Istio's homeInfo). */
export function homeInfo(): Record<string, unknown> {
  return {
    ProcessName: process.argv[1] ?? process.argv[0],
    HeapSize: process.memoryUsage().heapUsed,
    NumGC: gcCount,
    CurrentTime: Date.now() * 1e6,
    Hostname: os.hostname(),
    IP: localIP(),
  };
}

/** Istio's getLocalIP: the first non-loopback IPv4 address. */
export function localIP(): string {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (!a.internal && a.family === 'IPv4') return a.address;
  }
  return '';
}

// ---- metrics -------------------------------------------------------------------------------------------

/** Go's fmt.Sprint of a float64 (strconv 'g', shortest): `1`, `0.5`, `1e+06`, `+Inf`. */
export function goFloat(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  if (n === 0) return '0';
  const [mant, expText] = n.toExponential().split('e') as [string, string];
  const exp = Number(expText);
  // Go switches to exponent form below 1e-4 and from 1e6 on when printing the shortest representation.
  if (exp < -4 || exp >= 6) {
    const e = Math.abs(exp);
    return `${mant}e${exp < 0 ? '-' : '+'}${e < 10 ? '0' : ''}${e}`;
  }
  return String(n);
}

export interface MetricFamilyJson {
  name: string;
  help: string;
  type: string;
  metrics: Array<Record<string, unknown>>;
}

type PromValue = { value: number; labels: Record<string, string | number>; metricName?: string };

const labelsOf = (v: PromValue, drop?: string): Record<string, string> =>
  Object.fromEntries(
    Object.entries(v.labels)
      .filter(([k]) => k !== drop)
      .map(([k, x]) => [k, String(x)]),
  );

/** Every metric family of the registry in prom2json's shape (the Metrics topic of Istio's ControlZ). */
export async function metricFamilies(): Promise<MetricFamilyJson[]> {
  const families = (await registry.getMetricsAsJSON()) as unknown as Array<{
    name: string;
    help: string;
    type: string;
    values: PromValue[];
  }>;
  return families.map((f) => {
    const type = f.type.toUpperCase();
    if (type !== 'HISTOGRAM' && type !== 'SUMMARY') {
      return {
        name: f.name,
        help: f.help,
        type,
        metrics: f.values.map((v) => {
          const labels = labelsOf(v);
          return Object.keys(labels).length ? { labels, value: goFloat(v.value) } : { value: goFloat(v.value) };
        }),
      };
    }
    // Histogram/summary samples come flat (`_bucket`/quantile, `_sum`, `_count`): group them per label set.
    const series = new Map<string, Record<string, unknown>>();
    for (const v of f.values) {
      const labels = labelsOf(v, type === 'HISTOGRAM' ? 'le' : 'quantile');
      const key = JSON.stringify(labels);
      let m = series.get(key);
      if (!m) {
        m = Object.keys(labels).length ? { labels } : {};
        if (type === 'HISTOGRAM') m.buckets = {};
        else m.quantiles = {};
        series.set(key, m);
      }
      const metricName = v.metricName ?? f.name;
      if (metricName.endsWith('_sum')) m.sum = goFloat(v.value);
      else if (metricName.endsWith('_count')) m.count = goFloat(v.value);
      else if (type === 'HISTOGRAM') {
        // prom2json lists the finite buckets; +Inf is the count.
        const le = v.labels.le === '+Inf' ? Infinity : Number(v.labels.le);
        if (le !== Infinity) (m.buckets as Record<string, string>)[goFloat(le)] = goFloat(v.value);
      } else (m.quantiles as Record<string, string>)[goFloat(Number(v.labels.quantile))] = goFloat(v.value);
    }
    return { name: f.name, help: f.help, type, metrics: [...series.values()] };
  });
}
