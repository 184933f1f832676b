// Upstream connections per host: an HTTP/1.1 keep-alive agent (connections reused across requests)
// and one HTTP/2 session (streams multiplexed), both opening sockets through connectUpstream() so
// connect timeouts, TLS, source binding and the cx_* counters are the same for HTTP and TCP proxying.
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type { RawHeaders } from '../http/headers';
import type { Host } from './host';
import type { UpstreamCluster } from './cluster';

export type UpstreamFailure = 'connect_failure' | 'reset' | 'overflow' | 'timeout';

interface HostPools {
  h1?: http.Agent;
  h2?: http2.ClientHttp2Session;
  h2Connecting?: boolean;
}

function pools(host: Host): HostPools {
  return (host.pool ??= {}) as HostPools;
}

class ConnectTimeoutError extends Error {
  code = 'ECONNECTTIMEOUT';
  constructor(ms: number) {
    super(`connect timeout after ${ms}ms`);
  }
}

/**
 * Opens a connection to a host with the cluster's connect timeout, transport socket and bind
 * config, counting upstream_cx_* for the cluster and the host.
 */
export function connectUpstream(cluster: UpstreamCluster, host: Host, alpn?: string[]): net.Socket {
  const s = cluster.stats;
  s.cxTotal.inc();
  s.cxActive.inc();
  host.stats.cxTotal++;
  host.stats.cxActive++;
  cluster.cxActive++;
  let socket: net.Socket;
  const local = cluster.sourceAddress;
  if (host.pipe) {
    socket = net.connect({ path: host.pipe });
  } else if (cluster.tls) {
    const o = cluster.tls.secureOptions();
    const protocols = alpn ?? (cluster.tls.alpn.length > 0 ? cluster.tls.alpn : undefined);
    socket = tls.connect({
      ...o,
      host: host.address,
      port: host.port,
      servername: cluster.sni || (net.isIP(host.address) ? undefined : host.address),
      ...(protocols ? { ALPNProtocols: protocols } : {}),
      ...(local ? { localAddress: local } : {}),
      checkServerIdentity: () => undefined,
    } as tls.ConnectionOptions);
  } else {
    socket = net.connect({ host: host.address, port: host.port, noDelay: true, ...(local ? { localAddress: local } : {}) });
  }
  const timeoutMs = cluster.connectTimeoutMs;
  let connected = false;
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
    if (cluster.tls && socket instanceof tls.TLSSocket && cluster.tls.needsPostHandshakeCheck()) {
      const v = cluster.tls.verifyPeer(socket);
      if (v.error) {
        socket.destroy(Object.assign(new Error(`TLS error: ${v.error}`), { code: 'ETLSVERIFY' }));
        return;
      }
    }
    connected = true;
    if (timer) clearTimeout(timer);
    cluster.outlier?.reportLocal(host, 'success');
  };
  socket.once(cluster.tls && !host.pipe ? 'secureConnect' : 'connect', onConnected);
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

