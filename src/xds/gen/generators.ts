// The Generator<PushContext> implementations the ADS server calls, one per resource type and proxy
// kind, and generatorsFor(proxy) choosing them (Istio's `GENERATOR: grpc` metadata selects grpcgen).
import { create } from '@bufbuild/protobuf';
import type { Proxy, Service, ServicePort } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import {
  ClusterSchema,
  Cluster_DiscoveryType,
  Cluster_EdsClusterConfigSchema,
  Cluster_LbPolicy,
  Cluster_RingHashLbConfigSchema,
  type Cluster,
} from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema, type Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { anyPack } from '@bufbuild/protobuf/wkt';
import type { GenerateResult, Generator, PushRequest, Resource, WatchedResource } from '../types';
import { TYPE_URL } from '../../lib/xds/type-urls';
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
import { initKey, optionsKey, outboundClusterKey } from './reuse';
import type { SecurityFilterBuilders } from './filters';
import { buildGatewayListeners, buildGrpcListeners, buildSidecarOutboundListeners, buildVirtualInboundListener } from './lds';
import { buildGatewayRouteConfiguration, buildGrpcRouteConfiguration, packSidecarRouteConfiguration, routeConfigRest } from './rds';
import type { MetadataMatcherHook } from './route';
import { registerScope } from '../../lib/log';
import { ndsGenerator, type NameTableOptions } from './nds';
import { secretGenerator, type SecretGenOptions } from './sds';
import { usesVhds } from '../vhds';
import { vhdsGenerator, vhdsRouteConfiguration } from './vhds';

const log = registerScope('ads', 'ads debugging');

export interface GeneratorOptions {
  /** jwt_authn / rbac filter builders (security issue). */
  security?: SecurityFilterBuilders;
  /** `@request.auth.claims…` header matcher translation (claim-routing issue). */
  metadataMatcher?: MetadataMatcherHook;
  /** Name table (NDS) settings from the daemon's environment. */
  nameTable?: NameTableOptions;
  /** Where credentials (`kubernetes://…` SDS over ADS) are read and who may read them; none: not served. */
  secrets?: SecretGenOptions;
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

/** Two services with one hostname (Istio normalizeClusters): the first cluster of a name wins, the others are counted. */
function uniqueByName<T extends { name: string }>(items: readonly T[], push: PushContext, proxy: Proxy): T[] {
  const seen = new Set<string>();
  return items.filter((c) => {
    if (!seen.has(c.name)) return seen.add(c.name);
    push.addMetric('duplicateClusters', c.name, proxy.id, `Duplicate cluster ${c.name} found while pushing CDS`);
    return false;
  });
}

/** The proxy's outbound clusters (every visible service port), packed, reusing clusters whose inputs did not change since an earlier push. */
function packedOutboundClusters(proxy: Proxy, push: PushContext): Resource[] {
  const ctx: ClusterBuildContext = { push, proxy, gateway: proxy.type === 'router' };
  const out: Resource[] = [];
  for (const svc of push.servicesForProxy(proxy)) {
    const dr = push.destinationRule(proxy, svc.hostname, svc);
    for (const p of svc.ports) {
      // auto mTLS depends on the destination's PeerAuthentication mode (and, for passthrough, its endpoints)
      const mtls = [dr?.trafficPolicy, ...(dr?.subsets ?? []).map((s) => s.trafficPolicy)]
        .map((tp) => push.inferServiceMtlsMode(tp, svc, p))
        .join(',');
      // what the proxy lacks of Istio's Envoy build shapes its mTLS ALPN (capabilities.ts)
      const key = `${outboundClusterKey(svc, p.port, dr, push.options, ctx.gateway, () => push.endpoints(svc, p))}|${mtls}|${proxy.capabilities?.key ?? ''}`;
      out.push(...push.cache.get('cds', `outbound|${key}`, () => buildOutboundClusters(svc, p, ctx).map(packCluster)));
    }
  }
  return out;
}

const packCluster = (c: Cluster): Resource => ({ name: c.name, resource: anyPack(ClusterSchema, c) });

/**
 * Inbound and special clusters, packed: each is built once per push for every proxy with the same shared
 * key (the special ones) or the same service target (inbound), so their Resource objects (and hashes) are
 * shared too.
 */
function packedLocalClusters(proxy: Proxy, push: PushContext): Resource[] {
  const key = push.sharedKey(proxy);
  const ctx: ClusterBuildContext = { push, proxy, gateway: proxy.type === 'router' };
  if (proxy.type !== 'sidecar') return push.shared('cds', `local|${key}`, () => [packCluster(buildBlackHoleCluster(ctx))]);
  const out: Resource[] = [];
  for (const t of push.serviceTargets(proxy)) {
    if (t.port.protocol === 'UDP') continue;
    const k = `inbound|${key}|${t.service.namespace}/${t.service.hostname}|${t.port.port}|${t.port.name}|${t.port.protocol}|${t.targetPort}`;
    out.push(push.shared('cds', k, () => packCluster(buildInboundCluster(t.service, t.port, t.targetPort, ctx))));
  }
  out.push(
    ...push.shared('cds', `special|${key}`, () =>
      [buildBlackHoleCluster(ctx), buildPassthroughCluster(ctx), buildInboundPassthroughCluster(ctx)].map(packCluster),
    ),
  );
  return out;
}

export const cdsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    const push = req.push;
    // Outbound clusters are the bulk and the same for every proxy of a shared key: pack them once.
    const outbound = push.shared('cds', `outbound|${push.sharedKey(proxy)}`, () => {
      const list = uniqueByName(packedOutboundClusters(proxy, push), push, proxy);
      return { list, names: new Set(list.map((r) => r.name)) };
    });
    const local = packedLocalClusters(proxy, push).filter((r) => !outbound.names.has(r.name));
    const resources = local.length === 0 ? outbound.list : [...outbound.list, ...uniqueByName(local, push, proxy)];
    return { resources: filterByWatch(resources, watched) };
  },
};

