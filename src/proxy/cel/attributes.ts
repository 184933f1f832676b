// Envoy's attributes (docs: intro/arch_overview/advanced/attributes) as the CEL variables `request`, `response`,
// `connection`, `upstream`, `source`, `destination`, `metadata`, `filter_state`, `upstream_filter_state` and `xds`,
// following source/extensions/filters/common/expr/context.cc (the *LookupValues tables) and evaluator.cc
// (StreamActivation::FindValue). Every variable and every attribute inside it is built on first read: an
// expression that reads `response.code` builds one map with one entry, nothing else.
// Differences on purpose: `metadata`, `xds.node` and the `*_metadata` attributes are maps (Envoy hands CEL the
// protobuf messages; field reads and `has()` behave the same, `type()` and printing the whole message do not);
// an attribute the engine does not track is absent (as Envoy's are when it has no data).
import { create } from '@bufbuild/protobuf';
import { DurationSchema, TimestampSchema, type Duration } from '@bufbuild/protobuf/wkt';
import { celUint, type CelInput } from '@bufbuild/cel';
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { joinHostPort } from '../../lib/hostport';
import type { FormatContext, HeaderSource } from '../format/substitution';
import { RESPONSE_FLAGS, type StreamInfo } from '../stream-info';

/** What the `xds` variable reads beyond the stream: the engine's own config around this request. */
export interface XdsAttributes {
  /** The bootstrap node (id, cluster, metadata…) as JSON. */
  node?: JsonObject;
  clusterMetadata?: JsonObject;
  routeMetadata?: JsonObject;
  virtualHostName?: string;
  virtualHostMetadata?: JsonObject;
  upstreamHostMetadata?: JsonObject;
  filterChainName?: string;
  listenerMetadata?: JsonObject;
  /** envoy.config.core.v3.TrafficDirection: 0 unspecified, 1 inbound, 2 outbound. */
  listenerDirection?: number;
}

/** One request (or TCP connection) as CEL sees it: the access-log context plus what only CEL reads. */
export interface CelContext extends FormatContext {
  /** Per-request filter state (HttpStream.filterState): strings, numbers and maps are readable. */
  filterState?: ReadonlyMap<string, unknown>;
  upstreamFilterState?: ReadonlyMap<string, unknown>;
  xds?: XdsAttributes;
}

type Extract<T> = (x: T) => CelInput | undefined;

/** A CEL map whose entries are computed on first read (Envoy's wrappers compute them on every read). */
class LazyMap<T> extends Map<string, CelInput> {
  private filled = false;
  constructor(
    private readonly table: Readonly<Record<string, Extract<T>>>,
    private readonly src: T,
  ) {
    super();
  }
  override get(key: string): CelInput | undefined {
    if (super.has(key)) return super.get(key);
    const f = Object.hasOwn(this.table, key) ? this.table[key] : undefined;
    const v = f?.(this.src);
    if (v !== undefined) super.set(key, v);
    return v;
  }
  override has(key: string): boolean {
    return this.get(key) !== undefined;
  }
  private fill(): void {
    if (this.filled) return;
    this.filled = true;
    for (const k of Object.keys(this.table)) this.get(k);
  }
  override get size(): number {
    this.fill();
    return super.size;
  }
  override keys(): MapIterator<string> {
    this.fill();
    return super.keys();
  }
  override values(): MapIterator<CelInput> {
    this.fill();
    return super.values();
  }
  override entries(): MapIterator<[string, CelInput]> {
    this.fill();
    return super.entries();
  }
  override [Symbol.iterator](): MapIterator<[string, CelInput]> {
    return this.entries();
  }
  override forEach(cb: (v: CelInput, k: string, m: Map<string, CelInput>) => void, thisArg?: unknown): void {
    this.fill();
    super.forEach(cb, thisArg);
  }
}

const PSEUDO = [':authority', ':path', ':method', ':scheme'] as const;

/**
 * Header maps: keys are lower-cased as Envoy's HeadersWrapper does (LowerCaseString), several values read joined
 * with ','. Listing the keys (size(), iteration) works when the source keeps raw headers (the codec's HeaderMap).
 */
