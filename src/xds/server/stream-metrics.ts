// Istio's pkg/xds/monitoring.go: the metrics of the generic xDS stream code, which istiod's discovery server
// and the agent's SDS server (security/pkg/nodeagent/sds, built on pkg/xds) both record. Apart from the
// daemon's pilot/pkg/xds metrics (metrics.ts) so that the agent exports these and only these.
import type { Gauge } from 'prom-client';
import { defineCounter, defineGauge, defineHistogram } from '../../lib/metrics';
import { metricType, TYPE_URL } from '../../lib/xds/type-urls';

export const sendTime = defineHistogram({
  name: 'pilot_xds_send_time',
  help: 'Total time in seconds Pilot takes to send generated configuration.',
  buckets: [0.01, 0.1, 1, 3, 5, 10, 20, 30],
});

export const responseWriteTimeouts = defineCounter({
  name: 'pilot_xds_write_timeout',
  help: 'Pilot XDS response write timeouts.',
});

export const totalXdsInternalErrors = defineCounter({
  name: 'pilot_total_xds_internal_errors',
  help: 'Total number of internal XDS errors in pilot.',
});

export const expiredNonce = defineCounter<'type'>({
  name: 'pilot_xds_expired_nonce',
  help: 'Total number of XDS requests with an expired nonce.',
  labelNames: ['type'],
});

export const totalXdsRejects = defineCounter<'type'>({
  name: 'pilot_total_xds_rejects',
  help: 'Total number of XDS responses from pilot rejected by proxy.',
  labelNames: ['type'],
});

// Kept for compatibility, as in Istio: per node and gRPC error code, only ever incremented.
const rejectGauges: Readonly<Record<string, Gauge<'node' | 'err'>>> = {
  [TYPE_URL.cluster]: defineGauge<'node' | 'err'>({ name: 'pilot_xds_cds_reject', help: 'Pilot rejected CDS configs.', labelNames: ['node', 'err'] }),
  [TYPE_URL.endpoint]: defineGauge<'node' | 'err'>({ name: 'pilot_xds_eds_reject', help: 'Pilot rejected EDS.', labelNames: ['node', 'err'] }),
  [TYPE_URL.listener]: defineGauge<'node' | 'err'>({ name: 'pilot_xds_lds_reject', help: 'Pilot rejected LDS.', labelNames: ['node', 'err'] }),
  [TYPE_URL.route]: defineGauge<'node' | 'err'>({ name: 'pilot_xds_rds_reject', help: 'Pilot rejected RDS.', labelNames: ['node', 'err'] }),
};

/** A proxy rejected (NACKed) a response of `typeUrl`. `node` is the proxy ID, `err` the Go gRPC code name. */
export function incrementXdsRejects(typeUrl: string, node: string, err: string): void {
  totalXdsRejects.inc({ type: metricType(typeUrl) });
  rejectGauges[typeUrl]?.inc({ node, err });
}