// ---------------------------------------------------------------------------------------------
// EDS

/** What a proxy's load assignment of a cluster name is built from: the service and port the name resolves to, and the subset's labels. */
interface LoadAssignmentInputs {
  svc: Service;
  port: ServicePort;
  labels: Readonly<Record<string, string>> | undefined;
}

/** The inputs of a cluster name's load assignment for a proxy; undefined when it is empty (unknown cluster or subset). */
function loadAssignmentInputs(proxy: Proxy, push: PushContext, clusterName: string): LoadAssignmentInputs | undefined {
  const key = parseSubsetKey(clusterName);
  if (!key || key.direction !== 'outbound') return undefined;
  const svc = push.serviceForHostname(proxy, key.hostname);
  const port = svc?.ports.find((p) => p.port === key.port);
  if (!svc || !port) return undefined;
  let labels: Readonly<Record<string, string>> | undefined;
  if (key.subset) {
    labels = push.subsetLabels(proxy, key.hostname, key.subset);
    // a subset no DestinationRule defines selects nothing, as in Istio
    if (labels === undefined) return undefined;
  }
  return { svc, port, labels };
}

/** The ClusterLoadAssignment of one cluster name from its inputs; empty without (warming needs an answer). */
function loadAssignment(push: PushContext, clusterName: string, inputs: LoadAssignmentInputs | undefined) {
  if (!inputs) return create(ClusterLoadAssignmentSchema, { clusterName });
  const o = push.options;
  const opts = {
    sendUnhealthy: o.sendUnhealthyEndpoints,
    drainingLabel: o.drainingLabel,
    requireIp: true,
    telemetryLabel: o.enableTelemetryLabel && o.endpointTelemetryLabel,
  };
  const cla = clusterLoadAssignment(clusterName, push.endpoints(inputs.svc, inputs.port, inputs.labels), opts);
  if (cla.endpoints.length === 0) push.addMetric('edsNoInstances', clusterName);
  return cla;
}

/** The ClusterLoadAssignment of one cluster name for a proxy; empty when the cluster is unknown (warming needs an answer). */
export function buildLoadAssignment(proxy: Proxy, push: PushContext, clusterName: string) {
  return loadAssignment(push, clusterName, loadAssignmentInputs(proxy, push, clusterName));
}

