// One listener (static or from LDS): filter chains compiled from the proto, and connection handling:
// inspect the first bytes when chain selection or the codec needs them, pick the chain, terminate TLS
// if the chain says so, then hand the connection to the HTTP connection manager or the TCP proxy.
import net from 'node:net';
import tls from 'node:tls';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { OriginalSrcSchema } from '../../gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb';
import type { Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { TrafficDirection } from '../../gen/envoy/config/core/v3/base_pb';
import type { HcmDeps } from '../http/hcm-config';
import type { ConnectionContext } from '../http/stream';
import type { Logger } from '../log';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import type { Counter, Gauge } from '../stats/store';
import { plainIp, type DownstreamConnectionInfo } from '../stream-info';
import { applyPeer } from '../tls/context';
import type { Destination, OriginalDstSource } from '../../native/original-dst';
import type { SecretManager } from '../tls/secrets';
import type { ClusterManager } from '../upstream/cluster-manager';
import type { SourceBinder, UpstreamSource } from '../upstream/source';
import { chainMatchKey, needsInspection, selectChain } from './chain-match';
import type { Sniffed } from './sniff';
import { acceptPacer, listenBacklog } from '../common/accept';
import { compileFilterChain, releaseChain, type CompiledChain } from './filter-chain';
import { inspectorsOf, peekFirstBytes, type Inspectors, type PeekOptions } from './inspect';
import { ipFamily } from '../../lib/ip';

const ORIGINAL_SRC = 'type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc';
const KNOWN_LISTENER_FILTERS = new Set([
  'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector',
  'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector',
  'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst',
  ORIGINAL_SRC,
]);
const KNOWN_LISTENER_FILTER_NAMES = new Set([
  'envoy.filters.listener.tls_inspector',
  'envoy.filters.listener.http_inspector',
  'envoy.filters.listener.original_dst',
  'envoy.filters.listener.original_src',
]);

function originalSrcOf(proto: Listener, where: string): { mark: number } | undefined {
  const i = proto.listenerFilters.findIndex((f) =>
    f.configType.case === 'typedConfig' ? f.configType.value.typeUrl === ORIGINAL_SRC : f.name === 'envoy.filters.listener.original_src',
  );
  if (i < 0) return undefined;
  const f = proto.listenerFilters[i]!;
  if (f.configType.case !== 'typedConfig') return { mark: 0 };
  try {
    return { mark: anyUnpack(f.configType.value, OriginalSrcSchema)?.mark ?? 0 };
  } catch (e) {
    throw new ConfigError(`${where}.listener_filters[${i}]: cannot decode OriginalSrc: ${(e as Error).message}`);
  }
}

export interface ListenerDeps extends HcmDeps {
  clusters: ClusterManager;
  secrets: SecretManager;
  log: HcmDeps['log'];
  /** Engine-wide drain (server draining) on top of this listener's own. */
  serverDraining: () => boolean;
  /** use_original_dst: the listener that owns a destination, if any (Envoy's original-dst handoff). */
  findListenerFor: (address: string, port: number) => ListenerRuntime | undefined;
  /** SO_ORIGINAL_DST; undefined where the native addon is missing (destinations are guessed then). */
  originalDst: OriginalDstSource | undefined;
  /** Transparent upstream sockets for the original_src filter (unavailable without the addon). */
  sourceBinder: SourceBinder;
}

/** A connection another listener passes on by its original destination. */
export interface Handoff {
  /** Bytes already read from the socket. */
  head: Buffer;
  destination: Destination;
  /** The first listener already counted it (it read the request to guess the destination). */
  accounted: boolean;
  /** What the first listener's original_src filter set (socket options stay with the socket). */
  upstreamSource?: UpstreamSource | undefined;
}

export interface ListenerStats {
  cxTotal: Counter;
  cxActive: Gauge;
  cxDestroy: Counter;
  noChain: Counter;
  preCxActive: Gauge;
  preCxTimeout: Counter;
  sslHandshake: Counter;
  sslError: Counter;
  sslSessionReused: Counter;
  sslNoCert: Counter;
}

export function listenerAddress(l: Listener, where: string): { host: string; port: number; pipe?: string; ipv4Compat?: boolean } {
  const a = l.address?.address;
  if (a?.case === 'socketAddress') {
    if (a.value.portSpecifier.case !== 'portValue') throw new ConfigError(`${where}.address.socket_address: a port_value is required`);
    return { host: a.value.address, port: a.value.portSpecifier.value, ipv4Compat: a.value.ipv4Compat };
  }
  if (a?.case === 'pipe') return { host: '', port: 0, pipe: a.value.path };
  if (l.apiListener) throw new ConfigError(`${where}.api_listener: API listeners are for gRPC clients, not proxies`);
  throw new ConfigError(`${where}.address: a socket_address or pipe is required`);
}

/** Envoy's listener stat prefix: the address as `ip_port` (`[::]_80` for IPv6). */
export function listenerStatPrefix(l: Listener, addr: { host: string; port: number; pipe?: string }): string {
  if (l.statPrefix) return l.statPrefix;
  if (addr.pipe) return addr.pipe;
  return addr.host.includes(':') ? `[${addr.host}]_${addr.port}` : `${addr.host}_${addr.port}`;
}

/**
 * Node sets `authorized` / `authorizationError` only on sockets a tls.Server accepted; a TLSSocket
 * wrapped around an accepted socket (TLS in front of tcp_proxy) must read OpenSSL's verdict itself,
 * or every client certificate would look unverified.
 */
function recordChainVerification(t: tls.TLSSocket, requested: boolean): void {
  if (!requested) return;
  const handle = (t as unknown as { _handle?: { verifyError?: () => (Error & { code?: string }) | null } })._handle;
  const err = handle?.verifyError?.();
  // Node itself stores the OpenSSL code string here despite the Error typing
  if (err) (t as unknown as { authorizationError: string }).authorizationError = err.code ?? err.message;
  else if (handle?.verifyError) t.authorized = true;
}

export class ListenerRuntime {
  readonly address: { host: string; port: number; pipe?: string; ipv4Compat?: boolean };
  readonly chains: CompiledChain[];
  readonly defaultChain: CompiledChain | undefined;
  readonly statPrefix: string;
  readonly stats: ListenerStats;
  readonly bindToPort: boolean;
  /** The listen backlog: tcp_backlog_size, else the kernel's somaxconn (Envoy's default; Node's is 511). */
  readonly backlog: number;
  readonly useOriginalDst: boolean;
  /** The original_dst listener filter: restore the destination (SO_ORIGINAL_DST) for chain matching. */
  private readonly originalDstFilter: boolean;
  /**
   * The original_src listener filter's config (Istio adds it in TPROXY mode, mark 1337): upstreams leave
   * from the downstream's address with that SO_MARK (upstream/source.ts); where the native addon cannot make
   * such sockets they leave from the proxy's address (the listener manager says so once).
   */
  readonly originalSrc: { mark: number } | undefined;
  readonly inbound: boolean;
  readonly ready: Promise<void>;
  /** Which inspectors read the first bytes of a connection to this destination port. */
  private readonly inspect: (port: number) => Inspectors;
  /** How the first bytes are read: listener_filters_timeout and what happens when it fires. */
  private readonly peekOptions: PeekOptions;
  /** Set by the listener manager once the listener may serve. */
  active = false;
  draining = false;
  readonly connections = new Set<net.Socket>();
  private readonly pending: Array<[net.Socket, Handoff | undefined]> = [];
  private readonly log: Logger;

  constructor(
    readonly proto: Listener,
    readonly versionInfo: string,
    readonly isStatic: boolean,
    private readonly deps: ListenerDeps,
  ) {
    const where = `listener '${proto.name}'`;
    if (!proto.name) throw new ConfigError('listener: name must not be empty');
    this.log = deps.log.get('conn_handler');
    this.address = listenerAddress(proto, where);
    this.statPrefix = listenerStatPrefix(proto, this.address);
    this.bindToPort = proto.bindToPort ?? true;
    this.backlog = listenBacklog(proto.tcpBacklogSize);
    this.useOriginalDst = proto.useOriginalDst ?? false;
    this.originalDstFilter = proto.listenerFilters.some(
      (f) =>
        f.name === 'envoy.filters.listener.original_dst' ||
        (f.configType.case === 'typedConfig' && f.configType.value.typeUrl.endsWith('.original_dst.v3.OriginalDst')),
    );
    this.inbound = proto.trafficDirection === TrafficDirection.INBOUND;
    this.originalSrc = originalSrcOf(proto, where);
    if (proto.additionalAddresses.length > 0) throw new ConfigError(`${where}.additional_addresses: listening on several addresses is not supported`);
    if (proto.filterChainMatcher)
      throw new ConfigError(`${where}.filter_chain_matcher: the generic matcher is not supported; use filter_chain_match`);
    if (proto.udpListenerConfig || (proto.address?.address.case === 'socketAddress' && proto.address.address.value.protocol === 1)) {
      throw new ConfigError(`${where}: UDP listeners are not supported`);
    }
    proto.listenerFilters.forEach((f, i) => {
      const t = f.configType.case === 'typedConfig' ? f.configType.value.typeUrl : undefined;
      if (t ? !KNOWN_LISTENER_FILTERS.has(t) : !KNOWN_LISTENER_FILTER_NAMES.has(f.name)) {
        throw new ConfigError(`${where}.listener_filters[${i}]: Didn't find a registered implementation for name: '${f.name}'`);
      }
    });
    const s = deps.stats.scope(`listener.${this.statPrefix}.`);
    this.stats = {
      cxTotal: s.counter('downstream_cx_total'),
      cxActive: s.gauge('downstream_cx_active'),
      cxDestroy: s.counter('downstream_cx_destroy'),
      noChain: s.counter('no_filter_chain_match'),
      preCxActive: s.gauge('downstream_pre_cx_active'),
      preCxTimeout: s.counter('downstream_pre_cx_timeout'),
      sslHandshake: s.counter('ssl.handshake'),
      sslError: s.counter('ssl.connection_error'),
      sslSessionReused: s.counter('ssl.session_reused'),
      sslNoCert: s.counter('ssl.no_certificate'),
    };
    const chainCtx = {
      deps: { ...deps, trafficDirection: proto.trafficDirection },
      isStatic,
      port: this.address.port,
      log: this.log,
      egress: proto.trafficDirection === TrafficDirection.OUTBOUND,
    };
    const built: CompiledChain[] = [];
    try {
      const seen = new Map<string, number>();
      proto.filterChains.forEach((fc, i) => {
        const c = compileFilterChain(fc, `${where}.filter_chains[${i}]`, chainCtx);
        built.push(c);
        const key = chainMatchKey(c.match);
        const prev = seen.get(key);
        if (prev !== undefined) {
          throw new ConfigError(`multiple filter chains with the same matching rules are defined: filter_chains[${prev}] and filter_chains[${i}]`);
        }
        seen.set(key, i);
      });
      this.chains = built;
      this.defaultChain = proto.defaultFilterChain
        ? compileFilterChain(proto.defaultFilterChain, `${where}.default_filter_chain`, chainCtx)
        : undefined;
    } catch (e) {
      for (const c of built) releaseChain(c);
      throw e;
    }
    if (this.chains.length === 0 && !this.defaultChain) throw new ConfigError(`${where}: no filter chains specified`);
    this.inspect = inspectorsOf(proto, needsInspection(this.chains), where);
    this.peekOptions = {
      stats: this.stats,
      timeoutMs: durationToMs(proto.listenerFiltersTimeout) ?? 15_000,
      continueOnTimeout: proto.continueOnListenerFiltersTimeout,
    };
    const waits: Array<Promise<void>> = [];
    for (const c of [...this.chains, ...(this.defaultChain ? [this.defaultChain] : [])]) {
      if (c.hcm) waits.push(c.hcm.ready);
      if (c.tls) waits.push(c.tls.ready);
    }
    this.ready = Promise.all(waits).then(() => undefined);
  }

  release(): void {
    for (const c of this.chains) releaseChain(c);
    if (this.defaultChain) releaseChain(this.defaultChain);
  }

  /** Serve connections that arrived while warming. */
  activate(): void {
    this.active = true;
    for (const [s, h] of this.pending.splice(0)) if (!s.destroyed) this.onConnection(s, h);
  }

  isDraining(): boolean {
    return this.draining || this.deps.serverDraining();
  }

  /** Whether this listener restores the original destination (original_dst filter or use_original_dst). */
  get restoresDestination(): boolean {
    return this.useOriginalDst || this.originalDstFilter;
  }

  /** Counts a connection as this listener's (Envoy counts a handed-off one only in the listener that takes it). */
  private account(socket: net.Socket): void {
    this.connections.add(socket);
    this.stats.cxTotal.inc();
    this.stats.cxActive.inc();
    socket.once('close', () => {
      this.connections.delete(socket);
      this.stats.cxActive.dec();
      this.stats.cxDestroy.inc();
    });
  }

  /**
   * Entry point for accepted sockets (the manager owns the net.Server), and for connections another
   * listener handed over by their original destination (`handoff`; `accounted` when that listener
   * already counted it because it had to read the request to find the destination).
   */
  onConnection(socket: net.Socket, handoff?: Handoff): void {
    if (!handoff) acceptPacer.accepted();
    if (!this.active) {
      this.pending.push([socket, handoff]);
      return;
    }
    const source = this.deps.originalDst;
    let destination = handoff?.destination;
    const upstreamSource = this.upstreamSourceFor(socket) ?? handoff?.upstreamSource;
    if (!handoff && this.restoresDestination && source) {
      // Envoy's original_dst listener filter: the address before the REDIRECT, else (TPROXY, or not
      // redirected at all) the socket's own local address, which then already is the destination.
      destination = source.read(socket) ?? { address: plainIp(socket.localAddress), port: socket.localPort ?? this.address.port };
      if (this.useOriginalDst) {
        // use_original_dst: the listener that owns the destination takes the connection before any
        // byte is read and runs its own listener filters and chain selection.
        const target = this.deps.findListenerFor(destination.address, destination.port);
        if (target && target !== this) {
          target.onConnection(socket, { head: Buffer.alloc(0), destination, accounted: false, upstreamSource });
          return;
        }
      }
    }
    socket.setNoDelay(true);
    if (!handoff?.accounted) this.account(socket);
    socket.on('error', () => {});
    const info: DownstreamConnectionInfo = {
      remoteAddress: plainIp(socket.remoteAddress),
      remotePort: socket.remotePort ?? 0,
      // a restored destination is the connection's local address from here on (Envoy restoreLocalAddress)
      localAddress: destination ? destination.address : plainIp(socket.localAddress),
      localPort: destination ? destination.port : (socket.localPort ?? this.address.port),
      serverName: '',
      alpn: '',
      tls: false,
      peerCertificatePresented: false,
      peerCertificateValidated: false,
      peerUriSans: [],
      peerDnsSans: [],
      peerSubject: '',
      ...(destination ? { originalDestination: destination } : {}),
      ...(upstreamSource ? { upstreamSource } : {}),
    };
    // Without the addon the destination is guessed from what the client asked for (HTTP Host /
    // absolute URL, or TLS SNI with port 443): the first bytes have to be read for that.
    const guess = this.restoresDestination && !source && !handoff;
    const head = handoff?.head;
    const singleChain = this.chains.length === 1 && !this.defaultChain ? this.chains[0]! : undefined;
    const insp = this.inspect(info.localPort);
    // no inspection for a lone TCP or TLS chain: server-first protocols work and nothing is buffered
    if (singleChain && (singleChain.tcp || singleChain.tls) && !insp.tls && !insp.http && !guess && !(head && head.length > 0)) {
      this.dispatch(socket, singleChain, info, undefined);
      return;
    }
    // Several chains that differ only by destination (port, prefix ranges) need no byte either: the
    // passthrough and black-hole chains of virtualOutbound serve server-first protocols too.
    if (!guess && !insp.tls && !insp.http && !(head && head.length > 0)) {
      const chain = this.selectFor(info, { kind: 'raw', alpn: [] });
      if (!chain) {
        this.noChain(socket, info);
        return;
      }
      if (chain.tcp) {
        this.dispatch(socket, chain, info, undefined);
        return;
      }
    }
    peekFirstBytes(socket, head, guess, insp, this.peekOptions, (buf, sniffed, host) => {
      if (guess) {
        const dst = host
          ? { address: host.host === 'localhost' ? '127.0.0.1' : host.host, port: host.port }
          : sniffed.kind === 'tls' && sniffed.sni
            ? { address: sniffed.sni, port: 443 }
            : undefined;
        if (dst) {
          info.originalDestination = dst;
          const target = this.useOriginalDst ? this.deps.findListenerFor(dst.address, dst.port) : undefined;
          if (target && target !== this) {
            socket.unshift(buf);
            // the target listener accounts the connection under its own stats as Envoy's handoff does
            target.stats.cxTotal.inc();
            target.onConnection(socket, { head: Buffer.alloc(0), destination: dst, accounted: true, upstreamSource });
            return;
          }
        }
      }
      info.serverName = sniffed.kind === 'tls' ? sniffed.sni : '';
      // application protocols of plaintext come only from an http_inspector that ran
      const chain = this.selectFor(info, sniffed.kind === 'raw' && !insp.http ? { kind: 'raw', alpn: [] } : sniffed);
      socket.unshift(buf);
      if (!chain) {
        this.noChain(socket, info);
        return;
      }
      this.dispatch(socket, chain, info, sniffed);
    });
  }

  /**
   * Envoy's original_src listener filter: IP downstreams only (nothing to do for a Unix socket peer), and only
   * where transparent sockets can be made (else upstreams leave from the proxy, as the manager warned).
   */
  private upstreamSourceFor(socket: net.Socket): UpstreamSource | undefined {
    if (!this.originalSrc || !this.deps.sourceBinder.available) return undefined;
    const address = plainIp(socket.remoteAddress);
    if (!address || !ipFamily(address)) return undefined;
    return { address, mark: this.originalSrc.mark, binder: this.deps.sourceBinder };
  }

  private noChain(socket: net.Socket, info: DownstreamConnectionInfo): void {
    this.stats.noChain.inc();
    this.log.debug(`closing connection from ${info.remoteAddress} to ${info.localAddress}:${info.localPort}: no matching filter chain found`);
    socket.destroy();
  }

  private selectFor(info: DownstreamConnectionInfo, sniffed: Sniffed): CompiledChain | undefined {
    const facts = {
      destinationPort: info.originalDestination?.port ?? info.localPort,
      destinationIp: info.originalDestination && ipFamily(info.originalDestination.address) ? info.originalDestination.address : info.localAddress,
      serverName: info.serverName,
      transportProtocol: sniffed.kind === 'tls' ? 'tls' : 'raw_buffer',
      applicationProtocols: sniffed.kind === 'more' ? [] : sniffed.alpn,
      sourceIp: info.remoteAddress,
      sourcePort: info.remotePort,
    };
    return selectChain(this.chains, facts) ?? this.defaultChain;
  }

  private dispatch(socket: net.Socket, chain: CompiledChain, info: DownstreamConnectionInfo, sniffed: Sniffed | undefined): void {
    // Network filters see the connection after the transport socket: on TLS chains the peer
    // certificate is known only once the handshake is done, so RBAC runs there.
    const rbacAllows = (): boolean => chain.rbac.every((r) => r.check(info));
    if (!chain.tls) {
      if (!rbacAllows()) {
        this.log.debug(`closing connection from ${info.remoteAddress}: rbac denied`);
        socket.destroy();
        return;
      }
      if (chain.tcp) {
        chain.tcp.handle(socket, undefined, info);
        return;
      }
      const h2 = sniffed?.kind === 'raw' && sniffed.alpn.includes('h2c') ? true : chain.hcm!.options.codec === 'http2';
      this.serveHttp(socket, chain, info, h2);
      return;
    }
    const ctx = chain.tls;
    // Envoy (BoringSSL) completes the handshake without ALPN when the client offers none of the
    // context's protocols; Node's server would send a fatal no_application_protocol alert instead, so
    // such a client is served by a context without ALPN (the tls_inspector told what it offers).
    const offered = sniffed?.kind === 'tls' ? sniffed.alpn : [];
    const negotiateAlpn = ctx.alpn.length === 0 || offered.length === 0 || offered.some((p) => ctx.alpn.includes(p));
    if (!ctx.hasCertificates()) {
      this.stats.sslNoCert.inc();
      socket.destroy();
      return;
    }
    if (chain.hcm && negotiateAlpn) {
      chain.hcm.serveTls(socket, { info, draining: () => this.isDraining() }, ctx, {
        onHandshake: (t) => {
          this.stats.sslHandshake.inc();
          if (t.isSessionReused()) this.stats.sslSessionReused.inc();
          return rbacAllows();
        },
        onError: (why) => {
          this.stats.sslError.inc();
          this.log.debug(`TLS error from ${info.remoteAddress}: ${why}`);
        },
      });
      return;
    }
    // TLS terminated here: in front of tcp_proxy, or of HTTP/1.1 when no ALPN was agreed
    const o = ctx.secureOptions();
    let secureContext: tls.SecureContext;
    try {
      secureContext = ctx.secureContext();
    } catch (e) {
      this.log.warn((e as Error).message);
      socket.destroy();
      return;
    }
    const t = new tls.TLSSocket(socket, {
      isServer: true,
      secureContext,
      requestCert: o.requestCert ?? false,
      rejectUnauthorized: o.rejectUnauthorized,
      ...(ctx.alpn.length > 0 && negotiateAlpn ? { ALPNProtocols: ctx.alpn } : {}),
    });
    t.on('error', () => {
      this.stats.sslError.inc();
      t.destroy();
      socket.destroy();
    });
    t.once('secure', () => {
      this.stats.sslHandshake.inc();
      if (t.isSessionReused()) this.stats.sslSessionReused.inc();
      info.tls = true;
      info.alpn = typeof t.alpnProtocol === 'string' ? t.alpnProtocol : '';
      recordChainVerification(t, o.requestCert ?? false);
      const v = ctx.verifyPeer(t);
      if (v.error) {
        this.stats.sslError.inc();
        this.log.debug(`TLS error from ${info.remoteAddress}: ${v.error}`);
        t.destroy();
        return;
      }
      applyPeer(info, v.peer);
      if (!rbacAllows()) {
        this.log.debug(`closing connection from ${info.remoteAddress}: rbac denied`);
        t.destroy();
        return;
      }
      if (chain.tcp) chain.tcp.handle(t, undefined, info);
      else this.serveHttp(t, chain, info, false);
    });
  }

  private serveHttp(socket: net.Socket, chain: CompiledChain, info: DownstreamConnectionInfo, h2: boolean): void {
    const ctx: ConnectionContext = { info, draining: () => this.isDraining() };
    chain.hcm!.serveConnection(socket, ctx, h2);
  }
}
