// The agent's xDS proxy (Istio's pkg/istio-agent xds_proxy.go): a gRPC AggregatedDiscoveryService on a local
// Unix socket that the data-plane proxy connects to, forwarding each of its streams to the discovery daemon.
// Unlike Istio, which fails the proxy's stream when the daemon goes away and lets Envoy reconnect, this
// proxy keeps the downstream stream open, reconnects upstream with exponential backoff and replays the
// proxy's latest request of each type (version kept, nonce cleared) so the new daemon stream resumes where
// the old one stopped. The proxy keeps serving its last good config in the meantime.
import * as fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { clone, create } from '@bufbuild/protobuf';
import { AggregatedDiscoveryService } from '../gen/envoy/service/discovery/v3/ads_pb';
import {
  DeltaDiscoveryRequestSchema,
  DiscoveryRequestSchema,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from '../gen/envoy/service/discovery/v3/discovery_pb';
import type { Node } from '../gen/envoy/config/core/v3/base_pb';
import { StatusSchema } from '../gen/google/rpc/status_pb';
import type { Any } from '@bufbuild/protobuf/wkt';
import { addGrpcService, grpcClientConstructor, type GrpcClient } from '../lib/xds/grpc';
import { HEALTH_INFO_TYPE_URL, TYPE_URL } from '../lib/xds/type-urls';
import { registerScope } from '../lib/log';
import type { CompliancePolicy } from '../lib/compliance';
import { grpcChannelCredentials, oneLine, protocolMismatchHint } from './tls-client';
import { UNGUARDED, type Guard } from './boundary';
import {
  meshdConnectionFailures,
  meshdConnectionTerminations,
  proxyConnectionTerminations,
  xdsProxyRequests,
  xdsProxyResponses,
  type DisconnectionType,
} from './metrics';

const log = registerScope('xdsproxy', 'XDS Proxy in the mesh agent');

type Ads = typeof AggregatedDiscoveryService.method;
const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);

export interface ClientCertificate {
  certChain: Buffer;
  privateKey: Buffer;
}

export interface UpstreamTls {
  /** PEM roots; undefined uses the system's trusted roots. */
  rootCerts?: Buffer;
  /** Name the daemon's certificate must carry (MESHD_SAN, or the discovery host). */
  serverName: string;
  /** The certificate presented to the daemon (controlPlaneAuthPolicy MUTUAL_TLS): the workload's current one. */
  clientCertificate?: () => ClientCertificate | undefined;
  /** Resolves once there is a certificate to present (or it is time to connect without one). */
  clientCertificateReady?: () => Promise<void>;
  /** COMPLIANCE_POLICY (default: none). */
  compliance?: CompliancePolicy;
}

export interface UpstreamOptions {
  /** `host:port` of the discovery daemon. */
  address: string;
  /** Undefined: plaintext (controlPlaneAuthPolicy NONE). */
  tls?: UpstreamTls;
  /** Sent as the `ClusterID` metadata, as Istio's agent does. */
  clusterId: string;
  /** Adds `authorization: Bearer <token>` when the workload has a token (Istio's per-RPC credentials). */
  credentials?: { apply(md: grpc.Metadata): void };
  keepaliveTimeMs?: number;
  keepaliveTimeoutMs?: number;
}

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** ±fraction applied to each delay. */
  jitter: number;
}

/** Istio's default exponential backoff starts at one second. */
export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 30_000, multiplier: 2, jitter: 0.2 };

export function backoffDelay(attempt: number, b: BackoffOptions, random: () => number = Math.random): number {
  const base = Math.min(b.maxMs, b.initialMs * b.multiplier ** attempt);
  return Math.max(0, Math.round(base * (1 + b.jitter * (2 * random() - 1))));
}

/**
 * Consumes the (single) resource of a response of an agent-internal type; returns an error message to NACK
 * with, or undefined.
 */
