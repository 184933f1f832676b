// What the ADS server is given and what it tells: its options (generators, node parser, push context, the
// authenticate and connection hooks), the options of attach and pushAll, and its stats.
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import type { Proxy } from '../../discovery/model';
import type { Generator } from '../types';
import type { XdsAuthDenied, XdsAuthenticate } from './auth';
import type { ListenerKind } from './connection';
import type { AdsSettings } from './settings';

/** Generators by type URL, or a function choosing one per proxy (e.g. proxyless gRPC clients). */
export type GeneratorTable<P> = Readonly<Record<string, Generator<P>>> | ((proxy: Proxy, typeUrl: string) => Generator<P> | undefined);

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
   * Names the caller of each new stream or refuses it (the daemon: its authenticator chain, gated by
   * XDS_AUTH / XDS_AUTH_PLAINTEXT). Default: no stream is authenticated, every one is let through.
   */
  authenticate?: XdsAuthenticate;
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
