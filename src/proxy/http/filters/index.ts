// The HTTP filters built into the engine. Other filter modules (jwt_authn) register into the same
// registry with defaultFilterRegistry().register(factory) before the engine starts.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { RouterSchema } from '../../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import { FilterConfigSchema as GrpcStatsSchema } from '../../../gen/envoy/extensions/filters/http/grpc_stats/v3/config_pb';
import { ConfigError } from '../../common/config-error';
import { HttpFilterRegistry, type HttpFilterFactory, type HttpStream } from '../filter-api';
import type { ResponseHeaders } from '../../codec/headers';
import { alpnFilterFactory } from './alpn';
import { GRPC_STATS_STATE, GrpcMessages } from '../grpc-frames';
import { corsFilterFactory } from './cors';
import { faultFilterFactory } from './fault';
import { jwtAuthnFilterFactory } from './jwt-authn/index';
import { rbacFilterFactory } from './rbac';
import { istioStatsFilterFactory } from './istio-stats';
import { peerMetadataFilterFactory } from './peer-metadata';

export const ROUTER_FILTER = 'envoy.filters.http.router';

/** The router is run by the HCM itself (http/router.ts); the factory validates and marks it terminal. */
export const routerFilterFactory: HttpFilterFactory = {
  name: ROUTER_FILTER,
  configTypes: [RouterSchema.typeName],
  terminal: true,
  create(config, ctx) {
    if (config && !anyUnpack(config, RouterSchema)) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    return { decodeHeaders: () => undefined };
  },
};

/**
 * envoy.filters.http.grpc_stats (Istio puts it in every HCM): counts gRPC requests per upstream cluster
 * as `cluster.<name>.grpc.<service>.<method>.{total,success,failure}` when stats_for_all_methods is on,
 * else `cluster.<name>.grpc.{total,success,failure}`; with emit_filter_state, the stream's message counts
 * in filter state (what Istio's stats filter reports).
 */
export const grpcStatsFilterFactory: HttpFilterFactory = {
  name: 'envoy.filters.http.grpc_stats',
  configTypes: [GrpcStatsSchema.typeName],
  create(config, ctx) {
    const c = config ? anyUnpack(config, GrpcStatsSchema) : undefined;
    if (config && !c) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    const allMethods = c?.perMethodStatSpecifier.case === 'statsForAllMethods' ? c.perMethodStatSpecifier.value : false;
    const emit = c?.emitFilterState ?? false;
    const store = ctx.stats.store;
    return {
      decodeHeaders: (s: HttpStream) => {
        const ct = s.request.get('content-type') ?? '';
        if (!ct.startsWith('application/grpc')) return undefined;
        const m = /^\/([^/]+)\/([^/?]+)/.exec(s.request.path);
        s.filterState.set('grpc_stats', m && allMethods ? `grpc.${m[1]}.${m[2]}.` : 'grpc.');
        if (emit) s.filterState.set(GRPC_STATS_STATE, (s.info.grpcMessages = new GrpcMessages()));
        return undefined;
      },
      encodeHeaders: (s: HttpStream, h: ResponseHeaders) => {
        const prefix = s.filterState.get('grpc_stats') as string | undefined;
        const cluster = s.info.upstreamCluster;
        if (!prefix || !cluster) return;
        const base = `cluster.${cluster}.${prefix}`;
        store.counter(`${base}total`).inc();
        const gs = h.get('grpc-status');
        if (gs === undefined) return;
        store.counter(`${base}${gs === '0' ? 'success' : 'failure'}`).inc();
      },
    };
  },
};

let defaults: HttpFilterRegistry | undefined;

/** The shared registry with router, fault, cors, rbac, grpc_stats, jwt_authn, istio.alpn, istio.metadata_exchange and istio.stats. */
export function defaultFilterRegistry(): HttpFilterRegistry {
  if (!defaults) {
    defaults = new HttpFilterRegistry();
    for (const f of [
      routerFilterFactory,
      faultFilterFactory,
      corsFilterFactory,
      rbacFilterFactory,
      grpcStatsFilterFactory,
      jwtAuthnFilterFactory,
      alpnFilterFactory,
      peerMetadataFilterFactory,
      istioStatsFilterFactory,
    ])
      defaults.register(f);
  }
  return defaults;
}
