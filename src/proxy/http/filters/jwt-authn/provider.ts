// One JwtProvider compiled for the request path: issuer, audience/subject/lifetime checks, where its
// tokens are found, what a verified token writes back (headers, metadata), and its key source.
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { JwtProvider } from '../../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import type { Logger } from '../../../log';
import { compileStringMatcher, type StringMatch } from '../../../matchers/string';
import { ConfigError } from '../../../common/config-error';
import { readDataSource } from '../../../common/data-source';
import { durationToMs } from '../../../common/duration';
import type { ProviderLocations } from './extractor';
import { DEFAULT_CLOCK_SKEW_SECONDS } from '../../../../lib/jwt-verify/jwt';
import { DEFAULT_JWT_CACHE_SIZE, JwtCache, VerifiedSignatures } from './jwt-cache';
import { jwksFromText } from '../../../../lib/jwt-verify/jwks';
import type { ClusterCall } from '../../../common/cluster-call';
import { LocalKeySource, RemoteKeySource, type KeySource } from './jwks-source';
import { Status, statusString } from '../../../../lib/jwt-verify/status';
import type { JwtAuthnStats } from './stats';

/** Envoy's default remote JWKS cache duration (JwksAsyncFetcher::getCacheDuration). */
export const DEFAULT_JWKS_CACHE_MS = 600_000;
export const DEFAULT_FAILED_REFETCH_MS = 1_000;
const DEFAULT_RETRY_BASE_MS = 1_000;

// Audiences compare without the URI scheme and a trailing slash (jwt_verify_lib CheckAudience).
function sanitizeAudience(aud: string): string {
  if (!aud) return aud;
  let begin = 0;
  let end = aud.length;
  if (aud.startsWith('http://')) begin = 7;
  else if (aud.startsWith('https://')) begin = 8;
  if (aud.endsWith('/')) end--;
  return aud.slice(begin, Math.max(begin, end));
}

export class AudienceChecker {
  private readonly allowed: ReadonlySet<string>;
  constructor(audiences: readonly string[]) {
    this.allowed = new Set(audiences.map(sanitizeAudience));
  }
  check(jwtAudiences: readonly string[]): boolean {
    if (this.allowed.size === 0) return true;
    for (const a of jwtAudiences) if (this.allowed.has(sanitizeAudience(a))) return true;
    return false;
  }
}

export interface ClaimToHeader {
  header: string;
  path: readonly string[];
}

export interface ProviderRuntime {
  readonly name: string;
  readonly issuer: string;
  readonly audiences: AudienceChecker;
  readonly subject: StringMatch | undefined;
  /** Seconds; Infinity with require_expiration; undefined = no limit. */
  readonly maxLifetime: number | undefined;
  readonly clockSkew: number;
  readonly forward: boolean;
  readonly forwardPayloadHeader: string;
  readonly padForwardPayloadHeader: boolean;
  readonly payloadInMetadata: string;
  readonly headerInMetadata: string;
  readonly failedStatusInMetadata: string;
  readonly spaceDelimitedClaims: readonly string[];
  readonly claimToHeaders: readonly ClaimToHeader[];
  readonly clearRouteCache: boolean;
  readonly jwtCache: JwtCache | undefined;
  readonly verifiedSignatures: VerifiedSignatures;
  readonly keys: KeySource;
  readonly locations: ProviderLocations;
}

export interface ProviderDeps {
  upstream: ClusterCall;
  stats: JwtAuthnStats;
  log: Logger;
}

/** A verified token's lifetime left (exp - now) must be below max_lifetime. */
export function lifetimeAllowed(p: ProviderRuntime, now: number, exp: number): boolean {
  if (p.maxLifetime === undefined) return true;
  if (!exp) return false;
  return exp - now < p.maxLifetime;
}

/** The payload as put into metadata: space-delimited claims (`scope: "a b"`) become lists. */
export function normalizedPayload(p: ProviderRuntime, payload: JsonObject): JsonObject {
  if (p.spaceDelimitedClaims.length === 0) return payload;
  let out: JsonObject | undefined;
  for (const claim of p.spaceDelimitedClaims) {
    const v = payload[claim];
    if (typeof v !== 'string') continue;
    const parts = v.split(' ').filter((x) => x !== '');
    if (parts.length === 0) continue;
    out ??= { ...payload };
    out[claim] = parts;
  }
  return out ?? payload;
}

