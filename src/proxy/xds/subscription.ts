// One xDS type as a mux watches it (Envoy's GrpcMuxImpl watch and subscription state): what the subscriber
// asked for, the last accepted version and nonce, what a delta stream holds, Envoy's update_* stats; and the
// decoding of a response's resources with the type's generated schema.
import { fromBinary, type DescMessage, type Message } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import { ResourceSchema, type DiscoveryResponse } from '../../gen/envoy/service/discovery/v3/discovery_pb';
import type { Counter, Gauge, StatsScope } from '../stats/store';

export interface DecodedResource<M extends Message = Message> {
  name: string;
  message: M;
  any: Any;
}

export interface XdsSubscriber<M extends Message = Message> {
  /** Applies a state-of-the-world response; throw to NACK (the message becomes error_detail). */
  onUpdate(resources: Array<DecodedResource<M>>, version: string): void | Promise<void>;
  /**
   * Delta streams: the added or changed resources and the names removed, instead of onUpdate. Throw to
   * NACK. A SotW stream calls onUpdate.
   */
  onDelta?(added: Array<DecodedResource<M>>, removed: string[], version: string): void | Promise<void>;
}

export interface SubscriptionHandle {
  /** Replaces the watched names (ignored for wildcard subscriptions). */
  setNames(names: Iterable<string>): void;
  cancel(): void;
  readonly version: string;
}

export interface TypeState {
  typeUrl: string;
  schema: DescMessage;
  wildcard: boolean;
  names: Set<string>;
  version: string;
  nonce: string;
  subscriber: XdsSubscriber;
  stats: SubStats | undefined;
  /**
   * Delta: resources held, by name, with the version the server gave each. Encoded only: the subscribers
   * keep what they use of the decoded messages (thousands of clusters in scope: a decoded Cluster is ~3.7 KB).
   */
  held: Map<string, { any: Any; version: string }>;
  /** Delta: the names the server knows this stream subscribes to. */
  sentNames: Set<string>;
  /** Delta: the first request of the type on this stream was sent. */
  opened: boolean;
  /** Delta: nonce of the last request sent (a request that would repeat it and change nothing is not sent). */
  nonceSent: string;
}

interface SubStats {
  attempt: Counter;
  success: Counter;
  rejected: Counter;
  failure: Counter;
  version: Gauge;
}

/** A new watch of a type: `names` undefined = wildcard (LDS/CDS); `stats` gets Envoy's update_* counters. */
export function newTypeState(
  typeUrl: string,
  schema: DescMessage,
  names: Iterable<string> | undefined,
  subscriber: XdsSubscriber,
  stats: StatsScope | undefined,
): TypeState {
  return {
    typeUrl,
    schema,
    wildcard: names === undefined,
    names: new Set(names ?? []),
    version: '',
    nonce: '',
    subscriber,
    held: new Map(),
    sentNames: new Set(),
    opened: false,
    nonceSent: '',
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
}

export function decodeResource(st: TypeState, raw: Any, where: string): DecodedResource {
  if (raw.typeUrl !== st.typeUrl) throw new Error(`${where}: ${raw.typeUrl} does not match the message-wide type URL ${st.typeUrl}`);
  raw.typeUrl = st.typeUrl; // one string for the thousands of held resources of a type, not a copy each
  let message: Message;
  try {
    message = fromBinary(st.schema, raw.value, { readUnknownFields: false });
  } catch (e) {
    throw new Error(`${where} of ${st.typeUrl}: cannot decode: ${(e as Error).message}`);
  }
  const name =
    (message as unknown as { name?: string; clusterName?: string }).name ?? (message as unknown as { clusterName?: string }).clusterName ?? '';
  return { name, message, any: raw };
}

export function decodeResponse(st: TypeState, resp: DiscoveryResponse): DecodedResource[] {
  return resp.resources.map((raw, i) => {
    let any = raw;
    if (any.typeUrl === 'type.googleapis.com/envoy.service.discovery.v3.Resource') {
      const wrapped = fromBinary(ResourceSchema, any.value);
      if (!wrapped.resource) throw new Error(`resource ${i} of ${st.typeUrl}: envoy.service.discovery.v3.Resource without a resource`);
      any = wrapped.resource;
    }
    return decodeResource(st, any, `resource ${i} in DiscoveryResponse ${resp.nonce}`);
  });
}