export type ResponseHandler = (resource: Any) => string | undefined;

export interface XdsProxyOptions {
  socketPath: string;
  upstream: UpstreamOptions;
  backoff?: BackoffOptions;
  /** Types the agent consumes itself (not forwarded); requested when the proxy first asks for listeners. */
  handlers?: ReadonlyMap<string, ResponseHandler>;
  /** The agent's fault boundary around the streams' message handlers. */
  guard?: Guard;
}

/** Istio's GRPCErrorType: expected ends (cancellation, the peer going away) versus errors. */
export function disconnectionType(code: grpc.status): DisconnectionType {
  return code === grpc.status.OK || code === grpc.status.CANCELLED || code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED
    ? 'cancelled'
    : 'error';
}

function statusText(s: grpc.StatusObject): string {
  return `rpc error: code = ${grpc.status[s.code] ?? s.code} desc = ${oneLine(s.details)}`;
}

type DownstreamCall<Req, Resp> = grpc.ServerDuplexStream<Req, Resp>;
type UpstreamCall<Req, Resp> = grpc.ClientDuplexStream<Req, Resp>;

let connectionNumber = 0;

interface ProxySession {
  readonly id: number;
  start(): void;
  sendHealth(): void;
  close(err: Error | undefined): void;
}

/**
 * One downstream stream and its upstream counterpart. Subclasses say what of the proxy's requests to
 * remember and how to replay it on a new upstream stream.
 */
