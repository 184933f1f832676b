// envoy.filters.http.jwt_authn: picks the requirement (per-route config, else the first matching
// rule, else filter-state rules), verifies the request's tokens, publishes payloads as dynamic
// metadata under `envoy.filters.http.jwt_authn`, clears the route cache when a provider asks, and
// rejects with Envoy's 401/403 local replies.
import type { FilterResult, HttpFilter, HttpStream, LocalReply } from '../../filter-api';
import type { RouteRequest } from '../../../route/types';
import type { VerifyContext } from './authenticator';
import type { JwtAuthnConfig, JwtAuthnPerRoute } from './config';
import { rcDetails, Status, statusString } from '../../../../lib/jwt-verify/status';
import type { JwtAuthnStats } from './stats';
import type { Verifier } from './verifier';

export const JWT_AUTHN_FILTER = 'envoy.filters.http.jwt_authn';

// Envoy keeps the realm short
const MAX_URI_LENGTH = 256;

function isCorsPreflight(s: HttpStream): boolean {
  const r = s.request;
  return r.method === 'OPTIONS' && !!r.get('origin') && !!r.get('access-control-request-method');
}

/** The realm of www-authenticate: the request URI as the client sent it (Utility::buildOriginalUri). */
function originalUri(s: HttpStream): string {
  const r = s.request;
  let path = r.get('x-envoy-original-path') ?? r.path;
  if (path.length > MAX_URI_LENGTH) path = path.slice(0, MAX_URI_LENGTH);
  return `${r.scheme}://${r.authority}${path}`;
}

export class JwtAuthnFilter implements HttpFilter {
  constructor(
    private readonly filterName: string,
    private readonly cfg: JwtAuthnConfig,
    private readonly stats: JwtAuthnStats,
  ) {}

  private routeRequest(s: HttpStream): RouteRequest {
    return {
      headers: s.request,
      dynamicMetadata: s.dynamicMetadata,
      tlsPresented: s.connection.peerCertificatePresented,
      tlsValidated: s.connection.peerCertificateValidated,
      random: 0,
    };
  }

  private findVerifier(s: HttpStream): Verifier | undefined {
    const cfg = this.cfg;
    if (cfg.rules.length > 0) {
      const rr = this.routeRequest(s);
      for (const rule of cfg.rules) if (rule.matches(rr)) return rule.verifier;
    }
    if (cfg.filterStateName && cfg.filterStateVerifiers.size > 0) {
      const v = s.filterState.get(cfg.filterStateName);
      if (typeof v === 'string') return cfg.filterStateVerifiers.get(v);
    }
    return undefined;
  }

  decodeHeaders(s: HttpStream): FilterResult | Promise<FilterResult> {
    const cfg = this.cfg;
    if (cfg.bypassCorsPreflight && isCorsPreflight(s)) {
      this.stats.corsPreflightBypassed.inc();
      this.stats.allowed.inc();
      return undefined;
    }
    let verifier: Verifier | undefined;
    const perRoute = s.perFilterConfig<JwtAuthnPerRoute>(this.filterName);
    if (perRoute) {
      if (!perRoute.disabled) {
        verifier = cfg.requirementMap.get(perRoute.requirementName);
        if (!verifier) {
          const msg = `Wrong requirement_name: ${perRoute.requirementName}. It should be one of [${cfg.requirementNames}]`;
          this.stats.denied.inc();
          return { status: 403, ...(cfg.stripFailureResponse ? {} : { body: `Failed JWT authentication: ${msg}` }), details: rcDetails(msg) };
        }
      }
    } else verifier = this.findVerifier(s);
    if (!verifier) {
      this.stats.allowed.inc();
      return undefined;
    }
    const ctx: VerifyContext = { headers: s.request, now: Math.floor(Date.now() / 1000), extracted: undefined, clearRoute: false, done: false };
    const realm = originalUri(s);
    const r = verifier.verify(ctx);
    if (typeof r === 'number') return this.complete(s, ctx, r, realm);
    return r.then((st) => this.complete(s, ctx, st, realm));
  }

  private complete(s: HttpStream, ctx: VerifyContext, st: Status, realm: string): FilterResult {
    ctx.done = true;
    if (ctx.extracted) s.setDynamicMetadata(JWT_AUTHN_FILTER, ctx.extracted);
    if (ctx.clearRoute) s.clearRouteCache();
    if (st === Status.Ok) {
      this.stats.allowed.inc();
      return undefined;
    }
    this.stats.denied.inc();
    const message = statusString(st);
    const status = st === Status.JwtAudienceNotAllowed ? 403 : 401;
    if (this.cfg.stripFailureResponse) return { status, details: rcDetails(message) };
    const reply: LocalReply = {
      status,
      body: message,
      headers: { 'www-authenticate': `Bearer realm="${realm}"${st === Status.JwtMissed ? '' : ', error="invalid_token"'}` },
      details: rcDetails(message),
    };
    return reply;
  }
}
