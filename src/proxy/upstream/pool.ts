// Upstream connections per host: an HTTP/1.1 keep-alive pool (the engine's own codec, connections
// reused across requests, see codec/h1/client.ts) and one HTTP/2 session (streams multiplexed), both
// opening sockets through connectUpstream() so connect timeouts, TLS, source binding and the cx_*
// counters are the same for HTTP and TCP proxying.
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { PassThrough } from 'node:stream';
import type { BodyReader, BodySource } from '../codec/h1/body';
import { H1Pool, type ClientCallbacks, type ClientFailure } from '../codec/h1/client';
import type { RawHeaders } from '../codec/headers';
import type { Host } from './host';
import { forgetWhenEmpty, type HostPools } from './host-pools';
import type { UpstreamCluster } from './cluster';
import { upstreamIdentities } from '../tls/identities';
import type { UpstreamTransport } from './transport-socket';
import { ipFamily } from '../../lib/ip';
import { sourcePoolKey, type UpstreamSource } from './source';

export type UpstreamFailure = 'connect_failure' | 'reset' | 'overflow' | 'timeout';

/** Envoy's default limit on upstream response headers (max_response_headers_kb 60). */
const MAX_RESPONSE_HEAD_BYTES = 60 * 1024;

/**
 * Options of one upstream connection that keep it apart from others (Envoy hashes transport socket
 * options and socket options into the pool key): the ALPN override a filter set (Istio's istio.alpn
 * filter state), and the source the original_src listener filter gave the downstream connection.
 */
export interface ConnectOptions {
  alpnOverride?: readonly string[] | undefined;
  source?: UpstreamSource | undefined;
}

/** The key of the pool a connection with these options belongs to (per host). */
export function poolKey(transport: string, o: ConnectOptions | undefined): string {
  return `${transport}|${o?.alpnOverride?.join(',') ?? ''}|${sourcePoolKey(o?.source)}`;
}

/** Pools per transport socket, ALPN override and source: a connection is only reused for requests that would make the same one. */
function pools(cluster: UpstreamCluster, host: Host, o: ConnectOptions | undefined): HostPools {
  const all = (host.pool ??= new Map<string, HostPools>()) as Map<string, HostPools>;
  const key = poolKey(cluster.transportFor(host).name, o);
  let p = all.get(key);
  if (!p) {
    all.set(key, (p = {}));
    if (o?.source) p.forget = () => forgetWhenEmpty(all, key, p!);
  }
  return p;
}

/** The event that says a new upstream socket can carry data (after the TLS handshake on TLS). */
export function readyEvent(socket: net.Socket): 'secureConnect' | 'connect' {
  return socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect';
}

/**
 * ALPN offered upstream, Envoy's precedence: a filter's override, else the context's alpn_protocols,
 * else the codec's fallback (h2 / http/1.1 for HTTP pools); only on TLS.
 */
export function upstreamAlpn(
  t: UpstreamTransport,
  override: readonly string[] | undefined,
  fallback: readonly string[] | undefined,
): string[] | undefined {
  if (!t.tls) return undefined;
  if (override && override.length > 0) return [...override];
  if (t.tls.alpn.length > 0) return t.tls.alpn;
  return fallback && fallback.length > 0 ? [...fallback] : undefined;
}

class ConnectTimeoutError extends Error {
  code = 'ECONNECTTIMEOUT';
  constructor(ms: number) {
    super(`connect timeout after ${ms}ms`);
  }
}

/**
 * Opens a connection to a host with the cluster's connect timeout, transport socket and bind
 * config, counting upstream_cx_* for the cluster and the host. A source from original_src takes the
 * place of the cluster's upstream_bind_config (Envoy binds the address the socket options set).
 */
