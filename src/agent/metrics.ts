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
