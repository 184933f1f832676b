export const SCHEDULE_SLACK_MS: number;
export const LOADGEN_OPTIONS: Record<string, { type: string; default?: unknown; help: string }>;
export function loadgenMissing(): string | undefined;
export function loadgenBinary(): string;
export function policyPrefix(policy: string): { prefix: string[]; note?: string };
export interface LoadgenOptions {
  host: string;
  port: number;
  path?: string;
  authority?: string;
  headers?: Record<string, string>;
  rate: number;
  duration: number;
  warmup?: number;
  connections?: number;
  maxConnections?: number;
  timeout?: number;
  spinUs?: number;
}
/** Latencies and lateness in ms (null where nothing was answered), generatorCpu in s. */
export interface LoadgenResult {
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  unanswered: number;
  retries: number;
  queued: number;
  connections: number;
  rps: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  p999: number | null;
  max: number | null;
  mean: number | null;
  sendLateP50: number | null;
  sendLateP99: number | null;
  sendLateMax: number | null;
  generatorCpu: number;
}
export function runLoadgen(binary: string, o: LoadgenOptions, wrap?: (argv: string[]) => string[], onMeasuring?: () => void): Promise<LoadgenResult>;
export function offSchedule(r: { sendLateP99: number | null }): string | undefined;
