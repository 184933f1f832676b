// envoy.filters.network.tcp_proxy (and envoy.filters.network.rbac in front of it): pick a cluster
// (one, or weighted), pick a host, connect with the cluster's settings and splice the two sockets,
// replaying the bytes the listener already read for inspection.
import type net from 'node:net';
import type { Any } from '@bufbuild/protobuf/wkt';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { TcpProxySchema } from '../../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { RBACSchema as NetworkRbacSchema } from '../../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { compileAccessLogs, type AccessLogger } from '../accesslog';
import type { ClusterCall } from '../common/cluster-call';
import type { Logger } from '../log';
import { ConfigError } from '../common/config-error';
import { RbacEngine } from '../rbac/engine';
import { durationToMs } from '../common/duration';
import type { Counter, Gauge, StatsStore } from '../stats/store';
import { plainIp, StreamInfo, type DownstreamConnectionInfo } from '../stream-info';
import { joinHostPort } from '../../lib/hostport';
import type { ClusterManager } from '../upstream/cluster-manager';
import { connectUpstream, readyEvent } from '../upstream/pool';
import type { TcpChainFilters } from './istio-network';
import { upstreamIdentities } from '../tls/identities';

/** Envoy statPrefixJoin: `a.` + `b` and `a` + `b` both give `a.b`. */
function statPrefixJoin(prefix: string, token: string): string {
  if (prefix === '') return token;
  return prefix.endsWith('.') ? `${prefix}${token}` : `${prefix}.${token}`;
}

/**
 * envoy.filters.network.rbac: connection attributes only (addresses, ports, SNI, peer certificate).
 * Envoy decides on the first bytes (ONE_TIME_ON_FIRST_BYTE) or on every read (CONTINUOUS); since
 * nothing it looks at changes during a connection, both come down to one decision per connection,
 * taken here once the connection (and its TLS handshake, if any) is established.
 */
export class NetworkRbac {
  private readonly engine: RbacEngine | undefined;
  private readonly shadow: RbacEngine | undefined;
  private readonly allowed: Counter;
  private readonly denied: Counter;
  private readonly shadowAllowed: Counter;
  private readonly shadowDenied: Counter;
  constructor(any: Any, where: string, stats: StatsStore) {
    const r = anyUnpack(any, NetworkRbacSchema);
    if (!r) throw new ConfigError(`${where}: cannot decode ${any.typeUrl}`);
    if (r.matcher || r.shadowMatcher) throw new ConfigError(`${where}: matcher-based RBAC is not supported; use rules`);
    if (!r.statPrefix) throw new ConfigError(`${where}.stat_prefix: value length must be at least 1 characters`);
    this.engine = r.rules ? new RbacEngine(r.rules, `${where}.rules`) : undefined;
    this.shadow = r.shadowRules ? new RbacEngine(r.shadowRules, `${where}.shadow_rules`) : undefined;
    // Envoy generateStats: `<stat_prefix>rbac.` then the shadow rules' own prefix for shadow counters
    const s = stats.scope(statPrefixJoin(r.statPrefix, 'rbac.'));
    this.allowed = s.counter('allowed');
    this.denied = s.counter('denied');
    this.shadowAllowed = s.counter(`${r.shadowRulesStatPrefix}shadow_allowed`);
    this.shadowDenied = s.counter(`${r.shadowRulesStatPrefix}shadow_denied`);
  }
  /** false = close the connection. */
  check(conn: DownstreamConnectionInfo): boolean {
    const input = { headers: undefined, path: undefined, connection: conn, dynamicMetadata: undefined };
    if (this.shadow) (this.shadow.evaluate(input).allowed ? this.shadowAllowed : this.shadowDenied).inc();
    if (!this.engine) return true;
    const d = this.engine.evaluate(input);
    (d.allowed ? this.allowed : this.denied).inc();
    return d.allowed;
  }
}

interface WeightedTarget {
  name: string;
  weight: number;
}

export class TcpProxy {
  private readonly cluster: string | undefined;
  private readonly weighted: WeightedTarget[];
  private readonly total: number;
  private readonly idleMs: number;
  private readonly maxAttempts: number;
  private readonly accessLogs: AccessLogger[];
  private readonly s: {
    cxTotal: Counter;
    noRoute: Counter;
    rxBytes: Counter;
    txBytes: Counter;
    idleTimeout: Counter;
    active: Gauge;
    connectAttemptsExceeded: Counter;
  };