abstract class Session<Req extends { node?: Node }, Resp extends { typeUrl: string }> implements ProxySession {
  readonly id = ++connectionNumber;
  protected node: Node | undefined;
  private upstream: UpstreamCall<Req, Resp> | undefined;
  private sentOnUpstream = 0;
  private established = false;
  private closed = false;
  private attempt = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    protected readonly proxy: XdsProxy,
    private readonly down: DownstreamCall<Req, Resp>,
  ) {
    // A fault while handling a message ends this stream; the proxy reconnects, as after a daemon restart.
    down.on(
      'data',
      proxy.guard.entry(
        'xds-proxy',
        (req: Req) => this.onDownstream(req),
        (e) => this.close(e),
      ),
    );
    down.on('end', () => this.close(undefined));
    down.on('cancelled', () => this.close(undefined));
    down.on('error', (e: Error) => this.close(e));
  }

  protected abstract open(client: GrpcClient<Ads>, md: grpc.Metadata): UpstreamCall<Req, Resp>;
  /** Remembers what is needed to resume; returns false when the request must not be forwarded. */
  protected abstract record(req: Req): boolean;
  /** Requests that resume the subscriptions on a new upstream stream, in the proxy's order. */
  protected abstract replay(): Req[];
  /** Handles a response; returns false when it is not for the proxy. */
  protected abstract observe(resp: Resp): boolean;
  protected abstract withNode(req: Req, node: Node): Req;
  /** The health report as a request of this stream's kind (error_detail when unhealthy). */
  protected abstract healthRequest(report: HealthReport): Req;
  /** The proxy asked for listeners on this stream: health reports may go upstream (Istio's initialRequestsSent). */
  private listenersAsked = false;

  /** Sends the latest health report upstream, once the proxy has asked for listeners. */
  sendHealth(): void {
    const report = this.proxy.healthReport;
    if (report && this.listenersAsked) this.sendInternal(this.healthRequest(report));
  }

  start(): void {
    this.connect();
  }

  private onDownstream(req: Req): void {
    if (req.node) this.node = req.node;
    if (!this.record(req)) return;
    if (this.upstream) this.send(req);
    if (!this.listenersAsked && (req as unknown as { typeUrl: string }).typeUrl === TYPE_URL.listener) {
      this.listenersAsked = true;
      // after the agent's own initial requests, as Istio sends its initial health request
      queueMicrotask(() => queueMicrotask(() => this.sendHealth()));
    }
  }

  protected send(req: Req): void {
    const call = this.upstream;
    if (!call) return;
    let msg = req;
    // The daemon needs the node on the first message of each stream; the proxy sends it only once.
    if (this.sentOnUpstream === 0 && !req.node && this.node) msg = this.withNode(req, this.node);
    this.sentOnUpstream++;
    xdsProxyRequests.inc();
    log.debug('request for type url', { id: this.id, type: (req as unknown as { typeUrl: string }).typeUrl });
    call.write(msg);
  }

  private connect(): void {
    this.retry = undefined;
    if (this.closed) return;
    const ready = this.proxy.upstream.tls?.clientCertificateReady;
    if (ready && !this.proxy.upstream.tls?.clientCertificate?.()) {
      void ready().then(() => this.open0());
      return;
    }
    this.open0();
  }

  private open0(): void {
    if (this.closed) return;
    const md = new grpc.Metadata();
    md.set('ClusterID', this.proxy.upstream.clusterId);
    this.proxy.upstream.credentials?.apply(md);
    const call = this.open(this.proxy.client(), md);
    this.upstream = call;
    this.sentOnUpstream = 0;
    this.established = false;
    const onResponse = (resp: Resp) => {
      if (call !== this.upstream) return;
      if (!this.established) {
        this.established = true;
        this.attempt = 0;
        log.info(`connected to upstream XDS server: ${this.proxy.upstream.address}`, { id: this.id });
      }
      xdsProxyResponses.inc();
      log.debug('upstream response', { id: this.id, type: resp.typeUrl });
      if (this.observe(resp) && !this.closed) this.down.write(resp);
    };
    call.on(
      'data',
      this.proxy.guard.entry('xds-proxy', onResponse, (e) => this.close(e)),
    );
    call.on('error', () => {
      // Reported through 'status'.
    });
    call.on('status', (s: grpc.StatusObject) => this.onUpstreamClosed(call, s));
    for (const req of this.replay()) this.send(req);
    // a new upstream stream gets the latest health report again (Istio's initialHealthRequest)
    this.sendHealth();
  }

  private onUpstreamClosed(call: UpstreamCall<Req, Resp>, s: grpc.StatusObject): void {
    if (call !== this.upstream) return;
    this.upstream = undefined;
    if (this.closed) return;
    if (this.established) {
      const type = disconnectionType(s.code);
      meshdConnectionTerminations.inc({ type });
      if (type === 'error') log.warn(`upstream terminated with unexpected error ${statusText(s)}`, { id: this.id });
      else log.info(`upstream terminated with status ${statusText(s)}`, { id: this.id });
    } else {
      meshdConnectionFailures.inc();
      const u = this.proxy.upstream;
      const hint = protocolMismatchHint(s.details, { address: u.address, tls: u.tls !== undefined, setting: 'discoveryAddress' });
      log.warn(hint ? `failed to connect to upstream: ${hint} (${statusText(s)})` : `failed to connect to upstream ${u.address}: ${statusText(s)}`, {
        id: this.id,
      });
    }
    const delay = backoffDelay(this.attempt++, this.proxy.backoff);
    log.info(`reconnecting to upstream ${this.proxy.upstream.address} in ${delay}ms; the proxy keeps its current configuration`, { id: this.id });
    this.retry = setTimeout(() => this.connect(), delay);
  }

  /** Internal requests (the agent's own subscriptions) go upstream without passing the proxy. */
  protected sendInternal(req: Req): void {
    if (this.upstream) this.send(req);
  }

  close(err: Error | undefined): void {
    if (this.closed) return;
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    const up = this.upstream;
    this.upstream = undefined;
    up?.cancel();
    const code = (err as { code?: number } | undefined)?.code ?? grpc.status.CANCELLED;
    const type = err ? disconnectionType(code) : 'cancelled';
    proxyConnectionTerminations.inc({ type });
    if (err && type === 'error') log.warn(`downstream terminated with unexpected error ${err.message}`, { id: this.id });
    else log.debug('downstream terminated', { id: this.id });
    try {
      this.down.end();
    } catch {
      // already finished
    }
    this.proxy.forget(this);
  }
}