function h1Agent(cluster: UpstreamCluster, host: Host): http.Agent {
  const p = pools(host);
  if (!p.h1) {
    const agent = new http.Agent({
      keepAlive: true,
      maxSockets: cluster.thresholds.maxConnections >= 1e9 ? Infinity : cluster.thresholds.maxConnections,
      maxFreeSockets: 1024,
      scheduling: 'lifo',
      ...(cluster.idleTimeoutMs > 0 ? { timeout: cluster.idleTimeoutMs } : {}),
    });
    (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => connectUpstream(cluster, host, cluster.tls ? ['http/1.1'] : undefined);
    p.h1 = agent;
  }
  return p.h1;
}

function h2Session(cluster: UpstreamCluster, host: Host): http2.ClientHttp2Session {
  const p = pools(host);
  if (p.h2 && !p.h2.closed && !p.h2.destroyed) return p.h2;
  const scheme = cluster.tls ? 'https' : 'http';
  const session = http2.connect(`${scheme}://${host.key}`, {
    createConnection: () => connectUpstream(cluster, host, cluster.tls ? ['h2'] : undefined),
    settings: { enablePush: false },
  });
  session.on('error', () => {});
  session.on('goaway', () => {
    if (p.h2 === session) p.h2 = undefined;
  });
  session.on('close', () => {
    if (p.h2 === session) p.h2 = undefined;
  });
  if (cluster.idleTimeoutMs > 0) {
    session.setTimeout(cluster.idleTimeoutMs, () => session.close());
  }
  p.h2 = session;
  return session;
}

/** Requests queued in the host's HTTP/1 agent waiting for a connection (pending requests). */
export function pendingOn(host: Host): number {
  const a = (host.pool as HostPools | undefined)?.h1 as (http.Agent & { requests?: Record<string, unknown[]> }) | undefined;
  if (!a?.requests) return 0;
  let n = 0;
  for (const k in a.requests) n += a.requests[k]!.length;
  return n;
}

/** Closes idle connections now and the rest when their requests finish. */
export function releaseHostPools(host: Host): void {
  const p = host.pool as HostPools | undefined;
  if (!p) return;
  if (p.h1) {
    const a = p.h1;
    // free sockets close now; busy ones are not reused after their response
    for (const list of Object.values((a as unknown as { freeSockets: Record<string, net.Socket[]> }).freeSockets ?? {})) for (const s of list) s.destroy();
    (a as unknown as { keepAlive: boolean }).keepAlive = false;
  }
  p.h2?.close();
  host.pool = undefined;
}

export interface UpstreamHead {
  method: string;
  path: string;
  authority: string;
  scheme: string;
  /** Owned by the request: host / pseudo-headers are added to it. */
  headers: RawHeaders;
}

export interface UpstreamResponse {
  status: number;
  headers: RawHeaders;
  body: Readable;
  /** HTTP/2 headers that ended the stream (gRPC trailers-only responses). */
  endStream?: boolean;
  /** Trailers once the body ended (HTTP/2 trailers, HTTP/1 chunked trailers). */
  trailers(): RawHeaders | undefined;
}

export interface UpstreamCallbacks {
  onResponse(r: UpstreamResponse): void;
  onError(kind: UpstreamFailure, detail: string): void;
}

export interface UpstreamRequestHandle {
  body: Writable;
  abort(): void;
}

function failureKind(err: NodeJS.ErrnoException, connected: boolean): UpstreamFailure {
  if (!connected) return 'connect_failure';
  return 'reset';
}

function describe(err: NodeJS.ErrnoException): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}

/** Starts one upstream request; exactly one of onResponse/onError is called. */
export function startUpstreamRequest(cluster: UpstreamCluster, host: Host, protocol: 'http1' | 'http2', head: UpstreamHead, cb: UpstreamCallbacks): UpstreamRequestHandle {
  let done = false;
  const fail = (kind: UpstreamFailure, detail: string) => {
    if (done) return;
    done = true;
    cb.onError(kind, detail);
  };
  if (protocol === 'http2') {
    const session = h2Session(cluster, host);
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
    let trailers: RawHeaders | undefined;
    stream.on('response', (h, flags: number) => {
      if (done) return;
      done = true;
      const status = Number(h[':status']);
      const out: RawHeaders = {};
      for (const k in h) if (k.charCodeAt(0) !== 58) out[k] = h[k] as string | string[];
      cb.onResponse({ status, headers: out, body: stream, trailers: () => trailers, endStream: (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0 });
    });
    stream.on('trailers', (t) => {
      trailers = {};
      for (const k in t) if (k.charCodeAt(0) !== 58) trailers[k] = t[k] as string | string[];
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
  const agent = h1Agent(cluster, host);
  head.headers.host = head.authority;
  const opts: http.RequestOptions = {
    agent,
    method: head.method,
    path: head.path,
    headers: head.headers,
    setHost: false,
    ...(host.pipe ? { socketPath: host.pipe } : { host: host.address, port: host.port }),
  };
  const req = http.request(opts);
  let sock: (net.Socket & { meshConnected?: () => boolean }) | undefined;
  req.on('socket', (s: net.Socket & { meshConnected?: () => boolean }) => {
    sock = s;
  });
  // connected = the transport (TCP and TLS with its checks) was established (connectUpstream knows)
  const connected = () => sock?.meshConnected?.() ?? false;
  req.on('response', (res) => {
    if (done) {
      res.resume();
      return;
    }
    done = true;
    cb.onResponse({ status: res.statusCode ?? 502, headers: res.headers as RawHeaders, body: res, trailers: () => (res.complete ? (res.trailers as RawHeaders) : undefined) });
  });
  req.on('error', (e: NodeJS.ErrnoException) => fail(failureKind(e, connected()), describe(e)));
  return { body: req, abort: () => req.destroy() };
}
