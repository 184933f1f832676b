// The ADS server (Istio's DiscoveryServer, pilot/pkg/xds): serves StreamAggregatedResources (state of the
// world) and DeltaAggregatedResources (incremental) on grpc-js servers the caller owns, answers requests
// with ACK/NACK detection, and pushes config changes through debouncing, a per-connection push queue and a
// concurrency throttle. Generation is delegated to Generator<P> implementations; P is the push context.
import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import * as grpc from '@grpc/grpc-js';
import { ControlPlaneSchema, type ControlPlane, type Node } from '../../gen/envoy/config/core/v3/base_pb';
import { AggregatedDiscoveryService } from '../../gen/envoy/service/discovery/v3/ads_pb';
import type { DeltaDiscoveryRequest, DiscoveryRequest } from '../../gen/envoy/service/discovery/v3/discovery_pb';
import type { Proxy } from '../../discovery/model';
import { registerScope } from '../../lib/log/index';
import { addGrpcService, type GrpcServiceImplementation } from '../../lib/xds/grpc';
import type { Generator, PushRequest, Resource, WatchedResource } from '../types';
import { grpcAuthRequest } from '../../ca/authn/grpc';
import { ClientCertAuthenticator } from '../../ca/authn/client-cert';
import { authenticate, type AuthOutcome, type AuthRequest } from '../../ca/authn/types';
import { authenticateXdsPeer, authorizeXdsProxy, type XdsAuthDenied } from './auth';
import { typeNeedsFullPush } from './needs-push';
import { SEND_BUDGET_BYTES, SendBudget, XdsConnection, type ConnectionInfo, type ListenerKind, type StreamKind } from './connection';
import { Debouncer, type DebouncedPush } from './debounce';
import { encodeDeltaDiscoveryResponse, encodeDiscoveryResponse } from './encode';
import { deltaOnRequest, deltaPushDiff, deltaRecordSent, type DeltaDiff } from './delta';
import {
  configSizeBytes,
  debounceTime,
  expiredNonce,
  incrementXdsRejects,
  proxiesConvergeDelay,
  proxiesQueueTime,
  recordPush,
  recordPushTriggers,
  recordSendError,
  recordXdsClients,
  responseWriteTimeouts,
  sendTime,
  totalXdsInternalErrors,
} from './metrics';
import { PushQueue, type QueuedPush } from './push-queue';
import { PROXY_REQUEST_TRIGGER, reasonsOrUnknown } from './push-request';
import { hashResource, totalSize, type HashedResource } from './resources';
import { DEFAULT_ADS_SETTINGS, resolvePushThrottle, type AdsSettings } from './settings';
import { sotwOnRequest, sotwPushSelection, sotwRecordSent } from './sotw';
import { clusterHostname, grpcCodeName, HEALTH_INFO_TYPE_URL, isWildcardType, metricType, orderTypes, shortType, TYPE_URL } from '../../lib/xds/type-urls';
import { watchedResource, type WatchState } from './watch';
import { markVhds, usesVhds } from '../vhds';
import { VHDS_CLIENT_FEATURE } from '../../lib/xds/vhds';
import { leftOutReport, proxyCapabilities } from '../gen/capabilities';

const log = registerScope('ads', 'ads debugging');
const deltaLog = registerScope('delta', 'delta xds debugging');

/** Generators by type URL, or a function choosing one per proxy (e.g. proxyless gRPC clients). */
export type GeneratorTable<P> =
  | Readonly<Record<string, Generator<P>>>
  | ((proxy: Proxy, typeUrl: string) => Generator<P> | undefined);

export interface AdsServerOptions<P extends { version: string }> {
  generators: GeneratorTable<P>;
  /** Node → Proxy (ID, metadata). A throw rejects the stream with INVALID_ARGUMENT and the message. */
  parseNode: (node: Node) => Proxy;
  /** The current push context: new connections and requests are answered from it. */
  pushContext: () => P;
  settings?: Partial<AdsSettings>;
  /** Response version of a push; default `<push.version>/<n>` with n counting pushes of this server. */
  versionFor?: (push: P, seq: number) => string;
  /** Sent as control_plane.identifier in every response when set (Istio: JSON of component, ID, version). */
  controlPlaneIdentifier?: string;
  /** Types whose responses alone carry controlPlaneIdentifier (Istio sends it only for debug syncz); default all. */
  controlPlaneTypes?: ReadonlySet<string>;
  /** Host of an EDS resource name, for incremental pushes; default Istio's `outbound|port|subset|host`. */
  endpointHostname?: (resourceName: string) => string;
  now?: () => number;
  /**
   * The daemon's authenticator chain (Istio's DiscoveryServer.Authenticators), gated by XDS_AUTH /
   * XDS_AUTH_PLAINTEXT. Default: client certificates only.
   */
  authenticate?: (req: AuthRequest) => Promise<AuthOutcome>;
  /** Told of each proxy's streams and health reports (Istio's WorkloadEntryController). */
  connectionHooks?: ConnectionHooks;
  /**
   * Asked before any request of a stream is answered: a refusal ends the stream with its code and message
   * (the daemon keeps its debug types from callers it cannot trust, src/meshd/xds-debug.ts).
   */
  authorizeRequest?: (c: RequestCaller, typeUrl: string) => XdsAuthDenied | undefined;
}

