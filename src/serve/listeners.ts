// The sockets every long-running program serves on (the daemon; the CNI node agent's ControlZ): binding
// Go-style addresses, the HTTP(S) listeners and the gRPC listeners. Every listener is a Node net/tls server
// we bind ourselves, so all of them report bind errors the same way (naming the flag and the address) and
// all of them can stop accepting before in-flight work is drained. gRPC connections are handed to a
// @grpc/grpc-js Server through its connection injector.
import * as net from 'node:net';
import * as http from 'node:http';
import * as https from 'node:https';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { joinHostPort } from '../lib/hostport';
import { AddressError, parseListenAddress } from './address';
import { secureContextOptions, type TlsSource } from './tls';

export type ListenerName = 'grpc' | 'secureGrpc' | 'http' | 'https' | 'monitoring' | 'ctrlz';

export interface BoundAddress {
  host: string;
  port: number;
  /** `127.0.0.1:43125`, `[::]:15010`: what the log line and the daemon object report. */
  address: string;
}

/** A listener could not be started; the message names the flag and the address as given. */
export class ListenError extends Error {
  constructor(
    readonly flag: string,
    readonly requested: string,
    detail: string,
  ) {
    super(`${flag} ${requested}: ${detail}`);
    this.name = 'ListenError';
  }
}

export interface Listener {
  name: ListenerName;
  /** The flag(s) the address came from, e.g. `--grpcAddr`. */
  flag: string;
  bound: BoundAddress;
  /** Stop accepting new connections; established ones continue. */
  stopAccepting(): void;
  /** Let established connections finish until `deadline` (ms since the epoch), then cut them. */
  drain(deadline: number): Promise<void>;
}

/** Binds `server` to a Go-style address; rejects with a ListenError naming the flag. */
export async function bind(server: net.Server, flag: string, requested: string): Promise<BoundAddress> {
  let addr;
  try {
    addr = parseListenAddress(requested);
  } catch (e) {
    if (e instanceof AddressError) throw new ListenError(flag, requested, `listen tcp: ${e.message}`);
    throw e;
  }
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => {
      server.off('listening', onListening);
      reject(new ListenError(flag, requested, err.message));
    };
    const onListening = () => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    // No host: Node listens on every interface (IPv6 and IPv4 when available), as Go does for `:port`.
    server.listen(addr.host === '' ? { port: addr.port } : { host: addr.host, port: addr.port });
  });
  const a = server.address() as net.AddressInfo;
  return { host: a.address, port: a.port, address: joinHostPort(a.address, a.port) };
}

function remaining(deadline: number): number {
  return Math.max(0, deadline - Date.now());
}

export interface HttpListenerOptions {
  name: ListenerName;
  flag: string;
  address: string;
  handler: http.RequestListener;
  /** Serve HTTPS with this material (no client certificates are requested); follows its changes. */
  tls?: TlsSource;
}

/** An HTTP or HTTPS server with Istio's timeouts (idle 90 s, read 30 s). */
export async function startHttpListener(o: HttpListenerOptions): Promise<Listener> {
  let server: http.Server;
  let unsubscribe = () => {};
  if (o.tls) {
    const source = o.tls;
    const { ca: _clientCa, ...opts } = secureContextOptions(source.current());
    const httpsServer = https.createServer(opts, o.handler);
    unsubscribe = source.subscribe(() => {
      const { ca: _ca, ...next } = secureContextOptions(source.current());
      httpsServer.setSecureContext(next);
    });
    server = httpsServer;
  } else {
    server = http.createServer(o.handler);
  }
  server.keepAliveTimeout = 90_000;
  server.headersTimeout = 30_000;
  server.requestTimeout = 30_000;
  const bound = await bind(server, o.flag, o.address);
  // After a successful bind, a socket error must not crash the daemon.
  server.on('error', () => {});
  let closed: Promise<void> | undefined;
  const stopAccepting = () => {
    unsubscribe();
    closed ??= new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
  };
  return {
    name: o.name,
    flag: o.flag,
    bound,
    stopAccepting,
    async drain(deadline) {
      stopAccepting();
      const timer = setTimeout(() => server.closeAllConnections(), remaining(deadline));
      await closed;
      clearTimeout(timer);
    },
  };
}