class SotwSession extends Session<DiscoveryRequest, DiscoveryResponse> {
  /** The proxy's latest request of each type, in the order types first appeared. */
  private readonly latest = new Map<string, DiscoveryRequest>();
  /** The agent's own subscriptions (NDS) with their latest ACK. */
  private readonly internal = new Map<string, DiscoveryRequest>();

  protected open(client: GrpcClient<Ads>, md: grpc.Metadata) {
    return client.streamAggregatedResources(md);
  }

  protected record(req: DiscoveryRequest): boolean {
    this.latest.set(req.typeUrl, req);
    if (req.typeUrl === TYPE_URL.listener && this.internal.size === 0) {
      for (const typeUrl of this.proxy.handlers.keys()) {
        const r = create(DiscoveryRequestSchema, { typeUrl });
        this.internal.set(typeUrl, r);
        queueMicrotask(() => this.sendInternal(r));
      }
    }
    return true;
  }

  protected replay(): DiscoveryRequest[] {
    const out: DiscoveryRequest[] = [];
    for (const req of [...this.latest.values(), ...this.internal.values()]) {
      const r = clone(DiscoveryRequestSchema, req);
      r.responseNonce = '';
      r.errorDetail = undefined;
      out.push(r);
    }
    return out;
  }

  protected observe(resp: DiscoveryResponse): boolean {
    const handler = this.proxy.handlers.get(resp.typeUrl);
    if (!handler) return true;
    // internal types are singletons: the first resource is the whole answer
    const error = resp.resources[0] ? handler(resp.resources[0]) : undefined;
    const ack = create(DiscoveryRequestSchema, {
      typeUrl: resp.typeUrl,
      versionInfo: error ? (this.internal.get(resp.typeUrl)?.versionInfo ?? '') : resp.versionInfo,
      responseNonce: resp.nonce,
      errorDetail: error ? create(StatusSchema, { code: grpc.status.INTERNAL, message: error }) : undefined,
    });
    this.internal.set(resp.typeUrl, ack);
    this.sendInternal(ack);
    return false;
  }

  protected withNode(req: DiscoveryRequest, node: Node): DiscoveryRequest {
    const r = clone(DiscoveryRequestSchema, req);
    r.node = node;
    return r;
  }

  protected healthRequest(report: HealthReport): DiscoveryRequest {
    return create(DiscoveryRequestSchema, { typeUrl: HEALTH_INFO_TYPE_URL, errorDetail: healthErrorDetail(report) });
  }
}

class DeltaSession extends Session<DeltaDiscoveryRequest, DeltaDiscoveryResponse> {
  /** Per type: explicitly subscribed names and whether the subscription is a wildcard. */
  private readonly subs = new Map<string, { wildcard: boolean; names: Set<string> }>();
  /** The agent's own subscriptions (NDS), made when the proxy first asks for listeners, as on SotW streams. */
  private internalSubscribed = false;
  /** Per type: the versions of the resources the proxy holds, for initial_resource_versions on resume. */
  private readonly versions = new Map<string, Map<string, string>>();

  protected open(client: GrpcClient<Ads>, md: grpc.Metadata) {
    return client.deltaAggregatedResources(md);
  }

