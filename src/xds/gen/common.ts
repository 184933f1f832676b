// Small shared pieces of the xDS generators: packing, names Istio uses, config sources, durations.
import { create, type DescMessage, type MessageInitShape, type MessageShape, type JsonObject } from '@bufbuild/protobuf';
import { anyPack, AnySchema, DurationSchema, type Any, type Duration } from '@bufbuild/protobuf/wkt';
import { ApiVersion, ConfigSourceSchema, type ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import type { Resource } from '../types';

export function pack<D extends DescMessage>(schema: D, init: MessageInitShape<D>): Any {
  return anyPack(schema, create(schema, init) as MessageShape<D>);
}

export function packed<D extends DescMessage>(name: string, schema: D, init: MessageInitShape<D>): Resource {
  return { name, resource: pack(schema, init) };
}

export function durationMs(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return create(DurationSchema, { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) });
}

export const ZERO_DURATION = (): Duration => durationMs(0);

/** Milliseconds of a Go duration string written in a config; undefined when absent or malformed. */
export function goDurationMs(s: string | undefined): number | undefined {
  if (s === undefined || s === '') return undefined;
  const re = /(\d+(?:\.\d+)?)(ns|us|\u00b5s|ms|s|m|h)/g;
  let total = 0;
  let consumed = 0;
  let m: RegExpExecArray | null;
  const unit: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  while ((m = re.exec(s)) !== null) {
    if (m.index !== consumed) return undefined;
    total += Number(m[1]) * unit[m[2]!]!;
    consumed = re.lastIndex;
  }
  if (consumed !== s.length || consumed === 0) return s === '0' ? 0 : undefined;
  return total;
}

export function goDuration(s: string | undefined): Duration | undefined {
  const ms = goDurationMs(s);
  return ms === undefined ? undefined : durationMs(ms);
}

/** ADS config source as Istio writes it: initial_fetch_timeout 0s, resource_api_version V3. */
export function adsConfigSource(): ConfigSource {
  return create(ConfigSourceSchema, {
    configSourceSpecifier: { case: 'ads', value: {} },
    initialFetchTimeout: durationMs(0),
    resourceApiVersion: ApiVersion.V3,
  });
}

/** Plain ADS config source (what Istio's gRPC generator writes). */
export function bareAdsConfigSource(): ConfigSource {
  return create(ConfigSourceSchema, { configSourceSpecifier: { case: 'ads', value: {} } });
}

// ---------------------------------------------------------------------------------------------
// cluster names: `outbound|<port>|<subset>|<host>` (Istio model.BuildSubsetKey)

export type TrafficDirection = 'inbound' | 'outbound';

export function buildSubsetKey(direction: TrafficDirection, subset: string, hostname: string, port: number): string {
  return `${direction}|${port}|${subset}|${hostname}`;
}

export interface SubsetKey {
  direction: TrafficDirection;
  subset: string;
  hostname: string;
  port: number;
}

/** Inverse of buildSubsetKey; undefined for names that are not subset keys (BlackHoleCluster…). */
export function parseSubsetKey(name: string): SubsetKey | undefined {
  const parts = name.split('|');
  if (parts.length !== 4) return undefined;
  const [dir, port, subset, hostname] = parts as [string, string, string, string];
  if (dir !== 'inbound' && dir !== 'outbound') return undefined;
  const p = Number(port);
  if (!Number.isInteger(p) || p <= 0 || p > 65535) return undefined;
  return { direction: dir, subset, hostname, port: p };
}

// Well-known cluster and listener names (Istio pilot/pkg/networking/util and model).
export const BLACKHOLE_CLUSTER = 'BlackHoleCluster';
export const PASSTHROUGH_CLUSTER = 'PassthroughCluster';
export const INBOUND_PASSTHROUGH_CLUSTER = 'InboundPassthroughCluster';
export const VIRTUAL_OUTBOUND_LISTENER = 'virtualOutbound';
export const VIRTUAL_INBOUND_LISTENER = 'virtualInbound';

// Filter names (Istio pkg/wellknown).
export const WK = {
  hcm: 'envoy.filters.network.http_connection_manager',
  tcpProxy: 'envoy.filters.network.tcp_proxy',
  router: 'envoy.filters.http.router',
  fault: 'envoy.filters.http.fault',
  cors: 'envoy.filters.http.cors',
  grpcStats: 'envoy.filters.http.grpc_stats',
  jwtAuthn: 'envoy.filters.http.jwt_authn',
  rbac: 'envoy.filters.http.rbac',
  alpn: 'istio.alpn',
  tlsInspector: 'envoy.filters.listener.tls_inspector',
  httpInspector: 'envoy.filters.listener.http_inspector',
  originalDst: 'envoy.filters.listener.original_dst',
  originalSrc: 'envoy.filters.listener.original_src',
  tlsTransportSocket: 'envoy.transport_sockets.tls',
  rawBufferTransportSocket: 'envoy.transport_sockets.raw_buffer',
  httpProtocolOptions: 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
} as const;

/** Istio's config-info metadata: filter_metadata.istio.config = `/apis/<group>/<version>/namespaces/<ns>/<kind>/<name>`. */
export function configInfoMetadata(
  apiVersion: string,
  kind: string,
  namespace: string,
  name: string,
): { filterMetadata: { [k: string]: JsonObject } } {
  const kebab = kind.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
  return { filterMetadata: { istio: { config: `/apis/${apiVersion}/namespaces/${namespace}/${kebab}/${name}` } } };
}

export function sortByName<T extends { name: string }>(xs: T[]): T[] {
  return xs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