function sortedJson(v: JsonValue): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedJson((v as JsonObject)[k]!)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * A claim as a header value (Envoy's addJWTClaimToHeader): strings as is, non-negative integers
 * without a fraction, other numbers like C's %f, booleans as true/false, objects and lists as
 * base64 of their JSON. undefined when the claim is missing or not usable.
 */
export function claimHeaderValue(payload: JsonObject, path: readonly string[]): string | undefined {
  let v: JsonValue | undefined = payload;
  for (const k of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    v = (v as JsonObject)[k];
    if (v === undefined) return undefined;
  }
  if (typeof v === 'string') return v || undefined;
  if (typeof v === 'number') return v >= 0 && Number.isInteger(v) && v < 2 ** 64 ? BigInt(v).toString() : v.toFixed(6);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v !== null && typeof v === 'object') return Buffer.from(sortedJson(v)).toString('base64');
  return undefined;
}

// PGV's non-strict HTTP_HEADER_NAME rule
function checkHeaderName(name: string, where: string, required: boolean): void {
  if (required && name.length === 0) throw new ConfigError(`${where}: value length must be at least 1 characters`);
  if (/[\0\r\n]/.test(name)) throw new ConfigError(`${where}: value does not match regex pattern for HTTP header names`);
}

function remoteSettings(name: string, p: JwtProvider, where: string): ConstructorParameters<typeof RemoteKeySource>[0] {
  const r = p.jwksSourceSpecifier.value as Extract<JwtProvider['jwksSourceSpecifier'], { case: 'remoteJwks' }>['value'];
  const w = `${where}.remote_jwks`;
  const hu = r.httpUri;
  if (!hu) throw new ConfigError(`${w}.http_uri: value is required`);
  let url: URL;
  try {
    url = new URL(hu.uri);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new ConfigError(`${w}.http_uri.uri: Provider '${name}' has an invalid URI: '${hu.uri}'`);
  }
  if (hu.httpUpstreamType.case !== 'cluster' || !hu.httpUpstreamType.value)
    throw new ConfigError(`${w}.http_uri.cluster: value length must be at least 1 characters`);
  if (!hu.timeout) throw new ConfigError(`${w}.http_uri.timeout: value is required`);
  const timeoutMs = durationToMs(hu.timeout)!;
  if (timeoutMs < 0) throw new ConfigError(`${w}.http_uri.timeout: value must be greater than or equal to 0s`);
  const cacheMs = r.cacheDuration ? durationToMs(r.cacheDuration)! : DEFAULT_JWKS_CACHE_MS;
  if (cacheMs <= 0) throw new ConfigError(`${w}.cache_duration: value must be greater than 0s`);
  let retry: { numRetries: number; baseMs: number; maxMs: number } | undefined;
  if (r.retryPolicy) {
    const rp = r.retryPolicy;
    const baseMs = durationToMs(rp.retryBackOff?.baseInterval) ?? DEFAULT_RETRY_BASE_MS;
    const maxMs = durationToMs(rp.retryBackOff?.maxInterval) ?? baseMs * 10;
    if (baseMs < 1) throw new ConfigError(`${w}.retry_policy.retry_back_off.base_interval: value must be greater than or equal to 1ms`);
    if (maxMs < baseMs) throw new ConfigError(`${w}.retry_policy.retry_back_off.max_interval: must be greater than or equal to the base_interval`);
    retry = { numRetries: rp.numRetries ?? 1, baseMs, maxMs };
  }
  return {
    provider: name,
    cluster: hu.httpUpstreamType.value,
    authority: url.host,
    path: `${url.pathname || '/'}${url.search}`,
    timeoutMs,
    cacheMs,
    ...(r.asyncFetch ? { asyncFetch: { failedRefetchMs: durationToMs(r.asyncFetch.failedRefetchDuration) ?? DEFAULT_FAILED_REFETCH_MS } } : {}),
    ...(retry ? { retry } : {}),
  };
}