class HeadersMap extends Map<string, CelInput> {
  constructor(private readonly src: HeaderSource | undefined) {
    super();
  }
  override get(key: string): CelInput | undefined {
    return typeof key === 'string' ? this.src?.get(key.toLowerCase()) : undefined;
  }
  override has(key: string): boolean {
    return this.get(key) !== undefined;
  }
  private all(): Map<string, CelInput> {
    const m = new Map<string, CelInput>();
    const raw = (this.src as { h?: Record<string, unknown> } | undefined)?.h;
    // a request's pseudo-headers are fields of RequestHeaders, not raw entries
    for (const p of PSEUDO) {
      const v = raw?.[p] === undefined ? this.src?.get(p) : undefined;
      if (v !== undefined) m.set(p, v);
    }
    if (raw) for (const k of Object.keys(raw)) if (raw[k] !== undefined) m.set(k, this.get(k)!);
    return m;
  }
  override get size(): number {
    return this.all().size;
  }
  override keys(): MapIterator<string> {
    return this.all().keys();
  }
  override values(): MapIterator<CelInput> {
    return this.all().values();
  }
  override entries(): MapIterator<[string, CelInput]> {
    return this.all().entries();
  }
  override [Symbol.iterator](): MapIterator<[string, CelInput]> {
    return this.entries();
  }
  override forEach(cb: (v: CelInput, k: string, m: Map<string, CelInput>) => void, thisArg?: unknown): void {
    this.all().forEach(cb, thisArg);
  }
}

const int = (n: number): bigint => BigInt(Math.trunc(n));

function durationOf(ms: number): Duration {
  const ns = BigInt(Math.round(ms * 1e6));
  const seconds = ns / 1_000_000_000n;
  return create(DurationSchema, { seconds, nanos: Number(ns - seconds * 1_000_000_000n) });
}

function timestampOf(ms: number): CelInput {
  const seconds = BigInt(Math.floor(ms / 1000));
  return create(TimestampSchema, { seconds, nanos: Math.round((ms - Number(seconds) * 1000) * 1e6) });
}

/** Bytes of a header map as Envoy's HeaderMap::byteSize (names plus values, no separators). */
function headerBytes(h: HeaderSource | undefined): number {
  const raw = (h as { h?: Record<string, string | string[] | undefined> } | undefined)?.h;
  if (!raw) return 0;
  let n = 0;
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined) continue;
    for (const x of typeof v === 'string' ? [v] : v) n += k.length + x.length;
  }
  for (const p of PSEUDO) {
    const v = raw[p] === undefined ? h!.get(p) : undefined;
    if (v !== undefined) n += p.length + v.length;
  }
  return n;
}

const pathOf = (c: CelContext): string | undefined => c.request?.get(':path');

const REQUEST: Record<string, Extract<CelContext>> = {
  headers: (c) => new HeadersMap(c.request),
  time: (c) => timestampOf(c.info.startTime),
  size: (c) => {
    const cl = c.request?.get('content-length');
    if (cl !== undefined) return /^\d+$/.test(cl) ? BigInt(cl) : undefined;
    return int(c.info.bytesReceived);
  },
  total_size: (c) => int(c.info.bytesReceived + headerBytes(c.request)),
  duration: (c) => (c.info.endHr ? durationOf(c.info.endHr - c.info.startHr) : undefined),
  protocol: (c) => c.info.protocol || undefined,
  path: pathOf,
  url_path: (c) => {
    const p = pathOf(c);
    if (p === undefined) return undefined;
    const q = p.indexOf('?');
    return q < 0 ? p : p.slice(0, q);
  },
  query: (c) => {
    const p = pathOf(c);
    if (p === undefined) return undefined;
    const q = p.indexOf('?');
    if (q < 0) return '';
    const rest = p.slice(q + 1);
    const f = rest.indexOf('#');
    return f < 0 ? rest : rest.slice(0, f);
  },
  host: (c) => c.request?.get(':authority'),
  scheme: (c) => c.request?.get(':scheme'),
  method: (c) => c.request?.get(':method'),
  referer: (c) => c.request?.get('referer'),
  id: (c) => c.request?.get('x-request-id'),
  useragent: (c) => c.request?.get('user-agent'),
};

