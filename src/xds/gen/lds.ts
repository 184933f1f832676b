// Listeners: gateways (one `0.0.0.0_<port>` listener per Gateway server port, Istio
// buildGatewayListeners), sidecars (virtualOutbound 15001, virtualInbound 15006 and per-port outbound
// listeners) and proxyless gRPC clients (api_listeners `<host>:<port>`, Istio grpcgen/lds.go).
import { supports } from '../../discovery/capabilities';
import { create } from '@bufbuild/protobuf';
import { hostMatches, isIp } from '../../discovery/host';
import { autoAddressForProxy } from '../../discovery/auto-allocate';
import type { Proxy, Service } from '../../discovery/model';
import type { PushContext, ServiceTarget } from '../../discovery/push-context';
import { isHttpProtocol, isHttpOrSniffed, parseProtocol } from '../../discovery/registry/protocol';
import { TrafficDirection } from '../../gen/envoy/config/core/v3/base_pb';
import { ListenerSchema, type Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { FilterChainSchema, type FilterChain } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { HttpConnectionManagerSchema } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import type { GatewayServer } from '../../discovery/push/gateway';
import { isHttpsTerminating } from '../../discovery/push/gateway';
import {
  bareAdsConfigSource,
  BLACKHOLE_CLUSTER,
  buildSubsetKey,
  durationMs,
  INBOUND_PASSTHROUGH_CLUSTER,
  pack,
  PASSTHROUGH_CLUSTER,
  VIRTUAL_INBOUND_LISTENER,
  VIRTUAL_OUTBOUND_LISTENER,
  WK,
} from './common';
import {
  faultFilter,
  hcmFilter,
  httpConnectionManager,
  httpInspector,
  originalDst,
  originalSrc,
  routerFilter,
  tcpSecurityFilters,
  tlsInspector,
  type SecurityFilterBuilders,
  type WeightedDestination,
} from './filters';
import { defaultInboundRoute, destinationCluster } from './route';
import { splitHostPort } from './rds';
import { buildInboundTls, downstreamTransportSocket, tlsTransportSocket } from './tls';
import { filterChainMatchOptions, inboundListenerFilters, type ListenerProtocol } from './inbound-mtls';
import { modeForPort, type MutualTlsMode } from '../../discovery/push/peer-authentication';
import { listenerAccessLogs, telemetryTcpFilters } from './telemetry-chains';
import { metadataExchangeNetworkFilters } from './telemetry-filters';

export interface ListenerBuildOptions {
  security?: SecurityFilterBuilders;
}

function socketAddress(address: string, port: number) {
  return { address: { case: 'socketAddress' as const, value: { address, portSpecifier: { case: 'portValue' as const, value: port } } } };
}

// ---------------------------------------------------------------------------------------------
// gateways

function tcpDestinations(
  push: PushContext,
  proxy: Proxy,
  routes: Array<{ destination: { host: string; subset?: string; port?: { number?: number } }; weight?: number }>,
  port: number,
): WeightedDestination[] {
  return routes
    .filter((r) => routes.length === 1 || (r.weight ?? 0) > 0)
    .map((r) => ({ cluster: destinationCluster(r.destination, push.serviceForHostname(proxy, r.destination.host), port), weight: r.weight ?? 100 }));
}

function gatewayChains(proxy: Proxy, push: PushContext, listenerName: string, servers: GatewayServer[], opts: ListenerBuildOptions): FilterChain[] {
  const chains: FilterChain[] = [];
  const first = servers[0]!;
  // Every TCP chain of a gateway (TLS passthrough, TCP, TLS terminated to TCP) gets the authz and stats
  // filters and access logs; ISTIO_MUTUAL TCP servers exchange metadata first.
  const tcpFilters = (dests: WeightedDestination[], mx = false) =>
    telemetryTcpFilters(proxy, push, 'gateway', dests[0]!.cluster, dests, {
      mx,
      security: tcpSecurityFilters(proxy, push, 'gateway', opts.security),
      accessLog: true,
    });
  if (first.routeName && !first.server.tls) {
    // plain HTTP servers of a port share one chain and the route `http.<port>`
    const hcm = httpConnectionManager(proxy, push, {
      statPrefix: `outbound_${listenerName}`,
      cls: 'gateway',
      rds: first.routeName,
      ...(opts.security ? { security: opts.security } : {}),
    });
    return [create(FilterChainSchema, { filters: [hcmFilter(hcm)] })];
  }
  const sniSeen = new Set<string>();
  for (const gs of servers) {
    const s = gs.server;
    const sni = gs.hosts.map((h) => h.host).filter((h) => h !== '*');
    if (isHttpsTerminating(s) && gs.routeName) {
      const hcm = httpConnectionManager(proxy, push, {
        statPrefix: s.name || `outbound_${listenerName}`,
        cls: 'gateway',
        rds: gs.routeName,
        ...(opts.security ? { security: opts.security } : {}),
      });
      chains.push(
        create(FilterChainSchema, {
          filterChainMatch: { serverNames: sni },
          filters: [hcmFilter(hcm)],
          transportSocket: downstreamTransportSocket(s.tls!, true),
        }),
      );
      continue;
    }
    const vss = push
      .virtualServicesForGateway(proxy.namespace, gs.gatewayName)
      .filter((v) => v.hosts.some((vh) => gs.hosts.some((h) => (h.namespace === '*' || h.namespace === v.namespace) && hostMatches(vh, h.host))));
    const matchesServer = (m: { port?: number; gateways?: string[] }) =>
      (!m.port || m.port === s.port.number) && (!m.gateways || m.gateways.length === 0 || m.gateways.includes(gs.gatewayName));
    if (s.tls && (s.tls.mode === 'PASSTHROUGH' || s.tls.mode === 'AUTO_PASSTHROUGH')) {
      for (const v of vss) {
        for (const t of v.spec.tls ?? []) {
          if (!t.route || t.route.length === 0) continue;
          for (const m of t.match) {
            if (!matchesServer(m)) continue;
            const names = m.sniHosts.filter((h) => !sniSeen.has(h));
            if (names.length === 0) continue; // Envoy rejects two chains with the same SNI match
            for (const n of names) sniSeen.add(n);
            const dests = tcpDestinations(push, proxy, t.route, s.port.number);
            chains.push(create(FilterChainSchema, { filterChainMatch: { serverNames: names }, filters: tcpFilters(dests) }));
          }
        }
      }
      continue;
    }
    // TCP, or TLS terminated then forwarded as TCP
    for (const v of vss) {
      const tcp = (v.spec.tcp ?? []).find((r) => r.route && r.route.length > 0 && (!r.match || r.match.length === 0 || r.match.some(matchesServer)));
      if (!tcp) continue;
      const dests = tcpDestinations(push, proxy, tcp.route!, s.port.number);
      chains.push(
        create(FilterChainSchema, {
          ...(s.tls ? { filterChainMatch: { serverNames: sni }, transportSocket: downstreamTransportSocket(s.tls, false) } : {}),
          filters: tcpFilters(dests, s.tls?.mode === 'ISTIO_MUTUAL'),
        }),
      );
      break;
    }
  }
  return chains;
}

export function buildGatewayListeners(proxy: Proxy, push: PushContext, opts: ListenerBuildOptions = {}): Listener[] {
  const out: Listener[] = [];
  for (const gp of push.mergedGateway(proxy).ports) {
    const bind = gp.bind ?? '0.0.0.0';
    const name = `${bind}_${gp.port}`;
    const chains = gatewayChains(proxy, push, name, gp.servers, opts);
    if (chains.length === 0) continue; // Istio omits listeners without filter chains
    const needsTlsInspector = chains.some((c) => (c.filterChainMatch?.serverNames.length ?? 0) > 0 || c.transportSocket !== undefined);
    out.push(
      create(ListenerSchema, {
        name,
        address: socketAddress(bind, gp.port),
        filterChains: chains,
        trafficDirection: TrafficDirection.OUTBOUND,
        listenerFilters: needsTlsInspector ? [tlsInspector()] : [],
        accessLog: listenerAccessLogs(proxy, push, 'gateway'),
      }),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// sidecars

/** TPROXY delivers connections still addressed to their destination: the sockets must be transparent (Istio). */
function transparent(proxy: Proxy): { transparent?: boolean } {
  return proxy.metadata.interceptionMode === 'TPROXY' ? { transparent: true } : {};
}

function virtualOutbound(push: PushContext, proxy: Proxy): Listener {
  const port = push.options.proxyListenPort;
  const registryOnly = push.sidecarScope(proxy).outboundTrafficPolicy === 'REGISTRY_ONLY';
  const catchall = registryOnly ? BLACKHOLE_CLUSTER : PASSTHROUGH_CLUSTER;
  return create(ListenerSchema, {
    name: VIRTUAL_OUTBOUND_LISTENER,
    address: socketAddress('0.0.0.0', port),
    ...transparent(proxy),
    useOriginalDst: true,
    trafficDirection: TrafficDirection.OUTBOUND,
    filterChains: [
      // connections straight to 15001 (not redirected) would loop: black-hole them
      create(FilterChainSchema, {
        name: 'virtualOutbound-blackhole',
        filterChainMatch: { destinationPort: port },
        filters: telemetryTcpFilters(proxy, push, 'sidecarOutbound', BLACKHOLE_CLUSTER, [{ cluster: BLACKHOLE_CLUSTER, weight: 100 }]),
      }),
      create(FilterChainSchema, {
        name: 'virtualOutbound-catchall-tcp',
        filters: telemetryTcpFilters(proxy, push, 'sidecarOutbound', catchall, [{ cluster: catchall, weight: 100 }], { accessLog: true }),
      }),
    ],
    accessLog: listenerAccessLogs(proxy, push, 'sidecarOutbound'),
  });
}

function inboundRouteConfig(cluster: string, servicePort: number, operation: string) {
  return {
    name: cluster,
    validateClusters: false,
    virtualHosts: [{ name: `inbound|http|${servicePort}`, domains: ['*'], routes: [defaultInboundRoute(cluster, operation)] }],
  };
}

/** Istio inboundChainConfig: one port of the workload (or the passthrough, port 0) to split into chains. */
interface InboundChainConfig {
  /** Workload port matched (destination_port); 0 for the passthrough chains. */
  targetPort: number;
  /** Service port (route vhost name and trace operation). */
  servicePort: number;
  hostname: string;
  cluster: string;
  protocol: ListenerProtocol;
  passthrough: boolean;
}

function listenerProtocol(p: Service['ports'][number]['protocol']): ListenerProtocol {
  if (isHttpProtocol(p)) return 'HTTP';
  return p === 'UnsupportedProtocol' ? 'AUTO' : 'TCP';
}

/** Istio inboundChainForOpts: the chains of one port, one per match option, TLS from the port's mTLS mode. */
function inboundChains(push: PushContext, proxy: Proxy, cc: InboundChainConfig, mode: MutualTlsMode, opts: ListenerBuildOptions): FilterChain[] {
  const tlsOpts = {
    trustDomains: [push.options.trustDomain],
    // a proxy without the exchange filter (upstream Envoy) must not agree to istio-peer-exchange: its peer would
    // send exchange bytes it passes to the application
    metadataExchange: push.options.metadataExchange && supports(proxy.capabilities, 'metadataExchange'),
    disableMxAlpn: push.options.disableMxAlpn,
  };
  const httpTls = buildInboundTls(mode, false, tlsOpts);
  const tcpTls = buildInboundTls(mode, true, tlsOpts);
  const name = (protocol: 'HTTP' | 'TCP') =>
    cc.passthrough ? (protocol === 'HTTP' ? 'virtualInbound-catchall-http' : VIRTUAL_INBOUND_LISTENER) : `0.0.0.0_${cc.targetPort}`;
  return filterChainMatchOptions(mode, cc.protocol, push.options.http10).map((o) => {
    const filters =
      o.protocol === 'HTTP'
        ? [
            ...metadataExchangeNetworkFilters(proxy, push),
            hcmFilter(
              httpConnectionManager(proxy, push, {
                statPrefix: cc.passthrough ? cc.cluster : `inbound_0.0.0.0_${cc.targetPort}`,
                cls: 'sidecarInbound',
                routeConfig: inboundRouteConfig(cc.cluster, cc.servicePort, `${cc.hostname}:${cc.servicePort}/*`),
                ...(opts.security ? { security: opts.security } : {}),
              }),
            ),
          ]
        : telemetryTcpFilters(proxy, push, 'sidecarInbound', cc.cluster, [{ cluster: cc.cluster, weight: 100 }], {
            mx: true,
            security: tcpSecurityFilters(proxy, push, 'sidecarInbound', opts.security),
            accessLog: true,
          });
    const tls = o.tls ? (o.protocol === 'HTTP' ? httpTls : tcpTls) : undefined;
    return create(FilterChainSchema, {
      name: name(o.protocol),
      filterChainMatch: {
        ...(cc.targetPort > 0 ? { destinationPort: cc.targetPort } : {}),
        transportProtocol: o.transportProtocol,
        applicationProtocols: [...o.applicationProtocols],
      },
      filters,
      ...(tls ? { transportSocket: tlsTransportSocket(tls) } : {}),
    });
  });
}

/**
 * Istio buildInboundListeners/inboundVirtualListener: the blackhole chain for 15006 itself, the passthrough
 * chains (for the workload's mode, plus one set per port-level PeerAuthentication port no service covers),
 * then each service target port split by its PeerAuthentication mode. Listener filters follow the chains.
 */
function virtualInbound(push: PushContext, proxy: Proxy, opts: ListenerBuildOptions): Listener {
  const port = push.options.proxyInboundListenPort;
  const peer = push.mergedPeerAuthentication(proxy);
  const chains: FilterChain[] = [
    create(FilterChainSchema, {
      name: 'virtualInbound-blackhole',
      filterChainMatch: { destinationPort: port },
      filters: telemetryTcpFilters(proxy, push, 'sidecarInbound', BLACKHOLE_CLUSTER, [{ cluster: BLACKHOLE_CLUSTER, weight: 100 }], { mx: true }),
    }),
  ];
  // First service per target port wins (Istio uses the oldest service on a conflict).
  const targets = new Map<number, ServiceTarget>();
  for (const t of push.serviceTargets(proxy)) {
    if (t.port.protocol === 'UDP') continue;
    const old = targets.get(t.targetPort);
    if (old) {
      // Istio reportInboundConflict: only two services with different protocols on one pod port are a real conflict
      if (old.port.protocol !== t.port.protocol && old.service.hostname !== t.service.hostname) {
        push.addMetric(
          'conflictInbound',
          proxy.id,
          proxy.id,
          `Conflicting inbound listener:${t.targetPort}. existing: ${old.service.hostname}, incoming: ${t.service.hostname}`,
        );
      }
      continue;
    }
    targets.set(t.targetPort, t);
  }
  const passthroughPorts = [0, ...[...peer.perPort.keys()].filter((p) => !targets.has(p)).sort((a, b) => a - b)];
  for (const p of passthroughPorts) {
    const cc: InboundChainConfig = {
      targetPort: p,
      servicePort: 0,
      hostname: '',
      cluster: INBOUND_PASSTHROUGH_CLUSTER,
      protocol: 'AUTO',
      passthrough: true,
    };
    chains.push(...inboundChains(push, proxy, cc, modeForPort(peer, p), opts));
  }
  for (const t of [...targets.values()].sort((a, b) => a.targetPort - b.targetPort)) {
    const cc: InboundChainConfig = {
      targetPort: t.targetPort,
      servicePort: t.port.port,
      hostname: t.service.hostname,
      cluster: buildSubsetKey('inbound', '', '', t.targetPort),
      protocol: listenerProtocol(t.port.protocol),
      passthrough: false,
    };
    chains.push(...inboundChains(push, proxy, cc, modeForPort(peer, t.targetPort), opts));
  }
  return create(ListenerSchema, {
    name: VIRTUAL_INBOUND_LISTENER,
    address: socketAddress('0.0.0.0', port),
    ...transparent(proxy),
    trafficDirection: TrafficDirection.INBOUND,
    // Istio populateListenerFilters: original_dst, then in TPROXY mode original_src, then the inspectors
    listenerFilters: inboundListenerFilters(chains, originalDst(), proxy.metadata.interceptionMode === 'TPROXY' ? [originalSrc()] : []),
    listenerFiltersTimeout: durationMs(0),
    continueOnListenerFiltersTimeout: true,
    filterChains: chains,
    accessLog: listenerAccessLogs(proxy, push, 'sidecarInbound'),
  });
}

/** Istio buildSidecarOutboundListeners: HTTP ports share `0.0.0.0_<port>` (RDS `<port>`), TCP services get `<VIP>_<port>`. */
function outboundListeners(push: PushContext, proxy: Proxy, opts: ListenerBuildOptions): Listener[] {
  const scope = push.sidecarScope(proxy);
  const listeners = new Map<string, Listener>();
  const tcpOwner = new Map<string, string>();
  // Chains are built only for the first service on a listener: HTTP ports are shared by every service.
  const add = (name: string, bind: string, port: number, chains: () => FilterChain[], sniffed: boolean, tcpHost?: string) => {
    if (listeners.has(name)) {
      // first service on a listener wins, as Istio's conflict resolution; a second plain-TCP service on a
      // taken TCP listener is Istio's pilot_conflict_outbound_listener_tcp_over_current_tcp
      const owner = tcpOwner.get(name);
      if (tcpHost !== undefined && owner !== undefined && owner !== tcpHost) {
        push.addMetric('conflictOutboundTcp', name, proxy.id, `Listener=${name} Accepted=TCP Rejected=TCP (${tcpHost})`);
      }
      return;
    }
    if (tcpHost !== undefined) tcpOwner.set(name, tcpHost);
    listeners.set(
      name,
      create(ListenerSchema, {
        name,
        address: socketAddress(bind, port),
        bindToPort: false,
        trafficDirection: TrafficDirection.OUTBOUND,
        filterChains: chains(),
        listenerFilters: sniffed ? [httpInspector()] : [],
      }),
    );
  };
  const httpChain = (port: number, name: string, match: boolean): FilterChain =>
    create(FilterChainSchema, {
      ...(match ? { filterChainMatch: { applicationProtocols: ['http/1.1', 'h2c'] } } : {}),
      filters: [
        hcmFilter(
          httpConnectionManager(proxy, push, {
            statPrefix: `outbound_${name}`,
            cls: 'sidecarOutbound',
            rds: String(port),
            ...(opts.security ? { security: opts.security } : {}),
          }),
        ),
      ],
    });
  for (const el of scope.egressListeners) {
    for (const svc of el.services) {
      for (const p of svc.ports) {
        if (el.port && el.port.number !== p.port) continue;
        if (p.protocol === 'UDP') continue;
        const protocol = el.port ? parseProtocol(el.port.protocol) : p.protocol;
        const bind = el.bind ?? '0.0.0.0';
        const cluster = buildSubsetKey('outbound', '', svc.hostname, p.port);
        if (isHttpProtocol(protocol)) {
          add(`${bind}_${p.port}`, bind, p.port, () => [httpChain(p.port, `${bind}_${p.port}`, false)], false);
        } else if (protocol === 'UnsupportedProtocol') {
          const name = `${bind}_${p.port}`;
          add(
            name,
            bind,
            p.port,
            () => [
              httpChain(p.port, name, true),
              create(FilterChainSchema, {
                filters: telemetryTcpFilters(proxy, push, 'sidecarOutbound', cluster, tcpRouteFor(push, proxy, svc, p.port, cluster), {
                  accessLog: true,
                }),
              }),
            ],
            true,
          );
        } else {
          // Istio GetAddressForProxy: its own VIP, else the auto-allocated one for a proxy that uses it
          const vip = svc.addresses.find((a) => isIp(a)) ?? autoAddressForProxy(svc, proxy, push.options.ipAutoallocate);
          const addr = el.bind ?? vip ?? '0.0.0.0';
          add(
            `${addr}_${p.port}`,
            addr,
            p.port,
            () => [
              create(FilterChainSchema, {
                filters: telemetryTcpFilters(proxy, push, 'sidecarOutbound', cluster, tcpRouteFor(push, proxy, svc, p.port, cluster), {
                  accessLog: true,
                }),
              }),
            ],
            false,
            svc.hostname,
          );
        }
      }
    }
  }
  return [...listeners.values()];
}

/** A mesh VirtualService's tcp route for the service, else the service's own cluster. */
function tcpRouteFor(push: PushContext, proxy: Proxy, svc: Service, port: number, cluster: string): WeightedDestination[] {
  for (const v of push.sidecarScope(proxy).virtualServices) {
    if (!v.hosts.some((h) => hostMatches(h, svc.hostname))) continue;
    const r = (v.spec.tcp ?? []).find((t) => t.route && t.route.length > 0 && (!t.match || t.match.some((m) => !m.port || m.port === port)));
    if (r) return tcpDestinations(push, proxy, r.route!, port);
  }
  return [{ cluster, weight: 100 }];
}

/**
 * The virtual outbound listener first, then the per-port outbound listeners: everything of LDS that does not
 * depend on the proxy's own addresses (outbound HCMs carry no authn/authz filters, as in Istio).
 */
export function buildSidecarOutboundListeners(proxy: Proxy, push: PushContext, opts: ListenerBuildOptions = {}): Listener[] {
  return [virtualOutbound(push, proxy), ...outboundListeners(push, proxy, opts)];
}

/** The proxy's own inbound listener (its service targets, inbound policies). */
export function buildVirtualInboundListener(proxy: Proxy, push: PushContext, opts: ListenerBuildOptions = {}): Listener {
  return virtualInbound(push, proxy, opts);
}

// ---------------------------------------------------------------------------------------------
// proxyless gRPC

/** Prefix of gRPC server-side listener names (xds.NewGRPCServer); those need mTLS support, not served yet. */
export const GRPC_INBOUND_LISTENER_PREFIX = 'xds.istio.io/grpc/lds/inbound/';

/** Istio tryFindFQDN: `foo` → `foo.<proxy domain>`, `foo.ns` / `foo.ns.svc` → FQDN in the proxy's domain. */
export function grpcFqdn(name: string, proxy: Proxy): string | undefined {
  if (!name.includes('.')) return `${name}.${proxy.dnsDomain}`;
  for (const suffix of [proxy.namespace, `${proxy.namespace}.svc`]) {
    if (name.endsWith(`.${suffix}`) && proxy.dnsDomain.startsWith(suffix)) return `${name.slice(0, -(suffix.length + 1))}.${proxy.dnsDomain}`;
  }
  return undefined;
}

function grpcApiListener(name: string, address: string, port: number, routeName: string): Listener {
  return create(ListenerSchema, {
    name,
    address: socketAddress(address, port),
    apiListener: {
      apiListener: pack(HttpConnectionManagerSchema, {
        httpFilters: [faultFilter(), routerFilter()],
        routeSpecifier: { case: 'rds', value: { configSource: bareAdsConfigSource(), routeConfigName: routeName } },
      }),
    },
  });
}

/**
 * api_listeners for the requested names (`host`, `host:port`, short names resolved as Istio does);
 * all visible services when the request names none.
 */
export function buildGrpcListeners(proxy: Proxy, push: PushContext, names: readonly string[]): Listener[] {
  const out: Listener[] = [];
  const services = push.servicesForProxy(proxy);
  if (names.length === 0) {
    for (const s of services)
      for (const p of s.ports) out.push(grpcApiListener(`${s.hostname}:${p.port}`, s.addresses[0] ?? '0.0.0.0', p.port, `${s.hostname}:${p.port}`));
    return out;
  }
  for (const name of names) {
    if (name.startsWith(GRPC_INBOUND_LISTENER_PREFIX)) continue;
    const { host, port } = splitHostPort(name);
    const candidates = [host, grpcFqdn(host, proxy)].filter((x): x is string => x !== undefined);
    const svc = candidates.map((h) => services.find((s) => s.hostname === h)).find((s) => s !== undefined);
    if (!svc) continue;
    for (const p of svc.ports) {
      if (port !== undefined && p.port !== port) continue;
      // the listener keeps the requested name; its route is named after the FQDN like Istio's clusterKey
      out.push(grpcApiListener(port !== undefined ? name : `${host}:${p.port}`, svc.addresses[0] ?? '0.0.0.0', p.port, `${svc.hostname}:${p.port}`));
    }
  }
  return out;
}

export { isHttpOrSniffed, WK };
