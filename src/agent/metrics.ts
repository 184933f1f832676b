// The agent's own metrics (spec doc 2 §4.6), on the process registry that the status server merges with the
// proxy's into /stats/prometheus.
import { defineCounter, defineGauge } from '../lib/metrics';

/** `type` of a terminated stream: an expected end (cancelled, daemon restart) or an error. */
export type DisconnectionType = 'cancelled' | 'error';

export const meshdConnectionFailures = defineCounter({
  name: 'meshd_connection_failures',
  help: 'The total number of connection failures to meshd',
});

export const meshdConnectionTerminations = defineCounter<'type'>({
  name: 'meshd_connection_terminations',
  help: 'The total number of connection errors to meshd',
  labelNames: ['type'],
});

export const proxyConnectionTerminations = defineCounter<'type'>({
  name: 'proxy_connection_terminations',
  help: 'The total number of connection errors from the proxy',
  labelNames: ['type'],
});

export const xdsProxyRequests = defineCounter({
  name: 'xds_proxy_requests',
  help: 'The total number of Xds Proxy Requests',
});

export const xdsProxyResponses = defineCounter({
  name: 'xds_proxy_responses',
  help: 'The total number of Xds Proxy Responses',
});

export const startupDuration = defineGauge({
  name: 'startup_duration_seconds',
  help: 'The time from the process starting to being marked ready.',
});

export const scrapesTotal = defineCounter({
  name: 'scrapes_total',
  help: 'The total number of scrapes.',
});

/** `type`: envoy, application or agent (Istio's names; `envoy` is the data-plane proxy). */
export const scrapeFailures = defineCounter<'type'>({
  name: 'scrape_failures_total',
  help: 'The total number of failed scrapes.',
  labelNames: ['type'],
});

// Workload certificates (Istio's security/pkg/nodeagent/cache monitoring). `request_type` is `csr` for calls
// to the certificate service.
export const outgoingLatency = defineCounter<'request_type'>({
  name: 'outgoing_latency',
  help: 'The latency of outgoing requests (e.g. to a token exchange server, CA, etc.) in milliseconds.',
  labelNames: ['request_type'],
});

export const numOutgoingRequests = defineCounter<'request_type'>({
  name: 'num_outgoing_requests',
  help: 'Number of total outgoing requests (e.g. to a token exchange server, CA, etc.)',
  labelNames: ['request_type'],
});

export const numFailedOutgoingRequests = defineCounter<'request_type'>({
  name: 'num_failed_outgoing_requests',
  help: 'Number of failed outgoing requests (e.g. to a token exchange server, CA, etc.)',
  labelNames: ['request_type'],
});

export const numOutgoingRetries = defineCounter<'request_type'>({
  name: 'num_outgoing_retries',
  help: 'Number of outgoing retry requests (e.g. to a token exchange server, CA, etc.)',
  labelNames: ['request_type'],
});

export const numFileWatcherFailures = defineCounter({
  name: 'num_file_watcher_failures_total',
  help: 'Number of times file watcher failed to add watchers',
});

export const numFileSecretFailures = defineCounter({
  name: 'num_file_secret_failures_total',
  help: 'Number of times secret generation failed for files',
});

let certExpirySource: (() => number | undefined) | undefined;

/** Where cert_expiry_seconds{resource_name="default"} reads the served certificate's expiry (ms since the epoch). */
export function setCertExpirySource(source: (() => number | undefined) | undefined): void {
  certExpirySource = source;
}

/** Computed at scrape time from the certificate being served (a derived gauge in Istio). */
export const certExpirySeconds = defineGauge<'resource_name'>({
  name: 'cert_expiry_seconds',
  help: 'The time remaining, in seconds, before the certificate chain will expire. A negative value indicates the cert is expired.',
  labelNames: ['resource_name'],
  collect() {
    const expiresAt = certExpirySource?.();
    if (expiresAt === undefined) this.reset();
    else this.set({ resource_name: 'default' }, (expiresAt - Date.now()) / 1000);
  },
});
