// The xDS server's metrics, with Istio's names, labels and buckets (pilot/pkg/xds/monitoring.go); those of
// pkg/xds/monitoring.go, which the agent's SDS server records too, are in stream-metrics.ts.
import { defineCounter, defineGauge, defineHistogram } from '../../lib/metrics';
import { metricType } from '../../lib/xds/type-urls';

export * from './stream-metrics';

export const xdsClients = defineGauge<'version'>({
  name: 'pilot_xds',
  help: 'Number of endpoints connected to this pilot using XDS.',
  labelNames: ['version'],
});

export const xdsPushes = defineCounter<'type'>({
  name: 'pilot_xds_pushes',
  help: 'Pilot build and send errors for lds, rds, cds and eds.',
  labelNames: ['type'],
});

export const configSizeBytes = defineHistogram<'type'>({
  name: 'pilot_xds_config_size_bytes',
  help: 'Distribution of configuration sizes pushed to clients',
  labelNames: ['type'],
  buckets: [1, 10000, 1000000, 4000000, 10000000, 40000000],
});

export const pushTime = defineHistogram<'type'>({
  name: 'pilot_xds_push_time',
  help: 'Total time in seconds Pilot takes to push lds, rds, cds and eds.',
  labelNames: ['type'],
  buckets: [0.01, 0.1, 0.5, 1, 3, 5, 10, 20, 30],
});

export const proxiesConvergeDelay = defineHistogram({
  name: 'pilot_proxy_convergence_time',
  help: 'Delay in seconds between config change and a proxy receiving all required configuration.',
  buckets: [0.1, 0.5, 1, 3, 5, 10, 20, 30],
});

export const proxiesQueueTime = defineHistogram({
  name: 'pilot_proxy_queue_time',
  help: 'Time in seconds, a proxy is in the push queue before being dequeued.',
  buckets: [0.1, 0.5, 1, 3, 5, 10, 20, 30],
});

export const debounceTime = defineHistogram({
  name: 'pilot_debounce_time',
  help: 'Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue (includes pushcontext_init_seconds).',
  buckets: [0.01, 0.1, 0.5, 1, 3, 5, 10, 20, 30],
});

export const pushContextInitTime = defineHistogram({
  name: 'pilot_pushcontext_init_seconds',
  help: 'Total time in seconds Pilot takes to init pushContext.',
  buckets: [0.01, 0.1, 0.5, 1, 3, 5],
});

/** `type`: config (a configuration event), eds (endpoints of a host), svc / svcdelete (a service changed / went away). */
export const inboundUpdates = defineCounter<'type'>({
  name: 'pilot_inbound_updates',
  help: 'Total number of updates received by pilot.',
  labelNames: ['type'],
});

export const pushTriggers = defineCounter<'type'>({
  name: 'pilot_push_triggers',
  help: 'Total number of times a push was triggered, labeled by reason for the push.',
  labelNames: ['type'],
});

/** A response was sent: Istio's recordPushTime (pilot_xds_pushes counts successful sends per type). */
export function recordPush(typeUrl: string, seconds: number): void {
  const type = metricType(typeUrl);
  pushTime.observe({ type }, seconds);
  xdsPushes.inc({ type });
}

/** A send failed for a reason other than the stream closing. */
export function recordSendError(typeUrl: string): void {
  xdsPushes.inc({ type: `${metricType(typeUrl)}_senderr` });
}

const clientsByVersion = new Map<string, number>();

export function recordXdsClients(version: string, delta: number): void {
  const n = (clientsByVersion.get(version) ?? 0) + delta;
  clientsByVersion.set(version, n);
  xdsClients.set({ version }, n);
}

export function recordPushTriggers(reasons: ReadonlyMap<string, number>): void {
  for (const [reason, n] of reasons) pushTriggers.inc({ type: reason }, n);
}
