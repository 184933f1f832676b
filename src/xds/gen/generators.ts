// The Generator<PushContext> implementations the ADS server calls, one per resource type and proxy
// kind, and generatorsFor(proxy) choosing them (Istio's `GENERATOR: grpc` metadata selects grpcgen).
import { create } from '@bufbuild/protobuf';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import { ClusterSchema, Cluster_DiscoveryType, Cluster_EdsClusterConfigSchema, Cluster_LbPolicy, Cluster_RingHashLbConfigSchema, type Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema } from '../../gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { TYPE_URL, type GenerateResult, type Generator, type PushRequest, type Resource, type WatchedResource } from '../types';
import { bareAdsConfigSource, buildSubsetKey, parseSubsetKey } from './common';
import {
  buildBlackHoleCluster,
  buildInboundCluster,
  buildInboundPassthroughCluster,
  buildOutboundClusters,
  buildPassthroughCluster,
  mergeTrafficPolicy,
  type ClusterBuildContext,
} from './clusters';
import { clusterLoadAssignment } from './endpoints';
import type { SecurityFilterBuilders } from './filters';
import { buildGatewayListeners, buildGrpcListeners, buildSidecarListeners } from './lds';
import { buildGatewayRouteConfiguration, buildGrpcRouteConfiguration, buildSidecarRouteConfiguration } from './rds';
import type { MetadataMatcherHook } from './route';

export interface GeneratorOptions {
  /** jwt_authn / rbac filter builders (security issue). */
  security?: SecurityFilterBuilders;
  /** `@request.auth.claims…` header matcher translation (claim-routing issue). */
  metadataMatcher?: MetadataMatcherHook;
}

function names(w: WatchedResource): string[] {
  return [...w.resourceNames];
}

/** Wildcard watches (delta wildcard plus names included) get everything; named watches only what they name. */
function filterByWatch(resources: Resource[], w: WatchedResource): Resource[] {
  if (w.wildcard) return resources;
  return resources.filter((r) => w.resourceNames.has(r.name));
}

// ---------------------------------------------------------------------------------------------
// CDS

export function buildClusters(proxy: Proxy, push: PushContext): Cluster[] {
  const ctx: ClusterBuildContext = { push, proxy, gateway: proxy.type === 'router' };
  const out: Cluster[] = [];
  const seen = new Set<string>();
  const add = (c: Cluster) => {
    if (seen.has(c.name)) return; // two services with one hostname (Istio pilot_duplicate_proxy_clusters): first wins
    seen.add(c.name);
    out.push(c);
  };
  for (const svc of push.servicesForProxy(proxy)) for (const p of svc.ports) for (const c of buildOutboundClusters(svc, p, ctx)) add(c);
  if (proxy.type === 'sidecar') {
    for (const t of push.serviceTargets(proxy)) if (t.port.protocol !== 'UDP') add(buildInboundCluster(t.service, t.port, t.targetPort, ctx));
    add(buildBlackHoleCluster(ctx));
    add(buildPassthroughCluster(ctx));
    add(buildInboundPassthroughCluster(ctx));
  } else {
    add(buildBlackHoleCluster(ctx));
  }
  return out;
}

export const cdsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    const resources = buildClusters(proxy, req.push).map((c) => ({ name: c.name, resource: anyPack(ClusterSchema, c) }));
    return { resources: filterByWatch(resources, watched) };
  },
};

// ---------------------------------------------------------------------------------------------
// EDS

/** The ClusterLoadAssignment of one cluster name; empty when the cluster is unknown (warming needs an answer). */
export function buildLoadAssignment(proxy: Proxy, push: PushContext, clusterName: string) {
  const o = push.options;
  const opts = { sendUnhealthy: o.sendUnhealthyEndpoints, drainingLabel: o.drainingLabel, requireIp: true };
  const key = parseSubsetKey(clusterName);
  if (!key || key.direction !== 'outbound') return create(ClusterLoadAssignmentSchema, { clusterName });
  const svc = push.serviceForHostname(proxy, key.hostname);
  const port = svc?.ports.find((p) => p.port === key.port);
  if (!svc || !port) return create(ClusterLoadAssignmentSchema, { clusterName });
  let labels: Readonly<Record<string, string>> | undefined;
  if (key.subset) {
    labels = push.subsetLabels(proxy, key.hostname, key.subset);
    // a subset no DestinationRule defines selects nothing, as in Istio
    if (labels === undefined) return create(ClusterLoadAssignmentSchema, { clusterName });
  }
  return clusterLoadAssignment(clusterName, push.endpoints(svc, port, labels), opts);
}

export const edsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    let requested = names(watched);
    // endpoint-only pushes resend just the clusters of the hosts that changed
    if (!req.full && req.edsUpdates.size > 0) requested = requested.filter((n) => req.edsUpdates.has(parseSubsetKey(n)?.hostname ?? ''));
    return {
      resources: requested.map((n) => ({ name: n, resource: anyPack(ClusterLoadAssignmentSchema, buildLoadAssignment(proxy, req.push, n)) })),
    };
  },
};

// ---------------------------------------------------------------------------------------------
// LDS / RDS for Envoy proxies

