// istio.metadata_exchange on HTTP (io.istio.http.peer_metadata.Config; istio/proxy release-1.26
// source/extensions/filters/http/peer_metadata/filter.cc): discovery of the peer from Istio's headers
// (`x-envoy-peer-metadata`: base64 protobuf Struct, `x-envoy-peer-metadata-id`: node id) on requests
// (downstream) and responses (upstream), the headers removed once read, the peer kept in filter state
// (`downstream_peer` / `upstream_peer`) for istio.stats; propagation of this proxy's own metadata on requests
// going upstream and, when the downstream sent its own, on responses going back.
// Differs on purpose: `workload_discovery` (Istio's workload metadata xDS, a bootstrap extension we do not
// have) finds nothing, so the headers are the only source; `baggage` likewise. `skip_external_clusters`
// skips PassthroughCluster only (the engine does not look at a cluster's `istio.external` metadata here).
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { ConfigSchema, type Config_DiscoveryMethod } from '../../../gen/io/istio/http/peer_metadata/config_pb';
import { ConfigError } from '../../common/config-error';
import type { ResponseHeaders } from '../../codec/headers';
import { DOWNSTREAM_PEER, encodeExchange, exchangeStruct, labelKeysOf, PeerCache, UPSTREAM_PEER, workloadFromStruct } from '../../istio/workload';
import type { HttpFilter, HttpFilterFactory, HttpStream } from '../filter-api';

/** The factory's name in istio/proxy (what Node.extensions lists); istiod names the HCM entry istio.metadata_exchange. */
export const PEER_METADATA_FILTER = 'envoy.filters.http.peer_metadata';
const MX = 'x-envoy-peer-metadata';
const MX_ID = 'x-envoy-peer-metadata-id';
/** Filter state: which of the two headers the downstream sent (downstream propagation answers in kind). */
const RECEIVED = 'io.istio.peer_metadata.received';
const GOT_ID = 1;
const GOT_VALUE = 2;

interface Compiled {
  downstreamHeaders: boolean;
  upstreamHeaders: boolean;
  propagateDownstream: boolean;
  propagateUpstream: boolean;
  skipExternal: boolean;
}

const usesHeaders = (ms: readonly Config_DiscoveryMethod[]) => ms.some((m) => m.methodSpecifier.case === 'istioHeaders');

class PeerMetadataFilter implements HttpFilter {
  constructor(
    private readonly c: Compiled,
    private readonly id: string,
    private readonly value: string,
    private readonly peers: PeerCache,
  ) {}

  decodeHeaders(s: HttpStream): undefined {
    const h = s.request;
    if (this.c.downstreamHeaders) {
      const id = h.get(MX_ID);
      const v = h.get(MX);
      if (id !== undefined || v !== undefined) {
        s.filterState.set(RECEIVED, (id !== undefined ? GOT_ID : 0) | (v !== undefined ? GOT_VALUE : 0));
        const peer = v ? this.peers.lookup(v) : undefined;
        if (peer && !s.filterState.has(DOWNSTREAM_PEER)) s.filterState.set(DOWNSTREAM_PEER, peer);
        h.remove(MX_ID);
        h.remove(MX);
      }
    }
    if (this.c.propagateUpstream && !this.skip(s)) {
      h.set(MX_ID, this.id);
      h.set(MX, this.value);
    }
    return undefined;
  }

  encodeHeaders(s: HttpStream, h: ResponseHeaders): void {
    if (this.c.upstreamHeaders) {
      const v = h.get(MX);
      if (v !== undefined || h.has(MX_ID)) {
        const peer = v ? this.peers.lookup(v) : undefined;
        if (peer && !s.filterState.has(UPSTREAM_PEER)) s.filterState.set(UPSTREAM_PEER, peer);
        h.remove(MX_ID);
        h.remove(MX);
      }
    }
    if (this.c.propagateDownstream) {
      const got = (s.filterState.get(RECEIVED) as number | undefined) ?? 0;
      if (got & GOT_ID) h.set(MX_ID, this.id);
      if (got & GOT_VALUE) h.set(MX, this.value);
    }
  }

  /** Istio skipMXHeaders with skip_external_clusters: PassthroughCluster is outside the mesh. */
  private skip(s: HttpStream): boolean {
    if (!this.c.skipExternal) return false;
    const a = s.route()?.route.action;
    return a?.kind === 'route' && a.cluster.kind === 'cluster' && a.cluster.name === 'PassthroughCluster';
  }
}

export const peerMetadataFilterFactory: HttpFilterFactory = {
  name: PEER_METADATA_FILTER,
  configTypes: [ConfigSchema.typeName],
  create(config, ctx) {
    const c = config ? anyUnpack(config, ConfigSchema) : undefined;
    if (config && !c) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    const prop = (ms: NonNullable<typeof c>['downstreamPropagation'] | undefined) =>
      (ms ?? []).filter((m) => m.methodSpecifier.case === 'istioHeaders');
    const up = prop(c?.upstreamPropagation);
    const compiled: Compiled = {
      downstreamHeaders: usesHeaders(c?.downstreamDiscovery ?? []),
      upstreamHeaders: usesHeaders(c?.upstreamDiscovery ?? []),
      propagateDownstream: prop(c?.downstreamPropagation).length > 0,
      propagateUpstream: up.length > 0,
      skipExternal: up.some((m) => m.methodSpecifier.case === 'istioHeaders' && m.methodSpecifier.value.skipExternalClusters),
    };
    const md = ctx.local?.metadata ?? {};
    // the value is computed once per filter config, as Istio's MXPropagationMethod does
    const value = encodeExchange(exchangeStruct(workloadFromStruct(md), labelKeysOf(md)));
    return new PeerMetadataFilter(compiled, ctx.local?.id ?? '', value, peerCache);
  },
};

/** One cache for the process: the same peers reach every listener. */
const peerCache = new PeerCache();
