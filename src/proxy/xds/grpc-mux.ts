// xDS over one gRPC stream (Envoy's GrpcMuxImpl / NewGrpcMuxImpl): ADS (every type on one stream) or a
// single-service stream such as SDS. ADS runs incremental (DeltaAggregatedResources) and advertises VHDS
// (node.client_features, src/lib/xds/vhds.ts), so the control plane may send route configurations' virtual
// hosts as VirtualHost resources and an edit costs one virtual host, not the route table; a server without
// delta (UNIMPLEMENTED) gets state of the world on the next attempt. Subscribers see delta responses as
// state of the world for wildcard types (the full set held) and as the changed resources for named ones
// (as a SotW server may send them); `onDelta` subscribers get the additions and removals themselves. Each response is decoded with the generated schema of its
// type and handed to the subscriber; success is ACKed with the response's version and nonce, a thrown
// error NACKs with the last accepted version and error_detail {code 13, message}. Name changes made
// while a response is being applied are sent after its ACK (Envoy pauses EDS during CDS, RDS/SDS during
// LDS). The stream reconnects with jittered exponential backoff and re-sends every subscription with
// the last accepted versions; subscribers keep their applied config meanwhile.
// Engine workers (src/proxy/engine/worker/): the main thread's mux hands every accepted response, as the
// encoded DiscoveryResponse / DeltaDiscoveryResponse, to `onRelay`, and keeps what it holds so a worker
// that starts late gets it all as one DeltaDiscoveryResponse per type (`snapshot`); a worker's mux is a
// `relay` mux: no stream of its own, it decodes and applies those same messages with the same code and
// answers nobody (the main thread ACKs).
import { create, fromBinary, toBinary, type DescMessage, type Message, type Registry } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { NodeSchema, type Node } from '../../gen/envoy/config/core/v3/base_pb';
import { AggregatedDiscoveryService } from '../../gen/envoy/service/discovery/v3/ads_pb';
import { SecretDiscoveryService } from '../../gen/envoy/service/secret/v3/sds_pb';
import {
  DeltaDiscoveryRequestSchema,
  DeltaDiscoveryResponseSchema,
  DiscoveryRequestSchema,
  DiscoveryResponseSchema,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from '../../gen/envoy/service/discovery/v3/discovery_pb';
import { StatusSchema } from '../../gen/google/rpc/status_pb';
import { grpcClientConstructor } from '../../lib/xds/grpc';
import { VHDS_CLIENT_FEATURE } from '../../lib/xds/vhds';
import type { Logger } from '../log';
import type { Gauge, StatsScope } from '../stats/store';
import {
  decodeResource,
  decodeResponse,
  newTypeState,
  type DecodedResource,
  type SubscriptionHandle,
  type TypeState,
  type XdsSubscriber,
} from './subscription';

/** A response the main thread accepted, as it goes to engine workers: the wire message, encoded. */
export interface RelayedResponse {
  delta: boolean;
  bytes: Uint8Array;
}

export interface GrpcMuxOptions {
  /** grpc-js target: `unix:///abs/path` or `host:port`. */
  target: string;
  credentials: grpc.ChannelCredentials;
  node: Node;
  service: 'ads' | 'sds';
  setNodeOnFirstMessageOnly: boolean;
  log: Logger;
  /** `control_plane.` stats (ADS only in Envoy). */
  controlPlaneStats?: StatsScope;
  typeRegistry: Registry;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  onConnectionChange?: (connected: boolean) => void;
  /** ADS over DeltaAggregatedResources (default for ADS); false: state of the world. */
  delta?: boolean;
  /** An engine worker's mux: no stream; responses come from the main thread through `receive`. */
  relay?: boolean;
}

const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);
const SdsClient = grpcClientConstructor(SecretDiscoveryService);

