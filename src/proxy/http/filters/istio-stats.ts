// istio.stats on HTTP (stats.PluginConfig; istio/proxy release-1.26
// source/extensions/filters/http/istio_stats/istio_stats.cc, IstioStatsFilter::log): when a stream completes,
// istio_requests_total, istio_request_duration_milliseconds, istio_request_bytes and istio_response_bytes with
// Istio's labels; the peer comes from istio.metadata_exchange's filter state (`downstream_peer` inbound,
// `upstream_peer` outbound, else the upstream endpoint's `istio.workload` labels on the client side); `metrics`
// overrides with CEL dimensions evaluated at the end of the stream.
// Differs on purpose: request/response bytes are body bytes (Envoy's wire meter also counts headers);
// gRPC message counts (istio_request_messages_total…) come from envoy.filters.http.grpc_stats' filter state
// (emit_filter_state, as istiod sets it) and are reported at the end of the stream only (no periodic report).
import type { JsonObject } from '@bufbuild/protobuf';
import type { CelContext } from '../../cel/evaluator';
import type { RawHeaders } from '../../codec/headers';
import type { HeaderSource } from '../../format/substitution';
import { PluginConfigSchema } from '../../../gen/istio/envoy/extensions/stats/config_pb';
import { DOWNSTREAM_PEER, UPSTREAM_PEER, type Workload } from '../../istio/workload';
import { endpointWorkload, istioStatsConfig, PeerParts, type IstioStatsConfig } from '../../istio/reporting';
import type { HttpFilter, HttpFilterFactory, HttpStream } from '../filter-api';
import { grpcStatusFor } from '../stream';
import { GRPC_STATS_STATE, type GrpcMessages } from '../grpc-frames';

export const ISTIO_STATS_FILTER = 'istio.stats';
const NO_VALUES: readonly string[] = [];

class IstioStatsFilter implements HttpFilter {
  private readonly parts: PeerParts;
  constructor(
    private readonly cfg: IstioStatsConfig,
    private readonly clusterMetadata: (cluster: string) => JsonObject | undefined,
    private readonly node: JsonObject,
    private readonly direction: number,
  ) {
    this.parts = new PeerParts(cfg);
  }

  decodeHeaders(): undefined {
    return undefined;
  }

  /** The dimension expressions' values at the end of the stream (Istio's StreamOverrides::evaluate in log()). */
  private evaluate(s: HttpStream, cluster: string): string[] {
    const c: CelContext = {
      info: s.info,
      request: s.request,
      ...(s.responseHeaders ? { response: s.responseHeaders } : {}),
      ...(s.responseTrailers ? { trailers: trailerSource(s.responseTrailers)! } : {}),
      filterState: s.filterState,
      xds: {
        node: this.node,
        ...(cluster ? { clusterMetadata: this.clusterMetadata(cluster) ?? {} } : {}),
        ...(s.info.upstreamHostMetadata ? { upstreamHostMetadata: s.info.upstreamHostMetadata } : {}),
        listenerDirection: this.direction,
      },
    };
    return this.cfg.sink.overrides.exprs.map((f) => f(c));
  }

  onStreamComplete(s: HttpStream): void {
    const cfg = this.cfg;
    const info = s.info;
    const conn = s.connection;
    const state = s.filterState;
    let peer: Workload | undefined;
    let endpointPeer: Workload | undefined;
    let peerSan = '';
    let localSan = '';
    if (cfg.reporter === 'source') {
      peer = (state.get(UPSTREAM_PEER) as Workload | undefined) ?? endpointWorkload(info.upstreamHostMetadata);
      peerSan = info.upstreamTls?.peer ?? '';
      localSan = info.upstreamTls?.local ?? '';
    } else {
      peer = state.get(DOWNSTREAM_PEER) as Workload | undefined;
      if (cfg.reporter === 'waypoint') endpointPeer = state.get(UPSTREAM_PEER) as Workload | undefined;
      peerSan = conn.peerUriSans[0] ?? '';
      localSan = conn.ssl?.uriSanLocalCertificate[0] ?? '';
    }
    const cluster = info.upstreamCluster;
    const part = this.parts.get({
      peer,
      endpointPeer,
      peerSan,
      localSan,
      hostHeader: s.request.authority,
      routeName: info.routeName,
      clusterName: cluster,
      clusterMetadata: cluster ? this.clusterMetadata(cluster) : undefined,
    });
    const sink = cfg.sink;
    const exprValues = sink.overrides.exprs.length === 0 ? NO_VALUES : this.evaluate(s, cluster);
    const grpc = (s.request.get('content-type') ?? '').startsWith('application/grpc');
    if (grpc) {
      const m = state.get(GRPC_STATS_STATE) as GrpcMessages | undefined;
      if (m) {
        const [rq, rs] = part.messageCounters(exprValues);
        rq?.inc(m.request.count);
        rs?.inc(m.response.count);
      }
    }
    const series = part.httpSeries(grpc ? 'grpc' : 'http', info.responseCode, grpc ? grpcStatusOf(s) : '', info.flagString(), exprValues);
    series.requests?.inc();
    series.duration?.record(Math.floor((info.endHr || performance.now()) - info.startHr));
    series.requestBytes?.record(info.bytesReceived);
    series.responseBytes?.record(info.bytesSent);
  }
}

/** Trailers as the CEL attributes read them. */
function trailerSource(t: RawHeaders | undefined): HeaderSource | undefined {
  if (!t) return undefined;
  return {
    get: (n) => {
      const v = t[n];
      return Array.isArray(v) ? v.join(',') : v;
    },
  };
}

/** Envoy Grpc::Common::getGrpcStatus with stream info: trailers, then headers, then the HTTP status mapped. */
function grpcStatusOf(s: HttpStream): string {
  const t = s.responseTrailers?.['grpc-status'];
  if (typeof t === 'string') return t;
  const h = s.responseHeaders?.get('grpc-status');
  if (h !== undefined) return h;
  return s.info.responseCode ? String(grpcStatusFor(s.info.responseCode)) : '';
}

export const istioStatsFilterFactory: HttpFilterFactory = {
  name: ISTIO_STATS_FILTER,
  configTypes: [PluginConfigSchema.typeName],
  create(config, ctx) {
    const cfg = istioStatsConfig(config, ctx.where, ctx.stats.store, ctx.node?.metadata ?? {}, ctx.direction ?? 'unspecified');
    const node: JsonObject = { id: ctx.node?.id ?? '', metadata: ctx.node?.metadata ?? {} };
    const direction = ctx.direction === 'inbound' ? 1 : ctx.direction === 'outbound' ? 2 : 0;
    return new IstioStatsFilter(cfg, ctx.clusterMetadata ?? (() => undefined), node, direction);
  },
};