/** Who sent a request, as authorizeRequest sees it. */
export interface RequestCaller {
  /** The TCP peer, as grpc-js prints it (`127.0.0.1:40000`, `[::1]:40000`). */
  peer: string;
  /** Identities the authenticator chain gave the stream; undefined when it was not authenticated. */
  identities: readonly string[] | undefined;
}

/** A stream as the connection hooks see it. */
export interface HookedConnection {
  conId: string;
  proxy: Proxy;
  node: Node;
  /** ms since epoch. */
  connectedAt: number;
}

/**
 * What Istio's DiscoveryServer tells its WorkloadEntryController: `connect` runs once the proxy is known,
 * before any request is answered, and a rejection ends the stream with its message (and its gRPC `code`,
 * when it has one); `disconnect` follows the end of every stream whose `connect` succeeded; `health` gets
 * each `istio.v1.HealthInformation` request (healthy unless it carries error_detail).
 */
export interface ConnectionHooks {
  connect(c: HookedConnection): Promise<void>;
  disconnect(c: HookedConnection): void;
  health(c: HookedConnection, report: { healthy: boolean; message: string }): void;
}

export interface AttachOptions {
  /** Which listener the grpc server serves: XDS_AUTH authenticates `tls` streams by client certificate. */
  listener?: ListenerKind;
  /** Shorthand: true is `listener: 'tls'` (ignored when listener is given). */
  secure?: boolean;
}

export interface PushAllOptions {
  /** Skip debouncing (debug endpoints). */
  immediate?: boolean;
}

export interface AdsServerStats {
  connections: number;
  /** Connections waiting in the push queue. */
  pendingPushes: number;
  /** Connections being pushed now. */
  inFlightPushes: number;
  /** Pushes dispatched to the queue (after debouncing). */
  pushesDispatched: number;
  /** Requests waiting in the debouncer. */
  debouncing: number;
  pushThrottle: number;
}

type AdsMethods = typeof AggregatedDiscoveryService extends GenService<infer S> ? S : never;
type SotwCall = grpc.ServerDuplexStream<DiscoveryRequest, unknown>;
type DeltaCall = grpc.ServerDuplexStream<DeltaDiscoveryRequest, unknown>;
type AnyCall = grpc.ServerDuplexStream<DiscoveryRequest | DeltaDiscoveryRequest, unknown>;

const CERTIFICATE_ONLY = [new ClientCertAuthenticator()];