export function ldsGenerator(opts: GeneratorOptions = {}): Generator<PushContext> {
  return {
    generate(proxy, watched, req) {
      const listeners = proxy.type === 'router' ? buildGatewayListeners(proxy, req.push, opts) : buildSidecarListeners(proxy, req.push, opts);
      return { resources: filterByWatch(listeners.map((l) => ({ name: l.name, resource: anyPack(ListenerSchema, l) })), watched) };
    },
  };
}

export function rdsGenerator(opts: GeneratorOptions = {}): Generator<PushContext> {
  return {
    generate(proxy, watched, req) {
      const resources = names(watched).map((n) => {
        const rc = proxy.type === 'router' ? buildGatewayRouteConfiguration(proxy, req.push, n, opts) : buildSidecarRouteConfiguration(proxy, req.push, n, opts);
        return { name: n, resource: anyPack(RouteConfigurationSchema, rc) };
      });
      return { resources };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// proxyless gRPC (Istio grpcgen)

/**
 * gRPC clusters: EDS over ADS, ROUND_ROBIN or RING_HASH (the balancers grpc-js accepts), for exactly
 * the requested names (default and subset clusters). DNS services become LOGICAL_DNS with their one address.
 */
export function buildGrpcClusters(proxy: Proxy, push: PushContext, requested: readonly string[]): Cluster[] {
  const out: Cluster[] = [];
  for (const name of requested) {
    const key = parseSubsetKey(name);
    if (!key || key.direction !== 'outbound') continue;
    const svc = push.serviceForHostname(proxy, key.hostname);
    const port = svc?.ports.find((p) => p.port === key.port);
    const dr = svc ? push.destinationRule(proxy, key.hostname, svc) : undefined;
    const subset = key.subset ? dr?.subsets.find((s) => s.name === key.subset) : undefined;
    if (key.subset && !subset) continue;
    const c = create(ClusterSchema, { name });
    if (svc && port && (svc.resolution === 'DNS' || svc.resolution === 'DNSRoundRobin')) {
      const ep = push.endpoints(svc, port, subset?.labels)[0];
      if (!ep) continue;
      c.clusterDiscoveryType = { case: 'type', value: Cluster_DiscoveryType.LOGICAL_DNS };
      c.loadAssignment = clusterLoadAssignment(name, [ep], { sendUnhealthy: true, drainingLabel: '', requireIp: false });
    } else {
      c.clusterDiscoveryType = { case: 'type', value: Cluster_DiscoveryType.EDS };
      c.edsClusterConfig = create(Cluster_EdsClusterConfigSchema, { serviceName: name, edsConfig: bareAdsConfigSource() });
    }
    const policy = mergeTrafficPolicy(dr?.trafficPolicy, subset?.trafficPolicy, key.port);
    if (policy.loadBalancer?.consistentHash) {
      const ch = policy.loadBalancer.consistentHash;
      c.lbPolicy = Cluster_LbPolicy.RING_HASH;
      const min = ch.ringHash?.minimumRingSize ?? ch.minimumRingSize;
      c.lbConfig = { case: 'ringHashLbConfig', value: create(Cluster_RingHashLbConfigSchema, { minimumRingSize: BigInt(min && min > 0 ? min : 1024) }) };
    } else {
      c.lbPolicy = Cluster_LbPolicy.ROUND_ROBIN;
    }
    out.push(c);
  }
  return out;
}

export const grpcCdsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    let requested = names(watched);
    if (requested.length === 0) {
      // a wildcard CDS watch from a gRPC client: every default cluster it could route to
      requested = req.push.servicesForProxy(proxy).flatMap((s) => s.ports.map((p) => buildSubsetKey('outbound', '', s.hostname, p.port)));
    }
    return { resources: buildGrpcClusters(proxy, req.push, requested).map((c) => ({ name: c.name, resource: anyPack(ClusterSchema, c) })) };
  },
};

export const grpcLdsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    return { resources: buildGrpcListeners(proxy, req.push, names(watched)).map((l) => ({ name: l.name, resource: anyPack(ListenerSchema, l) })) };
  },
};

export function grpcRdsGenerator(opts: GeneratorOptions = {}): Generator<PushContext> {
  return {
    generate(proxy, watched, req) {
      const resources: Resource[] = [];
      for (const n of names(watched)) {
        const rc = buildGrpcRouteConfiguration(proxy, req.push, n, opts);
        if (rc) resources.push({ name: n, resource: anyPack(RouteConfigurationSchema, rc) });
      }
      return { resources };
    },
  };
}

export type GeneratorSet = Readonly<Record<string, Generator<PushContext>>>;

/** TYPE_URL → generator for this proxy: grpcgen for `GENERATOR: grpc`, Envoy generators otherwise. */
export function generatorsFor(proxy: Proxy, opts: GeneratorOptions = {}): GeneratorSet {
  if (proxy.proxyless) {
    return {
      [TYPE_URL.listener]: grpcLdsGenerator,
      [TYPE_URL.route]: grpcRdsGenerator(opts),
      [TYPE_URL.cluster]: grpcCdsGenerator,
      [TYPE_URL.endpoint]: edsGenerator,
    };
  }
  return {
    [TYPE_URL.cluster]: cdsGenerator,
    [TYPE_URL.endpoint]: edsGenerator,
    [TYPE_URL.listener]: ldsGenerator(opts),
    [TYPE_URL.route]: rdsGenerator(opts),
  };
}

export type { GenerateResult, PushRequest };
