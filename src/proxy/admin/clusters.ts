// /clusters (Envoy's `cluster::host::stat::value` text and `?format=json` envoy.admin.v3.Clusters) and
// /listeners (`name::address` text and envoy.admin.v3.Listeners JSON).
import { create, toJson, type JsonValue, type Registry } from '@bufbuild/protobuf';
import { ClustersSchema, type HostStatus } from '../../gen/envoy/admin/v3/clusters_pb';
import { SimpleMetric_Type } from '../../gen/envoy/admin/v3/metrics_pb';
import { ListenersSchema } from '../../gen/envoy/admin/v3/listeners_pb';
import { HealthStatus } from '../../gen/envoy/config/core/v3/health_check_pb';
import type { ListenerManager } from '../listener/manager';
import type { UpstreamCluster } from '../upstream/cluster';
import type { Host } from '../upstream/host';
import { joinHostPort } from '../../lib/hostport';

function hostStats(h: Host): Array<[string, number]> {
  const s = h.stats;
  return [
    ['cx_active', s.cxActive],
    ['cx_connect_fail', s.cxConnectFail],
    ['cx_total', s.cxTotal],
    ['rq_active', s.rqActive],
    ['rq_error', s.rqError],
    ['rq_success', s.rqSuccess],
    ['rq_timeout', s.rqTimeout],
    ['rq_total', s.rqTotal],
  ];
}

export function clustersText(clusters: readonly UpstreamCluster[]): string {
  let out = '';
  for (const c of clusters) {
    const n = c.name;
    const t = c.thresholds;
    out += `${n}::observability_name::${c.proto.altStatName || n}\n`;
    if (c.outlier) {
      out += `${n}::outlier::success_rate_average::-1\n${n}::outlier::success_rate_ejection_threshold::-1\n`;
      out += `${n}::outlier::local_origin_success_rate_average::-1\n${n}::outlier::local_origin_success_rate_ejection_threshold::-1\n`;
    }
    for (const p of ['default_priority', 'high_priority']) {
      out += `${n}::${p}::max_connections::${t.maxConnections}\n${n}::${p}::max_pending_requests::${t.maxPendingRequests}\n`;
      out += `${n}::${p}::max_requests::${t.maxRequests}\n${n}::${p}::max_retries::${t.maxRetries}\n`;
    }
    out += `${n}::added_via_api::${c.addedViaApi}\n`;
    if (c.type === 'EDS') out += `${n}::eds_service_name::${c.edsServiceName}\n`;
    for (const h of c.hosts) {
      const k = `${n}::${h.key}`;
      for (const [s, v] of hostStats(h)) out += `${k}::${s}::${v}\n`;
      out += `${k}::hostname::${h.hostname}\n`;
      out += `${k}::health_flags::${h.healthFlags()}\n`;
      out += `${k}::weight::${h.weight}\n`;
      out += `${k}::region::${h.locality.region}\n${k}::zone::${h.locality.zone}\n${k}::sub_zone::${h.locality.subZone}\n`;
      out += `${k}::canary::false\n${k}::priority::${h.priority}\n`;
      out += `${k}::success_rate::-1\n${k}::local_origin_success_rate::-1\n`;
    }
  }
  return out;
}

/** Envoy reports hosts EDS left UNKNOWN as HEALTHY (HostImpl::edsHealthStatus). */
const EDS_HEALTH: Record<string, HealthStatus> = {
  unknown: HealthStatus.HEALTHY,
  healthy: HealthStatus.HEALTHY,
  unhealthy: HealthStatus.UNHEALTHY,
  draining: HealthStatus.DRAINING,
  timeout: HealthStatus.TIMEOUT,
  degraded: HealthStatus.DEGRADED,
};

export function clustersJson(clusters: readonly UpstreamCluster[], registry: Registry): JsonValue {
  const msg = create(ClustersSchema, {
    clusterStatuses: clusters.map((c) => ({
      name: c.name,
      addedViaApi: c.addedViaApi,
      observabilityName: c.proto.altStatName || c.name,
      ...(c.type === 'EDS' ? { edsServiceName: c.edsServiceName } : {}),
      ...(c.proto.circuitBreakers ? { circuitBreakers: c.proto.circuitBreakers } : {}),
      hostStatuses: c.hosts.map(
        (h) =>
          ({
            address: h.pipe
              ? { address: { case: 'pipe', value: { path: h.pipe } } }
              : { address: { case: 'socketAddress', value: { address: h.address, portSpecifier: { case: 'portValue', value: h.port } } } },
            stats: hostStats(h).map(([name, value]) => ({
              name,
              value: BigInt(value),
              type: name.endsWith('active') ? SimpleMetric_Type.GAUGE : SimpleMetric_Type.COUNTER,
            })),
            healthStatus: {
              edsHealthStatus: EDS_HEALTH[h.health] ?? HealthStatus.UNKNOWN,
              failedOutlierCheck: h.ejected,
              pendingDynamicRemoval: h.health === 'draining',
            },
            weight: h.weight,
            hostname: h.hostname,
            priority: h.priority,
            locality: h.locality,
          }) as unknown as HostStatus,
      ),
    })),
  });
  return toJson(ClustersSchema, msg, { registry, useProtoFieldName: true });
}

export function listenersText(lm: ListenerManager): string {
  let out = '';
  for (const l of lm.list()) {
    const a = l.runtime.address;
    const addr = a.pipe ?? joinHostPort(a.host, l.boundPort ?? a.port);
    out += `${l.name}::${addr}\n`;
  }
  return out;
}

export function listenersJson(lm: ListenerManager, registry: Registry): JsonValue {
  const msg = create(ListenersSchema, {
    listenerStatuses: lm.list().map((l) => {
      const a = l.runtime.address;
      return {
        name: l.name,
        localAddress: a.pipe
          ? { address: { case: 'pipe' as const, value: { path: a.pipe } } }
          : {
              address: {
                case: 'socketAddress' as const,
                value: { address: a.host, portSpecifier: { case: 'portValue' as const, value: l.boundPort ?? a.port } },
              },
            },
      };
    }),
  });
  return toJson(ListenersSchema, msg, { registry, useProtoFieldName: true });
}