  constructor(
    any: Any,
    where: string,
    stats: StatsStore,
    private readonly clusters: ClusterManager,
    private readonly log: Logger,
    call: ClusterCall | undefined,
    /** Istio's network filters before this one (istio.stats, istio.metadata_exchange) and the node they describe. */
    private readonly filters: TcpChainFilters,
  ) {
    const t = anyUnpack(any, TcpProxySchema);
    if (!t) throw new ConfigError(`${where}: cannot decode ${any.typeUrl}`);
    if (!t.statPrefix) throw new ConfigError(`${where}.stat_prefix: value length must be at least 1 characters`);
    if (t.tunnelingConfig) throw new ConfigError(`${where}.tunneling_config: not supported`);
    const cs = t.clusterSpecifier;
    if (cs.case === 'cluster') {
      this.cluster = cs.value;
      this.weighted = [];
    } else if (cs.case === 'weightedClusters') {
      this.cluster = undefined;
      this.weighted = cs.value.clusters.map((c) => ({ name: c.name, weight: c.weight }));
      if (this.weighted.length === 0) throw new ConfigError(`${where}.weighted_clusters.clusters: at least one cluster is required`);
    } else throw new ConfigError(`${where}: cluster or weighted_clusters is required`);
    this.total = this.weighted.reduce((a, c) => a + c.weight, 0);
    this.idleMs = durationToMs(t.idleTimeout) ?? 3_600_000;
    this.maxAttempts = t.maxConnectAttempts ?? 1;
    this.accessLogs = compileAccessLogs(t.accessLog, where, { call });
    const sc = stats.scope(`tcp.${t.statPrefix}.`);
    this.s = {
      cxTotal: sc.counter('downstream_cx_total'),
      noRoute: sc.counter('downstream_cx_no_route'),
      rxBytes: sc.counter('downstream_cx_rx_bytes_total'),
      txBytes: sc.counter('downstream_cx_tx_bytes_total'),
      idleTimeout: sc.counter('idle_timeout'),
      active: sc.gauge('downstream_cx_active'),
      connectAttemptsExceeded: sc.counter('upstream_flush_total'),
    };
  }

  private pickCluster(): string | undefined {
    if (this.cluster !== undefined) return this.cluster;
    let r = Math.floor(Math.random() * this.total);
    for (const c of this.weighted) {
      r -= c.weight;
      if (r < 0) return c.name;
    }
    return this.weighted[0]?.name;
  }

  /** Takes over the downstream socket; `head` are bytes already read from it. */
  handle(down: net.Socket, head: Buffer | undefined, conn: DownstreamConnectionInfo): void {
    this.s.cxTotal.inc();
    this.s.active.inc();
    // Envoy's tcp_proxy enables half-close on both connections (TcpProxy::Filter::initializeReadFilterCallbacks,
    // onPoolReady): a client's FIN is passed on and the other direction stays open until its own FIN
    down.allowHalfOpen = true;
    const info = new StreamInfo(conn);
    info.protocol = '';
    const log = () => {
      info.endHr = performance.now();
      for (const l of this.accessLogs) l({ info });
    };
    const filters = this.filters.open(info);
    down.once('close', () => {
      this.s.active.dec();
      filters.closed();
      log();
    });
    const name = this.pickCluster();
    const cluster = name ? this.clusters.get(name) : undefined;
    if (!cluster) {
      this.s.noRoute.inc();
      info.setFlag('NR');
      down.destroy();
      return;
    }
    info.upstreamCluster = cluster.name;
    const received = (n: number) => {
      info.bytesReceived += n;
      this.s.rxBytes.inc(n);
    };
    const sent = (n: number) => {
      info.bytesSent += n;
      this.s.txBytes.inc(n);
    };
    // an exchange on either side takes its bytes off the stream: tcp_proxy counts what is left
    const exchanges = filters.exchanges(cluster.exchange);
    let attempts = 0;
    const connect = (): void => {
      attempts++;
      let host;
      if (cluster.type === 'ORIGINAL_DST') {
        const dst = conn.originalDestination;
        host = dst ? cluster.originalDstHost(dst.address, dst.port) : undefined;
      } else host = cluster.chooseHost({});
      if (!host) {
        cluster.stats.noneHealthy.inc();
        info.setFlag('UH');
        down.destroy();
        return;
      }
      if (cluster.cxActive >= cluster.thresholds.maxConnections) {
        cluster.stats.cxOverflow.inc();
        info.setFlag('UO');
        down.destroy();
        return;
      }
      info.upstreamHost = host.key;
      info.upstreamHostMetadata = host.metadata;
      const up = connectUpstream(cluster, host, undefined, conn.upstreamSource ? { source: conn.upstreamSource } : undefined);
      up.allowHalfOpen = true;
      let connected = false;
      up.once(readyEvent(up), () => {
        connected = true;
        info.upstreamTls = upstreamIdentities(up, host!.key);
        filters.connected();
        // %UPSTREAM_LOCAL_ADDRESS%
        if (up.localAddress) info.upstreamLocalAddress = joinHostPort(plainIp(up.localAddress), up.localPort ?? 0);
        if (exchanges) filters.splice(down, up, head, cluster.exchange, { received, sent });
        else {
          if (head && head.length > 0) up.write(head);
          down.pipe(up);
          up.pipe(down);
        }
        down.resume();
      });
      if (!exchanges) up.on('data', (d: Buffer) => sent(d.length));
      up.on('error', (e: Error) => {
        if (!connected) {
          this.log.debug(`tcp_proxy: connect to ${host!.key} failed: ${e.message}`);
          if (attempts < this.maxAttempts && !down.destroyed) {
            connect();
            return;
          }
          info.setFlag('UF');
          info.upstreamTransportFailureReason = e.message;
          down.destroy();
        } else down.destroy();
      });
      up.on('close', () => {
        if (connected) down.end();
      });
      down.once('close', () => up.destroy());
      down.on('error', () => up.destroy());
      up.setTimeout(this.idleMs, () => {
        this.s.idleTimeout.inc();
        up.destroy();
        down.destroy();
      });
    };
    if (!exchanges) down.on('data', (d: Buffer) => received(d.length));
    down.pause();
    connect();
  }
}