export function compileProvider(name: string, p: JwtProvider, where: string, deps: ProviderDeps): ProviderRuntime {
  p.fromHeaders.forEach((h, i) => {
    checkHeaderName(h.name, `${where}.from_headers[${i}].name`, true);
    if (/[\0\r\n]/.test(h.valuePrefix))
      throw new ConfigError(`${where}.from_headers[${i}].value_prefix: value does not match regex pattern for HTTP header values`);
  });
  checkHeaderName(p.forwardPayloadHeader, `${where}.forward_payload_header`, false);
  const claimToHeaders = p.claimToHeaders.map((c, i) => {
    checkHeaderName(c.headerName, `${where}.claim_to_headers[${i}].header_name`, true);
    if (!c.claimName) throw new ConfigError(`${where}.claim_to_headers[${i}].claim_name: value length must be at least 1 characters`);
    return { header: c.headerName.toLowerCase(), path: c.claimName.split('.') };
  });

  let keys: KeySource;
  const src = p.jwksSourceSpecifier;
  if (src.case === 'localJwks') {
    const text = readDataSource(src.value, `${where}.local_jwks`)?.toString('utf8') ?? '';
    let jwks;
    if (text !== '') {
      jwks = jwksFromText(text);
      // Envoy refuses the whole filter config (filter_factory.cc validateJwtConfig), so the listener is NACKed:
      // the daemon never sends such a key set (src/security/jwks/resolver.ts puts a placeholder in its place)
      if (jwks.status !== Status.Ok)
        throw new ConfigError(`${where}.local_jwks: Provider '${name}' in jwt_authn config has invalid local jwks: ${statusString(jwks.status)}`);
    }
    keys = new LocalKeySource(jwks);
  } else if (src.case === 'remoteJwks') {
    keys = new RemoteKeySource(remoteSettings(name, p, where), deps.upstream, deps.stats, deps.log);
  } else {
    throw new ConfigError(`${where}: provider '${name}' needs a key source: jwks_source_specifier (local_jwks or remote_jwks) is required`);
  }

  let maxLifetime: number | undefined;
  if (p.requireExpiration) maxLifetime = Number.POSITIVE_INFINITY;
  if (p.maxLifetime) maxLifetime = Number(p.maxLifetime.seconds) + p.maxLifetime.nanos / 1e9;

  const headersToSanitize = [...(p.forwardPayloadHeader ? [p.forwardPayloadHeader] : []), ...claimToHeaders.map((c) => c.header)];
  return {
    name,
    issuer: p.issuer,
    audiences: new AudienceChecker(p.audiences),
    subject: p.subjects ? compileStringMatcher(p.subjects, `${where}.subjects`) : undefined,
    maxLifetime,
    clockSkew: p.clockSkewSeconds > 0 ? p.clockSkewSeconds : DEFAULT_CLOCK_SKEW_SECONDS,
    forward: p.forward,
    forwardPayloadHeader: p.forwardPayloadHeader.toLowerCase(),
    padForwardPayloadHeader: p.padForwardPayloadHeader,
    payloadInMetadata: p.payloadInMetadata,
    headerInMetadata: p.headerInMetadata,
    failedStatusInMetadata: p.failedStatusInMetadata,
    spaceDelimitedClaims: p.normalizePayloadInMetadata?.spaceDelimitedClaims ?? [],
    claimToHeaders,
    clearRouteCache: p.clearRouteCache,
    jwtCache: p.jwtCacheConfig ? new JwtCache(p.jwtCacheConfig.jwtCacheSize || DEFAULT_JWT_CACHE_SIZE) : undefined,
    verifiedSignatures: new VerifiedSignatures(),
    keys,
    locations: {
      issuer: p.issuer,
      fromHeaders: p.fromHeaders.map((h) => ({ name: h.name, valuePrefix: h.valuePrefix })),
      fromParams: p.fromParams,
      fromCookies: p.fromCookies,
      headersToSanitize,
    },
  };
}
