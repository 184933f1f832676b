// The HTTP filter plug-in interface. A filter module registers a factory for its config type URL(s);
// the HTTP connection manager builds one filter instance per HCM config (not per request) and calls it
// for every request in chain order. A filter reads and edits the request headers, reads/writes dynamic
// metadata, may clear the route cache (after changing what routing looks at) and may stop the request
// with a local reply. Everything per request lives on the HttpStream.
import type { JsonObject } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { Registry } from '@bufbuild/protobuf';
import type { ClusterCall } from '../common/cluster-call';
import type { LocalInfo } from '../common/local-info';
import type { LoggerRegistry } from '../log';
import type { DynamicMetadata } from '../matchers/string';
import type { StatsScope } from '../stats/store';
import type { DownstreamConnectionInfo, StreamInfo } from '../stream-info';
import type { RouteSelection } from '../route/types';
import type { RawHeaders, RequestHeaders, ResponseHeaders } from '../codec/headers';

/** A response the proxy makes itself (Envoy sendLocalReply). */
export interface LocalReply {
  status: number;
  body?: string;
  headers?: Readonly<Record<string, string>>;
  /** %RESPONSE_CODE_DETAILS% */
  details?: string;
  /** Envoy response flag (fault abort → `FI`…). */
  flag?: string;
  /** For gRPC requests: the grpc-status to send (else mapped from `status`). */
  grpcStatus?: number;
}

/** What a filter sees of one request. */
export interface HttpStream {
  readonly request: RequestHeaders;
  readonly info: StreamInfo;
  readonly connection: DownstreamConnectionInfo;
  readonly dynamicMetadata: DynamicMetadata;
  /** Merges keys into the namespace (Envoy setDynamicMetadata). */
  setDynamicMetadata(namespace: string, values: JsonObject): void;
  /** The cached route, computed on first use. */
  route(): RouteSelection | undefined;
  /** Forget the cached route: the next route() re-matches (jwt_authn clear_route_cache). */
  clearRouteCache(): void;
  /** Most specific per-route config for this filter: weighted cluster, route, vhost, route config. */
  perFilterConfig<T>(filterName: string): T | undefined;
  /** Per-request state filters keep between decode and encode. */
  readonly filterState: Map<string, unknown>;
  /** What went downstream, once the response started; its trailers once it ended (gRPC status). */
  readonly responseHeaders: ResponseHeaders | undefined;
  readonly responseTrailers: RawHeaders | undefined;
}

/** undefined = continue with the next filter. */
export type FilterResult = LocalReply | undefined;

export interface HttpFilter {
  /** Request headers. A promise pauses the chain until it settles (remote JWKS fetch, fault delay). */
  decodeHeaders(stream: HttpStream): FilterResult | Promise<FilterResult>;
  /** Response headers on their way downstream (upstream responses and local replies alike). */
  encodeHeaders?(stream: HttpStream, headers: ResponseHeaders): void;
  /** The stream is over, whatever ended it (Envoy's AccessLog::Instance log(), which Istio's stats filter is). */
  onStreamComplete?(stream: HttpStream): void;
}

export interface FilterFactoryContext {
  /** HCM stat prefix without dots (`outbound_0.0.0.0_80`); stats live under `http.<prefix>.`. */
  readonly statPrefix: string;
  readonly stats: StatsScope;
  readonly log: LoggerRegistry;
  readonly typeRegistry: Registry;
  /** Makes a request through a cluster of the engine (fails when the cluster is unknown). */
  readonly upstream: ClusterCall;
  /** Where in the config this filter is, for error messages. */
  readonly where: string;
  /** The name the HCM gives this filter: the key of its typed_per_filter_config entries. */
  readonly filterName: string;
  /** This proxy (Envoy's LocalInfo): node id, metadata… */
  readonly local?: LocalInfo;
  /** A cluster's filter_metadata as the engine keeps it (Istio's `istio.services`), undefined when unknown. */
  readonly clusterMetadata?: (cluster: string) => JsonObject | undefined;
  /** The listener's traffic_direction (Envoy's listenerInfo().direction()). */
  readonly direction?: 'inbound' | 'outbound' | 'unspecified';
}

export interface HttpFilterFactory {
  /** Canonical name, e.g. `envoy.filters.http.rbac`. */
  readonly name: string;
  /** Type URLs (without `type.googleapis.com/`) of the filter config. */
  readonly configTypes: readonly string[];
  /** Type names accepted in typed_per_filter_config (may include configTypes). */
  readonly perRouteTypes?: readonly string[];
  /** True for the router: it must be last and only once. */
  readonly terminal?: boolean;
  /** Validates and decodes; throws ConfigError for an invalid config (the resource is NACKed). */
  create(config: Any | undefined, ctx: FilterFactoryContext): HttpFilter;
  /** Decodes a per-route config once per route update. */
  parsePerRoute?(config: Any, where: string, typeRegistry: Registry): unknown;
}

/** Type URL → factory; built-ins register at start, other modules (jwt_authn) call register(). */
export class HttpFilterRegistry {
  private readonly byType = new Map<string, HttpFilterFactory>();
  private readonly byName = new Map<string, HttpFilterFactory>();
  private readonly byPerRouteType = new Map<string, HttpFilterFactory>();

  register(f: HttpFilterFactory): void {
    this.byName.set(f.name, f);
    for (const t of f.configTypes) this.byType.set(t, f);
    for (const t of f.perRouteTypes ?? f.configTypes) this.byPerRouteType.set(t, f);
  }
  forType(typeName: string): HttpFilterFactory | undefined {
    return this.byType.get(typeName);
  }
  forName(name: string): HttpFilterFactory | undefined {
    return this.byName.get(name);
  }
  forPerRouteType(typeName: string): HttpFilterFactory | undefined {
    return this.byPerRouteType.get(typeName);
  }
}

export function typeNameOf(any: Any): string {
  const i = any.typeUrl.lastIndexOf('/');
  return i >= 0 ? any.typeUrl.slice(i + 1) : any.typeUrl;
}
