// Prometheus for the tests: reading the text exposition the programs serve on /metrics (the format of
// prometheus/common expfmt) for tests that assert a counter or gauge, and a real Prometheus server
// (scripts/lib/prometheus.mjs, shared with the mesh demo) that scrapes by file service discovery and answers
// PromQL through its HTTP API.
export {
  prometheusConfig,
  prometheusPath,
  prometheusUnavailable,
  parseQueryResult,
  queryPath,
  queryPrometheus,
  startPrometheus,
  type RunningPrometheus,
  type Sample,
  type TargetGroup,
} from '../../scripts/lib/prometheus.mjs';

/** The value of a metric (optionally with labels, as written) in a text exposition; undefined when absent. */
export function metricValue(text: string, name: string, labels = ''): number | undefined {
  const re = new RegExp(`^${name}${labels ? `\\{${labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\}` : '(?:\\{\\})?'} (\\S+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : undefined;
}

export interface Series {
  labels: Record<string, string>;
  value: number;
}

/** Every series of one metric in a text exposition, as label maps with their values. */
export function seriesOf(text: string, name: string): Series[] {
  const out: Series[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const end = line.lastIndexOf('}');
    const labels: Record<string, string> = {};
    for (const m of line.slice(name.length + 1, end).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ labels, value: Number(line.slice(end + 1).trim()) });
  }
  return out;
}

/**
 * The labels Istio's standard metrics give one end (`source` or `destination`) of a request when it is the pod the
 * telemetry e2e tests start as an injector would: workload `<name>-v1` in namespace `<name>`, labels app=<name>,
 * version=v1 and the canonical service labels, cluster id Orchestrator.
 */
export function istioPeerLabels(side: 'source' | 'destination', name: string): Record<string, string> {
  return {
    [`${side}_workload`]: `${name}-v1`,
    [`${side}_workload_namespace`]: name,
    [`${side}_app`]: name,
    [`${side}_version`]: 'v1',
    [`${side}_canonical_service`]: name,
    [`${side}_canonical_revision`]: 'v1',
    [`${side}_cluster`]: 'Orchestrator',
  };
}
