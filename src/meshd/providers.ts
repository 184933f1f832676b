// What the daemon shell (listeners, debug pages, readiness, metrics, webhook) needs from the components
// that do the real work: the config store, the service registries, the push context and the ADS server.
// The daemon only reads through these interfaces, so it can be started against fakes in tests and wired
// to the real components in the `discovery` command.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as GrpcServer } from '@grpc/grpc-js';
import type { Config } from '../config/types';
import type { Endpoint, Proxy, Service } from '../discovery/model';
import type { ClusterDebugInfo } from '../multicluster';
import type { TlsMaterial, TlsSource } from '../serve/tls';

/** Whether a component is ready, and if not, why (shown by `/ready` and logged). */
export type Readiness = { ready: true } | { ready: false; reason: string };

/** One resource type a connected proxy watches, with the nonces of the last response and ACK. */
export interface WatchedTypeStatus {
  typeUrl: string;
  resourceNames: readonly string[];
  /** Nonce of the last response sent for this type. */
  nonceSent?: string;
  /** Nonce of the last response the proxy ACKed. */
  nonceAcked?: string;
  /** When the last response was sent, ms since the epoch. */
  lastSendTime?: number;
  /** error_detail of the last NACK, if the latest request was a NACK. */
  lastError?: string;
}

/** One ADS stream, as `/debug/adsz`, `/debug/syncz` and `/debug/connections` show it. */
export interface XdsConnectionInfo {
  /** Istio's connection ID: `<node id>-<counter>`, unique per stream. */
  id: string;
  proxy: Proxy;
  /** Peer `ip:port` of the stream. */
  peerAddress: string;
  /** ms since the epoch. */
  connectedAt: number;
  watched: readonly WatchedTypeStatus[];
}

export interface ConfigDumpOptions {
  /** `?include_eds`: add the EndpointsConfigDump (Istio leaves it out by default, like Envoy). */
  includeEds: boolean;
  /** `?types=cds,eds` or full type URLs: dump only these types (Istio's typed dump). Empty = the full dump. */
  types: readonly string[];
}

/** One entry of Istio's push status: a proxy and what was wrong (`pilot_conflict_…`, `pilot_eds_no_instances`). */
export interface ProxyPushStatus {
  proxy?: string;
  message?: string;
}
/** Istio's PushContext.ProxyStatus: metric name → key (listener, cluster, …) → status. */
export type PushStatus = Readonly<Record<string, Readonly<Record<string, ProxyPushStatus>>>>;

/** What the validation webhook learns about one object from the config model. */
export interface ValidationResult {
  /** Errors that make the object invalid, each naming the field. Empty when valid. */
  errors: readonly string[];
  warnings?: readonly string[];
  /** True when apiVersion/kind is not a type the daemon validates (Istio: `unrecognized type`). */
  unknownType?: boolean;
}

/** The xDS server as the daemon drives it (src/xds/server's AdsServer). */
export interface XdsServerHandle {
  /**
   * Registers the ADS service on a gRPC server. Called once for the plain listener (`secure: false`)
   * and once for the TLS listener (`secure: true`, where XDS_AUTH applies).
   */
  attach(server: GrpcServer, opts: { secure: boolean }): void;
  connections(): readonly XdsConnectionInfo[];
  /** Ends the stream with this connection ID; false when no such stream. */
  forceDisconnect(connectionId: string): boolean;
  /**
   * Stop starting new pushes, let in-flight pushes finish for at most `graceMs`, then end every stream.
   * Resolves when done; the daemon force-closes the gRPC servers if it has not resolved by the deadline.
   */
  stop(graceMs: number): Promise<void>;
  /**
   * The config a connected proxy would get now, as the JSON of envoy.admin.v3.ConfigDump (Any values
   * resolved), for `/debug/config_dump`. Undefined when the connection is gone.
   */
  configDump(connectionId: string, opts: ConfigDumpOptions): unknown;
  /** `/debug/adsz?push=true`: a full push to every connection; returns how many were pushed to. Optional. */
  pushAll?(): number;
  /**
   * Gives the xDS server the daemon's debug pages, which `istio.io/debug` requests over ADS read (meshctl x
   * internal-debug, target resolution). Optional: servers without debug over xDS ignore it.
   */
  setDebugPages?(page: (name: string) => { status: number; body: string } | undefined): void;
}

/** The daemon's identity: its CA service and the TLS material of its secure listeners (src/meshd/identity/). */
export interface IdentityProvider {
  /**
   * TLS for :15012 and :15017. The operator's files (`files`, already read) win; otherwise the certificate
   * the daemon's CA issued itself. Client certificates are verified against --caCertFile when given, else
   * against the mesh roots. Undefined when there is no material; `noTlsReason` then says why.
   */
  serverTls(files: TlsMaterial | undefined): TlsSource | undefined;
  readonly noTlsReason?: string;
  /** Registers the CA service, when there is one, on a gRPC server (the secure one, or the plain one if none). */
  registerGrpc(server: GrpcServer, opts: { secure: boolean }): void;
}

/** Everything the daemon shell reads. One object, so the wiring can pass the real components or a fake. */
export interface MeshdProviders {
  /** Config and registries have their initial state: `/ready` answers 200 only then. */
  synced(): Readiness;
  /** Every mesh config resource (Istio's configz lists the config store, not the Kubernetes objects). */
  configs(): readonly Config[];
  services(): readonly Service[];
  endpoints(): readonly Endpoint[];
  /** The Gateway API objects' computed status (`/debug/gateway-status`), when the Gateway API is served. */
  gatewayStatus?(): readonly unknown[];
  /** The clusters the daemon reads (`/debug/clusterz`), when it reads the orchestrator API. */
  clusters?(): readonly ClusterDebugInfo[];
  /** The last push context's status, undefined before the first push. */
  pushStatus(): PushStatus | undefined;
  xds: XdsServerHandle;
  /** Validates one Kubernetes-style object for `POST /validate` on the HTTPS listener. */
  validate(obj: Readonly<Record<string, unknown>>): ValidationResult;
  /** The sidecar injection webhook (`/inject`, `/inject/…` on the HTTPS listener), when injection is on. */
  inject?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /**
   * Authenticates a debug request from a non-loopback client (Istio authenticates these like xDS clients).
   * Returns the identities, or undefined when not authenticated. Without it, such requests get 401, as in
   * Istio with no authenticators.
   */
  authenticateDebug?(req: IncomingMessage): Promise<readonly string[] | undefined>;
  /** The CA and the daemon's own certificate; without it only --tlsCertFile/--tlsKeyFile start the TLS listeners. */
  identity?: IdentityProvider;
  /** Releases what the providers hold (watches, clients); called last during shutdown. */
  close?(): Promise<void>;
}
