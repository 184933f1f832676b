// State-of-the-world xDS over one gRPC stream (Envoy's GrpcMuxImpl): ADS (every type on one stream) or
// a single-service stream such as SDS. Each response is decoded with the generated schema of its
// type and handed to the subscriber; success is ACKed with the response's version and nonce, a thrown
// error NACKs with the last accepted version and error_detail {code 13, message}. Name changes made
// while a response is being applied are sent after its ACK (Envoy pauses EDS during CDS, RDS/SDS during
// LDS). The stream reconnects with jittered exponential backoff and re-sends every subscription with
// the last accepted versions; subscribers keep their applied config meanwhile.
import { create, fromBinary, type DescMessage, type Message, type Registry } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import { AggregatedDiscoveryService } from '../../gen/envoy/service/discovery/v3/ads_pb';
import { SecretDiscoveryService } from '../../gen/envoy/service/secret/v3/sds_pb';
import {
  DiscoveryRequestSchema,
  ResourceSchema,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from '../../gen/envoy/service/discovery/v3/discovery_pb';
import { StatusSchema } from '../../gen/google/rpc/status_pb';
import { grpcClientConstructor } from '../../xds/grpc';
import type { Logger } from '../log';
import type { Counter, Gauge, StatsScope } from '../stats/store';

export interface DecodedResource<M extends Message = Message> {
  name: string;
  message: M;
  any: Any;
}

export interface XdsSubscriber<M extends Message = Message> {
  /** Applies a state-of-the-world response; throw to NACK (the message becomes error_detail). */
  onUpdate(resources: Array<DecodedResource<M>>, version: string): void | Promise<void>;
}

export interface SubscriptionHandle {
  /** Replaces the watched names (ignored for wildcard subscriptions). */
  setNames(names: Iterable<string>): void;
  cancel(): void;
  readonly version: string;
}

interface TypeState {
  typeUrl: string;
  schema: DescMessage;
  wildcard: boolean;
  names: Set<string>;
  version: string;
  nonce: string;
  subscriber: XdsSubscriber;
  stats: SubStats | undefined;
}

interface SubStats {
  attempt: Counter;
  success: Counter;
  rejected: Counter;
  failure: Counter;
  version: Gauge;
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
  private call: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse> | undefined;
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

  constructor(private readonly opts: GrpcMuxOptions) {
    this.backoffMs = opts.backoffBaseMs ?? 500;
    this.connectedGauge = opts.controlPlaneStats?.gauge('connected_state');
    this.connectedGauge?.set(0);
  }

  get connected(): boolean {
    return this.connectedState;
  }

  /** Watches a type: `names` undefined = wildcard (LDS/CDS). `stats` gets Envoy's update_* counters. */
  subscribe<M extends Message>(typeUrl: string, schema: DescMessage, names: Iterable<string> | undefined, subscriber: XdsSubscriber<M>, stats?: StatsScope): SubscriptionHandle {
    const st: TypeState = {
      typeUrl,
      schema,
      wildcard: names === undefined,
      names: new Set(names ?? []),
      version: '',
      nonce: '',
      subscriber: subscriber as XdsSubscriber,
      stats: stats
        ? {
            attempt: stats.counter('update_attempt'),
            success: stats.counter('update_success'),
            rejected: stats.counter('update_rejected'),
            failure: stats.counter('update_failure'),
            version: stats.gauge('version'),
          }
        : undefined,
    };
    this.types.set(typeUrl, st);
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
    this.connect();
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
    const c = this.client as unknown as {
      streamAggregatedResources?: () => grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
      streamSecrets?: () => grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
    };
    const call = this.opts.service === 'ads' ? c.streamAggregatedResources!() : c.streamSecrets!();
    this.call = call;
    this.firstMessageSent = false;
    for (const st of this.types.values()) st.nonce = '';
    call.on('data', (resp: DiscoveryResponse) => {
      if (this.call !== call) return;
      this.setConnected(true);
      this.backoffMs = this.opts.backoffBaseMs ?? 500;
      this.queue = this.queue.then(() => this.handle(resp, call)).catch((e) => this.opts.log.error(`xds: ${(e as Error).message}`));
    });
    const lost = (why: string) => {
      if (this.call !== call) return;
      this.call = undefined;
      this.setConnected(false);
      for (const st of this.types.values()) st.stats?.failure.inc();
      if (this.closed) return;
      const jitter = Math.random() * this.backoffMs;
      const delay = Math.min(this.opts.backoffMaxMs ?? 30_000, jitter + this.backoffMs / 2);
      this.opts.log.warn(`StreamAggregatedResources gRPC config stream to ${this.opts.target} closed: ${why}; retrying in ${Math.round(delay)}ms`);
      this.backoffMs = Math.min(this.opts.backoffMaxMs ?? 30_000, this.backoffMs * 2);
      this.retryTimer = setTimeout(() => this.connect(), delay);
    };
    call.on('error', (e: grpc.ServiceError) => lost(`${e.code}, ${e.details || e.message}`));
    call.on('end', () => lost('stream ended by the server'));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code !== grpc.status.OK) lost(`${s.code}, ${s.details}`);
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

  private decode(st: TypeState, resp: DiscoveryResponse): DecodedResource[] {
    const out: DecodedResource[] = [];
    resp.resources.forEach((raw, i) => {
      let any = raw;
      if (any.typeUrl === 'type.googleapis.com/envoy.service.discovery.v3.Resource') {
        const wrapped = fromBinary(ResourceSchema, any.value);
        if (!wrapped.resource) throw new Error(`resource ${i} of ${st.typeUrl}: envoy.service.discovery.v3.Resource without a resource`);
        any = wrapped.resource;
      }
      if (any.typeUrl !== st.typeUrl) throw new Error(`${any.typeUrl} does not match the message-wide type URL ${st.typeUrl} in DiscoveryResponse ${resp.nonce}`);
      let message: Message;
      try {
        message = fromBinary(st.schema, any.value, { readUnknownFields: false });
      } catch (e) {
        throw new Error(`resource ${i} of ${st.typeUrl}: cannot decode: ${(e as Error).message}`);
      }
      const name = (message as unknown as { name?: string; clusterName?: string }).name ?? (message as unknown as { clusterName?: string }).clusterName ?? '';
      out.push({ name, message, any });
    });
    return out;
  }

  private async handle(resp: DiscoveryResponse, call: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>): Promise<void> {
    const st = this.types.get(resp.typeUrl);
    if (!st) {
      this.opts.log.warn(`Ignoring the message for type URL ${resp.typeUrl} as it has no current subscribers.`);
      return;
    }
    st.nonce = resp.nonce;
    st.stats?.attempt.inc();
    this.applying++;
    let error: string | undefined;
    try {
      const resources = this.decode(st, resp);
      await st.subscriber.onUpdate(resources, resp.versionInfo);
    } catch (e) {
      error = (e as Error).message;
    } finally {
      this.applying--;
    }
    if (this.call !== call) return;
    if (error === undefined) {
      st.version = resp.versionInfo;
      st.stats?.success.inc();
      st.stats?.version.set(versionHash(resp.versionInfo));
      this.opts.log.debug(`gRPC config for ${resp.typeUrl} accepted with ${resp.resources.length} resources with version ${resp.versionInfo}`);
      this.send(st);
    } else {
      st.stats?.rejected.inc();
      this.opts.log.warn(`gRPC config for ${resp.typeUrl} rejected: ${error}`);
      this.send(st, error);
    }
    if (this.applying === 0 && this.deferred.size > 0) {
      const pending = [...this.deferred];
      this.deferred.clear();
      for (const t of pending) {
        const s = this.types.get(t);
        if (s) this.send(s);
      }
    }
  }
}
