// This proxy as Envoy's LocalInfo presents it (envoy/local_info/local_info.h): the bootstrap node's id, cluster,
// zone and metadata, which Istio's stats and metadata exchange describe the proxy by, tracers tag spans with and
// the OpenTelemetry access logger puts in its resource; plus what Envoy's tracers add (the first non-loopback IPv4
// address, Network::Utility::getLocalAddress) and the engine's version string (the OTLP instrumentation scope).
import os from 'node:os';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';

export interface LocalInfo {
  readonly id: string;
  readonly cluster: string;
  readonly zone: string;
  readonly metadata: JsonObject;
  /** The first non-loopback IPv4 address, else 127.0.0.1. */
  readonly address: string;
  readonly version: string;
}

export const NO_LOCAL_INFO: LocalInfo = { id: '', cluster: '', zone: '', metadata: {}, address: '127.0.0.1', version: '' };

export function localInfoOf(node: Node | undefined, version = ''): LocalInfo {
  return {
    id: node?.id ?? '',
    cluster: node?.cluster ?? '',
    zone: node?.locality?.zone ?? '',
    metadata: node?.metadata ?? {},
    address: localAddress(),
    version,
  };
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