/** grpc-status from trailers, else headers (trailers-only), as Grpc::Common::getGrpcStatus reads it. */
function grpcStatus(c: CelContext): CelInput | undefined {
  const v = c.trailers?.get('grpc-status') ?? c.response?.get('grpc-status');
  if (v === undefined) return undefined;
  return /^\d+$/.test(v) ? BigInt(v) : undefined;
}

export function legacyResponseFlags(info: StreamInfo): number {
  let bits = 0;
  for (const f of info.flags) {
    const i = RESPONSE_FLAGS.indexOf(f);
    if (i >= 0) bits |= 1 << i;
  }
  return bits;
}

const RESPONSE: Record<string, Extract<CelContext>> = {
  code: (c) => (c.info.responseCode ? int(c.info.responseCode) : undefined),
  code_details: (c) => c.info.responseCodeDetails || undefined,
  flags: (c) => int(legacyResponseFlags(c.info)),
  grpc_status: grpcStatus,
  headers: (c) => new HeadersMap(c.response),
  trailers: (c) => new HeadersMap(c.trailers),
  size: (c) => int(c.info.bytesSent),
  total_size: (c) => int(c.info.bytesSent + headerBytes(c.response) + headerBytes(c.trailers)),
};

const first = (xs: readonly string[]): string | undefined => xs[0];

const CONNECTION: Record<string, Extract<CelContext>> = {
  mtls: (c) => c.info.downstream.tls && c.info.downstream.peerCertificatePresented,
  requested_server_name: (c) => c.info.downstream.serverName,
  termination_details: (c) => c.info.connectionTerminationDetails || undefined,
  // the SSL extractors: present on TLS connections only
  subject_peer_certificate: (c) => (c.info.downstream.tls ? c.info.downstream.peerSubject : undefined),
  uri_san_peer_certificate: (c) => (c.info.downstream.tls ? first(c.info.downstream.peerUriSans) : undefined),
  dns_san_peer_certificate: (c) => (c.info.downstream.tls ? first(c.info.downstream.peerDnsSans) : undefined),
  uri_san_local_certificate: (c) => (c.info.downstream.tls ? first(c.info.downstream.ssl?.uriSanLocalCertificate ?? []) : undefined),
  sha256_peer_certificate_digest: (c) => c.info.downstream.ssl?.sha256PeerCertificateDigest || undefined,
};

function splitHostPort(hp: string): [string, number | undefined] {
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(hp);
  return m ? [m[1]!, Number(m[2])] : [hp, undefined];
}

const UPSTREAM: Record<string, Extract<CelContext>> = {
  address: (c) => c.info.upstreamHost || undefined,
  port: (c) => {
    const p = c.info.upstreamHost ? splitHostPort(c.info.upstreamHost)[1] : undefined;
    return p === undefined ? undefined : int(p);
  },
  local_address: (c) => c.info.upstreamLocalAddress || undefined,
  transport_failure_reason: (c) => (c.info.upstreamCluster ? c.info.upstreamTransportFailureReason : undefined),
  request_attempt_count: (c) => celUint(BigInt(c.info.attemptCount)),
};

const SOURCE: Record<string, Extract<CelContext>> = {
  address: (c) => joinHostPort(c.info.downstream.remoteAddress, c.info.downstream.remotePort),
  port: (c) => int(c.info.downstream.remotePort),
};

const DESTINATION: Record<string, Extract<CelContext>> = {
  address: (c) => joinHostPort(c.info.downstream.localAddress, c.info.downstream.localPort),
  port: (c) => int(c.info.downstream.localPort),
};

