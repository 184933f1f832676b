// Streams of the ADS server (Istio's DiscoveryServer.Stream and processRequest, pilot/pkg/xds/ads.go and
// delta.go): each stream is authenticated before anything else runs on it, its first request names the proxy
// (parsed, authorized against the stream's identities, told to the connection hooks), and every request is
// answered, ACKed or counted as a NACK; ends of streams release the connection everywhere it is tracked.
import * as grpc from '@grpc/grpc-js';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import type { DeltaDiscoveryRequest, DiscoveryRequest } from '../../gen/envoy/service/discovery/v3/discovery_pb';
import type { Proxy } from '../../discovery/model';
import { registerScope } from '../../lib/log/index';
import { TYPE_URL } from '../../lib/xds/type-urls';
import { markVhds } from '../vhds';
import { VHDS_CLIENT_FEATURE } from '../../lib/xds/vhds';
import { leftOutReport, proxyCapabilities } from '../../discovery/capabilities';
import { authorizeXdsProxy, type XdsAuthDenied, type XdsAuthenticated } from './auth';
import { SEND_BUDGET_BYTES, SendBudget, XdsConnection, type ListenerKind, type StreamKind } from './connection';
import { deltaOnRequest, deltaPushDiff } from './delta';
import { errorMessage, type Responder } from './generate';
import { expiredNonce, incrementXdsRejects, recordXdsClients, totalXdsInternalErrors } from './metrics';
import type { AdsServerOptions, ConnectionHooks, HookedConnection } from './options';
import type { Pusher } from './push';
import type { AdsSettings } from './settings';
import { sotwOnRequest } from './sotw';
import { grpcCodeName, HEALTH_INFO_TYPE_URL, metricType, shortType } from '../../lib/xds/type-urls';

const log = registerScope('ads', 'ads debugging');
const deltaLog = registerScope('delta', 'delta xds debugging');

export type AnyCall = grpc.ServerDuplexStream<DiscoveryRequest | DeltaDiscoveryRequest, unknown>;

const NOT_AUTHENTICATED: XdsAuthenticated = { ok: true, identities: undefined };

function hooked<P>(con: XdsConnection<P>): HookedConnection {
  return { conId: con.conId, proxy: con.proxy as Proxy, node: con.node as Node, connectedAt: con.connectedAt };
}

export interface StreamsOptions<P extends { version: string }> {
  server: AdsServerOptions<P>;
  settings: Readonly<AdsSettings>;
  now: () => number;
  responder: Responder<P>;
  pusher: Pusher<P>;
}

export class Streams<P extends { version: string }> {
  /** Initialized connections by ID. */
  readonly byId = new Map<string, XdsConnection<P>>();
  /** Every open stream, initialized or not. */
  private readonly open = new Set<XdsConnection<P>>();
  private readonly sendBudget = new SendBudget(SEND_BUDGET_BYTES);
  private connectionSeq = 0;
  private refusing = false;

  constructor(private readonly o: StreamsOptions<P>) {}

  private authenticate(call: AnyCall, secure: boolean): Promise<XdsAuthenticated | XdsAuthDenied> {
    const hook = this.o.server.authenticate;
    return hook ? hook(call, secure) : Promise.resolve(NOT_AUTHENTICATED);
  }