export function connectUpstream(cluster: UpstreamCluster, host: Host, alpnFallback?: string[], o?: ConnectOptions): net.Socket {
  const s = cluster.stats;
  s.cxTotal.inc();
  s.cxActive.inc();
  host.stats.cxTotal++;
  host.stats.cxActive++;
  cluster.cxActive++;
  let socket: net.Socket;
  const local = cluster.sourceAddress;
  const transport = cluster.transportFor(host);
  const tctx = transport.tls;
  let connected = false;
  let verified: (() => void) | undefined;
  // a Unix socket has no source address to preserve
  const source = host.pipe ? undefined : o?.source;
  const raw = source ? source.binder.connect(source, host.address, host.port) : undefined;
  if (host.pipe) {
    socket = net.connect({ path: host.pipe });
  } else if (tctx) {
    // the context's SecureContext, built once: certificate, key and CA are not parsed again per connection
    const secureContext = tctx.secureContext();
    const session = tctx.resumesSessions ? tctx.session(host.key) : undefined;
    const protocols = upstreamAlpn(transport, o?.alpnOverride, alpnFallback);
    socket = tls.connect({
      secureContext,
      rejectUnauthorized: tctx.secureOptions().rejectUnauthorized,
      ...(session ? { session } : {}),
      ...(raw ? { socket: raw } : { host: host.address, port: host.port, ...(local ? { localAddress: local } : {}) }),
      servername: transport.sni || (ipFamily(host.address) ? undefined : host.address),
      ...(protocols ? { ALPNProtocols: protocols } : {}),
      checkServerIdentity: () => undefined,
    } as tls.ConnectionOptions);
    // as for plaintext: without it Nagle holds a request's second TLS record until the peer's delayed ACK
    // (up to 40 ms per request between two sidecars)
    socket.setNoDelay(true);
    // Envoy's client session resumption (max_session_keys): the next connection to this host resumes. Only
    // sessions of a connection whose peer passed verification are kept (a resumed handshake is not verified
    // again: its session was, under the same material — the context empties its sessions when that changes).
    if (tctx.resumesSessions) {
      const tlsSocket = socket as tls.TLSSocket;
      let early: Buffer | undefined;
      tlsSocket.on('session', (s: Buffer) => {
        if (connected) tctx.saveSession(host.key, secureContext, s);
        else early = s;
      });
      verified = () => {
        if (early) tctx.saveSession(host.key, secureContext, early);
        early = undefined;
      };
    }
  } else if (raw) {
    socket = raw;
  } else {
    socket = net.connect({ host: host.address, port: host.port, noDelay: true, ...(local ? { localAddress: local } : {}) });
  }
  const timeoutMs = cluster.connectTimeoutMs;
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          if (!connected) {
            s.cxConnectTimeout.inc();
            socket.destroy(new ConnectTimeoutError(timeoutMs));
          }
        }, timeoutMs)
      : undefined;
  const onConnected = () => {
    if (tctx && socket instanceof tls.TLSSocket && tctx.needsPostHandshakeCheck() && !socket.isSessionReused()) {
      const v = tctx.verifyPeer(socket);
      if (v.error) {
        socket.destroy(Object.assign(new Error(`TLS error: ${v.error}`), { code: 'ETLSVERIFY' }));
        return;
      }
    }
    connected = true;
    // read the identities while the handshake's certificates are at hand (Istio's client-side principals)
    if (socket instanceof tls.TLSSocket) upstreamIdentities(socket, host.key);
    verified?.();
    if (timer) clearTimeout(timer);
    cluster.outlier?.reportLocal(host, 'success');
  };
  socket.once(readyEvent(socket), onConnected);
  let failed = false;
  // `on`, not `once`: a socket can emit more than one error, and an unheard one would crash the process
  socket.on('error', () => {
    if (timer) clearTimeout(timer);
    if (!connected && !failed) {
      failed = true;
      s.cxConnectFail.inc();
      host.stats.cxConnectFail++;
      cluster.outlier?.reportLocal(host, 'connect_failed');
    }
  });
  socket.once('close', () => {
    if (timer) clearTimeout(timer);
    s.cxActive.dec();
    host.stats.cxActive--;
    cluster.cxActive--;
  });
  (socket as net.Socket & { meshConnected?: () => boolean }).meshConnected = () => connected;
  return socket;
}

