// Istio's PushContext.ProxyStatus and the gauges read from it (pilot/pkg/model/push_context.go): while a
// snapshot is built and its configuration generated, conflicts and anomalies are recorded under a metric
// name and a key (listener, cluster, host, proxy ID); each gauge reports how many distinct keys the latest
// snapshot holds, and /debug/push_status shows the entries with their proxy and message.
import { defineGauge } from '../lib/metrics';

/** One entry: the proxy the problem was seen for and what was wrong. */
export interface ProxyPushStatus {
  proxy?: string;
  message?: string;
}

/** Metric names of the push status, with Istio's help texts (pilot_duplicate_envoy_clusters renamed). */
export const PUSH_STATUS_METRICS = {
  noIp: ['pilot_no_ip', 'Pods not found in the endpoint table, possibly invalid.'],
  endpointNotReady: ['pilot_endpoint_not_ready', 'Endpoint found in unready state.'],
  conflictOutboundTcp: ['pilot_conflict_outbound_listener_tcp_over_current_tcp', 'Number of conflicting tcp listeners with current tcp listener.'],
  conflictInbound: ['pilot_conflict_inbound_listener', 'Number of conflicting inbound listeners.'],
  duplicateClusters: ['pilot_duplicate_proxy_clusters', 'Duplicate proxy clusters caused by service entries with same hostname'],
  dnsNoEndpoints: [
    'pilot_dns_cluster_without_endpoints',
    'DNS clusters without endpoints caused by the endpoint field in STRICT_DNS type cluster is not set or the corresponding subset cannot select any endpoint',
  ],
  edsNoInstances: ['pilot_eds_no_instances', 'Number of clusters without instances.'],
  dupDomain: ['pilot_vservice_dup_domain', 'Virtual services with dup domains.'],
  dupSubsets: ['pilot_destrule_subsets', 'Duplicate subsets across destination rules for same host'],
} as const;

export type PushStatusMetric = keyof typeof PUSH_STATUS_METRICS;

export class PushStatus {
  private readonly byMetric = new Map<string, Map<string, ProxyPushStatus>>();

  /** Istio AddMetric: the last entry for a key wins. */
  add(metric: PushStatusMetric, key: string, proxy = '', message = ''): void {
    const name = PUSH_STATUS_METRICS[metric][0];
    let m = this.byMetric.get(name);
    if (!m) this.byMetric.set(name, (m = new Map()));
    m.set(key, { ...(proxy ? { proxy } : {}), ...(message ? { message } : {}) });
  }

  count(name: string): number {
    return this.byMetric.get(name)?.size ?? 0;
  }

  /** metric name → key → entry, for /debug/push_status. */
  toJSON(): Record<string, Record<string, ProxyPushStatus>> {
    const out: Record<string, Record<string, ProxyPushStatus>> = {};
    for (const [name, m] of this.byMetric) out[name] = Object.fromEntries(m);
    return out;
  }
}

let last: PushStatus | undefined;

/** Istio LastPushStatus: the status the gauges report (the daemon's current snapshot). */
export function setLastPushStatus(s: PushStatus | undefined): void {
  last = s;
}

for (const [name, help] of Object.values(PUSH_STATUS_METRICS)) {
  defineGauge({
    name,
    help,
    collect() {
      this.set(last?.count(name) ?? 0);
    },
  });
}