function hooked<P>(con: XdsConnection<P>): HookedConnection {
  return { conId: con.conId, proxy: con.proxy as Proxy, node: con.node as Node, connectedAt: con.connectedAt };
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class AdsServer<P extends { version: string }> {
  readonly settings: Readonly<AdsSettings>;
  readonly pushThrottle: number;

  private readonly streams = new Set<XdsConnection<P>>();
  private readonly byId = new Map<string, XdsConnection<P>>();
  private readonly queue = new PushQueue<XdsConnection<P>, P>();
  private readonly debouncer: Debouncer<P>;
  private readonly now: () => number;
  private readonly controlPlane: ControlPlane | undefined;
  private readonly endpointHostname: (name: string) => string;
  private readonly sendBudget = new SendBudget(SEND_BUDGET_BYTES);

  private pushSeq = 0;
  private connectionSeq = 0;
  private dispatched = 0;
  private current: { push: P; version: string } | undefined;
  private inFlight = 0;
  private pumpScheduled = false;
  private stopping: Promise<void> | undefined;

  constructor(private readonly opts: AdsServerOptions<P>) {
    this.settings = { ...DEFAULT_ADS_SETTINGS, ...opts.settings };
    this.pushThrottle = resolvePushThrottle(this.settings.pushThrottle);
    this.now = opts.now ?? Date.now;
    this.endpointHostname = opts.endpointHostname ?? clusterHostname;
    this.controlPlane = opts.controlPlaneIdentifier ? create(ControlPlaneSchema, { identifier: opts.controlPlaneIdentifier }) : undefined;
    this.debouncer = new Debouncer<P>(
      { afterMs: this.settings.debounceAfterMs, maxMs: this.settings.debounceMaxMs, enableEds: this.settings.enableEdsDebounce },
      (req, info) => this.dispatch(req, info),
      this.now,
    );
  }

  // ---- wiring ---------------------------------------------------------------------------------------

  private authenticate(req: AuthRequest): Promise<AuthOutcome> {
    if (this.opts.authenticate) return this.opts.authenticate(req);
    return authenticate(CERTIFICATE_ONLY, req, this.settings);
  }

  /**
   * Adds the AggregatedDiscoveryService to a grpc-js server the caller binds. With MESH_DELTA_XDS=false the
   * delta method is left out, so grpc-js answers it UNIMPLEMENTED like a server without delta support.
   */
  attach(server: grpc.Server, options: AttachOptions = {}): void {
    const listener: ListenerKind = options.listener ?? (options.secure ? 'tls' : 'plaintext');
    const impl: Partial<GrpcServiceImplementation<AdsMethods>> = {
      streamAggregatedResources: (call) => this.acceptStream('sotw', call as unknown as SotwCall, listener),
    };
    if (this.settings.deltaXds) {
      impl.deltaAggregatedResources = (call) => this.acceptStream('delta', call as unknown as DeltaCall, listener);
    }
    addGrpcService(server, AggregatedDiscoveryService, impl);
  }

  // ---- pushes ---------------------------------------------------------------------------------------

  /**
   * Queues a push to every connection, debounced per PILOT_DEBOUNCE_* unless `immediate`. Returns the
   * number of connections now (those connected when the push is dispatched get it).
   */
  pushAll(req: PushRequest<P>, options: PushAllOptions = {}): number {
    if (this.stopping) return 0;
    if (options.immediate) this.dispatch(req, { events: 1, waitedMs: 0, debounced: false });
    else this.debouncer.submit(req);
    return this.byId.size;
  }

  private nextVersion(push: P): string {
    const seq = ++this.pushSeq;
    return this.opts.versionFor ? this.opts.versionFor(push, seq) : `${push.version}/${seq}`;
  }

  /** The push context and version new connections start from. */
  private currentPush(): { push: P; version: string } {
    const push = this.opts.pushContext();
    if (!this.current || this.current.push !== push) this.current = { push, version: this.nextVersion(push) };
    return this.current;
  }

  private dispatch(req: PushRequest<P>, info: DebouncedPush): void {
    if (this.stopping) return;
    this.dispatched++;
    if (info.debounced) {
      debounceTime.observe(info.waitedMs / 1000);
      log.info(
        `Push debounce stable[${this.dispatched}] ${info.events} for config ${[...req.configsUpdated].join(', ') || '(all)'}: ${info.waitedMs}ms since first change, full=${req.full}`,
      );
    }
    const version = this.nextVersion(req.push);
    this.current = { push: req.push, version };
    const enqueuedAt = this.now();
    log.info(`XDS: ${req.full ? 'Pushing' : 'Incremental Pushing'} ConnectedEndpoints:${this.byId.size} Version:${version}`);
    for (const con of this.byId.values()) this.queue.enqueue(con, { req, version, enqueuedAt });
    this.pump();
  }

  private pump(): void {
    if (this.pumpScheduled || this.stopping) return;
    this.pumpScheduled = true;
    // Deferred so that a burst of enqueues is drained together and requests get processed in between.
    setImmediate(() => {
      this.pumpScheduled = false;
      while (!this.stopping && this.inFlight < this.pushThrottle) {
        const item = this.queue.dequeue();
        if (!item) break;
        this.inFlight++;
        void this.runQueuedPush(item.con, item.push).finally(() => {
          this.queue.markDone(item.con);
          this.inFlight--;
          this.pump();
        });
      }
    });
  }

  private async runQueuedPush(con: XdsConnection<P>, item: QueuedPush<P>): Promise<void> {
    if (con.closed) return;
    proxiesQueueTime.observe(Math.max(0, this.now() - item.enqueuedAt) / 1000);
    recordPushTriggers(reasonsOrUnknown(item.req));
    await con.run(() => this.pushConnection(con, item));
  }

  /** Sends what changed for one connection, in Istio's push order. */
  private async pushConnection(con: XdsConnection<P>, item: QueuedPush<P>): Promise<void> {
    const proxy = con.proxy;
    if (!proxy) return;
    const { req, version } = item;
    con.lastPush = { push: req.push, version };
    // Clusters sent in this push: Envoy re-warms them and waits for their endpoints.
    let clustersSent: ReadonlySet<string> | undefined;
    for (const typeUrl of orderTypes(con.watches.keys())) {
      if (!req.full && typeUrl !== TYPE_URL.endpoint) continue;
      // Clusters just sent are re-warmed by Envoy and wait for their endpoints: EDS then always follows.
      const forcedEds = typeUrl === TYPE_URL.endpoint && clustersSent !== undefined;
      if (req.full && !forcedEds && (req.unchangedTypes?.has(typeUrl) || !typeNeedsFullPush(typeUrl, proxy.type, req.configsUpdated))) continue;
      const w = con.watches.get(typeUrl);
      if (!w) continue;
      const gen = this.generatorFor(proxy, typeUrl);
      if (!gen) continue;
      const only = req.full || w.wildcard ? undefined : this.namesForEndpointUpdate(w, req.edsUpdates);
      if (only && only.size === 0) continue;
      const generated = this.generate(con, gen, w, req, only);
      if (!generated) continue;
      const reason = req.full ? '' : ' (incremental)';
      if (con.kind === 'sotw') {
        const forceAll = typeUrl === TYPE_URL.endpoint && clustersSent !== undefined;
        const selection = sotwPushSelection(w, generated, forceAll);
        if (!selection) continue;
        const ok = await this.sendSotw(con, w, selection, generated, version, only === undefined, `PUSH${reason}`);
        if (!ok) return;
        if (typeUrl === TYPE_URL.cluster) clustersSent = new Set(selection.map((r) => r.name));
      } else {
        let force: ReadonlySet<string> = new Set();
        if (typeUrl === TYPE_URL.endpoint && clustersSent) {
          force = new Set([...clustersSent].filter((n) => w.wildcard || w.names.has(n)));
        }
        const diff = deltaPushDiff(w, generated, force, only);
        if (diff.send.length === 0 && diff.removed.length === 0) continue;
        const ok = await this.sendDelta(con, w, diff, version, `PUSH${reason}`);
        if (!ok) return;
        if (typeUrl === TYPE_URL.cluster) clustersSent = new Set(diff.send.map((r) => r.name));
      }
    }
    proxiesConvergeDelay.observe(Math.max(0, this.now() - req.start) / 1000);
  }

  /** Watched endpoint names whose service host changed (all when the request lists none). */
  private namesForEndpointUpdate(w: WatchState, hosts: ReadonlySet<string>): ReadonlySet<string> {
    if (hosts.size === 0) return new Set(w.names);
    return new Set([...w.names].filter((n) => hosts.has(this.endpointHostname(n))));
  }

  // ---- generation -----------------------------------------------------------------------------------

  private generatorFor(proxy: Proxy, typeUrl: string): Generator<P> | undefined {
    const g = this.opts.generators;
    return typeof g === 'function' ? g(proxy, typeUrl) : g[typeUrl];
  }

  /**
   * Resources for a watch (or some of its names), hashed; undefined when the generator failed, which is
   * counted and logged while the stream stays up.
   */
  private generate(
    con: XdsConnection<P>,
    gen: Generator<P>,
    w: WatchState,
    req: PushRequest<P>,
    only?: ReadonlySet<string>,
  ): HashedResource[] | undefined {
    const proxy = con.proxy as Proxy;
    let watch = watchedResource(w, only);
    if (w.typeUrl === TYPE_URL.virtualHost) watch = { ...watch, routeConfigs: con.watches.get(TYPE_URL.route)?.names ?? new Set() };
    try {
      // Reuse of generated output is the generators' (through the push context's xDS cache).
      return this.generateDirect(gen, proxy, watch, req);
    } catch (err) {
      totalXdsInternalErrors.inc();
      log.error(`ADS:${shortType(w.typeUrl)}: generation failed for node:${con.conId}: ${errorMessage(err)}`);
      return undefined;
    }
  }

  private generateDirect(gen: Generator<P>, proxy: Proxy, watch: WatchedResource, req: PushRequest<P>): HashedResource[] {
    const out = gen.generate(proxy, watch, req).resources;
    // A by-name watch gets only what it asked for.
    const wanted = watch.wildcard ? out : out.filter((r) => watch.resourceNames.has(r.name));
    return wanted.map(hashResource);
  }

  private requestPushRequest(con: XdsConnection<P>): PushRequest<P> {
    return {
      full: true,
      configsUpdated: new Set(),
      edsUpdates: new Set(),
      reasons: new Map([[PROXY_REQUEST_TRIGGER, 1]]),
      push: (con.lastPush as { push: P }).push,
      start: this.now(),
    };
  }

  // ---- sending --------------------------------------------------------------------------------------

  private async sendSotw(
    con: XdsConnection<P>,
    w: WatchState,
    resources: readonly HashedResource[],
    generated: readonly HashedResource[],
    version: string,
    complete: boolean,
    what: string,
  ): Promise<boolean> {
    const nonce = randomUUID();
    const msg = () => encodeDiscoveryResponse({ versionInfo: version, resources, typeUrl: w.typeUrl, nonce, controlPlane: this.controlPlaneFor(w.typeUrl) });
    // Recorded before the write: the client's answer can only be read after this task ends.
    w.nonceSent = nonce;
    w.versionSent = version;
    w.lastSendTime = this.now();
    sotwRecordSent(w, resources, complete, generated);
    const ok = await this.write(con, w.typeUrl, msg, resources, what, `version:${version} nonce:${nonce}`);
    return ok;
  }

  /**
   * `budgeted`: an answer to a request, written within the send budget. Proxies connecting at once are owed
   * all their config at once; pushes are already limited by PILOT_PUSH_THROTTLE.
   */
  private async sendDelta(con: XdsConnection<P>, w: WatchState, diff: DeltaDiff, version: string, what: string, budgeted = false): Promise<boolean> {
    const nonce = randomUUID();
    const msg = () =>
      encodeDeltaDiscoveryResponse({
        systemVersionInfo: version,
        resources: diff.send,
        typeUrl: w.typeUrl,
        removedResources: diff.removed,
        nonce,
        controlPlane: this.controlPlaneFor(w.typeUrl),
      });
    w.nonceSent = nonce;
    w.versionSent = version;
    w.lastSendTime = this.now();
    deltaRecordSent(w, diff);
    return this.write(con, w.typeUrl, msg, diff.send, what, `removed:${diff.removed.length} version:${version} nonce:${nonce}`, budgeted);
  }

  private async write(
    con: XdsConnection<P>,
    typeUrl: string,
    encode: () => unknown,
    resources: readonly HashedResource[],
    what: string,
    detail: string,
    budgeted = false,
  ): Promise<boolean> {
    // Send time counts from when the response may be written, not the wait for the send budget.
    let t0 = performance.now();
    const timed = (): unknown => {
      t0 = performance.now();
      return encode();
    };
    const result = budgeted ? await con.sendWithin(totalSize(resources), timed, this.settings.sendTimeoutMs) : await con.send(timed(), this.settings.sendTimeoutMs);
    const seconds = (performance.now() - t0) / 1000;
    sendTime.observe(seconds);
    const stype = shortType(typeUrl);
    const scope = con.kind === 'delta' ? deltaLog : log;
    if (result === 'ok') {
      const size = totalSize(resources);
      recordPush(typeUrl, seconds);
      configSizeBytes.observe({ type: typeUrl }, size);
      scope.info(`${stype}: ${what} for node:${con.proxy?.id ?? ''} resources:${resources.length} size:${size}B`);
      if (scope.debugEnabled()) scope.debug(`${stype}: ${con.conId} ${detail}`);
      return true;
    }
    if (result === 'timeout') {
      responseWriteTimeouts.inc();
      scope.info(`Timeout writing ${con.conId}: ${stype}`);
      this.closeConnection(con, grpc.status.DEADLINE_EXCEEDED, `timeout writing ${stype} response`);
    } else if (result === 'error') {
      recordSendError(typeUrl);
      scope.warn(`${stype}: Send failure for node:${con.proxy?.id ?? ''} resources:${resources.length}`);
    }
    return false;
  }

  // ---- streams --------------------------------------------------------------------------------------

  private acceptStream(kind: StreamKind, anyCall: SotwCall | DeltaCall, listener: ListenerKind): void {
    const call = anyCall as AnyCall;
    const peer = call.getPeer();
    if (this.stopping) {
      call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'server is shutting down' });
      return;
    }
    const secure = listener === 'tls';
    const onError = (err: unknown): void => {
      totalXdsInternalErrors.inc();
      log.error(`ADS: ${con.conId || peer} internal error: ${errorMessage(err)}`);
    };
    const con = new XdsConnection<P>(kind, call as grpc.ServerDuplexStream<unknown, unknown>, peer, listener, this.now(), onError, this.sendBudget);
    this.streams.add(con);
    // Authentication may call out (a TokenReview, a key set): it runs first on the connection's task chain,
    // so the requests that arrive meanwhile wait behind it.
    void con.run(async () => {
      const outcome = await this.authenticate(grpcAuthRequest(call, secure));
      const authn = authenticateXdsPeer(outcome, secure);
      if (!authn.ok) {
        log.warn(`ADS: rejected unauthenticated stream from ${peer}: ${authn.message}`);
        this.closeConnection(con, authn.code, authn.message);
        return;
      }
      con.identities = authn.identities;
    });
    call.on('data', (req: DiscoveryRequest | DeltaDiscoveryRequest) => {
      void con.run(() => this.onRequest(con, req));
    });
    // Client half-close: finish what is queued, then end the stream (Istio returns on EOF).
    call.on('end', () => {
      void con.run(() => this.closeConnection(con, grpc.status.OK, ''));
    });
    call.on('error', () => this.streamGone(con));
    call.on('close', () => this.streamGone(con));
  }

  private streamGone(con: XdsConnection<P>): void {
    con.markClosed();
    this.release(con);
  }

  private closeConnection(con: XdsConnection<P>, code: grpc.status, details: string): void {
    con.end(code, details);
    this.release(con);
  }

  private release(con: XdsConnection<P>): void {
    if (con.released) return;
    con.released = true;
    this.streams.delete(con);
    this.queue.remove(con);
    if (con.hooked) {
      const hooks = this.opts.connectionHooks as ConnectionHooks;
      const c = hooked(con);
      void con.hooked.then((ok) => ok && hooks.disconnect(c));
    }
    if (con.proxy && this.byId.get(con.conId) === con) {
      this.byId.delete(con.conId);
      recordXdsClients(con.proxy.metadata.meshVersion ?? '', -1);
      log.info(`ADS: "${con.peer}" ${con.conId} terminated`);
    }
  }

  private async onRequest(con: XdsConnection<P>, req: DiscoveryRequest | DeltaDiscoveryRequest): Promise<void> {
    if (con.closed) return;
    if (!con.initialized) {
      // Istio tolerates a health probe before the first real request.
      if (req.typeUrl === HEALTH_INFO_TYPE_URL) return;
      if (!this.initialize(con, req.node)) return;
      if (!(await this.connectHook(con))) return;
    }
    const denied = this.opts.authorizeRequest?.({ peer: con.peer, identities: con.identities }, req.typeUrl);
    if (denied) {
      log.warn(`ADS: ${con.conId} from ${con.peer}: ${req.typeUrl} refused: ${denied.message}`);
      this.closeConnection(con, denied.code, denied.message);
      return;
    }
    if (req.typeUrl === HEALTH_INFO_TYPE_URL) {
      if (this.opts.connectionHooks) this.opts.connectionHooks.health(hooked(con), { healthy: !req.errorDetail, message: req.errorDetail?.message ?? '' });
      return;
    }
    if (con.kind === 'sotw') await this.onSotwRequest(con, req as DiscoveryRequest);
    else await this.onDeltaRequest(con, req as DeltaDiscoveryRequest);
  }

  /** The connect hook; false when it rejected the proxy (the stream is then closed). */
  private async connectHook(con: XdsConnection<P>): Promise<boolean> {
    const hooks = this.opts.connectionHooks;
    if (!hooks) return true;
    let settle: (ok: boolean) => void = () => undefined;
    con.hooked = new Promise<boolean>((r) => (settle = r));
    try {
      await hooks.connect(hooked(con));
      settle(true);
      return true;
    } catch (err) {
      settle(false);
      const code = (err as { code?: unknown }).code;
      log.warn(`ADS: ${con.conId} rejected: ${errorMessage(err)}`);
      this.closeConnection(con, typeof code === 'number' ? (code as grpc.status) : grpc.status.UNKNOWN, errorMessage(err));
      return false;
    }
  }

  /** First request: the node says who the proxy is; authorize it and start tracking the connection. */
  private initialize(con: XdsConnection<P>, node: Node | undefined): boolean {
    if (!node || node.id === '') {
      log.warn(`ADS: "${con.peer}" rejected: missing node information`);
      this.closeConnection(con, grpc.status.INVALID_ARGUMENT, 'missing node information: the first request of an ADS stream must carry node.id');
      return false;
    }
    let proxy: Proxy;
    try {
      proxy = this.opts.parseNode(node);
    } catch (err) {
      log.warn(`ADS: "${con.peer}" rejected: invalid node ${node.id}: ${errorMessage(err)}`);
      this.closeConnection(con, grpc.status.INVALID_ARGUMENT, `invalid node ${JSON.stringify(node.id)}: ${errorMessage(err)}`);
      return false;
    }
    const authz = authorizeXdsProxy(this.settings, con.identities, {
      namespace: proxy.namespace,
      serviceAccount: proxy.metadata.serviceAccount,
    });
    if (!authz.ok) {
      log.warn(`Unauthorized XDS: ${con.peer} with identity [${(con.identities ?? []).join(' ')}]: ${authz.message}`);
      this.closeConnection(con, authz.code, authz.message);
      return false;
    }
    if (authz.identity) proxy.verifiedIdentity = authz.identity;
    // VHDS needs delta xDS, and Envoy cannot say it wants it: only clients that advertise it get it.
    if (con.kind === 'delta' && node.clientFeatures.includes(VHDS_CLIENT_FEATURE)) markVhds(proxy);
    proxy.capabilities = proxyCapabilities(node.extensions);
    con.proxy = proxy;
    con.node = node;
    con.conId = `${proxy.id}-${++this.connectionSeq}`;
    con.lastPush = this.currentPush();
    this.byId.set(con.conId, con);
    recordXdsClients(proxy.metadata.meshVersion ?? '', 1);
    (con.kind === 'delta' ? deltaLog : log).info(`ADS: new ${con.kind === 'delta' ? 'delta ' : ''}connection for node:${con.conId}`);
    const leftOut = leftOutReport(proxy.capabilities);
    if (leftOut) log.info(`ADS: node:${con.conId} is not Istio's Envoy build, left out: ${leftOut}`);
    return true;
  }

  private recordNack(con: XdsConnection<P>, typeUrl: string, code: number, message: string): void {
    const codeName = grpcCodeName(code);
    log.warn(`ADS:${shortType(typeUrl)}: ACK ERROR ${con.conId} ${codeName}:${message}`);
    incrementXdsRejects(typeUrl, con.proxy?.id ?? '', codeName);
  }

  private async onSotwRequest(con: XdsConnection<P>, req: DiscoveryRequest): Promise<void> {
    const stype = shortType(req.typeUrl);
    if (log.debugEnabled()) {
      log.debug(`ADS:${stype}: REQ ${con.conId} resources:${req.resourceNames.length} nonce:${req.responseNonce} version:${req.versionInfo}`);
    }
    const d = sotwOnRequest(
      con.watches,
      {
        typeUrl: req.typeUrl,
        resourceNames: req.resourceNames,
        responseNonce: req.responseNonce,
        versionInfo: req.versionInfo,
        errorDetail: req.errorDetail ? { code: req.errorDetail.code, message: req.errorDetail.message } : undefined,
      },
      this.now(),
    );
    switch (d.kind) {
      case 'nack':
        this.recordNack(con, req.typeUrl, d.nack.code, d.nack.message);
        return;
      case 'expired':
        expiredNonce.inc({ type: metricType(req.typeUrl) });
        log.debug(`ADS:${stype}: REQ ${con.conId} Expired nonce received ${req.responseNonce}, sent ${d.nonceSent}`);
        return;
      case 'unsubscribe':
        log.debug(`ADS:${stype}: UNSUBSCRIBE ${con.conId} ${req.versionInfo} ${req.responseNonce}`);
        return;
      case 'ack':
        log.debug(`ADS:${stype}: ACK ${con.conId} ${req.versionInfo} ${req.responseNonce}`);
        return;
      case 'respond': {
        if (d.why === 'warming') log.info(`ADS:${stype}: FORCE RESPONSE ${con.conId} for warming.`);
        const w = con.watches.get(req.typeUrl);
        const gen = w && this.generatorFor(con.proxy as Proxy, req.typeUrl);
        if (!w || !gen) {
          log.debug(`ADS:${stype}: no generator for ${req.typeUrl}, not answering ${con.conId}`);
          return;
        }
        const pr = this.requestPushRequest(con);
        const generated = this.generate(con, gen, w, pr, d.only);
        if (!generated) return;
        await this.sendSotw(con, w, generated, generated, (con.lastPush as { version: string }).version, d.only === undefined, 'PUSH request');
        return;
      }
    }
  }

  private async onDeltaRequest(con: XdsConnection<P>, req: DeltaDiscoveryRequest): Promise<void> {
    const stype = shortType(req.typeUrl);
    if (deltaLog.debugEnabled()) {
      deltaLog.debug(
        `ADS:${stype}: REQ ${con.conId} resources sub:${req.resourceNamesSubscribe.length} unsub:${req.resourceNamesUnsubscribe.length} nonce:${req.responseNonce}`,
      );
    }
    const d = deltaOnRequest(
      con.watches,
      {
        typeUrl: req.typeUrl,
        resourceNamesSubscribe: req.resourceNamesSubscribe,
        resourceNamesUnsubscribe: req.resourceNamesUnsubscribe,
        initialResourceVersions: req.initialResourceVersions,
        responseNonce: req.responseNonce,
        errorDetail: req.errorDetail ? { code: req.errorDetail.code, message: req.errorDetail.message } : undefined,
      },
      this.now(),
    );
    if (d.nack) this.recordNack(con, req.typeUrl, d.nack.code, d.nack.message);
    if (d.expired) {
      expiredNonce.inc({ type: metricType(req.typeUrl) });
      deltaLog.debug(`ADS:${stype}: REQ ${con.conId} Expired nonce received ${req.responseNonce}, sent ${con.watches.get(req.typeUrl)?.nonceSent ?? ''}`);
    }
    if (!d.respond) return;
    await this.respondDelta(con, req.typeUrl, d.force, d.required);
    // Envoy may leave clusters warming unless endpoints follow clusters (envoyproxy/envoy#33607), so a
    // cluster request is always followed by the endpoints of the clusters.
    if (req.typeUrl === TYPE_URL.cluster && con.watches.has(TYPE_URL.endpoint) && !con.closed) {
      deltaLog.info(`ADS:EDS: FORCE EDS PUSH ${con.conId} for warming.`);
      await this.respondDelta(con, TYPE_URL.endpoint, 'all', false);
    }
    // Virtual hosts belong to the watched route configurations: a new route name brings its virtual hosts,
    // a dropped one removes them.
    if (req.typeUrl === TYPE_URL.route && con.watches.has(TYPE_URL.virtualHost) && !con.closed) {
      await this.respondDelta(con, TYPE_URL.virtualHost, new Set(), false);
    }
  }

  private async respondDelta(con: XdsConnection<P>, typeUrl: string, force: ReadonlySet<string> | 'all', required: boolean): Promise<void> {
    const w = con.watches.get(typeUrl);
    const gen = w && this.generatorFor(con.proxy as Proxy, typeUrl);
    if (!w || !gen) {
      deltaLog.debug(`ADS:${shortType(typeUrl)}: no generator for ${typeUrl}, not answering ${con.conId}`);
      return;
    }
    const generated = this.generate(con, gen, w, this.requestPushRequest(con));
    if (!generated) return;
    const diff = deltaPushDiff(w, generated, force);
    if (!required && diff.send.length === 0 && diff.removed.length === 0) return;
    await this.sendDelta(con, w, diff, (con.lastPush as { version: string }).version, 'PUSH request', true);
  }

  private controlPlaneFor(typeUrl: string): ControlPlane | undefined {
    const only = this.opts.controlPlaneTypes;
    return only && !only.has(typeUrl) ? undefined : this.controlPlane;
  }

  // ---- introspection and control --------------------------------------------------------------------

  /** Every initialized connection, for adsz/syncz/connections. */
  connections(): ConnectionInfo[] {
    const out: ConnectionInfo[] = [];
    for (const con of this.byId.values()) {
      const info = con.info();
      if (info) out.push(info);
    }
    return out.sort((a, b) => a.conId.localeCompare(b.conId));
  }

  connection(conId: string): ConnectionInfo | undefined {
    return this.byId.get(conId)?.info();
  }

  /**
   * What a connection would be sent for a type now, from the current push context and its watch (a type
   * it does not watch: everything for wildcard types, nothing for by-name ones). For config_dump.
   * undefined: no such connection, or no generator for the type.
   */
  resourcesFor(conId: string, typeUrl: string): { version: string; resources: Resource[] } | undefined {
    const con = this.byId.get(conId);
    const proxy = con?.proxy;
    if (!con || !proxy) return undefined;
    const gen = this.generatorFor(proxy, typeUrl);
    if (!gen) return undefined;
    const current = this.currentPush();
    const w = con.watches.get(typeUrl);
    let watch: WatchedResource = w
      ? watchedResource(w)
      : { typeUrl, resourceNames: new Set(), wildcard: isWildcardType(typeUrl) };
    // Virtual hosts are those of the route configurations the proxy watches, as when they are pushed.
    if (typeUrl === TYPE_URL.virtualHost) watch = { ...watch, routeConfigs: con.watches.get(TYPE_URL.route)?.names ?? new Set() };
    if (!watch.wildcard && watch.resourceNames.size === 0) return { version: current.version, resources: [] };
    const req: PushRequest<P> = { ...this.requestPushRequest(con), push: current.push };
    try {
      const out = gen.generate(proxy, watch, req).resources;
      return { version: current.version, resources: watch.wildcard ? out : out.filter((r) => watch.resourceNames.has(r.name)) };
    } catch (err) {
      totalXdsInternalErrors.inc();
      log.error(`ADS:${shortType(typeUrl)}: generation failed for node:${conId}: ${errorMessage(err)}`);
      return undefined;
    }
  }

  /** Ends one connection (debug force_disconnect); the proxy reconnects. false if there is no such ID. */
  forceDisconnect(conId: string): boolean {
    const con = this.byId.get(conId);
    if (!con) return false;
    log.info(`ADS: force disconnecting ${conId}`);
    this.closeConnection(con, grpc.status.UNAVAILABLE, 'connection closed by the control plane (force disconnect)');
    return true;
  }

  stats(): AdsServerStats {
    return {
      connections: this.byId.size,
      pendingPushes: this.queue.pending(),
      inFlightPushes: this.inFlight,
      pushesDispatched: this.dispatched,
      debouncing: this.debouncer.pendingEvents(),
      pushThrottle: this.pushThrottle,
    };
  }

  /**
   * Graceful stop: refuse new streams, drop pushes not yet started, let running pushes and requests finish
   * for up to `graceMs`, then end every stream with UNAVAILABLE so proxies reconnect elsewhere.
   */
  stop(graceMs: number): Promise<void> {
    if (this.stopping) return this.stopping;
    this.debouncer.stop();
    this.queue.clear();
    const streams = [...this.streams];
    this.stopping = (async () => {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, graceMs));
      });
      await Promise.race([Promise.all(streams.map((c) => c.idle())), grace]);
      if (timer) clearTimeout(timer);
      for (const con of [...this.streams]) this.closeConnection(con, grpc.status.UNAVAILABLE, 'server is shutting down');
    })();
    return this.stopping;
  }
}


