// One Prometheus registry per process, with Istio's metric names. Modules define their own metrics
// against it (defineCounter etc.) so that a metric is declared once, next to the code that moves it.
//
// The classes come from prom-client's own files, not its index: the index also loads the push gateway
// (node:https), the cluster aggregator (node:cluster) and the default metrics, ~20 ms of an agent's way to
// its first certificate that no process here uses.
import type { CounterConfiguration, GaugeConfiguration, HistogramConfiguration } from 'prom-client';
import Registry from 'prom-client/lib/registry';
import Counter from 'prom-client/lib/counter';
import Gauge from 'prom-client/lib/gauge';
import Histogram from 'prom-client/lib/histogram';

export const registry = new Registry();

type Named<T> = Omit<T, 'registers'>;

function once<T>(name: string, make: () => T): T {
  const existing = registry.getSingleMetric(name);
  return (existing as T | undefined) ?? make();
}

export function defineCounter<L extends string>(cfg: Named<CounterConfiguration<L>>): Counter<L> {
  return once(cfg.name, () => new Counter<L>({ ...cfg, registers: [registry] }));
}
export function defineGauge<L extends string>(cfg: Named<GaugeConfiguration<L>>): Gauge<L> {
  return once(cfg.name, () => new Gauge<L>({ ...cfg, registers: [registry] }));
}
export function defineHistogram<L extends string>(cfg: Named<HistogramConfiguration<L>>): Histogram<L> {
  return once(cfg.name, () => new Histogram<L>({ ...cfg, registers: [registry] }));
}

/** Prometheus text exposition of every metric of this process. */
export async function metricsText(): Promise<string> {
  return registry.metrics();
}

export const METRICS_CONTENT_TYPE = registry.contentType;
