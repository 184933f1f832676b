// The DNS proxy's metrics (spec doc 2 §4.6; Istio's pkg/dns/client monitoring), on the agent's registry.
import { defineCounter, defineHistogram } from '../lib/metrics';

export const dnsRequests = defineCounter({
  name: 'dns_requests_total',
  help: 'Total number of DNS requests.',
});

export const dnsUpstreamRequests = defineCounter({
  name: 'dns_upstream_requests_total',
  help: 'Total number of DNS requests forwarded to upstream.',
});

export const dnsUpstreamFailures = defineCounter({
  name: 'dns_upstream_failures_total',
  help: 'Total number of DNS failures.',
});

export const dnsUpstreamRequestDuration = defineHistogram({
  name: 'dns_upstream_request_duration_seconds',
  help: 'Total time in seconds mesh takes to get DNS response from upstream.',
  buckets: [0.001, 0.005, 0.01, 0.1, 1, 5],
});
