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
