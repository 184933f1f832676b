// What a proxy can take, from the extensions it lists in its xDS Node (envoy.config.core.v3.Node.extensions:
// Envoy fills it with every extension factory it registered, each with its category and the config types it
// accepts in type_urls, without the `type.googleapis.com/` prefix). Istio's xDS assumes its own Envoy build,
// which carries Istio's filters (istio.alpn, istio.stats, istio.metadata_exchange, …); upstream Envoy has none of
// them and NACKs a listener that names one. Istio itself does not read Node.extensions (it decides by
// IstioVersion, pilot/pkg/networking/core `util.IsIstioVersionGE`); we do, so the daemon can serve the upstream
// Envoy a user points PROXY_CONFIG binaryPath at. A node that lists no extensions (an older client, a tool)
// is taken to be Istio's own build: it gets what Istio would send.
//
// Of Istio's own extensions the daemon generates istio.alpn, istio.stats and istio.metadata_exchange (HTTP
// peer metadata, network and upstream network metadata exchange); no Wasm. The table below holds them, with
// what a proxy without them gets instead (the generators' side: alpnInsteadOfFilter in src/xds/gen/tls.ts,
// src/xds/gen/telemetry-filters.ts). The model of the proxy, read once per stream, below the generators that
// consult it.
import type { Extension } from '../gen/envoy/config/core/v3/base_pb';

/** An extension only Istio's Envoy build has, and what the daemon does for a proxy that lacks it. */
export interface IstioOnlyExtension {
  /** The name Istio gives the filter. */
  name: string;
  /** Its config message (what Envoy lists in type_urls). */
  typeName: string;
  /** What a proxy without it gets instead, for the daemon's log and the README. */
  instead: string;
}

export type IstioFeature = 'alpn' | 'stats' | 'peerMetadata' | 'metadataExchange';

export const ISTIO_ONLY_EXTENSIONS: Readonly<Record<IstioFeature, IstioOnlyExtension>> = {
  alpn: {
    name: 'istio.alpn',
    typeName: 'istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig',
    instead:
      'no istio.alpn HTTP filter; its mesh mTLS clusters offer the istio-http/1.1 or istio-h2 ALPN themselves when the port protocol fixes it (sniffed ports offer istio and reach a sniffing server as TCP)',
  },
  stats: {
    name: 'istio.stats',
    typeName: 'stats.PluginConfig',
    instead: "no istio.stats HTTP or network filters: the proxy reports none of Istio's standard metrics",
  },
  peerMetadata: {
    name: 'istio.metadata_exchange',
    typeName: 'io.istio.http.peer_metadata.Config',
    instead: 'no peer metadata HTTP filter: no x-envoy-peer-metadata headers are sent or read',
  },
  metadataExchange: {
    name: 'istio.metadata_exchange',
    typeName: 'envoy.tcp.metadataexchange.config.MetadataExchange',
    instead:
      'no TCP metadata exchange filters on inbound chains or outbound clusters, and no istio-peer-exchange ALPN on its mTLS clusters and TCP chains',
  },
};

/** What the daemon generates for one proxy beyond plain upstream Envoy. */
export interface ProxyCapabilities {
  /** False when the node listed no extensions: taken to be Istio's own Envoy build. */
  reported: boolean;
  /** Istio-only extensions the proxy lacks, in table order. */
  missing: readonly IstioFeature[];
  /** '' when nothing is missing; otherwise names what is, for keys of output shared between proxies. */
  key: string;
}

/** Istio's own Envoy build, or a node that said nothing about its extensions. */
export const ISTIO_PROXY: ProxyCapabilities = { reported: false, missing: [], key: '' };

type ExtensionLike = Pick<Extension, 'name' | 'disabled' | 'typeUrls'>;

/**
 * Envoy finds an extension's factory by its config type first (type_urls), by name only for a config it cannot
 * type; a listed extension without type_urls (our engine lists names only where it has no typed config) counts
 * by name. A disabled extension is not there.
 */
function lists(extensions: readonly ExtensionLike[], x: IstioOnlyExtension): boolean {
  return extensions.some((e) => !e.disabled && (e.typeUrls.includes(x.typeName) || (e.typeUrls.length === 0 && e.name === x.name)));
}

/** The capabilities of a proxy from its Node.extensions. */
export function proxyCapabilities(extensions: readonly ExtensionLike[]): ProxyCapabilities {
  if (extensions.length === 0) return ISTIO_PROXY;
  const missing = (Object.keys(ISTIO_ONLY_EXTENSIONS) as IstioFeature[]).filter((f) => !lists(extensions, ISTIO_ONLY_EXTENSIONS[f]));
  return { reported: true, missing, key: missing.length ? `no:${missing.join(',')}` : '' };
}

/** Whether the daemon may send the proxy this Istio-only feature (undefined: Istio's build). */
export function supports(caps: ProxyCapabilities | undefined, f: IstioFeature): boolean {
  return !caps?.missing.includes(f);
}

/** The daemon's log line for a proxy that lacks some of Istio's own extensions; undefined when none. */
export function leftOutReport(caps: ProxyCapabilities | undefined): string | undefined {
  if (!caps?.missing.length) return undefined;
  return caps.missing.map((f) => `${ISTIO_ONLY_EXTENSIONS[f].name} (not in the node's extensions): ${ISTIO_ONLY_EXTENSIONS[f].instead}`).join('; ');
}
