// Verifying the tokens one requirement found (Envoy's jwt_authn Authenticator). In provider mode the
// tokens are checked against that provider; in allow-missing / allow-failed mode the provider is found
// by the token's issuer. Every token must pass unless failures or absence are allowed. Synchronous
// unless a remote key set has to be fetched first.
import type { JsonObject } from '@bufbuild/protobuf';
import type { RequestHeaders } from '../../../codec/headers';
import type { TokenLocation } from './extractor';
import { parseJwt, verifyTimeConstraint, type Jwt } from '../../../../lib/jwt-verify/jwt';
import type { Jwks } from '../../../../lib/jwt-verify/jwks';
import { claimHeaderValue, lifetimeAllowed, normalizedPayload, type AudienceChecker, type ProviderRuntime } from './provider';
import { Status, statusString } from '../../../../lib/jwt-verify/status';
import type { JwtAuthnStats } from './stats';
import { verifySignature } from '../../../../lib/jwt-verify/verify';

export type Outcome = Status | Promise<Status>;

/** One request's verification state, shared by every requirement node. */
export interface VerifyContext {
  readonly headers: RequestHeaders;
  /** Unix seconds, read once per request. */
  readonly now: number;
  /** Metadata entries to publish under envoy.filters.http.jwt_authn (payload_in_metadata…). */
  extracted: JsonObject | undefined;
  /** A verified provider asked for the route to be re-selected. */
  clearRoute: boolean;
  /** The result was delivered: late async work must leave the request alone. */
  done: boolean;
}

export interface ProviderSet {
  readonly byName: ReadonlyMap<string, ProviderRuntime>;
  /** First provider with this issuer, else the first without an issuer. */
  byIssuer(iss: string): ProviderRuntime | undefined;
  /** The provider when there is exactly one (failed_status_in_metadata without a match). */
  readonly single: ProviderRuntime | undefined;
}

export interface AuthenticatorSpec {
  /** Provider mode; undefined = find the provider by issuer. */
  readonly provider: ProviderRuntime | undefined;
  /** provider_and_audiences: replaces the provider's audiences. */
  readonly audiences: AudienceChecker | undefined;
  readonly allowFailed: boolean;
  readonly allowMissing: boolean;
  readonly providers: ProviderSet;
  readonly stats: JwtAuthnStats;
}

/** Per-request run of one requirement node's authenticator. */
class Run {
  private current: ProviderRuntime | undefined;
  private clearRoute = false;

  constructor(
    private readonly spec: AuthenticatorSpec,
    private readonly tokens: TokenLocation[],
    private readonly ctx: VerifyContext,
  ) {}

  start(): Outcome {
    if (this.tokens.length === 0) return this.done(Status.JwtMissed)!;
    return this.loop();
  }

  private loop(): Outcome {
    for (;;) {
      const loc = this.tokens.pop()!;
      const r = this.verifyToken(loc);
      if (typeof r !== 'number') return r.then((s) => (this.ctx.done ? s : (this.done(s) ?? this.loop())));
      const f = this.done(r);
      if (f !== undefined) return f;
    }
  }

  private setExtracted(name: string, value: JsonObject): void {
    (this.ctx.extracted ??= {})[name] = value;
  }

  /** Final status, or undefined when the next token is to be checked. */
  private done(s: Status): Status | undefined {
    if (s !== Status.Ok) {
      const name = (this.current ?? this.spec.providers.single)?.failedStatusInMetadata;
      if (name) this.setExtracted(name, { code: s, message: statusString(s) });
    }
    const { allowFailed, allowMissing } = this.spec;
    if ((s !== Status.Ok && !allowFailed && !allowMissing) || this.tokens.length === 0) {
      this.tokens.length = 0;
      if (this.clearRoute) this.ctx.clearRoute = true;
      if (allowFailed) return Status.Ok;
      if (allowMissing && s === Status.JwtMissed) return Status.Ok;
      return s;
    }
    return undefined;
  }

  private verifyToken(loc: TokenLocation): Outcome {
    const { spec, ctx } = this;
    let provider = spec.provider;
    let jwt: Jwt | undefined;
    let cached = false;
    if (provider) {
      this.current = provider;
      jwt = provider.jwtCache?.lookup(loc.token, ctx.now);
      if (jwt) {
        spec.stats.jwtCacheHit.inc();
        cached = true;
      } else spec.stats.jwtCacheMiss.inc();
    }
    if (!jwt) {
      const parsed = parseJwt(loc.token);
      if (typeof parsed === 'number') return parsed;
      jwt = parsed;
    }
    if (!loc.issuerAllowed(jwt.iss)) return Status.JwtUnknownIssuer;
    if (!provider) {
      provider = spec.providers.byIssuer(jwt.iss);
      this.current = provider;
      if (!provider) return Status.JwtUnknownIssuer;
    }
    if (provider.subject && !provider.subject(jwt.sub)) return Status.JwtVerificationFail;
    const t = verifyTimeConstraint(jwt, ctx.now, provider.clockSkew);
    if (t !== Status.Ok) return t;
    if (!lifetimeAllowed(provider, ctx.now, jwt.exp)) return Status.JwtExpired;
    if (!(spec.audiences ?? provider.audiences).check(jwt.audiences)) return Status.JwtAudienceNotAllowed;
    if (cached) return this.good(provider, jwt, loc, true);

    const keys = provider.keys.current();
    if (keys) return this.verifyKey(provider, jwt, loc, keys);
    if (!provider.keys.remote) return Status.JwksNoValidKeys;
    const p = provider;
    const j = jwt;
    return p.keys.fetch().then((fetched) => {
      if (!fetched) return Status.JwksFetchFail;
      if (ctx.done) return Status.Ok;
      return this.verifyKey(p, j, loc, fetched);
    });
  }

  private verifyKey(p: ProviderRuntime, jwt: Jwt, loc: TokenLocation, keys: Jwks): Status {
    if (p.verifiedSignatures.has(jwt.token, keys)) return this.good(p, jwt, loc, false);
    const s = verifySignature(jwt, keys);
    if (s !== Status.Ok) return s;
    p.verifiedSignatures.add(jwt.token, keys);
    return this.good(p, jwt, loc, false);
  }

  /** A verified token: forward payload and claims, strip the token, publish metadata. */
  private good(p: ProviderRuntime, jwt: Jwt, loc: TokenLocation, cached: boolean): Status {
    const h = this.ctx.headers;
    if (p.forwardPayloadHeader) {
      let v = jwt.payloadB64;
      if (p.padForwardPayloadHeader && v.length % 4 !== 0) v += '='.repeat(4 - (v.length % 4));
      h.add(p.forwardPayloadHeader, v);
    }
    let headerAdded = false;
    for (const c of p.claimToHeaders) {
      const v = claimHeaderValue(jwt.payload, c.path);
      if (v !== undefined) {
        h.add(c.header, v);
        headerAdded = true;
      }
    }
    if (p.clearRouteCache && (headerAdded || p.payloadInMetadata)) this.clearRoute = true;
    if (!p.forward) loc.remove(h);
    if (p.headerInMetadata) this.setExtracted(p.headerInMetadata, jwt.header);
    if (p.payloadInMetadata) this.setExtracted(p.payloadInMetadata, normalizedPayload(p, jwt.payload));
    if (this.spec.provider && !cached) p.jwtCache?.insert(jwt);
    return Status.Ok;
  }
}

export function authenticate(spec: AuthenticatorSpec, tokens: TokenLocation[], ctx: VerifyContext): Outcome {
  return new Run(spec, tokens, ctx).start();
}
