// The xDS Node each simulated proxy sends (needs tsx: it builds the generated Node message).
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../../src/gen/envoy/config/core/v3/base_pb.ts';
import { GATEWAY_LABELS, GATEWAY_NAMESPACE, DOMAIN, namespaceOf, serviceName, workloadAddress } from './config.mjs';

/**
 * Node identity of client c: every `routerEvery`-th is an ingress gateway (with `routerLabels` besides its own),
 * the rest sidecars of app workloads.
 */
export function nodeFor(c, services, routerEvery, routerLabels = {}) {
  if (c % routerEvery === 0) {
    const ip = `10.255.${(c >> 8) & 255}.${c & 255}`;
    return create(NodeSchema, {
      id: `router~${ip}~ingressgateway-${c}.${GATEWAY_NAMESPACE}~${GATEWAY_NAMESPACE}.svc.${DOMAIN}`,
      cluster: 'ingressgateway',
      metadata: {
        NAMESPACE: GATEWAY_NAMESPACE,
        LABELS: { ...GATEWAY_LABELS, ...routerLabels },
        CLUSTER_ID: 'Orchestrator',
        ISTIO_VERSION: '1.26.0',
        INSTANCE_IPS: ip,
      },
    });
  }
  // Spread sidecars over the services; the IP and labels are those of one of the service's WorkloadEntries,
  // so the sidecar gets inbound config for it.
  const s = (c * 7919) % services;
  const k = c % 2;
  const ns = namespaceOf(s);
  const app = serviceName(s);
  const ip = workloadAddress(s, k);
  return create(NodeSchema, {
    id: `sidecar~${ip}~${app}-${c}.${ns}~${ns}.svc.${DOMAIN}`,
    cluster: `${app}.${ns}`,
    metadata: {
      NAMESPACE: ns,
      LABELS: { app, version: `v${k + 1}` },
      CLUSTER_ID: 'Orchestrator',
      ISTIO_VERSION: '1.26.0',
      INSTANCE_IPS: ip,
      SERVICE_ACCOUNT: app,
      WORKLOAD_NAME: `${app}-${k}`,
    },
  });
}
