// How a tracer reaches its collector: a request through the engine's own cluster manager (the HCM's
// upstreamCall), as Envoy's tracers use the cluster's async HTTP client; and the local facts every span carries.
import os from 'node:os';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import type { StatsScope } from '../stats/store';

export interface CollectorCall {
  method: string;
  path: string;
  authority: string;
  headers?: Readonly<Record<string, string>>;
  body?: Buffer;
  timeoutMs: number;
}
export interface CollectorReply {
  status: number;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: Buffer;
}
export type CallCollector = (cluster: string, call: CollectorCall) => Promise<CollectorReply>;

/** Envoy's LocalInfo as tracers read it: node id and cluster, zone, the proxy's own address. */
export interface LocalInfo {
  nodeId: string;
  cluster: string;
  zone: string;
  /** The first non-loopback IPv4 address (Envoy's Network::Utility::getLocalAddress), else 127.0.0.1. */
  address: string;
  /** The engine's version string (the OTLP instrumentation scope's version). */
  version: string;
}

export function localInfoOf(node: Node | undefined, version = ''): LocalInfo {
  return { nodeId: node?.id ?? '', cluster: node?.cluster ?? '', zone: node?.locality?.zone ?? '', address: localAddress(), version };
}

let cachedAddress: string | undefined;
function localAddress(): string {
  if (cachedAddress === undefined) {
    cachedAddress = '127.0.0.1';
    for (const list of Object.values(os.networkInterfaces())) {
      const a = list?.find((x) => x.family === 'IPv4' && !x.internal);
      if (a) {
        cachedAddress = a.address;
        break;
      }
    }
  }
  return cachedAddress;
}

/** What the tracers need of the engine. */
export interface TracerHost {
  call: CallCollector;
  local: LocalInfo;
  /** The engine's root stats scope (tracers count under `tracing.<name>.`). */
  stats: StatsScope;
  warn(message: string): void;
}

/** The headers Envoy's async client adds to a collector request it makes itself. */
export function internalHeaders(local: LocalInfo): Record<string, string> {
  return { 'x-envoy-internal': 'true', 'x-forwarded-for': local.address };
}
