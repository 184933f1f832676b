// envoy.filters.http.rbac: enforcing rules (403 "RBAC: access denied") and shadow rules (stats and
// dynamic metadata only), per-route overrides through RBACPerRoute.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { RBACPerRouteSchema, RBACSchema, type RBAC } from '../../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { ConfigError } from '../../common/config-error';
import { RbacEngine } from '../../rbac/engine';
import type { Counter, StatsScope } from '../../stats/store';
import type { FilterResult, HttpFilter, HttpFilterFactory, HttpStream } from '../filter-api';

export const RBAC_FILTER = 'envoy.filters.http.rbac';

interface RbacConfig {
  engine: RbacEngine | undefined;
  shadow: RbacEngine | undefined;
  rulesStatPrefix: string;
  shadowRulesStatPrefix: string;
}

function compile(r: RBAC, where: string): RbacConfig {
  if (r.matcher || r.shadowMatcher) throw new ConfigError(`${where}: matcher-based RBAC is not supported; use rules`);
  return {
    engine: r.rules ? new RbacEngine(r.rules, `${where}.rules`) : undefined,
    shadow: r.shadowRules ? new RbacEngine(r.shadowRules, `${where}.shadow_rules`) : undefined,
    rulesStatPrefix: r.rulesStatPrefix,
    shadowRulesStatPrefix: r.shadowRulesStatPrefix,
  };
}

interface Counters {
  allowed: Counter;
  denied: Counter;
  shadowAllowed: Counter;
  shadowDenied: Counter;
}

class RbacFilter implements HttpFilter {
  private readonly counters = new Map<string, Counters>();
  constructor(
    private readonly name: string,
    private readonly base: RbacConfig,
    private readonly scope: StatsScope,
  ) {}

  private countersFor(c: RbacConfig): Counters {
    const key = `${c.rulesStatPrefix}|${c.shadowRulesStatPrefix}`;
    let x = this.counters.get(key);
    if (!x) {
      const s = this.scope.scope('rbac.');
      x = {
        allowed: s.counter(`${c.rulesStatPrefix}allowed`),
        denied: s.counter(`${c.rulesStatPrefix}denied`),
        shadowAllowed: s.counter(`${c.shadowRulesStatPrefix}shadow_allowed`),
        shadowDenied: s.counter(`${c.shadowRulesStatPrefix}shadow_denied`),
      };
      this.counters.set(key, x);
    }
    return x;
  }

  decodeHeaders(s: HttpStream): FilterResult {
    const cfg = s.perFilterConfig<RbacConfig>(this.name) ?? this.base;
    const input = { headers: s.request, path: s.request.pathOnly(), connection: s.connection, dynamicMetadata: s.dynamicMetadata };
    const c = this.countersFor(cfg);
    if (cfg.shadow) {
      const d = cfg.shadow.evaluate(input);
      (d.allowed ? c.shadowAllowed : c.shadowDenied).inc();
      const md: Record<string, string> = { [`${cfg.shadowRulesStatPrefix}shadow_engine_result`]: d.allowed ? 'allowed' : 'denied' };
      if (d.policy) md[`${cfg.shadowRulesStatPrefix}shadow_effective_policy_id`] = d.policy;
      s.setDynamicMetadata(RBAC_FILTER, md);
    }
    if (!cfg.engine) return undefined;
    const d = cfg.engine.evaluate(input);
    if (cfg.engine.action === 'LOG') {
      if (d.policy) s.setDynamicMetadata('envoy.common', { access_log_hint: true });
      c.allowed.inc();
      return undefined;
    }
    if (d.allowed) {
      c.allowed.inc();
      return undefined;
    }
    c.denied.inc();
    return { status: 403, body: 'RBAC: access denied', details: `rbac_access_denied_matched_policy[${d.policy || 'none'}]` };
  }
}

export const rbacFilterFactory: HttpFilterFactory = {
  name: RBAC_FILTER,
  configTypes: [RBACSchema.typeName],
  perRouteTypes: [RBACPerRouteSchema.typeName],
  create(config, ctx) {
    const r = config ? anyUnpack(config, RBACSchema) : undefined;
    if (config && !r) throw new ConfigError(`${ctx.where}: cannot decode ${config.typeUrl}`);
    return new RbacFilter(
      ctx.filterName,
      r ? compile(r, ctx.where) : { engine: undefined, shadow: undefined, rulesStatPrefix: '', shadowRulesStatPrefix: '' },
      ctx.stats,
    );
  },
  parsePerRoute(config, where) {
    const p = anyUnpack(config, RBACPerRouteSchema);
    if (!p) throw new ConfigError(`${where}: cannot decode ${config.typeUrl}`);
    return p.rbac ? compile(p.rbac, `${where}.rbac`) : { engine: undefined, shadow: undefined, rulesStatPrefix: '', shadowRulesStatPrefix: '' };
  },
};
