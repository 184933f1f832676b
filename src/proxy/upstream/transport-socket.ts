// A cluster's upstream transport sockets: `transport_socket` (the default) and `transport_socket_matches`,
// chosen per endpoint the way Envoy's TransportSocketMatcherImpl does it — the first match whose labels all
// equal the endpoint's `envoy.transport_socket_match` metadata, then the same over the locality's metadata,
// else the default. This is how Istio's auto-mTLS speaks TLS only to endpoints labelled `tlsMode: istio`.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import type { TransportSocket } from '../../gen/envoy/config/core/v3/base_pb';
import { UpstreamTlsContextSchema } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { ConfigError } from '../common/config-error';
import type { Counter, StatsScope } from '../stats/store';
import { TlsContext } from '../tls/context';
import type { SecretManager } from '../tls/secrets';

const TLS_SOCKET_TYPE = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';
const RAW_BUFFER_TYPE = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';
export const TRANSPORT_SOCKET_MATCH_KEY = 'envoy.transport_socket_match';

/** One way of connecting to an endpoint: plaintext, or TLS with its context and SNI. */
export interface UpstreamTransport {
  /** The match name (`default` for the cluster's transport_socket): pools are kept apart by it. */
  readonly name: string;
  readonly tls: TlsContext | undefined;
  readonly sni: string;
  /** cluster.<name>.<match>.total_match_count */
  readonly matchCount: Counter;
}

/** Envoy Config::Metadata::metadataLabelMatch (list_as_any false): every label present and equal. */
export function metadataLabelMatch(labels: JsonObject, metadata: JsonObject | undefined, key: string): boolean {
  const names = Object.keys(labels);
  const data = metadata?.[key];
  if (!data || typeof data !== 'object' || Array.isArray(data)) return names.length === 0;
  return names.every((k) => k in data && jsonEqual(data[k]!, labels[k]!));
}

function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as JsonValue[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]!));
  }
  const ao = a as JsonObject;
  const bo = b as JsonObject;
  const ak = Object.keys(ao);
  return ak.length === Object.keys(bo).length && ak.every((k) => k in bo && jsonEqual(ao[k]!, bo[k]!));
}

function compileTransport(
  ts: TransportSocket | undefined,
  name: string,
  where: string,
  secrets: SecretManager,
  scope: StatsScope,
): UpstreamTransport {
  const matchCount = scope.counter(`${name}.total_match_count`);
  if (!ts || ts.configType.case !== 'typedConfig' || ts.configType.value.typeUrl === RAW_BUFFER_TYPE) {
    return { name, tls: undefined, sni: '', matchCount };
  }
  if (ts.configType.value.typeUrl !== TLS_SOCKET_TYPE)
    throw new ConfigError(`${where}: Didn't find a registered implementation for name: '${ts.name}'`);
  const u = anyUnpack(ts.configType.value, UpstreamTlsContextSchema);
  if (!u) throw new ConfigError(`${where}: cannot decode UpstreamTlsContext`);
  return {
    name,
    tls: new TlsContext(u.commonTlsContext, { role: 'client', sni: u.sni, maxSessionKeys: u.maxSessionKeys ?? 1 }, secrets, where),
    sni: u.sni,
    matchCount,
  };
}

export class TransportSocketMatcher {
  readonly default: UpstreamTransport;
  private readonly matches: Array<{ labels: JsonObject; transport: UpstreamTransport }> = [];

  constructor(proto: Cluster, where: string, secrets: SecretManager, scope: StatsScope) {
    this.default = compileTransport(proto.transportSocket, 'default', `${where}.transport_socket`, secrets, scope);
    try {
      proto.transportSocketMatches.forEach((m, i) => {
        const w = `${where}.transport_socket_matches[${i}]`;
        if (!m.name) throw new ConfigError(`${w}.name: value length must be at least 1 characters`);
        this.matches.push({ labels: m.match ?? {}, transport: compileTransport(m.transportSocket, m.name, `${w}.transport_socket`, secrets, scope) });
      });
    } catch (e) {
      this.release();
      throw e;
    }
  }

  /** Every transport the cluster may use (warming waits for their secrets). */
  all(): UpstreamTransport[] {
    return [this.default, ...this.matches.map((m) => m.transport)];
  }

  /** Endpoint metadata first, then locality metadata, then the cluster's transport_socket. */
  resolve(endpoint: JsonObject | undefined, locality: JsonObject | undefined): UpstreamTransport {
    for (const m of this.matches) if (metadataLabelMatch(m.labels, endpoint, TRANSPORT_SOCKET_MATCH_KEY)) return m.transport;
    for (const m of this.matches) if (metadataLabelMatch(m.labels, locality, TRANSPORT_SOCKET_MATCH_KEY)) return m.transport;
    return this.default;
  }

  get hasMatches(): boolean {
    return this.matches.length > 0;
  }

  release(): void {
    for (const t of this.all()) t.tls?.release();
  }
}