  accept(kind: StreamKind, call: AnyCall, listener: ListenerKind): void {
    const peer = call.getPeer();
    if (this.refusing) {
      call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'server is shutting down' });
      return;
    }
    const secure = listener === 'tls';
    const onError = (err: unknown): void => {
      totalXdsInternalErrors.inc();
      log.error(`ADS: ${con.conId || peer} internal error: ${errorMessage(err)}`);
    };
    const con = new XdsConnection<P>(kind, call as grpc.ServerDuplexStream<unknown, unknown>, peer, listener, this.o.now(), onError, this.sendBudget);
    this.open.add(con);
    // Authentication may call out (a TokenReview, a key set): it runs first on the connection's task chain,
    // so the requests that arrive meanwhile wait behind it.
    void con.run(async () => {
      const authn = await this.authenticate(call, secure);
      if (!authn.ok) {
        log.warn(`ADS: rejected unauthenticated stream from ${peer}: ${authn.message}`);
        this.close(con, authn.code, authn.message);
        return;
      }
      con.identities = authn.identities;
    });
    call.on('data', (req: DiscoveryRequest | DeltaDiscoveryRequest) => {
      void con.run(() => this.onRequest(con, req));
    });
    // Client half-close: finish what is queued, then end the stream (Istio returns on EOF).
    call.on('end', () => {
      void con.run(() => this.close(con, grpc.status.OK, ''));
    });
    call.on('error', () => this.streamGone(con));
    call.on('close', () => this.streamGone(con));
  }

  /**
   * Refuses new streams, lets running work finish for up to `graceMs`, then ends every stream with
   * UNAVAILABLE so proxies reconnect elsewhere.
   */
  async stop(graceMs: number): Promise<void> {
    this.refusing = true;
    const streams = [...this.open];
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, graceMs));
    });
    await Promise.race([Promise.all(streams.map((c) => c.idle())), grace]);
    if (timer) clearTimeout(timer);
    for (const con of [...this.open]) this.close(con, grpc.status.UNAVAILABLE, 'server is shutting down');
  }

  private streamGone(con: XdsConnection<P>): void {
    con.markClosed();
    this.release(con);
  }

  close(con: XdsConnection<P>, code: grpc.status, details: string): void {
    con.end(code, details);
    this.release(con);
  }

  private release(con: XdsConnection<P>): void {
    if (con.released) return;
    con.released = true;
    this.open.delete(con);
    this.o.pusher.forget(con);
    if (con.hooked) {
      const hooks = this.o.server.connectionHooks as ConnectionHooks;
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
    const denied = this.o.server.authorizeRequest?.({ peer: con.peer, identities: con.identities }, req.typeUrl);
    if (denied) {
      log.warn(`ADS: ${con.conId} from ${con.peer}: ${req.typeUrl} refused: ${denied.message}`);
      this.close(con, denied.code, denied.message);
      return;
    }
    if (req.typeUrl === HEALTH_INFO_TYPE_URL) {
      const hooks = this.o.server.connectionHooks;
      if (hooks) hooks.health(hooked(con), { healthy: !req.errorDetail, message: req.errorDetail?.message ?? '' });
      return;
    }
    if (con.kind === 'sotw') await this.onSotwRequest(con, req as DiscoveryRequest);
    else await this.onDeltaRequest(con, req as DeltaDiscoveryRequest);
  }

  /** The connect hook; false when it rejected the proxy (the stream is then closed). */
  private async connectHook(con: XdsConnection<P>): Promise<boolean> {
    const hooks = this.o.server.connectionHooks;
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
      this.close(con, typeof code === 'number' ? (code as grpc.status) : grpc.status.UNKNOWN, errorMessage(err));
      return false;
    }
  }

  /** First request: the node says who the proxy is; authorize it and start tracking the connection. */
  private initialize(con: XdsConnection<P>, node: Node | undefined): boolean {
    if (!node || node.id === '') {
      log.warn(`ADS: "${con.peer}" rejected: missing node information`);
      this.close(con, grpc.status.INVALID_ARGUMENT, 'missing node information: the first request of an ADS stream must carry node.id');
      return false;
    }
    let proxy: Proxy;
    try {
      proxy = this.o.server.parseNode(node);
    } catch (err) {
      log.warn(`ADS: "${con.peer}" rejected: invalid node ${node.id}: ${errorMessage(err)}`);
      this.close(con, grpc.status.INVALID_ARGUMENT, `invalid node ${JSON.stringify(node.id)}: ${errorMessage(err)}`);
      return false;
    }
    const authz = authorizeXdsProxy(this.o.settings, con.identities, {
      namespace: proxy.namespace,
      serviceAccount: proxy.metadata.serviceAccount,
    });
    if (!authz.ok) {
      log.warn(`Unauthorized XDS: ${con.peer} with identity [${(con.identities ?? []).join(' ')}]: ${authz.message}`);
      this.close(con, authz.code, authz.message);
      return false;
    }
    if (authz.identity) proxy.verifiedIdentity = authz.identity;
    // VHDS needs delta xDS, and Envoy cannot say it wants it: only clients that advertise it get it.
    if (con.kind === 'delta' && node.clientFeatures.includes(VHDS_CLIENT_FEATURE)) markVhds(proxy);
    proxy.capabilities = proxyCapabilities(node.extensions);
    // Node.cluster: the OpenTelemetry tracer's service name (Istio XdsNode.Cluster)
    if (node.cluster) proxy.serviceCluster = node.cluster;
    con.proxy = proxy;
    con.node = node;
    con.conId = `${proxy.id}-${++this.connectionSeq}`;
    con.lastPush = this.o.pusher.currentPush();
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
      this.o.now(),
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
        const gen = w && this.o.responder.generatorFor(con.proxy as Proxy, req.typeUrl);
        if (!w || !gen) {
          log.debug(`ADS:${stype}: no generator for ${req.typeUrl}, not answering ${con.conId}`);
          return;
        }
        const pr = this.o.responder.requestPushRequest(con);
        const generated = this.o.responder.generate(con, gen, w, pr, d.only);
        if (!generated) return;
        await this.o.responder.sendSotw(
          con,
          w,
          generated,
          generated,
          (con.lastPush as { version: string }).version,
          d.only === undefined,
          'PUSH request',
        );
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
      this.o.now(),
    );
    if (d.nack) this.recordNack(con, req.typeUrl, d.nack.code, d.nack.message);
    if (d.expired) {
      expiredNonce.inc({ type: metricType(req.typeUrl) });
      deltaLog.debug(
        `ADS:${stype}: REQ ${con.conId} Expired nonce received ${req.responseNonce}, sent ${con.watches.get(req.typeUrl)?.nonceSent ?? ''}`,
      );
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
    const gen = w && this.o.responder.generatorFor(con.proxy as Proxy, typeUrl);
    if (!w || !gen) {
      deltaLog.debug(`ADS:${shortType(typeUrl)}: no generator for ${typeUrl}, not answering ${con.conId}`);
      return;
    }
    const generated = this.o.responder.generate(con, gen, w, this.o.responder.requestPushRequest(con));
    if (!generated) return;
    const diff = deltaPushDiff(w, generated, force);
    if (!required && diff.send.length === 0 && diff.removed.length === 0) return;
    await this.o.responder.sendDelta(con, w, diff, (con.lastPush as { version: string }).version, 'PUSH request', true);
  }
}