/**
 * The packed load assignment of a cluster name for a proxy. Proxy kinds differ in which service a hostname
 * resolves to (visibility) and which subset labels apply (their namespace's DestinationRule), not in how
 * a resolved name is built: packed assignments are shared by every kind of proxy in a push, keyed by the
 * service object, the name and the labels (Istio's EndpointBuilder key: cluster name, service, subset
 * labels… and nothing of the proxy beyond what resolves them).
 */
export function packedLoadAssignment(proxy: Proxy, push: PushContext, clusterName: string): Resource {
  const inputs = loadAssignmentInputs(proxy, push, clusterName);
  const pack = (): Resource => ({ name: clusterName, resource: anyPack(ClusterLoadAssignmentSchema, loadAssignment(push, clusterName, inputs)) });
  if (!inputs) return push.shared('eds', `cla-empty|${clusterName}`, pack);
  const build = (): Resource => {
    const cla = loadAssignment(push, clusterName, inputs);
    const r = { name: clusterName, resource: anyPack(ClusterLoadAssignmentSchema, cla) };
    if (cla.endpoints.length === 0) EMPTY.add(r);
    return r;
  };
  const byName = assignmentsOf(push, inputs.svc);
  const labels = inputs.labels ? initKey(Object.entries(inputs.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : '';
  const key = `${clusterName}|${labels}|${inputs.port.name}|${inputs.svc.ports.length}`;
  let r = byName.get(key);
  if (!r) byName.set(key, (r = build()));
  // the push status of every push lists the empty ones, built in it or not (Istio's edsNoInstances)
  else if (EMPTY.has(r)) push.addMetric('edsNoInstances', clusterName);
  return r;
}

/**
 * Packed load assignments across pushes (Istio keeps its EDS cache entries until a change names their service):
 * keyed by what they are built from — the snapshot's options and the service's endpoint list (objects a push
 * context takes over unchanged from the one before: PushContext.update, withRegistryUpdates), then the name,
 * the subset labels and what of the service picks a port's endpoints (the port's name, how many ports) — so a
 * push whose change left a service's endpoints alone (a DestinationRule, another service's endpoints) packs none
 * of its load assignments again; a changed list is a new object, so a stale entry is never found. Without the
 * xDS cache (PILOT_ENABLE_XDS_CACHE=false), one push's only.
 */
const ACROSS_PUSHES = new WeakMap<object, WeakMap<readonly unknown[], Map<string, Resource>>>();
/** Load assignments without endpoints, reported in the status of each push that serves them. */
const EMPTY = new WeakSet<Resource>();

function assignmentsOf(push: PushContext, svc: Service): Map<string, Resource> {
  const byEndpoints = push.cache.settings.enabled
    ? (ACROSS_PUSHES.get(push.options) ?? ACROSS_PUSHES.set(push.options, new WeakMap()).get(push.options)!)
    : push.shared('eds', 'cla-by-endpoints', () => new WeakMap<readonly unknown[], Map<string, Resource>>());
  const endpoints = push.allEndpoints(svc);
  let byName = byEndpoints.get(endpoints);
  if (!byName) byEndpoints.set(endpoints, (byName = new Map()));
  return byName;
}

export const edsGenerator: Generator<PushContext> = {
  generate(proxy, watched, req) {
    let requested = names(watched);
    // endpoint-only pushes resend just the clusters of the hosts that changed
    if (!req.full && req.edsUpdates.size > 0) requested = requested.filter((n) => req.edsUpdates.has(parseSubsetKey(n)?.hostname ?? ''));
    // One cache entry per kind of proxy (sharedKey) and push, holding its load assignments by cluster name: a
    // proxy's lookups are then by the names it watches, with no key built per proxy and cluster.
    const byName = req.push.shared('eds', `cla|${req.push.sharedKey(proxy)}`, () => new Map<string, Resource>());
    return {
      resources: requested.map((n) => {
        let r = byName.get(n);
        if (!r) byName.set(n, (r = packedLoadAssignment(proxy, req.push, n)));
        return r;
      }),
    };
  },
};

// ---------------------------------------------------------------------------------------------
// LDS / RDS for Envoy proxies

/** The proxy's service targets, for reuse keys of its inbound config. */
function targetsKey(proxy: Proxy, push: PushContext): string {
  return push
    .serviceTargets(proxy)
    .map((t) => `${t.service.namespace}/${t.service.hostname}/${t.port.port}/${t.port.name}/${t.port.protocol}/${t.targetPort}`)
    .join(',');
}

/**
 * The virtual inbound listener, reused across pushes while its inputs (service targets, policies, options)
 * stay the same. With a RequestAuthentication selected it is always rebuilt: its filter carries key sets
 * fetched outside the config snapshot.
 */
function packedVirtualInbound(proxy: Proxy, push: PushContext, opts: GeneratorOptions, pack: (l: Listener) => Resource): Resource {
  const build = () => pack(buildVirtualInboundListener(proxy, push, opts));
  if (push.requestAuthentications(proxy).length > 0) return build();
  const peer = push.mergedPeerAuthentication(proxy);
  const policies = push.authorizationPolicies(proxy).map((c) => [c.kind, c.meta.namespace, c.meta.name, c.spec]);
  const mtls = [peer.mode, ...[...peer.perPort].sort(([a], [b]) => a - b)];
  const key = `${push.sharedKey(proxy)}|${targetsKey(proxy, push)}|${optionsKey(push.options)}|${initKey(policies)}|${initKey(mtls)}`;
  return push.cache.get('lds', `inbound|${key}`, build);
}

export function ldsGenerator(opts: GeneratorOptions = {}): Generator<PushContext> {
  // A gateway with nothing to listen on still reports ready; say why once, and again when the reason changes.
  const silentGateways = new WeakMap<Proxy, string>();
  return {
    generate(proxy, watched, req) {
      const push = req.push;
      const pack = (l: Listener): Resource => ({ name: l.name, resource: anyPack(ListenerSchema, l) });
      let resources: Resource[];
      if (proxy.type === 'router') {
        resources = push.shared('lds', push.sharedKey(proxy), () => buildGatewayListeners(proxy, push, opts).map(pack));
        if (resources.length === 0) {
          const why = push.explainNoGatewayListeners(proxy);
          if (silentGateways.get(proxy) !== why) log.warn(why);
          silentGateways.set(proxy, why);
        } else silentGateways.delete(proxy);
      } else {
        // The virtual inbound listener is the proxy's own; the outbound ones are shared by key.
        const shared = push.shared('lds', push.sharedKey(proxy), () => buildSidecarOutboundListeners(proxy, push, opts).map(pack));
        resources = [shared[0]!, packedVirtualInbound(proxy, push, opts, pack), ...shared.slice(1)];
      }
      return { resources: filterByWatch(resources, watched) };
    },
  };
}

export function rdsGenerator(opts: GeneratorOptions = {}): Generator<PushContext> {
  return {
    generate(proxy, watched, req) {
      const push = req.push;
      if (usesVhds(proxy)) {
        // Virtual hosts go out over VHDS: the route configuration is only its other fields.
        const resources = names(watched).map((n) =>
          push.shared('rds', `rc-vhds|${push.sharedKey(proxy)}|${n}`, () => ({
            name: n,
            resource: anyPack(RouteConfigurationSchema, vhdsRouteConfiguration(n, routeConfigRest(proxy, push, n))),
          })),
        );
        return { resources };
      }
      const resources = names(watched).map((n) =>
        push.shared('rds', `rc|${push.sharedKey(proxy)}|${n}`, () => {
          if (proxy.type !== 'router') return { name: n, resource: packSidecarRouteConfiguration(proxy, push, n, opts) };
          return { name: n, resource: anyPack(RouteConfigurationSchema, buildGatewayRouteConfiguration(proxy, push, n, opts)) };
        }),
      );
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
      c.lbConfig = {
        case: 'ringHashLbConfig',
        value: create(Cluster_RingHashLbConfigSchema, { minimumRingSize: BigInt(min && min > 0 ? min : 1024) }),
      };
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
    [TYPE_URL.nameTable]: ndsGenerator(opts.nameTable),
    ...(opts.secrets ? { [TYPE_URL.secret]: secretGenerator(opts.secrets) } : {}),
    [TYPE_URL.virtualHost]: vhdsGenerator(opts),
  };
}

export type { GenerateResult, PushRequest };
