// The ADS server (Istio's DiscoveryServer, pilot/pkg/xds): serves StreamAggregatedResources (state of the
// world) and DeltaAggregatedResources (incremental) on grpc-js servers the caller owns, answers requests
// with ACK/NACK detection, and pushes config changes through debouncing, a per-connection push queue and a
// concurrency throttle. Generation is delegated to Generator<P> implementations; P is the push context.
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import * as grpc from '@grpc/grpc-js';
import { AggregatedDiscoveryService } from '../../gen/envoy/service/discovery/v3/ads_pb';
import { registerScope } from '../../lib/log/index';
import { addGrpcService, type GrpcServiceImplementation } from '../../lib/xds/grpc';
import type { PushRequest, Resource } from '../types';
import type { ConnectionInfo, ListenerKind } from './connection';
import { Responder } from './generate';
import type { AdsServerOptions, AdsServerStats, AttachOptions, PushAllOptions } from './options';
import { Pusher } from './push';
import { DEFAULT_ADS_SETTINGS, resolvePushThrottle, type AdsSettings } from './settings';
import { Streams, type AnyCall } from './streams';
import { clusterHostname } from '../../lib/xds/type-urls';

const log = registerScope('ads', 'ads debugging');

type AdsMethods = typeof AggregatedDiscoveryService extends GenService<infer S> ? S : never;

/** The server as its owner drives it; the work is in streams.ts (requests), push.ts and generate.ts. */
export class AdsServer<P extends { version: string }> {
  readonly settings: Readonly<AdsSettings>;
  readonly pushThrottle: number;

  private readonly responder: Responder<P>;
  private readonly pusher: Pusher<P>;
  private readonly streams: Streams<P>;
  private stopping: Promise<void> | undefined;

  constructor(opts: AdsServerOptions<P>) {
    const settings: Readonly<AdsSettings> = { ...DEFAULT_ADS_SETTINGS, ...opts.settings };
    const now = opts.now ?? Date.now;
    this.settings = settings;
    this.pushThrottle = resolvePushThrottle(settings.pushThrottle);
    this.responder = new Responder<P>({
      generators: opts.generators,
      settings,
      now,
      ...(opts.controlPlaneIdentifier ? { controlPlaneIdentifier: opts.controlPlaneIdentifier } : {}),
      ...(opts.controlPlaneTypes ? { controlPlaneTypes: opts.controlPlaneTypes } : {}),
      close: (con, code, details) => this.streams.close(con, code, details),
    });
    this.pusher = new Pusher<P>({
      settings,
      pushThrottle: this.pushThrottle,
      now,
      pushContext: opts.pushContext,
      ...(opts.versionFor ? { versionFor: opts.versionFor } : {}),
      endpointHostname: opts.endpointHostname ?? clusterHostname,
      connections: () => this.streams.byId,
      responder: this.responder,
    });
    this.streams = new Streams<P>({ server: opts, settings, now, responder: this.responder, pusher: this.pusher });
  }

  /**
   * Adds the AggregatedDiscoveryService to a grpc-js server the caller binds. With MESH_DELTA_XDS=false the
   * delta method is left out, so grpc-js answers it UNIMPLEMENTED like a server without delta support.
   */
  attach(server: grpc.Server, options: AttachOptions = {}): void {
    const listener: ListenerKind = options.listener ?? (options.secure ? 'tls' : 'plaintext');
    const impl: Partial<GrpcServiceImplementation<AdsMethods>> = {
      streamAggregatedResources: (call) => this.streams.accept('sotw', call as unknown as AnyCall, listener),
    };
    if (this.settings.deltaXds) {
      impl.deltaAggregatedResources = (call) => this.streams.accept('delta', call as unknown as AnyCall, listener);
    }
    addGrpcService(server, AggregatedDiscoveryService, impl);
  }

  /**
   * Queues a push to every connection, debounced per PILOT_DEBOUNCE_* unless `immediate`. Returns the
   * number of connections now (those connected when the push is dispatched get it).
   */
  pushAll(req: PushRequest<P>, options: PushAllOptions = {}): number {
    if (this.stopping) return 0;
    this.pusher.submit(req, options);
    return this.streams.byId.size;
  }

  /**
   * Has `prepare` give each push its push context as it leaves the debouncer, before it is versioned and queued
   * (the daemon's push controller: Istio builds the push context there, once per debounced push).
   */
  onDispatch(prepare: (req: PushRequest<P>) => PushRequest<P>): void {
    this.pusher.onDispatch(prepare);
  }

  /** Every initialized connection, for adsz/syncz/connections. */
  connections(): ConnectionInfo[] {
    const out: ConnectionInfo[] = [];
    for (const con of this.streams.byId.values()) {
      const info = con.info();
      if (info) out.push(info);
    }
    return out.sort((a, b) => a.conId.localeCompare(b.conId));
  }

  connection(conId: string): ConnectionInfo | undefined {
    return this.streams.byId.get(conId)?.info();
  }

  /**
   * What a connection would be sent for a type now, from the current push context and its watch (a type
   * it does not watch: everything for wildcard types, nothing for by-name ones). For config_dump.
   * undefined: no such connection, or no generator for the type.
   */
  resourcesFor(conId: string, typeUrl: string): { version: string; resources: Resource[] } | undefined {
    const con = this.streams.byId.get(conId);
    if (!con || !con.proxy) return undefined;
    return this.responder.resourcesFor(con, typeUrl, () => this.pusher.currentPush());
  }

  /** Ends one connection (debug force_disconnect); the proxy reconnects. false if there is no such ID. */
  forceDisconnect(conId: string): boolean {
    const con = this.streams.byId.get(conId);
    if (!con) return false;
    log.info(`ADS: force disconnecting ${conId}`);
    this.streams.close(con, grpc.status.UNAVAILABLE, 'connection closed by the control plane (force disconnect)');
    return true;
  }

  stats(): AdsServerStats {
    return { connections: this.streams.byId.size, ...this.pusher.stats(), pushThrottle: this.pushThrottle };
  }

  /**
   * Graceful stop: refuse new streams, drop pushes not yet started, let running pushes and requests finish
   * for up to `graceMs`, then end every stream with UNAVAILABLE so proxies reconnect elsewhere.
   */
  stop(graceMs: number): Promise<void> {
    if (this.stopping) return this.stopping;
    this.pusher.stop();
    this.stopping = this.streams.stop(graceMs);
    return this.stopping;
  }
}