  protected record(req: DeltaDiscoveryRequest): boolean {
    let s = this.subs.get(req.typeUrl);
    if (!s) {
      // The first request of a type without names subscribes to everything (legacy wildcard).
      s = { wildcard: req.resourceNamesSubscribe.length === 0, names: new Set() };
      this.subs.set(req.typeUrl, s);
      const known = new Map(Object.entries(req.initialResourceVersions));
      if (known.size) this.versions.set(req.typeUrl, known);
    }
    for (const n of req.resourceNamesSubscribe) {
      if (n === '*') s.wildcard = true;
      else s.names.add(n);
    }
    for (const n of req.resourceNamesUnsubscribe) {
      if (n === '*') s.wildcard = false;
      else s.names.delete(n);
    }
    if (req.typeUrl === TYPE_URL.listener && !this.internalSubscribed && this.proxy.handlers.size > 0) {
      this.internalSubscribed = true;
      for (const typeUrl of this.proxy.handlers.keys()) queueMicrotask(() => this.sendInternal(create(DeltaDiscoveryRequestSchema, { typeUrl })));
    }
    return true;
  }

  protected replay(): DeltaDiscoveryRequest[] {
    const internal = this.internalSubscribed
      ? [...this.proxy.handlers.keys()].map((typeUrl) => create(DeltaDiscoveryRequestSchema, { typeUrl }))
      : [];
    return [...this.subs.entries()]
      .map(([typeUrl, s]) => {
        const names = [...s.names];
        return create(DeltaDiscoveryRequestSchema, {
          typeUrl,
          resourceNamesSubscribe: s.wildcard && names.length ? ['*', ...names] : names,
          initialResourceVersions: Object.fromEntries(this.versions.get(typeUrl) ?? []),
        });
      })
      .concat(internal);
  }

  protected observe(resp: DeltaDiscoveryResponse): boolean {
    const handler = this.proxy.handlers.get(resp.typeUrl);
    if (handler) {
      const any = resp.resources[0]?.resource;
      const error = any ? handler(any) : undefined;
      this.sendInternal(
        create(DeltaDiscoveryRequestSchema, {
          typeUrl: resp.typeUrl,
          responseNonce: resp.nonce,
          errorDetail: error ? create(StatusSchema, { code: grpc.status.INTERNAL, message: error }) : undefined,
        }),
      );
      return false;
    }
    let v = this.versions.get(resp.typeUrl);
    if (!v) this.versions.set(resp.typeUrl, (v = new Map()));
    for (const r of resp.resources) v.set(r.name, r.version);
    for (const n of resp.removedResources) v.delete(n);
    return true;
  }

  protected withNode(req: DeltaDiscoveryRequest, node: Node): DeltaDiscoveryRequest {
    const r = clone(DeltaDiscoveryRequestSchema, req);
    r.node = node;
    return r;
  }

  protected healthRequest(report: HealthReport): DeltaDiscoveryRequest {
    return create(DeltaDiscoveryRequestSchema, { typeUrl: HEALTH_INFO_TYPE_URL, errorDetail: healthErrorDetail(report) });
  }
}

/** The application's health as the agent's health check last found it. */
export interface HealthReport {
  healthy: boolean;
  message?: string;
}

/** Istio: an unhealthy report carries error_detail {code: Internal, message}. */
function healthErrorDetail(r: HealthReport) {
  return r.healthy ? undefined : create(StatusSchema, { code: grpc.status.INTERNAL, message: r.message ?? '' });
}

export class XdsProxy {
  readonly upstream: UpstreamOptions;
  /** The latest health report, sent on every stream now and on every new upstream stream. */
  healthReport: HealthReport | undefined;
  readonly backoff: BackoffOptions;
  readonly handlers: ReadonlyMap<string, ResponseHandler>;
  readonly socketPath: string;
  readonly guard: Guard;
  private server: grpc.Server | undefined;
  private upstreamClient: GrpcClient<Ads> | undefined;
  /** The client certificate the current channel presents. */
  private presented: Buffer | undefined;
  private readonly sessions = new Set<ProxySession>();

  constructor(o: XdsProxyOptions) {
    this.upstream = o.upstream;
    this.backoff = o.backoff ?? DEFAULT_BACKOFF;
    this.handlers = o.handlers ?? new Map();
    this.socketPath = path.resolve(o.socketPath);
    this.guard = o.guard ?? UNGUARDED;
  }

