// Istio's network filters in front of tcp_proxy (istio/proxy release-1.26): istio.stats as a network filter
// (istio_stats.cc, IstioStatsFilter as Network::ReadFilter: istio_tcp_connections_opened_total,
// _closed_total, istio_tcp_sent_bytes_total, istio_tcp_received_bytes_total, reported every
// tcp_reporting_duration once the peer lookup has concluded, and at close), and istio.metadata_exchange
// (envoy.tcp.metadataexchange.config.MetadataExchange), the in-band exchange of ../istio/tcp-exchange.ts, run
// here between the two sockets tcp_proxy splices: the listener's filter on the downstream connection and the
// cluster's upstream filter (Cluster.filters) on the upstream one, each when its TLS negotiated
// `istio-peer-exchange`. The peer goes to filter state: the connection's (`downstream_peer`) and the upstream
// connection's (`upstream_peer`), or `peer_not_found`; istio.stats reads the connection's inbound and the
// upstream's outbound (the connection's until there is an upstream), and reports once either key is there,
// falling back to the endpoint's `istio.workload` labels outbound. Without an exchange filter on that side the
// lookup never concludes and everything is reported at close, as in Istio.
// tcp_proxy's byte counts (and so Istio's sent/received bytes) leave the exchange's own bytes out, as Envoy's
// do: tcp_proxy counts what the filters before it let through.
// Differs on purpose: an exchange filter on an HTTP connection manager chain, or on the connections of a
// cluster's HTTP pools, is accepted and does nothing (Istio's HTTP chains and HTTP clusters never negotiate
// `istio-peer-exchange`; Istio's filter would only count `alpn_protocol_not_found` there).
import type net from 'node:net';
import { Transform } from 'node:stream';
import tls from 'node:tls';
import type { StreamInfo } from '../stream-info';
import { endpointWorkload, istioStatsConfig, PeerParts, type IstioStatsConfig, type TcpSeries } from '../istio/reporting';
import { ExchangeFilter, NO_PEER, ownExchange, type ExchangeConfig, type ExchangeConnection } from '../istio/tcp-exchange';
import { DOWNSTREAM_PEER, UPSTREAM_PEER, type Workload } from '../istio/workload';
import type { LocalInfo } from '../common/local-info';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { StatsStore } from '../stats/store';

/** Filter state of one proxied connection: the downstream connection's, and the upstream's once connected. */
export interface TcpFilterState {
  readonly connection: Map<string, unknown>;
  upstream: Map<string, unknown> | undefined;
}