/** Keepalive and limits of the discovery gRPC servers (Istio's keepalive.Options + MESH_GPRC_*). */
export interface GrpcServerSettings {
  keepaliveIntervalMs: number;
  keepaliveTimeoutMs: number;
  maxServerConnectionAgeMs: number;
  /** Istio's MaxServerConnectionAgeGrace: 10 s unless configured. */
  maxServerConnectionAgeGraceMs: number;
  maxConcurrentStreams: number;
  maxRecvMsgSize: number;
}

// grpc-js keeps these in setTimeout, which fires at once for delays above 2^31-1 ms; that value is also
// what grpc-js itself treats as "unlimited". Go's max duration (the --keepaliveMaxServerConnectionAge
// default) therefore means: no limit.
const GRPC_UNLIMITED_MS = 2 ** 31 - 1;
const clampMs = (ms: number) => Math.min(Math.max(0, Math.round(ms)), GRPC_UNLIMITED_MS);

/**
 * grpc-js server options for Istio's ServerOptions: keepalive time/timeout, max connection age and grace,
 * max concurrent streams, max receive size. (grpc-js servers do not police client ping rates, so Istio's
 * permissive enforcement policy — MinTime interval/2, pings without streams allowed — holds by default.)
 */
export function grpcServerOptions(s: GrpcServerSettings): grpc.ServerOptions {
  const options: grpc.ServerOptions = {
    'grpc.keepalive_time_ms': clampMs(s.keepaliveIntervalMs),
    'grpc.keepalive_timeout_ms': clampMs(s.keepaliveTimeoutMs),
    'grpc.max_concurrent_streams': s.maxConcurrentStreams,
    'grpc.max_receive_message_length': s.maxRecvMsgSize,
  };
  const age = clampMs(s.maxServerConnectionAgeMs);
  if (age < GRPC_UNLIMITED_MS) {
    options['grpc.max_connection_age_ms'] = age;
    options['grpc.max_connection_age_grace_ms'] = clampMs(s.maxServerConnectionAgeGraceMs);
  }
  return options;
}

export interface GrpcListenerOptions {
  name: ListenerName;
  flag: string;
  address: string;
  server: grpc.Server;
  /**
   * TLS with Go's VerifyClientCertIfGiven: a client certificate is requested; one that is presented must
   * verify against the CA bundle (or the handshake is refused), none at all is accepted (XDS_AUTH then
   * authenticates by token). Follows the source's changes (new serving certificate, new roots).
   */
  tls?: TlsSource;
}

export async function startGrpcListener(o: GrpcListenerOptions): Promise<Listener> {
  // TLS is terminated here rather than inside grpc-js so that "verify if given" can be enforced; the gRPC
  // server sees a TLSSocket, so calls still report the peer certificate in their auth context.
  const injector = o.server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  let server: net.Server;
  let unsubscribe = () => {};
  if (o.tls) {
    const source = o.tls;
    const tlsServer = tls.createServer({
      ...secureContextOptions(source.current()),
      requestCert: true,
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    unsubscribe = source.subscribe(() => tlsServer.setSecureContext(secureContextOptions(source.current())));
    tlsServer.on('secureConnection', (sock) => {
      const peer = sock.getPeerCertificate();
      const presented = peer && Object.keys(peer).length > 0;
      if (presented && !sock.authorized) {
        sock.destroy();
        return;
      }
      track(sock);
      injector.injectConnection(sock);
    });
    // A failed handshake is the client's problem; it must not reach the process.
    tlsServer.on('tlsClientError', () => {});
    server = tlsServer;
  } else {
    server = net.createServer((sock) => {
      track(sock);
      injector.injectConnection(sock);
    });
  }
  const bound = await bind(server, o.flag, o.address);
  server.on('error', () => {});
  let accepting = true;
  const stopAccepting = () => {
    if (!accepting) return;
    accepting = false;
    unsubscribe();
    server.close();
  };
  return {
    name: o.name,
    flag: o.flag,
    bound,
    stopAccepting,
    async drain(deadline) {
      stopAccepting();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          o.server.forceShutdown();
          for (const s of sockets) s.destroy();
          resolve();
        }, remaining(deadline));
        o.server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