  /** The channel to the daemon, shared by all streams (grpc-js reconnects it underneath). */
  client(): GrpcClient<Ads> {
    const cert = this.upstream.tls?.clientCertificate?.();
    if (this.upstreamClient && cert && !cert.certChain.equals(this.presented ?? Buffer.alloc(0))) {
      // A renewed certificate: new connections present it; streams open on the old channel run on.
      this.upstreamClient.close();
      this.upstreamClient = undefined;
    }
    if (!this.upstreamClient) {
      const u = this.upstream;
      const options: grpc.ChannelOptions = {
        'grpc.max_receive_message_length': -1,
        'grpc.max_send_message_length': -1,
        'grpc.keepalive_time_ms': u.keepaliveTimeMs ?? 30_000,
        'grpc.keepalive_timeout_ms': u.keepaliveTimeoutMs ?? 10_000,
        // Our own backoff paces reconnects; keep the channel's short so a restarted daemon is seen quickly.
        'grpc.initial_reconnect_backoff_ms': 500,
        'grpc.max_reconnect_backoff_ms': 2000,
      };
      const { credentials, options: tlsOptions } = grpcChannelCredentials(
        u.tls
          ? {
              rootCerts: u.tls.rootCerts,
              serverName: u.tls.serverName,
              certChain: cert?.certChain,
              privateKey: cert?.privateKey,
              compliance: u.tls.compliance ?? '',
            }
          : undefined,
      );
      this.presented = cert?.certChain;
      this.upstreamClient = new AdsClient(u.address, credentials, { ...options, ...tlsOptions });
    }
    return this.upstreamClient;
  }

  /** Binds the Unix socket (replacing a stale one, as Istio's uds.NewListener does). */
  async start(): Promise<void> {
    fs.mkdirSync(path.dirname(this.socketPath), { recursive: true });
    try {
      fs.unlinkSync(this.socketPath);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new Error(`failed to remove stale xDS socket ${this.socketPath}: ${(e as Error).message}`);
    }
    const server = new grpc.Server({ 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
    addGrpcService(server, AggregatedDiscoveryService, {
      streamAggregatedResources: this.guard.entry(
        'xds-proxy',
        (call) => this.accept(new SotwSession(this, call)),
        (_e, call) => call.end(),
      ),
      deltaAggregatedResources: this.guard.entry(
        'xds-proxy',
        (call) => this.accept(new DeltaSession(this, call)),
        (_e, call) => call.end(),
      ),
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${this.socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
    ).catch((e: Error) => {
      throw new Error(`failed to start xds proxy: listen unix ${this.socketPath}: ${e.message}`);
    });
    this.server = server;
    log.info(`Initializing with upstream address ${JSON.stringify(this.upstream.address)} and cluster ${JSON.stringify(this.upstream.clusterId)}`);
  }

  /** Istio's sendHealthCheckRequest: send now where connected, and again on each reconnection. */
  reportHealth(report: HealthReport): void {
    this.healthReport = report;
    for (const s of this.sessions) s.sendHealth();
  }

  private accept(s: ProxySession): void {
    log.debug('accepted XDS connection from the proxy, forwarding to upstream XDS server', { id: s.id });
    this.sessions.add(s);
    s.start();
  }

  forget(s: ProxySession): void {
    this.sessions.delete(s);
  }

  /** Streams currently proxied. */
  streamCount(): number {
    return this.sessions.size;
  }

  async stop(): Promise<void> {
    for (const s of [...this.sessions]) s.close(undefined);
    const server = this.server;
    this.server = undefined;
    server?.forceShutdown();
    this.upstreamClient?.close();
    this.upstreamClient = undefined;
    try {
      fs.unlinkSync(this.socketPath);
    } catch {
      // gone already
    }
  }
}
