export interface TargetGroup {
  targets: string[];
  labels?: Record<string, string>;
}
export interface Sample {
  metric: Record<string, string>;
  value: number;
}
export interface PrometheusOptions {
  dir: string;
  port: number;
  host?: string;
  targets?: TargetGroup[];
  /** Scrape and evaluation interval, a Prometheus duration (default 1s). */
  interval?: string;
  netns?: string;
  timeoutMs?: number;
  onOutput?: (chunk: string) => void;
}
export interface RunningPrometheus {
  url: string;
  child: import('node:child_process').ChildProcess;
  out(): string;
  configFile: string;
  targetsFile: string;
  setTargets(groups: TargetGroup[]): void;
  query(q: string, time?: number): Promise<Sample[]>;
}
export function prometheusPath(env?: NodeJS.ProcessEnv): string | undefined;
export function prometheusUnavailable(env?: NodeJS.ProcessEnv): string | false;
export function prometheusConfig(o: { targetsFile: string; interval?: string }): string;
export function writeTargets(file: string, groups: TargetGroup[]): void;
export function queryPath(query: string, time?: number): string;
export function parseQueryResult(query: string, text: string): Sample[];
export function queryPrometheus(url: string, query: string, time?: number): Promise<Sample[]>;
export function startPrometheus(owner: { teardown(fn: () => unknown): void }, o: PrometheusOptions): Promise<RunningPrometheus>;