/** 53-bit hash of a version string (Envoy's `version` gauge holds a hash). */
export function versionHash(v: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

export class GrpcMux {
  private readonly types = new Map<string, TypeState>();
  private client: grpc.Client | undefined;
  private call: grpc.ClientDuplexStream<DiscoveryRequest | DeltaDiscoveryRequest, DiscoveryResponse | DeltaDiscoveryResponse> | undefined;
  /** Incremental xDS on this stream; cleared for good when the server does not implement it. */
  private delta: boolean;
  private readonly deltaNode: Node;
  private firstMessageSent = false;
  private queue: Promise<void> = Promise.resolve();
  private applying = 0;
  private readonly deferred = new Set<string>();
  private backoffMs: number;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private started = false;
  private connectedState = false;
  private readonly connectedGauge: Gauge | undefined;
  /** Main thread with engine workers: every accepted response, encoded (set before the stream starts). */
  onRelay: ((r: RelayedResponse) => void) | undefined;
  /** Relay mux: responses of types nobody subscribed to yet (a worker subscribes RDS after LDS). */
  private readonly pendingRelay = new Map<string, RelayedResponse[]>();

  constructor(private readonly opts: GrpcMuxOptions) {
    this.backoffMs = opts.backoffBaseMs ?? 500;
    this.delta = opts.service === 'ads' && opts.delta !== false;
    this.deltaNode = opts.node.clientFeatures.includes(VHDS_CLIENT_FEATURE)
      ? opts.node
      : create(NodeSchema, { ...opts.node, clientFeatures: [...opts.node.clientFeatures, VHDS_CLIENT_FEATURE] });
    this.connectedGauge = opts.controlPlaneStats?.gauge('connected_state');
    this.connectedGauge?.set(0);
  }

  get connected(): boolean {
    return this.connectedState;
  }

  /** Watches a type: `names` undefined = wildcard (LDS/CDS). `stats` gets Envoy's update_* counters. */
  subscribe<M extends Message>(
    typeUrl: string,
    schema: DescMessage,
    names: Iterable<string> | undefined,
    subscriber: XdsSubscriber<M>,
    stats?: StatsScope,
  ): SubscriptionHandle {
    const st = newTypeState(typeUrl, schema, names, subscriber as XdsSubscriber, stats);
    this.types.set(typeUrl, st);
    const waiting = this.pendingRelay.get(typeUrl);
    if (waiting) {
      this.pendingRelay.delete(typeUrl);
      for (const r of waiting) this.receive(r);
    }
    if (this.started) this.sendOrDefer(st);
    return {
      setNames: (n) => {
        if (st.wildcard) return;
        const next = new Set(n);
        if (next.size === st.names.size && [...next].every((x) => st.names.has(x))) return;
        st.names = next;
        if (this.types.get(typeUrl) === st) this.sendOrDefer(st);
      },
      cancel: () => {
        if (this.types.get(typeUrl) !== st) return;
        this.types.delete(typeUrl);
        if (this.delta) {
          // unsubscribe from everything, `*` included (legacy wildcard cannot be left otherwise)
          if (st.opened) this.sendDelta(st, undefined, [...st.sentNames, ...(st.wildcard ? ['*'] : [])]);
          return;
        }
        if (!st.wildcard && st.names.size > 0) {
          st.names.clear();
          this.send(st);
        }
      },
      get version() {
        return st.version;
      },
    };
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    if (!this.opts.relay) this.connect();
  }

  /** Relay mux: applies a response the main thread accepted, in the order it was accepted. */
  receive(r: RelayedResponse): void {
    if (this.closed) return;
    const resp = r.delta ? fromBinary(DeltaDiscoveryResponseSchema, r.bytes) : fromBinary(DiscoveryResponseSchema, r.bytes);
    if (!this.types.has(resp.typeUrl)) {
      const list = this.pendingRelay.get(resp.typeUrl) ?? [];
      list.push(r);
      this.pendingRelay.set(resp.typeUrl, list);
      return;
    }
    const handle = r.delta
      ? () => this.handleDelta(resp as DeltaDiscoveryResponse, undefined)
      : () => this.handle(resp as DiscoveryResponse, undefined);
    this.queue = this.queue.then(handle).catch((e) => this.opts.log.error(`xds: ${(e as Error).message}`));
  }

  /**
   * What this mux holds, one DeltaDiscoveryResponse per type in the order the types were subscribed
   * (clusters before their endpoints, listeners before their routes): a new engine worker starts from it.
   */
  snapshot(): RelayedResponse[] {
    const out: RelayedResponse[] = [];
    for (const st of this.types.values()) {
      if (st.version === '' && st.held.size === 0) continue;
      const msg = create(DeltaDiscoveryResponseSchema, {
        typeUrl: st.typeUrl,
        systemVersionInfo: st.version,
        resources: [...st.held].map(([name, h]) => ({ name, version: h.version, resource: h.any })),
      });
      out.push({ delta: true, bytes: toBinary(DeltaDiscoveryResponseSchema, msg) });
    }
    return out;
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.call?.cancel();
    this.client?.close();
    this.call = undefined;
    this.client = undefined;
  }

  private connect(): void {
    if (this.closed) return;
    const channelOptions: grpc.ChannelOptions = {
      'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1,
      'grpc.keepalive_time_ms': 300_000,
      'grpc.initial_reconnect_backoff_ms': 500,
    };
    if (!this.client) {
      const Ctor = this.opts.service === 'ads' ? AdsClient : SdsClient;
      this.client = new Ctor(this.opts.target, this.opts.credentials, channelOptions);
    }
    type AnyCall = NonNullable<GrpcMux['call']>;
    const c = this.client as unknown as {
      streamAggregatedResources?: () => AnyCall;
      deltaAggregatedResources?: () => AnyCall;
      streamSecrets?: () => AnyCall;
    };
    const delta = this.delta;
    const call = this.opts.service === 'ads' ? (delta ? c.deltaAggregatedResources!() : c.streamAggregatedResources!()) : c.streamSecrets!();
    this.call = call;
    this.firstMessageSent = false;
    for (const st of this.types.values()) {
      st.nonce = '';
      st.sentNames = new Set();
      st.opened = false;
      st.nonceSent = '';
    }
    call.on('data', (resp: DiscoveryResponse | DeltaDiscoveryResponse) => {
      if (this.call !== call) return;
      this.setConnected(true);
      this.backoffMs = this.opts.backoffBaseMs ?? 500;
      const handle = delta ? () => this.handleDelta(resp as DeltaDiscoveryResponse, call) : () => this.handle(resp as DiscoveryResponse, call);
      this.queue = this.queue.then(handle).catch((e) => this.opts.log.error(`xds: ${(e as Error).message}`));
    });
    const lost = (why: string, code?: number) => {
      if (this.call !== call) return;
      this.call = undefined;
      if (delta && code === grpc.status.UNIMPLEMENTED && !this.closed) {
        // The server has no incremental xDS: state of the world from now on, without a backoff.
        this.delta = false;
        this.opts.log.info(`DeltaAggregatedResources is not implemented by ${this.opts.target}; using StreamAggregatedResources`);
        this.retryTimer = setTimeout(() => this.connect(), 0);
        return;
      }
      this.setConnected(false);
      for (const st of this.types.values()) st.stats?.failure.inc();
      if (this.closed) return;
      const jitter = Math.random() * this.backoffMs;
      const delay = Math.min(this.opts.backoffMaxMs ?? 30_000, jitter + this.backoffMs / 2);
      this.opts.log.warn(`StreamAggregatedResources gRPC config stream to ${this.opts.target} closed: ${why}; retrying in ${Math.round(delay)}ms`);
      this.backoffMs = Math.min(this.opts.backoffMaxMs ?? 30_000, this.backoffMs * 2);
      this.retryTimer = setTimeout(() => this.connect(), delay);
    };
    call.on('error', (e: grpc.ServiceError) => lost(`${e.code}, ${e.details || e.message}`, e.code));
    call.on('end', () => lost('stream ended by the server'));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code !== grpc.status.OK) lost(`${s.code}, ${s.details}`, s.code);
    });
    for (const st of this.types.values()) this.send(st);
  }

  private setConnected(v: boolean): void {
    if (this.connectedState === v) return;
    this.connectedState = v;
    this.connectedGauge?.set(v ? 1 : 0);
    this.opts.onConnectionChange?.(v);
  }

  private sendOrDefer(st: TypeState): void {
    if (this.applying > 0) this.deferred.add(st.typeUrl);
    else this.send(st);
  }

  private send(st: TypeState, errorMessage?: string): void {
    if (this.delta) {
      this.sendDelta(st, errorMessage);
      return;
    }
    const call = this.call;
    if (!call) return;
    const withNode = !this.firstMessageSent || !this.opts.setNodeOnFirstMessageOnly;
    const req = create(DiscoveryRequestSchema, {
      versionInfo: st.version,
      resourceNames: st.wildcard ? [] : [...st.names].sort(),
      typeUrl: st.typeUrl,
      responseNonce: st.nonce,
      ...(withNode ? { node: this.opts.node } : {}),
      ...(errorMessage !== undefined ? { errorDetail: create(StatusSchema, { code: grpc.status.INTERNAL, message: errorMessage }) } : {}),
    });
    this.firstMessageSent = true;
    call.write(req);
  }

  /**
   * A delta request: subscription changes since the last one (all of them, with initial_resource_versions,
   * when the type opens on this stream), plus the nonce of the response being acknowledged. `extraUnsub`
   * unsubscribes besides (cancel).
   */
  private sendDelta(st: TypeState, errorMessage?: string, extraUnsub?: string[]): void {
    const call = this.call;
    if (!call) return;
    const withNode = !this.firstMessageSent || !this.opts.setNodeOnFirstMessageOnly;
    const subscribe = st.wildcard ? [] : [...st.names].filter((n) => !st.sentNames.has(n)).sort();
    const unsubscribe = extraUnsub ?? (st.wildcard ? [] : [...st.sentNames].filter((n) => !st.names.has(n)).sort());
    const initial: Record<string, string> = {};
    if (!st.opened) for (const [name, h] of st.held) initial[name] = h.version;
    // A named type with nothing subscribed does not open (an empty first request would mean wildcard).
    if (!st.opened && !st.wildcard && subscribe.length === 0) return;
    if (st.opened && subscribe.length === 0 && unsubscribe.length === 0 && errorMessage === undefined && st.nonce === st.nonceSent) return;
    st.nonceSent = st.nonce;
    const req = create(DeltaDiscoveryRequestSchema, {
      typeUrl: st.typeUrl,
      resourceNamesSubscribe: subscribe,
      resourceNamesUnsubscribe: unsubscribe,
      initialResourceVersions: initial,
      responseNonce: st.nonce,
      ...(withNode ? { node: this.deltaNode } : {}),
      ...(errorMessage !== undefined ? { errorDetail: create(StatusSchema, { code: grpc.status.INTERNAL, message: errorMessage }) } : {}),
    });
    st.opened = true;
    for (const n of subscribe) st.sentNames.add(n);
    for (const n of unsubscribe) st.sentNames.delete(n);
    this.firstMessageSent = true;
    call.write(req);
  }

  private handleDelta(resp: DeltaDiscoveryResponse, call: GrpcMux['call']): Promise<void> {
    let next: Map<string, { any: Any; version: string }> | undefined;
    return this.apply(resp.typeUrl, resp.nonce, resp.systemVersionInfo, call, {
      update: async (st) => {
        next = new Map(st.held);
        const added: DecodedResource[] = [];
        const fresh = new Map<string, DecodedResource>();
        const removed = [...resp.removedResources];
        resp.resources.forEach((r, i) => {
          // A resource without a body says the name (an alias asked for on demand) does not exist.
          if (!r.resource) {
            removed.push(r.name, ...r.aliases);
            return;
          }
          const d = decodeResource(st, r.resource, `resource ${i} (${r.name})`);
          added.push(d);
          next!.set(r.name || d.name, { any: r.resource, version: r.version });
          fresh.set(r.name || d.name, d);
        });
        for (const n of removed) next.delete(n);
        if (st.subscriber.onDelta) await st.subscriber.onDelta(added, removed, resp.systemVersionInfo);
        else if (st.wildcard) {
          // the whole set for a subscriber without onDelta: the unchanged resources decoded again from what is held
          const all = [...next].map(([name, h]) => fresh.get(name) ?? decodeResource(st, h.any, `held resource ${name}`));
          await st.subscriber.onUpdate(all, resp.systemVersionInfo);
        } else await st.subscriber.onUpdate(added, resp.systemVersionInfo);
      },
      accepted: (st) => {
        st.held = next!;
        return `${resp.resources.length} resources added, ${resp.removedResources.length} removed`;
      },
      answer: (st, error) => this.sendDelta(st, error),
      relay: () => ({ delta: true, bytes: toBinary(DeltaDiscoveryResponseSchema, resp) }),
    });
  }

  /**
   * One response of either protocol: decode and hand it to the subscriber, then ACK (new version) or NACK
   * (the error), and send what waited while it was applied. A response from a stream that was replaced while
   * it was applied is not answered.
   */
  private async apply(
    typeUrl: string,
    nonce: string,
    version: string,
    call: GrpcMux['call'],
    h: {
      update: (st: TypeState) => Promise<void> | void;
      accepted: (st: TypeState) => string;
      answer: (st: TypeState, error?: string) => void;
      relay: () => RelayedResponse;
    },
  ): Promise<void> {
    const st = this.types.get(typeUrl);
    if (!st) {
      this.opts.log.warn(`Ignoring the message for type URL ${typeUrl} as it has no current subscribers.`);
      return;
    }
    st.nonce = nonce;
    st.stats?.attempt.inc();
    this.applying++;
    let error: string | undefined;
    try {
      await h.update(st);
    } catch (e) {
      error = (e as Error).message;
    } finally {
      this.applying--;
    }
    if (this.call !== call) return;
    if (error === undefined) {
      const what = h.accepted(st);
      st.version = version;
      st.stats?.success.inc();
      st.stats?.version.set(versionHash(version));
      this.opts.log.debug(`gRPC config for ${typeUrl} accepted with ${what}`);
      h.answer(st);
      this.onRelay?.(h.relay());
    } else {
      st.stats?.rejected.inc();
      this.opts.log.warn(`gRPC config for ${typeUrl} rejected: ${error}`);
      h.answer(st, error);
    }
    this.flushDeferred();
  }

  private flushDeferred(): void {
    if (this.applying === 0 && this.deferred.size > 0) {
      const pending = [...this.deferred];
      this.deferred.clear();
      for (const t of pending) {
        const s = this.types.get(t);
        if (s) this.send(s);
      }
    }
  }

  private handle(resp: DiscoveryResponse, call: GrpcMux['call']): Promise<void> {
    let decoded: DecodedResource[] = [];
    return this.apply(resp.typeUrl, resp.nonce, resp.versionInfo, call, {
      update: (st) => st.subscriber.onUpdate((decoded = decodeResponse(st, resp)), resp.versionInfo),
      accepted: (st) => {
        // what a late engine worker starts from: the whole set (wildcard), else the named ones still watched
        if (this.onRelay) {
          if (st.wildcard) st.held = new Map();
          for (const d of decoded) st.held.set(d.name, { any: d.any, version: resp.versionInfo });
          if (!st.wildcard) for (const n of [...st.held.keys()]) if (!st.names.has(n)) st.held.delete(n);
        }
        return `${resp.resources.length} resources with version ${resp.versionInfo}`;
      },
      answer: (st, error) => this.send(st, error),
      relay: () => ({ delta: false, bytes: toBinary(DiscoveryResponseSchema, resp) }),
    });
  }
}
