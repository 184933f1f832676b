// Istio's in-band TCP metadata exchange (istio/proxy release-1.26
// source/extensions/filters/network/metadata_exchange/: metadata_exchange.{h,cc}, metadata_exchange_initial_header.h,
// config.cc, config/metadata_exchange.proto): on a connection whose TLS negotiated the ALPN `istio-peer-exchange`,
// each proxy sends, before any application byte, an 8-byte header (magic 0x3D230467 then the payload length, both
// 32-bit big-endian) and a google.protobuf.Any of type google.protobuf.Struct holding `x-envoy-peer-metadata` (its
// workload, convertWorkloadMetadataToStruct) and `x-envoy-peer-metadata-id` (its node id); it reads the peer's the
// same way and keeps the peer in filter state (`downstream_peer` for the listener filter, `upstream_peer` for the
// cluster's upstream filter) for istio.stats, or `peer_not_found` when there is none to be had. The same state
// machine serves both sides: whichever of the first read or the first write comes first checks the ALPN and sends
// this proxy's metadata; reads then take the peer's header and payload off the stream.
// Stats, as Istio's (root scope): metadata_exchange.{alpn_protocol_found, alpn_protocol_not_found,
// initial_header_not_found, header_not_found, metadata_added}.
// Differs on purpose: `enable_discovery` (Istio's workload metadata xDS, a bootstrap extension the engine does not
// have; the HTTP peer_metadata filter says the same) finds nothing, so a connection without an exchange ends with
// `peer_not_found`. A payload longer than MAX_PAYLOAD_BYTES closes the connection: Envoy would buffer up to its
// per-connection buffer limit and then stop reading, leaving the connection stalled until an idle timeout. What we
// send uses the canonical-name label key the pod had (workload.ts exchangeStruct, as the HTTP exchange does).
import { create, fromBinary, fromJson, toBinary, toJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { AnySchema, anyUnpack, StructSchema, type Any } from '@bufbuild/protobuf/wkt';
import { MetadataExchangeSchema } from '../../gen/envoy/tcp/metadataexchange/config/metadata_exchange_pb';
import { TypedStructSchema } from '../../gen/udpa/type/v1/typed_struct_pb';
import { ConfigError } from '../common/config-error';
import type { Counter, StatsStore } from '../stats/store';
import { DOWNSTREAM_PEER, exchangeStruct, labelKeysOf, UPSTREAM_PEER, workloadFromStruct, type Workload } from './workload';

/** metadata_exchange_initial_header.h: magic_number (decimal 1025705063). */
export const EXCHANGE_MAGIC = 0x3d230467;
/** sizeof(MetadataExchangeInitialHeader): magic and data_size, 32 bits each. */
export const EXCHANGE_HEADER_BYTES = 8;
export const STRUCT_TYPE_URL = 'type.googleapis.com/google.protobuf.Struct';
/** The Struct's keys (MetadataExchangeFilter::ExchangeMetadataHeader / ExchangeMetadataHeaderId). */
export const PEER_METADATA_KEY = 'x-envoy-peer-metadata';
export const PEER_METADATA_ID_KEY = 'x-envoy-peer-metadata-id';
/** Filter state key set when no peer could be had (Istio::Common::NoPeer). */
export const NO_PEER = 'peer_not_found';
/** Envoy's default per_connection_buffer_limit_bytes: more than this is never read into one buffer. */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;

const METADATA_EXCHANGE_TYPE = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';
const TYPED_STRUCTS = new Set(['type.googleapis.com/udpa.type.v1.TypedStruct', 'type.googleapis.com/xds.type.v3.TypedStruct']);

export interface ExchangeStats {
  alpnProtocolFound: Counter;
  alpnProtocolNotFound: Counter;
  initialHeaderNotFound: Counter;
  headerNotFound: Counter;
  metadataAdded: Counter;
}

/** One MetadataExchange config (shared by every connection of a listener chain or cluster). */
export interface ExchangeConfig {
  /** The ALPN the exchange runs on (`istio-peer-exchange` in Istio's config). */
  readonly protocol: string;
  readonly enableDiscovery: boolean;
  readonly additionalLabels: readonly string[];
  readonly stats: ExchangeStats;
}

/** Istio's MetadataExchangeConfig stats: `metadata_exchange.` in the server's root scope, for both directions. */
function exchangeStats(store: StatsStore): ExchangeStats {
  const s = store.scope('metadata_exchange.');
  return {
    alpnProtocolFound: s.counter('alpn_protocol_found'),
    alpnProtocolNotFound: s.counter('alpn_protocol_not_found'),
    initialHeaderNotFound: s.counter('initial_header_not_found'),
    headerNotFound: s.counter('header_not_found'),
    metadataAdded: s.counter('metadata_added'),
  };
}

// thousands of outbound clusters carry the same config: one object for all of them
const interned = new WeakMap<StatsStore, Map<string, ExchangeConfig>>();

/** The config of a MetadataExchange filter (packed, or in a TypedStruct as istiod sends it). */
export function exchangeConfig(any: Any, where: string, store: StatsStore): ExchangeConfig {
  let m;
  if (TYPED_STRUCTS.has(any.typeUrl)) {
    // a cluster has no type registry to unwrap TypedStructs generically: this one type is read from its JSON
    const ts = anyUnpack({ ...any, typeUrl: 'type.googleapis.com/udpa.type.v1.TypedStruct' } as Any, TypedStructSchema);
    if (!ts || ts.typeUrl !== METADATA_EXCHANGE_TYPE) return unknownFilter(where, ts?.typeUrl ?? any.typeUrl);
    try {
      m = fromJson(MetadataExchangeSchema, ts.value ?? {});
    } catch (e) {
      throw new ConfigError(`${where}: TypedStruct of 'envoy.tcp.metadataexchange.config.MetadataExchange': ${(e as Error).message}`);
    }
  } else if (any.typeUrl === METADATA_EXCHANGE_TYPE) {
    m = anyUnpack(any, MetadataExchangeSchema);
    if (!m) throw new ConfigError(`${where}: cannot decode ${any.typeUrl}`);
  } else return unknownFilter(where, any.typeUrl);
  // config.cc ASSERTs a protocol; the proto has no validation rule, so say it instead of crashing
  if (!m.protocol) throw new ConfigError(`${where}.protocol: must not be empty`);
  let byKey = interned.get(store);
  if (!byKey) interned.set(store, (byKey = new Map()));
  const key = JSON.stringify([m.protocol, m.enableDiscovery, m.additionalLabels]);
  let c = byKey.get(key);
  if (!c) {
    c = { protocol: m.protocol, enableDiscovery: m.enableDiscovery, additionalLabels: [...m.additionalLabels], stats: exchangeStats(store) };
    byKey.set(key, c);
  }
  return c;
}

function unknownFilter(where: string, typeUrl: string): never {
  throw new ConfigError(`${where}: Didn't find a registered implementation for type URL: '${typeUrl}'`);
}

/**
 * Cluster.filters: the upstream network filters of a cluster's connections. The engine has one, Istio's
 * upstream metadata exchange (MetadataExchangeUpstreamConfigFactory); any other is refused as Envoy refuses a
 * filter it has no factory for.
 */
export function upstreamExchange(
  filters: ReadonlyArray<{ name: string; typedConfig?: Any | undefined }>,
  where: string,
  store: StatsStore,
): ExchangeConfig | undefined {
  let found: ExchangeConfig | undefined;
  filters.forEach((f, i) => {
    const fw = `${where}.filters[${i}]`;
    if (!f.typedConfig) throw new ConfigError(`${fw}: typed_config is required`);
    found = exchangeConfig(f.typedConfig, fw, store);
  });
  return found;
}

/** What a proxy sends: the 8-byte header, then the Any of the Struct (convertWorkloadMetadataToStruct + id). */
export function encodeExchange(id: string, nodeMetadata: JsonObject, additionalLabels: readonly string[] = []): Buffer {
  const peer = exchangeStruct(workloadFromStruct(nodeMetadata), labelKeysOf(nodeMetadata)) as Record<string, JsonValue>;
  // additional_labels: the node's own values of those labels travel in LABELS beside the standard ones
  const nodeLabels = nodeMetadata['LABELS'];
  if (additionalLabels.length > 0 && nodeLabels && typeof nodeLabels === 'object' && !Array.isArray(nodeLabels)) {
    const labels: Record<string, JsonValue> = { ...(peer['LABELS'] as JsonObject) };
    for (const k of additionalLabels) if (typeof nodeLabels[k] === 'string') labels[k] = nodeLabels[k];
    peer['LABELS'] = Object.fromEntries(
      Object.keys(labels)
        .sort()
        .map((k) => [k, labels[k]!]),
    );
  }
  // keys in sorted order: Istio serialises the Struct deterministically (map entries sorted by key)
  const data: JsonObject = { [PEER_METADATA_KEY]: peer };
  if (id) data[PEER_METADATA_ID_KEY] = id;
  const any = create(AnySchema, { typeUrl: STRUCT_TYPE_URL, value: toBinary(StructSchema, fromJson(StructSchema, data)) });
  const payload = toBinary(AnySchema, any);
  const out = Buffer.allocUnsafe(EXCHANGE_HEADER_BYTES + payload.length);
  out.writeUInt32BE(EXCHANGE_MAGIC, 0);
  out.writeUInt32BE(payload.length, 4);
  out.set(payload, EXCHANGE_HEADER_BYTES);
  return out;
}

const ownBytes = new WeakMap<ExchangeConfig, WeakMap<object, Buffer>>();
/** encodeExchange for this proxy (`local`: its node id and metadata) under one config, built once. */
export function ownExchange(cfg: ExchangeConfig, local: { readonly id: string; readonly metadata: JsonObject }): Buffer {
  let byLocal = ownBytes.get(cfg);
  if (!byLocal) ownBytes.set(cfg, (byLocal = new WeakMap()));
  let b = byLocal.get(local);
  if (!b) byLocal.set(local, (b = encodeExchange(local.id, local.metadata, cfg.additionalLabels)));
  return b;
}

/** The exchanged Struct of a payload (the bytes after the header); undefined when it is not an Any of a Struct. */
export function decodeExchangePayload(payload: Uint8Array): JsonObject | undefined {
  try {
    const any = fromBinary(AnySchema, payload);
    // MessageUtil::anyConvert<Struct> refuses another type
    if (any.typeUrl !== STRUCT_TYPE_URL) return undefined;
    const j = toJson(StructSchema, fromBinary(StructSchema, any.value));
    return j && typeof j === 'object' && !Array.isArray(j) ? j : undefined;
  } catch {
    return undefined;
  }
}

/** The peer of an exchanged Struct (its `x-envoy-peer-metadata`), undefined when it carries none. */
export function peerOfExchange(s: JsonObject): Workload | undefined {
  const md = s[PEER_METADATA_KEY];
  return md && typeof md === 'object' && !Array.isArray(md) ? workloadFromStruct(md) : undefined;
}

/**
 * Decoded payloads by their bytes: the same few peers send the same payload on every connection, and the stats
 * filter's label cache (reporting.ts PeerParts) is keyed by the peer object, so one object per peer keeps it
 * small. Not workload.ts's PeerCache: that one holds the HTTP header's base64 Struct, and this one must tell an
 * undecodable payload (null: header_not_found) from a Struct without a peer.
 */
class PayloadCache {
  private readonly byBytes = new Map<string, { peer: Workload | undefined } | null>();
  constructor(private readonly max = 1000) {}
  lookup(payload: Buffer): { peer: Workload | undefined } | null {
    // a workload's metadata is a few hundred bytes: anything far larger is decoded, never kept
    if (payload.length > 16 * 1024) {
      const s = decodeExchangePayload(payload);
      return s ? { peer: peerOfExchange(s) } : null;
    }
    const key = payload.toString('latin1');
    let v = this.byBytes.get(key);
    if (v === undefined) {
      const s = decodeExchangePayload(payload);
      v = s ? { peer: peerOfExchange(s) } : null;
      if (this.byBytes.size >= this.max) {
        // drop the oldest quarter, as the HTTP peer cache does
        let n = this.max >> 2;
        for (const k of this.byBytes.keys()) {
          if (n-- <= 0) break;
          this.byBytes.delete(k);
        }
      }
      this.byBytes.set(key, v);
    }
    return v;
  }
}
const payloads = new PayloadCache();

/** Where one side of a connection runs the exchange: the listener (downstream) or the cluster (upstream). */
export type ExchangeDirection = 'downstream' | 'upstream';

/** What the filter needs of its connection. */
export interface ExchangeConnection {
  /** The negotiated ALPN of this filter's connection ('' when none). */
  alpn(): string;
  /** Writes bytes to this filter's connection, ahead of anything not yet written (injectWriteDataToFilterChain). */
  inject(bytes: Buffer): void;
  /** The filter state the peer goes to: the connection's (downstream) or the upstream connection's. */
  readonly state: Map<string, unknown>;
  /** Closes the connection (a payload too long to buffer). */
  close(): void;
}

const EMPTY = Buffer.alloc(0);

type Phase = 'protocolNotRead' | 'readingHeader' | 'readingPayload' | 'done' | 'invalid';

/** MetadataExchangeFilter: one per connection and direction. */
export class ExchangeFilter {
  private phase: Phase = 'protocolNotRead';
  private held: Buffer | undefined;
  private payloadBytes = 0;

  constructor(
    private readonly cfg: ExchangeConfig,
    private readonly direction: ExchangeDirection,
    /** This proxy's header and payload (encodeExchange), built once per config by the caller. */
    private readonly own: Buffer,
    private readonly conn: ExchangeConnection,
  ) {}

  /**
   * Bytes read from this filter's connection; returns what continues on (empty while the exchange holds them).
   * `end`: the peer sent its last byte.
   */
  onData(data: Buffer, end: boolean): Buffer {
    if (this.phase === 'done' || this.phase === 'invalid') return data;
    if (this.phase === 'protocolNotRead' && !this.start()) return data;
    let b = this.held ? Buffer.concat([this.held, data]) : data;
    this.held = undefined;
    if (this.phase === 'readingHeader') {
      if (b.length < EXCHANGE_HEADER_BYTES) {
        this.cfg.stats.initialHeaderNotFound.inc();
        // the peer half-closed: no header is coming, let what there is through
        if (end) {
          this.phase = 'invalid';
          return b;
        }
        this.held = b;
        return EMPTY;
      }
      if (b.readUInt32BE(0) !== EXCHANGE_MAGIC) {
        // the peer has no exchange filter: its bytes go on untouched
        this.cfg.stats.initialHeaderNotFound.inc();
        this.notFound();
        this.phase = 'invalid';
        return b;
      }
      this.payloadBytes = b.readUInt32BE(4);
      b = b.subarray(EXCHANGE_HEADER_BYTES);
      this.phase = 'readingPayload';
      if (this.payloadBytes > MAX_PAYLOAD_BYTES) {
        this.phase = 'invalid';
        this.conn.close();
        return EMPTY;
      }
    }
    if (b.length < this.payloadBytes) {
      this.held = b;
      return EMPTY;
    }
    const got = payloads.lookup(b.subarray(0, this.payloadBytes));
    if (!got) {
      // not drained: the bytes after the header go on, as in Istio
      this.cfg.stats.headerNotFound.inc();
      this.notFound();
      this.phase = 'invalid';
      return b;
    }
    const peer = got.peer;
    if (peer) this.conn.state.set(this.direction === 'downstream' ? DOWNSTREAM_PEER : UPSTREAM_PEER, peer);
    this.phase = 'done';
    return b.subarray(this.payloadBytes);
  }

  /** Bytes are about to be written to this filter's connection: the first write may send our metadata first. */
  onWrite(): void {
    if (this.phase === 'protocolNotRead') this.start();
  }

  /** ConnProtocolNotRead: the ALPN decides; on a match our metadata goes out (writeNodeMetadata). */
  private start(): boolean {
    if (this.conn.alpn() !== this.cfg.protocol) {
      this.notFound();
      this.phase = 'invalid';
      this.cfg.stats.alpnProtocolNotFound.inc();
      return false;
    }
    this.cfg.stats.alpnProtocolFound.inc();
    this.conn.inject(this.own);
    this.cfg.stats.metadataAdded.inc();
    this.phase = 'readingHeader';
    return true;
  }

  /** setMetadataNotFoundFilterState: workload discovery has nothing here (see the header), so no peer. */
  private notFound(): void {
    this.conn.state.set(NO_PEER, true);
  }
}
