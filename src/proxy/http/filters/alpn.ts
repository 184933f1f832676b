// Istio's istio.alpn HTTP filter (istio/proxy source/extensions/filters/http/alpn): on sidecar outbound it
// makes mesh mTLS connections offer `istio-http/1.0|1.1` or `istio-h2` (by the upstream HTTP protocol)
// instead of the cluster's `istio-peer-exchange, istio`, so the server sidecar's inbound filter chains tell
// HTTP from opaque TCP by ALPN. Clusters marked `istio: {alpn_override: "false"}` (DestinationRule
// SIMPLE/MUTUAL TLS to non-mesh servers) keep their own ALPN.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { FilterConfig_Protocol, FilterConfigSchema } from '../../../gen/istio/envoy/config/filter/http/alpn/v2alpha1/config_pb';
import { ConfigError } from '../../common/config-error';
import { APPLICATION_PROTOCOLS_KEY, type ApplicationProtocolsFor } from '../../stream-info';
import type { HttpFilterFactory } from '../filter-api';

export const ALPN_FILTER = 'istio.alpn';

export const alpnFilterFactory: HttpFilterFactory = {
  name: ALPN_FILTER,
  configTypes: [FilterConfigSchema.typeName],
  create(config, ctx) {
    const c = config ? anyUnpack(config, FilterConfigSchema) : undefined;
    if (config && !c) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    const byProtocol = new Map<FilterConfig_Protocol, readonly string[]>();
    for (const o of c?.alpnOverride ?? []) byProtocol.set(o.upstreamProtocol, o.alpnOverride);
    const resolve: ApplicationProtocolsFor = (protocol, clusterMetadata) => {
      const istio = clusterMetadata?.['istio'];
      if (istio && typeof istio === 'object' && !Array.isArray(istio) && istio['alpn_override'] === 'false') return undefined;
      // Envoy has no HTTP/1.0 upstream codec: HTTP/1.0 requests go out as HTTP/1.1 (upstreamHttpProtocol)
      const list = byProtocol.get(protocol === 'http2' ? FilterConfig_Protocol.HTTP2 : FilterConfig_Protocol.HTTP11);
      return list && list.length > 0 ? list : undefined;
    };
    return {
      decodeHeaders: (s) => {
        if (byProtocol.size > 0) s.filterState.set(APPLICATION_PROTOCOLS_KEY, resolve);
        return undefined;
      },
    };
  },
};
