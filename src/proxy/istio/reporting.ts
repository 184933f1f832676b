// What Istio's stats filter keeps per config and per peer (istio/proxy release-1.26 istio_stats.cc: Config and
// IstioStatsFilter), shared by the HTTP and the network filter: the decoded stats.PluginConfig, and the label
// values of each (peer, service, principals) seen, computed once and reused by every request or connection
// like it, with the store's stats of each full label set behind them — the per-request work is a few map
// lookups and increments.
import type { JsonObject } from '@bufbuild/protobuf';
import { anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import { PluginConfigSchema, Reporter as ReporterEnum } from '../../gen/istio/envoy/extensions/stats/config_pb';
import { ConfigError } from '../common/config-error';
import { compileCel } from '../cel/evaluator';
import { durationToMs } from '../common/duration';
import type { Counter, Histogram, StatsStore } from '../stats/store';
import { PEER_LABELS, peerLabelValues, securityPolicy, serviceOf, type PeerFacts, type Reporter, type ServiceFacts } from './labels';
import { compileOverrides, IstioStatsSink, type DimensionCompiler, type MetricName } from './metrics';
import { workloadFromEndpoint, workloadFromStruct, type Workload } from './workload';

export interface IstioStatsConfig {
  reporter: Reporter;
  disableHostHeaderFallback: boolean;
  /** Periodic TCP (and gRPC message) reporting; 0 = only at the end. Istio's default is 5 s. */
  reportingMs: number;
  local: Workload;
  sink: IstioStatsSink;
}

/** Decodes stats.PluginConfig for a listener of `direction` (Istio's Config constructor). */
export function istioStatsConfig(
  any: Any | undefined,
  where: string,
  store: StatsStore,
  nodeMetadata: JsonObject,
  direction: 'inbound' | 'outbound' | 'unspecified',
  compile: DimensionCompiler = celDimensions(`${where}.metrics`),
): IstioStatsConfig {
  const c = any ? anyUnpack(any, PluginConfigSchema) : undefined;
  if (any && !c) throw new ConfigError(`${where}: cannot decode ${any.typeUrl}`);
  if (c && c.definitions.length > 0) throw new ConfigError(`${where}.definitions: custom metric definitions are not supported`);
  const reporter: Reporter = c?.reporter === ReporterEnum.SERVER_GATEWAY ? 'waypoint' : direction === 'inbound' ? 'destination' : 'source';
  return {
    reporter,
    disableHostHeaderFallback: c?.disableHostHeaderFallback ?? false,
    reportingMs: c?.tcpReportingDuration ? (durationToMs(c.tcpReportingDuration) ?? 5000) : 5000,
    local: workloadFromStruct(nodeMetadata),
    sink: new IstioStatsSink(store, compileOverrides(c?.metrics ?? [], compile)),
  };
}

/** Dimension expressions as Istio compiles them: CEL, `unknown` when evaluation fails, skipped when unparsable. */
export function celDimensions(where: string): DimensionCompiler {
  return (expr) => {
    let p;
    try {
      p = compileCel(expr, where);
    } catch (e) {
      if ((e as Error).message.includes('Not able to parse')) return undefined;
      throw e;
    }
    return (c) => p.evaluateString(c) ?? 'unknown';
  };
}

export interface HttpSeries {
  requests: Counter | undefined;
  duration: Histogram | undefined;
  requestBytes: Histogram | undefined;
  responseBytes: Histogram | undefined;
}

export interface TcpSeries {
  opened: Counter | undefined;
  closed: Counter | undefined;
  sent: Counter | undefined;
  received: Counter | undefined;
}

/** The labels of one (reporter, peer, service, principals): `reporter` and the 19 peer labels. */
export class PeerPart {
  readonly labels: ReadonlyArray<readonly [string, string]>;
  readonly policy: string;
  private readonly http = new Map<string, HttpSeries>();
  /** Plain HTTP outcomes (no gRPC status, no flags, no expressions) by response code: no key to build. */
  private readonly plain: Array<HttpSeries | undefined> = [];
  private tcp: TcpSeries | undefined;
  private messages: [Counter | undefined, Counter | undefined] | undefined;

  constructor(
    facts: PeerFacts,
    /** The cluster metadata the service labels were read from (a CDS update makes a new part). */
    readonly clusterMetadata: JsonObject | undefined,
    private readonly sink: IstioStatsSink,
  ) {
    const values = peerLabelValues(facts);
    this.labels = [['reporter', facts.reporter], ...PEER_LABELS.map((n, i) => [n, values[i]!] as const)];
    this.policy = securityPolicy(facts);
  }

  /** HTTP series of one outcome; `exprValues` are the dimension expressions' values (in the key when any). */
  httpSeries(protocol: string, code: number, grpc: string, flags: string, exprValues: readonly string[]): HttpSeries {
    const simple = protocol === 'http' && flags === '-' && exprValues.length === 0 && code >= 0 && code < 1000;
    if (simple) {
      const hit = this.plain[code];
      if (hit) return hit;
    }
    const key = exprValues.length === 0 ? `${protocol}|${code}|${grpc}|${flags}` : `${protocol}|${code}|${grpc}|${flags}|${exprValues.join('|')}`;
    let s = this.http.get(key);
    if (!s) {
      const l = [
        ...this.labels,
        ['request_protocol', protocol],
        ['response_code', String(code)],
        ['grpc_response_status', grpc],
        ['response_flags', flags],
        ['connection_security_policy', this.policy],
      ] as const;
      const k = this.sink;
      s = {
        requests: k.counter('requests_total', l, exprValues),
        duration: k.histogram('request_duration_milliseconds', l, exprValues),
        requestBytes: k.histogram('request_bytes', l, exprValues),
        responseBytes: k.histogram('response_bytes', l, exprValues),
      };
      this.http.set(key, s);
    }
    if (simple) this.plain[code] = s;
    return s;
  }

  /** gRPC message counters: Istio reports them with the peer labels only (before the protocol ones). */
  messageCounters(exprValues: readonly string[]): [Counter | undefined, Counter | undefined] {
    return (this.messages ??= [
      this.sink.counter('request_messages_total', this.labels, exprValues),
      this.sink.counter('response_messages_total', this.labels, exprValues),
    ]);
  }

  /** TCP series: the protocol labels are `tcp`, the flags at first report and the security policy. */
  tcpSeries(flags: string, exprValues: readonly string[]): TcpSeries {
    if (this.tcp && flags === '-' && exprValues.length === 0) return this.tcp;
    const l = [...this.labels, ['request_protocol', 'tcp'], ['response_flags', flags], ['connection_security_policy', this.policy]] as const;
    const c = (m: MetricName) => this.sink.counter(m, l, exprValues);
    const s = {
      opened: c('tcp_connections_opened_total'),
      closed: c('tcp_connections_closed_total'),
      sent: c('tcp_sent_bytes_total'),
      received: c('tcp_received_bytes_total'),
    };
    if (flags === '-' && exprValues.length === 0) this.tcp = s;
    return s;
  }
}

/** Inputs of one report, as the filters gather them. */
export interface ReportFacts {
  peer: Workload | undefined;
  endpointPeer: Workload | undefined;
  peerSan: string;
  localSan: string;
  hostHeader: string | undefined;
  routeName: string;
  clusterName: string;
  clusterMetadata: JsonObject | undefined;
}

const ids = new WeakMap<object, number>();
let nextId = 1;
function idOf(o: object | undefined): number {
  if (!o) return 0;
  let id = ids.get(o);
  if (id === undefined) ids.set(o, (id = nextId++));
  return id;
}

const endpointPeers = new WeakMap<JsonObject, Workload | null>();
/** The client side's fallback: the upstream endpoint's `istio.workload` metadata. */
export function endpointWorkload(md: JsonObject | undefined): Workload | undefined {
  if (!md) return undefined;
  let w = endpointPeers.get(md);
  if (w === undefined) {
    const istio = md['istio'];
    const enc = istio && typeof istio === 'object' && !Array.isArray(istio) ? istio['workload'] : undefined;
    w = (typeof enc === 'string' ? workloadFromEndpoint(enc) : undefined) ?? null;
    endpointPeers.set(md, w);
  }
  return w ?? undefined;
}

const services = new WeakMap<JsonObject, ServiceFacts | null>();
function clusterService(md: JsonObject | undefined): ServiceFacts | undefined {
  if (!md) return undefined;
  let s = services.get(md);
  if (s === undefined) {
    const istio = md['istio'];
    const list = istio && typeof istio === 'object' && !Array.isArray(istio) ? istio['services'] : undefined;
    const first = Array.isArray(list) ? list[0] : undefined;
    s =
      first && typeof first === 'object' && !Array.isArray(first)
        ? { host: String(first['host'] ?? ''), name: String(first['name'] ?? ''), namespace: String(first['namespace'] ?? '') }
        : null;
    services.set(md, s);
  }
  return s ?? undefined;
}

/** PeerParts of one filter config, by what their labels depend on. */
export class PeerParts {
  private readonly parts = new Map<string, PeerPart>();
  /** The last request's facts and part: steady traffic repeats them, and comparing beats building a key. */
  private last: { f: ReportFacts; host: string; part: PeerPart } | undefined;
  constructor(readonly config: IstioStatsConfig) {}

  get(f: ReportFacts): PeerPart {
    const cfg = this.config;
    const host = cfg.disableHostHeaderFallback ? '' : (f.hostHeader ?? '');
    const l = this.last;
    if (
      l &&
      l.f.peer === f.peer &&
      l.f.endpointPeer === f.endpointPeer &&
      l.f.clusterMetadata === f.clusterMetadata &&
      l.host === host &&
      l.f.clusterName === f.clusterName &&
      l.f.routeName === f.routeName &&
      l.f.peerSan === f.peerSan &&
      l.f.localSan === f.localSan
    )
      return l.part;
    const p = this.lookup(f, host);
    this.last = { f, host, part: p };
    return p;
  }

  private lookup(f: ReportFacts, host: string): PeerPart {
    const cfg = this.config;
    const key = `${idOf(f.peer)}|${idOf(f.endpointPeer)}|${f.clusterName}|${f.routeName}|${host}|${f.peerSan}|${f.localSan}`;
    let p = this.parts.get(key);
    if (!p || p.clusterMetadata !== f.clusterMetadata) {
      const svc = serviceOf(host, f.routeName, f.clusterName, clusterService(f.clusterMetadata), cfg.disableHostHeaderFallback);
      p = new PeerPart(
        {
          reporter: cfg.reporter,
          local: cfg.local,
          peer: f.peer,
          endpointPeer: f.endpointPeer,
          peerSan: f.peerSan,
          localSan: f.localSan,
          serviceHost: svc.host,
          serviceName: svc.name,
          serviceNamespace: svc.namespace,
        },
        f.clusterMetadata,
        cfg.sink,
      );
      this.parts.set(key, p);
    }
    return p;
  }
}