/** A network filter that watches connections handed to tcp_proxy. */
export interface ConnectionObserver {
  open(info: StreamInfo, state: TcpFilterState): ConnectionTracker;
}
export interface ConnectionTracker {
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
    private readonly clusterMetadata: (cluster: string) => JsonObject | undefined,
  ) {
    this.cfg = istioStatsConfig(any, where, store, nodeMetadata, direction);
    this.parts = new PeerParts(this.cfg);
  }

  open(info: StreamInfo, state: TcpFilterState): ConnectionTracker {
    const cfg = this.cfg;
    const source = cfg.reporter === 'source';
    // peerInfoRead / peerInfo: the client side reads the upstream connection's filter state
    const peerKey = source ? UPSTREAM_PEER : DOWNSTREAM_PEER;
    const filterState = () => (source && state.upstream) || state.connection;
    let peerRead = false;
    let series: TcpSeries | undefined;
    let opened = false;
    let sent = 0;
    let received = 0;
    const report = (end: boolean) => {
      if (!peerRead) {
        const fs = filterState();
        peerRead = fs.has(peerKey) || fs.has(NO_PEER);
      }
      if (!opened && (peerRead || end)) {
        opened = true;
        const conn = info.downstream;
        const cluster = info.upstreamCluster;
        const up = source ? (info.upstreamTls ?? { peer: '', local: '' }) : undefined;
        const exchanged = filterState().get(peerKey) as Workload | undefined;
        const part = this.parts.get({
          peer: source ? (exchanged ?? endpointWorkload(info.upstreamHostMetadata)) : exchanged,
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
      closed: () => {
        if (timer) clearInterval(timer);
        report(true);
      },
    };
  }
}

/** The Istio filters of one chain in front of tcp_proxy, and this proxy's identity for the exchange. */
export class TcpChainFilters {
  constructor(
    readonly observers: readonly ConnectionObserver[],
    /** The listener's istio.metadata_exchange, when the chain has one. */
    readonly exchange: ExchangeConfig | undefined,
    readonly local: LocalInfo,
  ) {}

  open(info: StreamInfo): TcpConnectionFilters {
    return new TcpConnectionFilters(this, info);
  }
}

const EMPTY = Buffer.alloc(0);

/** Byte counts of what tcp_proxy forwards (after the exchange filters took their bytes off). */
export interface SpliceCounts {
  received(n: number): void;
  sent(n: number): void;
}

/** One proxied connection's filters: its filter state, the stats trackers, the exchange on either side. */
export class TcpConnectionFilters {
  readonly state: TcpFilterState = { connection: new Map(), upstream: undefined };
  private readonly trackers: ConnectionTracker[];

  constructor(
    private readonly chain: TcpChainFilters,
    private readonly info: StreamInfo,
  ) {
    this.trackers = chain.observers.map((o) => o.open(info, this.state));
  }

  /** Whether bytes must go through splice() rather than a plain pipe (an exchange on either side). */
  exchanges(upstream: ExchangeConfig | undefined): boolean {
    return !!(this.chain.exchange || upstream);
  }

  /** The upstream connection is up: its filter state exists from here on (tcp_proxy's upstreamFilterState). */
  connected(): void {
    this.state.upstream = new Map();
  }

  closed(): void {
    for (const t of this.trackers) t.closed();
  }

  /**
   * Splices the two sockets through the exchange filters: downstream reads pass the listener's filter then
   * the cluster's (as an upstream write); upstream reads pass the cluster's filter then the listener's (as a
   * downstream write). `head`: bytes already read from the downstream.
   */
  splice(down: net.Socket, up: net.Socket, head: Buffer | undefined, upstream: ExchangeConfig | undefined, counts: SpliceCounts): void {
    const local = this.chain.local;
    let toUpEnded = false;
    let toDownEnded = false;
    const toUp = new Transform();
    const toDown = new Transform();
    const closeBoth = () => {
      up.destroy();
      down.destroy();
    };
    const dmx =
      this.chain.exchange &&
      new ExchangeFilter(this.chain.exchange, 'downstream', ownExchange(this.chain.exchange, local), {
        alpn: () => this.info.downstream.alpn,
        inject: (b) => void (toDownEnded || toDown.push(b)),
        state: this.state.connection,
        close: closeBoth,
      } satisfies ExchangeConnection);
    const umx =
      upstream &&
      new ExchangeFilter(upstream, 'upstream', ownExchange(upstream, local), {
        alpn: () => (up instanceof tls.TLSSocket && typeof up.alpnProtocol === 'string' ? up.alpnProtocol : ''),
        inject: (b) => void (toUpEnded || toUp.push(b)),
        state: (this.state.upstream ??= new Map()),
        close: closeBoth,
      } satisfies ExchangeConnection);
    // downstream → upstream: what the listener's filter lets through is tcp_proxy's, then an upstream write
    const forwardUp = (chunk: Buffer, end: boolean) => {
      const d = dmx ? dmx.onData(chunk, end) : chunk;
      if (d.length === 0) return;
      counts.received(d.length);
      umx?.onWrite();
      toUp.push(d);
    };
    // upstream → downstream: the cluster's filter reads first, then the write to the downstream
    const forwardDown = (chunk: Buffer, end: boolean) => {
      const d = umx ? umx.onData(chunk, end) : chunk;
      if (d.length === 0) return;
      counts.sent(d.length);
      dmx?.onWrite();
      toDown.push(d);
    };
    toUp._transform = (chunk: Buffer, _e, cb) => (forwardUp(chunk, false), cb());
    toUp._flush = (cb) => (forwardUp(EMPTY, true), (toUpEnded = true), cb());
    toDown._transform = (chunk: Buffer, _e, cb) => (forwardDown(chunk, false), cb());
    toDown._flush = (cb) => (forwardDown(EMPTY, true), (toDownEnded = true), cb());
    if (head && head.length > 0) toUp.write(head);
    down.pipe(toUp).pipe(up);
    up.pipe(toDown).pipe(down);
  }
}