/** Tells a per-source pool when its connection closes. */
function watched(p: HostPools, socket: net.Socket): net.Socket {
  if (p.forget) socket.once('close', p.forget);
  return socket;
}

function h1Pool(cluster: UpstreamCluster, host: Host, o: ConnectOptions | undefined): H1Pool {
  const p = pools(cluster, host, o);
  if (!p.h1) {
    const st = cluster.stats;
    p.h1 = new H1Pool({
      connect: () => watched(p, connectUpstream(cluster, host, ['http/1.1'], o)),
      maxConnections: cluster.thresholds.maxConnections >= 1e9 ? Infinity : cluster.thresholds.maxConnections,
      idleTimeoutMs: cluster.idleTimeoutMs,
      maxResponseHeadBytes: MAX_RESPONSE_HEAD_BYTES,
      onQueued: () => {
        st.rqPendingTotal.inc();
        st.rqPendingActive.inc();
      },
      onDequeued: () => st.rqPendingActive.dec(),
    });
  }
  return p.h1;
}

const sessionSockets = new WeakMap<http2.ClientHttp2Session, () => net.Socket | undefined>();

function h2Session(cluster: UpstreamCluster, host: Host, o: ConnectOptions | undefined): http2.ClientHttp2Session {
  const p = pools(cluster, host, o);
  if (p.h2 && !p.h2.closed && !p.h2.destroyed) return p.h2;
  const scheme = cluster.transportFor(host).tls ? 'https' : 'http';
  let socket: net.Socket | undefined;
  const session = http2.connect(`${scheme}://${host.key}`, {
    createConnection: () => (socket = watched(p, connectUpstream(cluster, host, ['h2'], o))),
    settings: { enablePush: false },
  });
  // the socket itself: session.socket is a proxy that hides the TLS socket's certificates
  sessionSockets.set(session, () => socket);
  session.on('error', () => {});
  session.on('goaway', () => {
    if (p.h2 === session) p.h2 = undefined;
  });
  session.on('close', () => {
    if (p.h2 === session) p.h2 = undefined;
    p.forget?.();
  });
  if (cluster.idleTimeoutMs > 0) {
    session.setTimeout(cluster.idleTimeoutMs, () => session.close());
  }
  p.h2 = session;
  return session;
}

export interface UpstreamHead {
  method: string;
  path: string;
  authority: string;
  scheme: string;
  /** Owned by the request: host / pseudo-headers are added to it. */
  headers: RawHeaders;
}

/** A response body: chunks to a reader, then its end with trailers, or an abort. */
export interface UpstreamBody {
  read(reader: BodyReader): void;
  pause(): void;
  resume(): void;
  /** Nobody wants it: read and dropped (the connection stays usable). */
  discard(): void;
}

/** Where a request body goes (an HTTP/2 stream, or the HTTP/1 codec's exchange). */
export interface BodySink {
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): unknown;
  once(ev: 'drain', fn: () => void): unknown;
}

export interface UpstreamResponse {
  status: number;
  headers: RawHeaders;
  body: UpstreamBody;
  /** HTTP/2 headers that ended the stream (gRPC trailers-only responses). */
  endStream?: boolean;
  /** The connection the response came on: its local end (%UPSTREAM_LOCAL_ADDRESS%) and TLS identities (Istio's client-side principals). */
  socket?: net.Socket;
}

export interface UpstreamCallbacks {
  onResponse(r: UpstreamResponse): void;
  onError(kind: UpstreamFailure, detail: string): void;
}

export interface UpstreamRequestHandle {
  readonly body: BodySink;
  abort(): void;
}

function failureKind(err: NodeJS.ErrnoException, connected: boolean): UpstreamFailure {
  if (!connected) return 'connect_failure';
  return 'reset';
}

function describe(err: NodeJS.ErrnoException): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}

