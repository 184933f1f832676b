// envoy.filters.http.cors with per-route envoy.extensions.filters.http.cors.v3.CorsPolicy (Istio puts
// the VirtualService corsPolicy there): answers allowed preflights itself, adds the CORS headers to
// responses of allowed origins, and forwards everything else untouched.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { CorsPolicySchema, CorsSchema, type CorsPolicy } from '../../../gen/envoy/extensions/filters/http/cors/v3/cors_pb';
import { compileStringMatcher, type StringMatch } from '../../matchers/string';
import { ConfigError } from '../../common/config-error';
import { fractionOf } from '../../route/match';
import type { Counter } from '../../stats/store';
import type { FilterResult, HttpFilter, HttpFilterFactory, HttpStream } from '../filter-api';
import type { ResponseHeaders } from '../../codec/headers';

export const CORS_FILTER = 'envoy.filters.http.cors';

interface Policy {
  origins: StringMatch[];
  allowMethods: string;
  allowHeaders: string;
  exposeHeaders: string;
  maxAge: string;
  allowCredentials: boolean;
  enabled: number;
  shadow: number;
  allowPrivateNetwork: boolean;
  forwardNotMatchingPreflights: boolean;
}

function compile(p: CorsPolicy, where: string): Policy {
  return {
    origins: p.allowOriginStringMatch.map((m, i) => compileStringMatcher(m, `${where}.allow_origin_string_match[${i}]`)),
    allowMethods: p.allowMethods,
    allowHeaders: p.allowHeaders,
    exposeHeaders: p.exposeHeaders,
    maxAge: p.maxAge,
    allowCredentials: p.allowCredentials ?? false,
    enabled: p.filterEnabled ? fractionOf(p.filterEnabled.defaultValue, 1) : 1,
    shadow: p.shadowEnabled ? fractionOf(p.shadowEnabled.defaultValue, 0) : 0,
    allowPrivateNetwork: p.allowPrivateNetworkAccess ?? false,
    forwardNotMatchingPreflights: p.forwardNotMatchingPreflights ?? true,
  };
}

const STATE = 'cors.origin';

class CorsFilter implements HttpFilter {
  constructor(
    private readonly name: string,
    private readonly stats: { valid: Counter; invalid: Counter },
  ) {}

  decodeHeaders(s: HttpStream): FilterResult {
    const origin = s.request.get('origin');
    if (!origin) return undefined;
    const p = s.perFilterConfig<Policy>(this.name);
    if (!p) return undefined;
    const enabled = Math.random() < p.enabled;
    if (!enabled) return undefined;
    const allowed = p.origins.some((m) => m(origin));
    (allowed ? this.stats.valid : this.stats.invalid).inc();
    const preflight = s.request.method === 'OPTIONS' && s.request.has('access-control-request-method');
    if (!allowed) {
      if (preflight && !p.forwardNotMatchingPreflights) return { status: 200, details: 'cors_response' };
      return undefined;
    }
    if (preflight) {
      const headers: Record<string, string> = { 'access-control-allow-origin': origin };
      if (p.allowCredentials) headers['access-control-allow-credentials'] = 'true';
      if (p.allowMethods) headers['access-control-allow-methods'] = p.allowMethods;
      if (p.allowHeaders) headers['access-control-allow-headers'] = p.allowHeaders;
      // Envoy's CorsFilter::decodeHeaders sets expose-headers on its preflight answer as well (seen on 1.36.2)
      if (p.exposeHeaders) headers['access-control-expose-headers'] = p.exposeHeaders;
      if (p.maxAge) headers['access-control-max-age'] = p.maxAge;
      if (p.allowPrivateNetwork && s.request.get('access-control-request-private-network') === 'true')
        headers['access-control-allow-private-network'] = 'true';
      return { status: 200, headers, details: 'cors_response' };
    }
    s.filterState.set(STATE, { origin, p });
    return undefined;
  }

  encodeHeaders(s: HttpStream, h: ResponseHeaders): void {
    const st = s.filterState.get(STATE) as { origin: string; p: Policy } | undefined;
    if (!st) return;
    h.set('access-control-allow-origin', st.origin);
    if (st.p.allowCredentials) h.set('access-control-allow-credentials', 'true');
    if (st.p.exposeHeaders) h.set('access-control-expose-headers', st.p.exposeHeaders);
  }
}

export const corsFilterFactory: HttpFilterFactory = {
  name: CORS_FILTER,
  configTypes: [CorsSchema.typeName],
  perRouteTypes: [CorsPolicySchema.typeName],
  create(config, ctx) {
    if (config && !anyUnpack(config, CorsSchema)) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    const sc = ctx.stats.scope('cors.');
    return new CorsFilter(ctx.filterName, { valid: sc.counter('origin_valid'), invalid: sc.counter('origin_invalid') });
  },
  parsePerRoute(config, where) {
    const p = anyUnpack(config, CorsPolicySchema);
    if (!p) throw new ConfigError(`${where}: cannot decode ${config.typeUrl} as ${CorsPolicySchema.typeName}`);
    return compile(p, where);
  },
};
