// The jwt_authn filter factory registered in the engine's filter registry.
import { JwtAuthenticationSchema, PerRouteConfigSchema } from '../../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import type { HttpFilterFactory } from '../../filter-api';
import { compileJwtAuthn, decodeJwtAuthentication, decodePerRoute } from './config';
import { JWT_AUTHN_FILTER, JwtAuthnFilter } from './filter';
import { jwtAuthnStats } from './stats';

export { JWT_AUTHN_FILTER } from './filter';

export const jwtAuthnFilterFactory: HttpFilterFactory = {
  name: JWT_AUTHN_FILTER,
  configTypes: [JwtAuthenticationSchema.typeName],
  perRouteTypes: [PerRouteConfigSchema.typeName],
  create(config, ctx) {
    const stats = jwtAuthnStats(ctx.stats);
    const cfg = compileJwtAuthn(decodeJwtAuthentication(config, ctx.where), ctx.where, { upstream: ctx.upstream, stats, log: ctx.log.get('jwt') });
    return new JwtAuthnFilter(ctx.filterName, cfg, stats);
  },
  parsePerRoute(config, where) {
    return decodePerRoute(config, where);
  },
};
