// Parsing a compact JWS the way Envoy's JWT library does (Jwt::parseFromString): exactly two dots and
// three non-empty sections, base64url header/payload JSON objects, typed registered claims, and the
// time checks with clock skew. The result is parsed once per token and read by every later step.
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { Status } from './status';

export interface Jwt {
  readonly token: string;
  /** The first two sections as sent (forward_payload_header uses the payload section verbatim). */
  readonly headerB64: string;
  readonly payloadB64: string;
  /** `header.payload`: what the signature covers. */
  readonly signingInput: string;
  readonly signature: Buffer;
  readonly header: JsonObject;
  readonly payload: JsonObject;
  readonly alg: string;
  readonly kid: string;
  readonly iss: string;
  readonly sub: string;
  readonly iat: number;
  /** 0 when absent. */
  readonly nbf: number;
  /** 0 when absent (no expiry). */
  readonly exp: number;
  readonly jti: string;
  readonly audiences: readonly string[];
}

const IMPLEMENTED_ALGS = new Set([
  'ES256',
  'ES384',
  'ES512',
  'HS256',
  'HS384',
  'HS512',
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'EdDSA',
]);

/** Default clock skew of Envoy's library (seconds), used when a provider sets none. */
export const DEFAULT_CLOCK_SKEW_SECONDS = 60;

const B64URL = /^[A-Za-z0-9_-]*={0,2}$/;

/** Strict base64url decoding (Buffer.from would silently skip bad characters); undefined when invalid. */
export function decodeBase64Url(s: string): Buffer | undefined {
  if (!B64URL.test(s)) return undefined;
  const eq = s.indexOf('=');
  const body = eq >= 0 ? s.slice(0, eq) : s;
  if (body.length % 4 === 1) return undefined;
  if (eq >= 0 && s.length % 4 !== 0) return undefined;
  return Buffer.from(body, 'base64url');
}

function parseObject(b: Buffer): JsonObject | undefined {
  try {
    const v: unknown = JSON.parse(b.toString('utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

type Typed<T> = T | undefined | null; // null = wrong type

function str(o: JsonObject, k: string): Typed<string> {
  const v = o[k];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : null;
}

function seconds(o: JsonObject, k: string): Typed<number> {
  const v = o[k];
  if (v === undefined) return undefined;
  // a negative or non-finite time would turn "no exp" (0) checks around; treat it as malformed
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return null;
  return Math.trunc(v);
}

function audiencesOf(v: JsonValue | undefined): string[] | null {
  if (v === undefined) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  return null;
}

interface ParsedHeader {
  header: JsonObject;
  alg: string;
  kid: string;
}

function parseHeaderUncached(headerB64: string): ParsedHeader | Status {
  const hb = decodeBase64Url(headerB64);
  if (!hb) return Status.JwtHeaderParseErrorBadBase64;
  const header = parseObject(hb);
  if (!header) return Status.JwtHeaderParseErrorBadJson;
  const alg = str(header, 'alg');
  if (typeof alg !== 'string') return Status.JwtHeaderBadAlg;
  if (!IMPLEMENTED_ALGS.has(alg)) return Status.JwtHeaderNotImplementedAlg;
  const kid = str(header, 'kid');
  if (kid === null) return Status.JwtHeaderBadKid;
  // shared by every token with this header (and by their metadata): never to be changed
  return { header: Object.freeze(header), alg, kid: kid ?? '' };
}

// Every token of an issuer key carries the same header section; parsing it once per distinct text
// saves a decode and a JSON parse per request. Bounded: a flood of distinct headers only resets it.
const HEADER_CACHE_MAX = 256;
const headerCache = new Map<string, ParsedHeader | Status>();

function parseHeader(headerB64: string): ParsedHeader | Status {
  let h = headerCache.get(headerB64);
  if (h === undefined) {
    h = parseHeaderUncached(headerB64);
    if (headerCache.size >= HEADER_CACHE_MAX) headerCache.clear();
    headerCache.set(headerB64, h);
  }
  return h;
}

/** Parses a token; a Status other than Ok is returned for malformed input. */
export function parseJwt(token: string): Jwt | Status {
  const d1 = token.indexOf('.');
  const d2 = d1 < 0 ? -1 : token.indexOf('.', d1 + 1);
  if (d1 <= 0 || d2 < 0 || token.indexOf('.', d2 + 1) >= 0 || d2 === d1 + 1 || d2 === token.length - 1) return Status.JwtBadFormat;
  const headerB64 = token.slice(0, d1);
  const payloadB64 = token.slice(d1 + 1, d2);
  const sigB64 = token.slice(d2 + 1);

  const h = parseHeader(headerB64);
  if (typeof h === 'number') return h;
  const { header, alg, kid } = h;

  const pb = decodeBase64Url(payloadB64);
  if (!pb) return Status.JwtPayloadParseErrorBadBase64;
  const payload = parseObject(pb);
  if (!payload) return Status.JwtPayloadParseErrorBadJson;
  const iss = str(payload, 'iss');
  if (iss === null) return Status.JwtPayloadParseErrorIssNotString;
  const sub = str(payload, 'sub');
  if (sub === null) return Status.JwtPayloadParseErrorSubNotString;
  const iat = seconds(payload, 'iat');
  if (iat === null) return Status.JwtPayloadParseErrorIatNotInteger;
  const nbf = seconds(payload, 'nbf');
  if (nbf === null) return Status.JwtPayloadParseErrorNbfNotInteger;
  const exp = seconds(payload, 'exp');
  if (exp === null) return Status.JwtPayloadParseErrorExpNotInteger;
  const jti = str(payload, 'jti');
  if (jti === null) return Status.JwtPayloadParseErrorJtiNotString;
  const audiences = audiencesOf(payload['aud']);
  if (audiences === null) return Status.JwtPayloadParseErrorAudNotString;

  const signature = decodeBase64Url(sigB64);
  if (!signature) return Status.JwtSignatureParseErrorBadBase64;
  return {
    token,
    headerB64,
    payloadB64,
    signingInput: token.slice(0, d2),
    signature,
    header,
    payload,
    alg,
    kid,
    iss: iss ?? '',
    sub: sub ?? '',
    iat: iat ?? 0,
    nbf: nbf ?? 0,
    exp: exp ?? 0,
    jti: jti ?? '',
    audiences,
  };
}

/** nbf and exp against `now` (seconds) with the clock skew on both sides, as Envoy checks them. */
export function verifyTimeConstraint(jwt: Jwt, now: number, skew: number): Status {
  if (now + skew < jwt.nbf) return Status.JwtNotYetValid;
  if (jwt.exp && now > jwt.exp + skew) return Status.JwtExpired;
  return Status.Ok;
}
