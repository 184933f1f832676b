// One cluster of the engine (from the bootstrap or CDS): discovery type, hosts with priorities and
// health, load balancer, circuit-breaker thresholds, outlier detection, upstream protocol and TLS,
// and the cluster.<name>.* stats Envoy keeps.
import dns from 'node:dns';
import net from 'node:net';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { fromBinary, toBinary, type JsonObject } from '@bufbuild/protobuf';
import {
  Cluster_DiscoveryType,
  Cluster_DnsLookupFamily,
  Cluster_LbPolicy,
  ClusterSchema,
  type Cluster,
} from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { RoutingPriority } from '../../gen/envoy/config/core/v3/base_pb';
import { HealthStatus as HealthProto } from '../../gen/envoy/config/core/v3/health_check_pb';
import type { ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import type { Address } from '../../gen/envoy/config/core/v3/address_pb';
import { HttpProtocolOptionsSchema } from '../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb';
import type { Logger } from '../log';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import { ResponseCodeStats, type Counter, type Gauge, type Histogram, type StatsScope, type StatsStore } from '../stats/store';
import type { SecretManager } from '../tls/secrets';
import { Host, type HealthStatus, type Locality } from './host';
import { LoadBalancer, type LbContext, type LbPolicy } from './lb';
import { OutlierDetector, outlierConfig } from './outlier';
import { releaseHostPools } from './host-pools';
import { TransportSocketMatcher, type UpstreamTransport } from './transport-socket';
import { ipFamily } from '../../lib/ip';
import { WeakInterner } from '../../lib/intern';
import { joinHostPort } from '../../lib/hostport';
import { upstreamExchange, type ExchangeConfig } from '../istio/tcp-exchange';

export type ClusterType = 'STATIC' | 'STRICT_DNS' | 'LOGICAL_DNS' | 'EDS' | 'ORIGINAL_DST';
export type UpstreamProtocol = 'http1' | 'http2' | 'downstream';

export interface Thresholds {
  maxConnections: number;
  maxPendingRequests: number;
  maxRequests: number;
  maxRetries: number;
}

const HTTP_PROTOCOL_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

export class ClusterStats {
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxConnectFail: Counter;
  readonly cxConnectTimeout: Counter;
  readonly cxOverflow: Counter;
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqCompleted: Counter;
  readonly rqPendingTotal: Counter;
  readonly rqPendingActive: Gauge;
  readonly rqPendingOverflow: Counter;
  readonly rqTimeout: Counter;
  readonly rqPerTryTimeout: Counter;
  readonly rqRetry: Counter;
  readonly rqRetrySuccess: Counter;
  readonly rqRetryOverflow: Counter;
  readonly rqTime: Histogram;
  readonly codes: ResponseCodeStats;
  readonly noneHealthy: Counter;
  readonly membershipHealthy: Gauge;
  readonly membershipTotal: Gauge;
  readonly membershipDegraded: Gauge;
  readonly membershipExcluded: Gauge;
  readonly membershipChange: Counter;
  readonly lbHealthyPanic: Counter;
  readonly updateAttempt: Counter;
  readonly updateSuccess: Counter;
  readonly updateFailure: Counter;
  readonly updateEmpty: Counter;
  readonly maxHostWeight: Gauge;
  readonly cbCxOpen: Gauge;
  readonly cbRqOpen: Gauge;
  readonly cbRqPendingOpen: Gauge;
  readonly cbRetryOpen: Gauge;
  readonly remainingRq: Gauge;
  readonly remainingCx: Gauge;
  readonly remainingPending: Gauge;
  readonly remainingRetries: Gauge;

  constructor(readonly scope: StatsScope) {
    const c = (n: string) => scope.counter(n);
    const g = (n: string) => scope.gauge(n);
    this.cxTotal = c('upstream_cx_total');
    this.cxActive = g('upstream_cx_active');
    this.cxConnectFail = c('upstream_cx_connect_fail');
    this.cxConnectTimeout = c('upstream_cx_connect_timeout');
    this.cxOverflow = c('upstream_cx_overflow');
    this.rqTotal = c('upstream_rq_total');
    this.rqActive = g('upstream_rq_active');
    this.rqCompleted = c('upstream_rq_completed');
    this.rqPendingTotal = c('upstream_rq_pending_total');
    // read back for circuit_breakers.*.remaining_pending: counts even where stats_matcher hides it
    this.rqPendingActive = scope.gauge('upstream_rq_pending_active', true);
    this.rqPendingOverflow = c('upstream_rq_pending_overflow');
    this.rqTimeout = c('upstream_rq_timeout');
    this.rqPerTryTimeout = c('upstream_rq_per_try_timeout');
    this.rqRetry = c('upstream_rq_retry');
    this.rqRetrySuccess = c('upstream_rq_retry_success');
    this.rqRetryOverflow = c('upstream_rq_retry_overflow');
    this.rqTime = scope.histogram('upstream_rq_time');
    this.codes = new ResponseCodeStats(scope, 'upstream_rq');
    this.noneHealthy = c('upstream_cx_none_healthy');
    this.membershipHealthy = g('membership_healthy');
    this.membershipTotal = g('membership_total');
    this.membershipDegraded = g('membership_degraded');
    this.membershipExcluded = g('membership_excluded');
    this.membershipChange = c('membership_change');
    this.lbHealthyPanic = c('lb_healthy_panic');
    this.updateAttempt = c('update_attempt');
    this.updateSuccess = c('update_success');
    this.updateFailure = c('update_failure');
    this.updateEmpty = c('update_empty');
    this.maxHostWeight = g('max_host_weight');
    this.cbCxOpen = g('circuit_breakers.default.cx_open');
    this.cbRqOpen = g('circuit_breakers.default.rq_open');
    this.cbRqPendingOpen = g('circuit_breakers.default.rq_pending_open');
    this.cbRetryOpen = g('circuit_breakers.default.rq_retry_open');
    this.remainingRq = g('circuit_breakers.default.remaining_rq');
    this.remainingCx = g('circuit_breakers.default.remaining_cx');
    this.remainingPending = g('circuit_breakers.default.remaining_pending');
    this.remainingRetries = g('circuit_breakers.default.remaining_retries');
  }
}

export interface ClusterDeps {
  stats: StatsStore;
  log: Logger;
  secrets: SecretManager;
  random?: () => number;
  lookup?: typeof dns.lookup;
}

function healthOf(h: HealthProto): HealthStatus {
  switch (h) {
    case HealthProto.HEALTHY:
      return 'healthy';
    case HealthProto.UNHEALTHY:
      return 'unhealthy';
    case HealthProto.DRAINING:
      return 'draining';
    case HealthProto.TIMEOUT:
      return 'timeout';
    case HealthProto.DEGRADED:
      return 'degraded';
    default:
      return 'unknown';
  }
}

/** address → {address, port} or pipe path; throws ConfigError naming `where`. */
export function resolveAddress(a: Address | undefined, where: string): { address: string; port: number; pipe?: string } {
  const x = a?.address;
  if (x?.case === 'socketAddress') {
    if (x.value.portSpecifier.case !== 'portValue') throw new ConfigError(`${where}.socket_address: named ports are not supported`);
    return { address: x.value.address, port: x.value.portSpecifier.value };
  }
  if (x?.case === 'pipe') return { address: '', port: 0, pipe: x.value.path };
  throw new ConfigError(`${where}: an address (socket_address or pipe) is required`);
}

const LB: Record<number, LbPolicy> = {
  [Cluster_LbPolicy.ROUND_ROBIN]: 'ROUND_ROBIN',
  [Cluster_LbPolicy.LEAST_REQUEST]: 'LEAST_REQUEST',
  [Cluster_LbPolicy.RANDOM]: 'RANDOM',
  [Cluster_LbPolicy.RING_HASH]: 'RING_HASH',
  [Cluster_LbPolicy.MAGLEV]: 'MAGLEV',
  [Cluster_LbPolicy.CLUSTER_PROVIDED]: 'CLUSTER_PROVIDED',
};

/** Typed load_balancing_policy → the equivalent enum policy. */
function typedPolicy(c: Cluster, where: string): LbPolicy | undefined {
  const p = c.loadBalancingPolicy?.policies;
  if (!p || p.length === 0) return undefined;
  for (const pol of p) {
    const t = pol.typedExtensionConfig?.typedConfig?.typeUrl ?? '';
    if (t.endsWith('.round_robin.v3.RoundRobin')) return 'ROUND_ROBIN';
    if (t.endsWith('.least_request.v3.LeastRequest')) return 'LEAST_REQUEST';
    if (t.endsWith('.random.v3.Random')) return 'RANDOM';
    if (t.endsWith('.ring_hash.v3.RingHash')) return 'RING_HASH';
    if (t.endsWith('.maglev.v3.Maglev')) return 'MAGLEV';
    if (t.endsWith('.wrr_locality.v3.WrrLocality')) return 'ROUND_ROBIN';
  }
  throw new ConfigError(`${where}.load_balancing_policy: none of the policies is supported`);
}

/** Localities by value: a mesh has a few, a sidecar's hosts thousands. Hosts never change a locality's fields. */
const localities = new WeakInterner<Locality>();
const NO_LOCALITY: Locality = Object.freeze({ region: '', zone: '', subZone: '' });

function localityOf(l: { region: string; zone: string; subZone: string } | undefined): Locality {
  if (!l || (!l.region && !l.zone && !l.subZone)) return NO_LOCALITY;
  const fresh = Object.freeze({ region: l.region, zone: l.zone, subZone: l.subZone });
  return localities.intern(
    `${l.region}/${l.zone}/${l.subZone}`,
    fresh,
    (k) => k.region === fresh.region && k.zone === fresh.zone && k.subZone === fresh.subZone,
  );
}

/**
 * A cluster's filter_metadata as the engine keeps it: of Istio's `istio.services` (the destination services,
 * ~400 bytes per cluster, a sidecar has thousands) only the first service's host, name and namespace, which
 * Istio's stats filter reads (destination_service*); the encoded cluster keeps all of it for config_dump.
 */
function keptMetadata(m: JsonObject | undefined): JsonObject | undefined {
  if (!m) return undefined;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(m)) {
    if (k === 'istio' && v && typeof v === 'object' && !Array.isArray(v)) {
      const { services, ...rest } = v;
      const first = Array.isArray(services) ? services[0] : undefined;
      if (first && typeof first === 'object' && !Array.isArray(first)) {
        const svc: JsonObject = {};
        for (const f of ['host', 'name', 'namespace']) if (typeof first[f] === 'string') svc[f] = first[f];
        rest['services'] = [svc];
      }
      if (Object.keys(rest).length > 0) out[k] = rest;
    } else out[k] = v;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export class UpstreamCluster {
  readonly name: string;
  readonly type: ClusterType;
  readonly edsServiceName: string;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly thresholds: Thresholds;
  readonly protocol: UpstreamProtocol;
  /** transport_socket and transport_socket_matches; each host carries the one it resolved to. */
  readonly transports: TransportSocketMatcher;
  readonly sourceAddress: string | undefined;
  readonly stats: ClusterStats;
  readonly lb: LoadBalancer;
  readonly outlier: OutlierDetector | undefined;
  /** filter_metadata, without what nothing in the engine reads (see keptMetadata). */
  readonly metadata: JsonObject | undefined;
  readonly useHttpHeaderForOriginalDst: string | undefined;
  /** Cluster.filters: Istio's upstream metadata exchange on the connections tcp_proxy makes. */
  readonly exchange: ExchangeConfig | undefined;
  readonly ready: Promise<void>;
  hosts: Host[] = [];
  /** In-flight counts for circuit breaking. */
  rqActive = 0;
  cxActive = 0;
  retriesActive = 0;
  /** Set once the first assignment / resolution arrived. */
  initialized = false;
  private resolveReady: (() => void) | undefined;
  private dnsTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly log: Logger;

  /**
   * The Cluster as received, kept encoded and decoded when asked (config_dump, /clusters, DNS refresh): with
   * thousands of clusters in scope the decoded messages (~3.7 KB each) were held only for those.
   */
  private readonly encoded: Uint8Array;
  get proto(): Cluster {
    return fromBinary(ClusterSchema, this.encoded);
  }

  constructor(
    proto: Cluster,
    readonly addedViaApi: boolean,
    readonly versionInfo: string,
    private readonly deps: ClusterDeps,
    /** `proto` encoded, when the caller already has it (CDS hashes it to tell changed clusters). */
    encoded?: Uint8Array,
  ) {
    const where = `cluster '${proto.name}'`;
    if (!proto.name) throw new ConfigError('cluster: name must not be empty');
    this.name = proto.name;
    this.encoded = encoded ?? toBinary(ClusterSchema, proto);
    this.log = deps.log;
    const dt = proto.clusterDiscoveryType;
    if (dt.case === 'clusterType') throw new ConfigError(`${where}.cluster_type: custom cluster types ('${dt.value.name}') are not supported`);
    const t = dt.case === 'type' ? dt.value : Cluster_DiscoveryType.STATIC;
    this.type =
      t === Cluster_DiscoveryType.STRICT_DNS
        ? 'STRICT_DNS'
        : t === Cluster_DiscoveryType.LOGICAL_DNS
          ? 'LOGICAL_DNS'
          : t === Cluster_DiscoveryType.EDS
            ? 'EDS'
            : t === Cluster_DiscoveryType.ORIGINAL_DST
              ? 'ORIGINAL_DST'
              : 'STATIC';
    const service = proto.edsClusterConfig?.serviceName;
    // one string for both when they are equal (Istio's clusters): thousands of clusters in a sidecar's scope
    this.edsServiceName = !service || service === proto.name ? this.name : service;
    if (
      this.type === 'EDS' &&
      proto.edsClusterConfig?.edsConfig?.configSourceSpecifier.case !== 'ads' &&
      proto.edsClusterConfig?.edsConfig !== undefined
    ) {
      throw new ConfigError(`${where}.eds_cluster_config.eds_config: only ADS config sources are supported`);
    }
    if (proto.healthChecks.length > 0) throw new ConfigError(`${where}.health_checks: active health checking is not supported`);
    this.connectTimeoutMs = durationToMs(proto.connectTimeout) ?? 5000;
    let policy = typedPolicy(proto, where) ?? LB[proto.lbPolicy];
    if (!policy) throw new ConfigError(`${where}.lb_policy: unsupported load balancing policy ${proto.lbPolicy}`);
    if (this.type === 'ORIGINAL_DST' && policy !== 'CLUSTER_PROVIDED') {
      throw new ConfigError(
        `${where}: cluster: LB policy ${policy} is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'`,
      );
    }
    if (policy === 'CLUSTER_PROVIDED' && this.type !== 'ORIGINAL_DST') policy = 'ROUND_ROBIN';
    const th = proto.circuitBreakers?.thresholds.find((x) => x.priority === RoutingPriority.DEFAULT);
    this.thresholds = {
      maxConnections: th?.maxConnections ?? 1024,
      maxPendingRequests: th?.maxPendingRequests ?? 1024,
      maxRequests: th?.maxRequests ?? 1024,
      maxRetries: th?.maxRetries ?? 3,
    };
    // upstream protocol: typed HttpProtocolOptions, else the deprecated cluster fields
    let protocol: UpstreamProtocol = proto.http2ProtocolOptions ? 'http2' : 'http1';
    let idle = durationToMs(proto.commonHttpProtocolOptions?.idleTimeout);
    const hpo = proto.typedExtensionProtocolOptions[HTTP_PROTOCOL_OPTIONS];
    if (hpo) {
      const o = anyUnpack(hpo, HttpProtocolOptionsSchema);
      if (!o) throw new ConfigError(`${where}.typed_extension_protocol_options['${HTTP_PROTOCOL_OPTIONS}']: cannot decode ${hpo.typeUrl}`);
      const u = o.upstreamProtocolOptions;
      if (u.case === 'explicitHttpConfig') {
        const pc = u.value.protocolConfig.case;
        if (pc === 'http3ProtocolOptions') throw new ConfigError(`${where}: HTTP/3 upstreams are not supported`);
        protocol = pc === 'http2ProtocolOptions' ? 'http2' : 'http1';
      } else if (u.case === 'useDownstreamProtocolConfig') protocol = 'downstream';
      else if (u.case === 'autoConfig') protocol = 'http1';
      idle = durationToMs(o.commonHttpProtocolOptions?.idleTimeout) ?? idle;
      if (o.httpFilters.length > 0) throw new ConfigError(`${where}: upstream HTTP filters are not supported`);
    }
    for (const k of Object.keys(proto.typedExtensionProtocolOptions)) {
      if (k !== HTTP_PROTOCOL_OPTIONS)
        throw new ConfigError(
          `${where}.typed_extension_protocol_options: Didn't find a registered network or http filter or protocol options implementation for name: '${k}'`,
        );
    }
    this.protocol = protocol;
    this.idleTimeoutMs = idle ?? 3_600_000;
    const scope = deps.stats.scope(`cluster.${proto.altStatName || proto.name}.`);
    this.transports = new TransportSocketMatcher(proto, where, deps.secrets, scope);
    const bind = proto.upstreamBindConfig?.sourceAddress;
    this.sourceAddress = bind?.address || undefined;
    this.metadata = keptMetadata(proto.metadata?.filterMetadata);
    this.useHttpHeaderForOriginalDst =
      proto.lbConfig.case === 'originalDstLbConfig' && proto.lbConfig.value.useHttpHeader
        ? proto.lbConfig.value.httpHeaderName.toLowerCase() || 'x-envoy-original-dst-host'
        : undefined;
    this.stats = new ClusterStats(scope);
    this.exchange = upstreamExchange(proto.filters, where, deps.stats);
    const random = deps.random ?? Math.random;
    this.lb = new LoadBalancer({
      policy,
      panicThreshold: proto.commonLbConfig?.healthyPanicThreshold?.value ?? 50,
      overprovisioningFactor: 140,
      choiceCount: proto.lbConfig.case === 'leastRequestLbConfig' ? (proto.lbConfig.value.choiceCount ?? 2) : 2,
      random,
    });
    this.outlier = proto.outlierDetection
      ? new OutlierDetector(
          outlierConfig(proto.outlierDetection),
          scope,
          () => this.hosts,
          () => this.rebuildLb(),
          Date.now,
          random,
        )
      : undefined;
    this.trackRemaining = proto.circuitBreakers?.thresholds.some((x) => x.trackRemaining) ?? false;
    this.updateCircuitBreakerGauges();
    const ready = new Promise<void>((r) => (this.resolveReady = r));
    this.ready = Promise.all([ready, ...this.transports.all().map((t) => t.tls?.ready)]).then(() => undefined);
    switch (this.type) {
      case 'STATIC':
        this.setAssignment(proto.loadAssignment, where);
        break;
      case 'ORIGINAL_DST':
        this.markInitialized();
        break;
      case 'STRICT_DNS':
      case 'LOGICAL_DNS':
        this.validateDnsAssignment(where);
        setImmediate(() => this.resolveDns());
        break;
      case 'EDS':
        // warms when its ClusterLoadAssignment arrives (cluster manager)
        break;
    }
  }

  private markInitialized(): void {
    if (this.initialized) return;
    this.initialized = true;
    this.resolveReady?.();
    this.resolveReady = undefined;
  }

  /** STATIC and EDS: the assignment's endpoints replace the hosts (same address keeps its state). */
  setAssignment(cla: ClusterLoadAssignment | undefined, where = `cluster '${this.name}'`): void {
    this.stats.updateAttempt.inc();
    const fresh: Host[] = [];
    for (const [li, loc] of (cla?.endpoints ?? []).entries()) {
      for (const [ei, lbe] of loc.lbEndpoints.entries()) {
        if (lbe.hostIdentifier.case !== 'endpoint')
          throw new ConfigError(`${where}.load_assignment.endpoints[${li}].lb_endpoints[${ei}]: named endpoints are not supported`);
        const ep = lbe.hostIdentifier.value;
        const a = resolveAddress(ep.address, `${where}.load_assignment.endpoints[${li}].lb_endpoints[${ei}].endpoint.address`);
        if (!a.pipe && ipFamily(a.address) === 0) {
          throw new ConfigError(
            `${where}.load_assignment.endpoints[${li}].lb_endpoints[${ei}]: malformed IP address: ${a.address}. Consider setting resolver_name or setting cluster type to 'STRICT_DNS' or 'LOGICAL_DNS'`,
          );
        }
        fresh.push(
          new Host(
            a.address,
            a.port,
            ep.hostname,
            lbe.loadBalancingWeight ?? 1,
            healthOf(lbe.healthStatus),
            loc.priority,
            localityOf(loc.locality),
            lbe.metadata?.filterMetadata,
            a.pipe,
            loc.metadata?.filterMetadata,
          ),
        );
      }
    }
    this.replaceHosts(fresh);
    if (fresh.length === 0) this.stats.updateEmpty.inc();
    this.stats.updateSuccess.inc();
    this.markInitialized();
  }

  private replaceHosts(fresh: Host[]): void {
    const old = new Map(this.hosts.map((h) => [h.key, h]));
    // map, not push: the list is kept, at its exact size
    const next = fresh.map((f) => {
      const prev = old.get(f.key);
      if (!prev) {
        this.assignTransport(f);
        return f;
      }
      old.delete(f.key);
      prev.weight = f.weight;
      prev.health = f.health;
      prev.priority = f.priority;
      prev.locality = f.locality;
      prev.metadata = f.metadata;
      prev.localityMetadata = f.localityMetadata;
      this.assignTransport(prev);
      return prev;
    });
    for (const gone of old.values()) releaseHostPools(gone);
    if (old.size > 0 || next.length !== this.hosts.length) this.stats.membershipChange.inc();
    this.hosts = next;
    this.rebuildLb();
  }

  /** Envoy resolves a host's transport socket when the host is made and again when its metadata changes. */
  private assignTransport(h: Host): void {
    const t = this.transports.resolve(h.metadata, h.localityMetadata);
    if (h.transport !== t) {
      // connections made with the previous transport are not reused for new requests
      if (h.transport) releaseHostPools(h);
      h.transport = t;
      t.matchCount.inc();
    }
  }

  /** The transport socket for a host (resolved at assignment; ORIGINAL_DST hosts use the default). */
  transportFor(h: Host): UpstreamTransport {
    return h.transport ?? this.transports.default;
  }

  rebuildLb(): void {
    this.lb.update(this.hosts);
    let healthy = 0;
    let degraded = 0;
    let excluded = 0;
    let maxW = 0;
    for (const h of this.hosts) {
      if (h.healthyForLb) healthy++;
      else if (h.degraded) degraded++;
      if (h.health === 'draining') excluded++;
      maxW = Math.max(maxW, h.weight);
    }
    this.stats.membershipHealthy.set(healthy);
    this.stats.membershipDegraded.set(degraded);
    this.stats.membershipExcluded.set(excluded);
    this.stats.membershipTotal.set(this.hosts.length);
    this.stats.maxHostWeight.set(maxW);
  }

  private validateDnsAssignment(where: string): void {
    const eps = (this.proto.loadAssignment?.endpoints ?? []).flatMap((l) => l.lbEndpoints);
    if (eps.length === 0) throw new ConfigError(`${where}.load_assignment: DNS clusters need at least one endpoint`);
    if (this.type === 'LOGICAL_DNS' && eps.length !== 1)
      throw new ConfigError(`${where}: LOGICAL_DNS clusters must have a single locality_lb_endpoint and a single lb_endpoint`);
    eps.forEach((e, i) => {
      if (e.hostIdentifier.case !== 'endpoint')
        throw new ConfigError(`${where}.load_assignment.lb_endpoints[${i}]: named endpoints are not supported`);
      resolveAddress(e.hostIdentifier.value.address, `${where}.load_assignment.lb_endpoints[${i}].endpoint.address`);
    });
  }

  private async resolveDns(): Promise<void> {
    if (this.closed) return;
    const lookup = this.deps.lookup ?? dns.lookup;
    const fam = this.proto.dnsLookupFamily;
    const family = fam === Cluster_DnsLookupFamily.V4_ONLY ? 4 : fam === Cluster_DnsLookupFamily.V6_ONLY ? 6 : 0;
    this.stats.updateAttempt.inc();
    const fresh: Host[] = [];
    let failed = false;
    for (const loc of this.proto.loadAssignment?.endpoints ?? []) {
      for (const lbe of loc.lbEndpoints) {
        if (lbe.hostIdentifier.case !== 'endpoint') continue;
        const ep = lbe.hostIdentifier.value;
        const a = resolveAddress(ep.address, 'endpoint');
        if (a.pipe) {
          fresh.push(new Host('', 0, '', lbe.loadBalancingWeight ?? 1, healthOf(lbe.healthStatus), loc.priority, NO_LOCALITY, undefined, a.pipe));
          continue;
        }
        let addrs: dns.LookupAddress[];
        try {
          addrs = ipFamily(a.address)
            ? [{ address: a.address, family: ipFamily(a.address) }]
            : await new Promise<dns.LookupAddress[]>((res, rej) =>
                lookup(a.address, { all: true, family }, (e, r) => (e ? rej(e) : res(r as dns.LookupAddress[]))),
              );
        } catch (e) {
          failed = true;
          this.log.debug(`DNS resolution for ${a.address} failed: ${(e as Error).message}`);
          continue;
        }
        if (fam === Cluster_DnsLookupFamily.V4_PREFERRED && addrs.some((x) => x.family === 4)) addrs = addrs.filter((x) => x.family === 4);
        if (fam === Cluster_DnsLookupFamily.AUTO && addrs.some((x) => x.family === 6)) addrs = addrs.filter((x) => x.family === 6);
        if (this.type === 'LOGICAL_DNS') addrs = addrs.slice(0, 1);
        for (const x of addrs) {
          fresh.push(
            new Host(
              x.address,
              a.port,
              ep.hostname || a.address,
              lbe.loadBalancingWeight ?? 1,
              healthOf(lbe.healthStatus),
              loc.priority,
              localityOf(loc.locality),
              lbe.metadata?.filterMetadata,
              undefined,
              loc.metadata?.filterMetadata,
            ),
          );
        }
      }
    }
    if (this.closed) return;
    if (failed && fresh.length === 0) this.stats.updateFailure.inc();
    else {
      this.replaceHosts(fresh);
      this.stats.updateSuccess.inc();
    }
    this.markInitialized();
    const refresh = failed
      ? (durationToMs(this.proto.dnsFailureRefreshRate?.baseInterval) ?? durationToMs(this.proto.dnsRefreshRate) ?? 5000)
      : (durationToMs(this.proto.dnsRefreshRate) ?? 5000);
    this.dnsTimer = setTimeout(() => void this.resolveDns(), Math.max(100, refresh));
    this.dnsTimer.unref();
  }

  /** ORIGINAL_DST: the host for a destination, created on first use. */
  originalDstHost(address: string, port: number): Host {
    const key = joinHostPort(address, port);
    let h = this.hosts.find((x) => x.key === key);
    if (!h) {
      h = new Host(address, port, '', 1, 'healthy', 0, NO_LOCALITY, undefined);
      this.assignTransport(h);
      this.hosts = [...this.hosts, h];
      this.rebuildLb();
    }
    return h;
  }

  chooseHost(ctx: LbContext): Host | undefined {
    const before = this.lb.panicCount;
    const h = this.lb.choose(ctx);
    if (this.lb.panicCount !== before) this.stats.lbHealthyPanic.inc();
    return h;
  }

  /** Whether a threshold asks for the remaining_* gauges. */
  private readonly trackRemaining: boolean;

  updateCircuitBreakerGauges(): void {
    const t = this.thresholds;
    const s = this.stats;
    s.cbRqOpen.set(this.rqActive >= t.maxRequests ? 1 : 0);
    s.cbCxOpen.set(this.cxActive >= t.maxConnections ? 1 : 0);
    s.cbRetryOpen.set(this.retriesActive >= t.maxRetries ? 1 : 0);
    if (this.trackRemaining) {
      s.remainingRq.set(Math.max(0, t.maxRequests - this.rqActive));
      s.remainingCx.set(Math.max(0, t.maxConnections - this.cxActive));
      s.remainingRetries.set(Math.max(0, t.maxRetries - this.retriesActive));
      s.remainingPending.set(Math.max(0, t.maxPendingRequests - s.rqPendingActive.value));
    }
  }

  close(): void {
    this.closed = true;
    if (this.dnsTimer) clearTimeout(this.dnsTimer);
    this.outlier?.close();
    this.transports.release();
    for (const h of this.hosts) releaseHostPools(h);
  }
}