/** An HTTP/2 response stream as an UpstreamBody. */
class H2Body implements UpstreamBody {
  trailers: RawHeaders | undefined;
  constructor(private readonly stream: http2.ClientHttp2Stream) {
    stream.on('trailers', (t) => {
      const out: RawHeaders = {};
      for (const k in t) if (k.charCodeAt(0) !== 58) out[k] = t[k] as string | string[];
      this.trailers = out;
    });
  }
  read(reader: BodyReader): void {
    let over = false;
    const abort = (why: string) => {
      if (over) return;
      over = true;
      reader.onAbort(why);
    };
    this.stream.on('data', (c: Buffer) => reader.onData(c));
    this.stream.on('end', () => {
      if (over) return;
      over = true;
      reader.onEnd(this.trailers);
    });
    this.stream.on('error', (e: Error) => abort(e.message));
    this.stream.on('aborted', () => abort('stream aborted'));
  }
  pause(): void {
    this.stream.pause();
  }
  resume(): void {
    this.stream.resume();
  }
  discard(): void {
    this.stream.resume();
  }
}

/** The HTTP/1 pool's callbacks turned into exactly one onResponse or onError. */
class H1Callbacks implements ClientCallbacks {
  private done = false;
  constructor(private readonly cb: UpstreamCallbacks) {}
  onResponse(status: number, headers: RawHeaders, body: BodySource, socket?: net.Socket): void {
    if (this.done) {
      body.discard();
      return;
    }
    this.done = true;
    this.cb.onResponse({ status, headers, body, ...(socket ? { socket } : {}) });
  }
  onError(kind: ClientFailure, detail: string): void {
    if (this.done) return;
    this.done = true;
    this.cb.onError(kind, detail);
  }
}

/** Starts one upstream request; exactly one of onResponse/onError is called. */
export function startUpstreamRequest(
  cluster: UpstreamCluster,
  host: Host,
  protocol: 'http1' | 'http2',
  head: UpstreamHead,
  cb: UpstreamCallbacks,
  o?: ConnectOptions,
): UpstreamRequestHandle {
  if (protocol === 'http2') return startH2Request(cluster, host, head, cb, o);
  head.headers.host = head.authority;
  return h1Pool(cluster, host, o).request(head.method, head.path, head.headers, new H1Callbacks(cb));
}

function startH2Request(
  cluster: UpstreamCluster,
  host: Host,
  head: UpstreamHead,
  cb: UpstreamCallbacks,
  o: ConnectOptions | undefined,
): UpstreamRequestHandle {
  let done = false;
  const fail = (kind: UpstreamFailure, detail: string) => {
    if (done) return;
    done = true;
    cb.onError(kind, detail);
  };
  const session = h2Session(cluster, host, o);
  const headers = head.headers as http2.OutgoingHttpHeaders;
  headers[':method'] = head.method;
  headers[':path'] = head.path;
  headers[':authority'] = head.authority;
  headers[':scheme'] = head.scheme;
  let stream: http2.ClientHttp2Stream;
  try {
    stream = session.request(headers);
  } catch (e) {
    fail('connect_failure', describe(e as NodeJS.ErrnoException));
    return { body: new PassThrough(), abort: () => {} };
  }
  const body = new H2Body(stream);
  stream.on('response', (h, flags: number) => {
    if (done) return;
    done = true;
    const status = Number(h[':status']);
    const out: RawHeaders = {};
    for (const k in h) if (k.charCodeAt(0) !== 58) out[k] = h[k] as string | string[];
    const socket = sessionSockets.get(session)?.();
    cb.onResponse({ status, headers: out, body, endStream: (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0, ...(socket ? { socket } : {}) });
  });
  stream.on('error', (e: NodeJS.ErrnoException) => {
    const sock = (session as unknown as { socket?: { meshConnected?: () => boolean } }).socket;
    fail(failureKind(e, sock?.meshConnected?.() ?? session.connecting === false), describe(e));
  });
  stream.on('close', () => {
    if (!done) fail('reset', stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM ? 'refused stream' : `stream closed, code ${stream.rstCode}`);
  });
  return { body: stream, abort: () => stream.close(http2.constants.NGHTTP2_CANCEL) };
}
