// Istio's network filters in front of tcp_proxy (istio/proxy release-1.26): istio.stats as a network filter
// (istio_stats.cc, IstioStatsFilter as Network::ReadFilter: istio_tcp_connections_opened_total,
// _closed_total, istio_tcp_sent_bytes_total, istio_tcp_received_bytes_total, reported every
// tcp_reporting_duration once the peer lookup has concluded, and at close), and istio.metadata_exchange
// (envoy.tcp.metadataexchange.config.MetadataExchange).
// Differs on purpose: the in-band TCP exchange (ALPN istio-peer-exchange) is not done. The MX filter is
// accepted and concludes as Istio's does when no exchange happens (`peer_not_found`): inbound the lookup
// concludes with no peer once the upstream is connected; outbound (Istio's upstream cluster filter) the
// same, with the endpoint's `istio.workload` labels as the peer, as Istio falls back to. Without an MX
// filter on an inbound chain the lookup never concludes and everything is reported at close, as in Istio.
import type { StreamInfo } from '../stream-info';
import { endpointWorkload, istioStatsConfig, PeerParts, type IstioStatsConfig, type TcpSeries } from '../istio/reporting';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { StatsStore } from '../stats/store';

/** A network filter that watches connections handed to tcp_proxy. */
export interface ConnectionObserver {
  open(info: StreamInfo): ConnectionTracker;
}
export interface ConnectionTracker {
  /** The upstream connection is established. */
  connected(): void;
  /** The downstream connection closed. */
  closed(): void;
}

const NO_VALUES: readonly string[] = [];

export class IstioNetworkStats implements ConnectionObserver {
  private readonly cfg: IstioStatsConfig;
  private readonly parts: PeerParts;

  constructor(
    any: Any | undefined,
    where: string,
    store: StatsStore,
    nodeMetadata: JsonObject,
    direction: 'inbound' | 'outbound' | 'unspecified',
    /** The chain has istio.metadata_exchange before this filter (inbound lookups conclude). */
    private readonly exchange: boolean,
    private readonly clusterMetadata: (cluster: string) => JsonObject | undefined,
  ) {
    this.cfg = istioStatsConfig(any, where, store, nodeMetadata, direction);
    this.parts = new PeerParts(this.cfg);
  }

  open(info: StreamInfo): ConnectionTracker {
    const cfg = this.cfg;
    let peerRead = false;
    let series: TcpSeries | undefined;
    let opened = false;
    let sent = 0;
    let received = 0;
    const report = (end: boolean) => {
      if (!opened && (peerRead || end)) {
        opened = true;
        const conn = info.downstream;
        const source = cfg.reporter === 'source';
        const cluster = info.upstreamCluster;
        const up = source ? (info.upstreamTls ?? { peer: '', local: '' }) : undefined;
        const part = this.parts.get({
          peer: source ? endpointWorkload(info.upstreamHostMetadata) : undefined,
          endpointPeer: undefined,
          peerSan: up ? up.peer : (conn.peerUriSans[0] ?? ''),
          localSan: up ? up.local : (conn.ssl?.uriSanLocalCertificate[0] ?? ''),
          hostHeader: undefined,
          routeName: '',
          clusterName: cluster,
          clusterMetadata: cluster ? this.clusterMetadata(cluster) : undefined,
        });
        // Istio evaluates the dimension expressions once, just before the first TCP metric
        const exprs = cfg.sink.overrides.exprs;
        const values =
          exprs.length === 0
            ? NO_VALUES
            : exprs.map((f) =>
                f({
                  info,
                  xds: {
                    ...(cluster ? { clusterMetadata: this.clusterMetadata(cluster) ?? {} } : {}),
                    ...(info.upstreamHostMetadata ? { upstreamHostMetadata: info.upstreamHostMetadata } : {}),
                  },
                }),
              );
        series = part.tcpSeries(info.flagString(), values);
        series.opened?.inc();
      }
      if (series) {
        series.sent?.inc(info.bytesSent - sent);
        series.received?.inc(info.bytesReceived - received);
        sent = info.bytesSent;
        received = info.bytesReceived;
      }
      if (end) series?.closed?.inc();
    };
    const timer = cfg.reportingMs > 0 ? setInterval(() => report(false), cfg.reportingMs) : undefined;
    timer?.unref();
    return {
      connected: () => {
        if (this.exchange || cfg.reporter === 'source') peerRead = true;
      },
      closed: () => {
        if (timer) clearInterval(timer);
        report(true);
      },
    };
  }
}