const XDS: Record<string, Extract<CelContext>> = {
  node: (c) => c.xds?.node,
  cluster_name: (c) => c.info.upstreamCluster || undefined,
  cluster_metadata: (c) => (c.info.upstreamCluster ? metadataMap(c.xds?.clusterMetadata) : undefined),
  route_name: (c) => c.info.routeName || undefined,
  route_metadata: (c) => (c.xds?.routeMetadata ? metadataMap(c.xds.routeMetadata) : undefined),
  virtual_host_name: (c) => c.xds?.virtualHostName,
  virtual_host_metadata: (c) => (c.xds?.virtualHostMetadata ? metadataMap(c.xds.virtualHostMetadata) : undefined),
  upstream_host_metadata: (c) => (c.info.upstreamHost ? metadataMap(c.xds?.upstreamHostMetadata) : undefined),
  filter_chain_name: (c) => c.xds?.filterChainName ?? '',
  listener_metadata: (c) => (c.xds?.listenerMetadata ? metadataMap(c.xds.listenerMetadata) : undefined),
  listener_direction: (c) => (c.xds?.listenerDirection === undefined ? undefined : int(c.xds.listenerDirection)),
};

/** envoy.config.core.v3.Metadata as CEL reads it: `filter_metadata` (namespace → Struct). */
function metadataMap(filterMetadata: JsonObject | Map<string, JsonObject> | undefined): CelInput {
  const fm = new Map<string, CelInput>();
  if (filterMetadata instanceof Map) for (const [k, v] of filterMetadata) fm.set(k, v as CelInput);
  else if (filterMetadata) for (const [k, v] of Object.entries(filterMetadata)) fm.set(k, v as CelInput);
  return new Map<string, CelInput>([['filter_metadata', fm]]);
}

/** A filter state object: strings and numbers as they are, JSON objects as maps, anything else absent. */
function filterStateValue(v: unknown): CelInput | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (typeof v === 'boolean' || v instanceof Uint8Array || v instanceof Map) return v as CelInput;
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return v as JsonValue as CelInput;
  return undefined;
}

class FilterStateMap extends Map<string, CelInput> {
  constructor(private readonly fs: ReadonlyMap<string, unknown>) {
    super();
  }
  override get(key: string): CelInput | undefined {
    return filterStateValue(this.fs.get(key));
  }
  override has(key: string): boolean {
    return this.get(key) !== undefined;
  }
}

/**
 * The variables of one evaluation, each built when the expression first names it. A class with #private state:
 * getters on its prototype make an activation one small allocation, and no other name resolves.
 */
class Activation {
  #req: CelInput | undefined;
  #resp: CelInput | undefined;
  #conn: CelInput | undefined;
  #up: CelInput | undefined;
  #src: CelInput | undefined;
  #dst: CelInput | undefined;
  #x: CelInput | undefined;
  readonly #c: CelContext;
  constructor(c: CelContext) {
    this.#c = c;
  }
  get request(): CelInput {
    return (this.#req ??= new LazyMap(REQUEST, this.#c));
  }
  get response(): CelInput {
    return (this.#resp ??= new LazyMap(RESPONSE, this.#c));
  }
  get connection(): CelInput {
    return (this.#conn ??= new LazyMap(CONNECTION, this.#c));
  }
  get upstream(): CelInput {
    return (this.#up ??= new LazyMap(UPSTREAM, this.#c));
  }
  get source(): CelInput {
    return (this.#src ??= new LazyMap(SOURCE, this.#c));
  }
  get destination(): CelInput {
    return (this.#dst ??= new LazyMap(DESTINATION, this.#c));
  }
  get metadata(): CelInput {
    return metadataMap(this.#c.info.dynamicMetadata);
  }
  get filter_state(): CelInput {
    return new FilterStateMap(this.#c.filterState ?? new Map());
  }
  get upstream_filter_state(): CelInput | undefined {
    return this.#c.upstreamFilterState ? new FilterStateMap(this.#c.upstreamFilterState) : undefined;
  }
  get xds(): CelInput {
    return (this.#x ??= new LazyMap(XDS, this.#c));
  }
}

export function activation(c: CelContext): Record<string, CelInput | undefined> {
  return new Activation(c) as unknown as Record<string, CelInput | undefined>;
}
