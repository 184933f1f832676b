// Where tokens are found in a request (Envoy's jwt_authn Extractor): configured headers with a value
// prefix, query parameters and cookies, or by default `Authorization: Bearer <t>` and the
// `access_token` parameter. Each location remembers which issuers named it, so a token found in one
// provider's location is not accepted for another provider's issuer.
import type { RequestHeaders } from '../../../codec/headers';

export interface ProviderLocations {
  readonly issuer: string;
  readonly fromHeaders: ReadonlyArray<{ readonly name: string; readonly valuePrefix: string }>;
  readonly fromParams: readonly string[];
  readonly fromCookies: readonly string[];
  /** Headers the filter itself writes (forward_payload_header, claim_to_headers): never trusted from the client. */
  readonly headersToSanitize: readonly string[];
}

export interface TokenLocation {
  readonly token: string;
  issuerAllowed(iss: string): boolean;
  /** forward: false — take the token out of the request. */
  remove(h: RequestHeaders): void;
}

class IssuerChecker {
  private allowAll = false;
  private readonly issuers = new Set<string>();
  add(issuer: string): void {
    if (issuer === '') this.allowAll = true;
    else this.issuers.add(issuer);
  }
  check(iss: string): boolean {
    return this.allowAll || this.issuers.has(iss);
  }
}

const enum Where {
  Header,
  Param,
  Cookie,
}

class Location implements TokenLocation {
  constructor(
    readonly token: string,
    private readonly issuers: IssuerChecker,
    private readonly where: Where,
    private readonly name: string,
  ) {}
  issuerAllowed(iss: string): boolean {
    return this.issuers.check(iss);
  }
  remove(h: RequestHeaders): void {
    if (this.where === Where.Header) h.remove(this.name);
    else if (this.where === Where.Param) removeQueryParam(h, this.name);
    // Envoy leaves cookies in place even with forward: false
  }
}

const BEARER = 'Bearer ';
const ACCESS_TOKEN = 'access_token';

interface HeaderSpec {
  header: string;
  prefix: string;
  issuers: IssuerChecker;
}

// RFC 4648 §5 alphabet plus '.': what a compact JWS is made of
const TOKEN_RUN = /[A-Za-z0-9_.-]+/g;

/** The token after a value prefix: skip to the first token character, stop at the first other one. */
export function tokenAfter(value: string, from: number): string {
  TOKEN_RUN.lastIndex = from;
  const m = TOKEN_RUN.exec(value);
  return m ? m[0] : value;
}

function decodeComponent(s: string): string {
  if (!s.includes('%') && !s.includes('+')) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** Removes every occurrence of a query parameter, keeping the others as sent. */
export function removeQueryParam(h: RequestHeaders, name: string): void {
  const path = h.path;
  const q = path.indexOf('?');
  if (q < 0) return;
  const hash = path.indexOf('#', q);
  const query = path.slice(q + 1, hash >= 0 ? hash : undefined);
  const kept = query.split('&').filter((part) => {
    if (!part) return false;
    const eq = part.indexOf('=');
    return decodeComponent(eq >= 0 ? part.slice(0, eq) : part) !== name;
  });
  h.path = path.slice(0, q) + (kept.length ? `?${kept.join('&')}` : '') + (hash >= 0 ? path.slice(hash) : '');
  h.pathChanged();
}

/** Cookie name → value (first occurrence wins, surrounding quotes dropped) for the wanted names only. */
function parseCookies(h: RequestHeaders, wanted: ReadonlyMap<string, unknown>): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of h.getAll('cookie')) {
    for (const raw of line.split(';')) {
      const part = raw.trimStart();
      const eq = part.indexOf('=');
      if (eq <= 0) continue;
      const k = part.slice(0, eq);
      if (!wanted.has(k) || out.has(k)) continue;
      let v = part.slice(eq + 1);
      if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
      out.set(k, v);
    }
  }
  return out;
}

const byKey = <T>(m: Map<string, T>): Array<[string, T]> => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

export class Extractor {
  // ordered by key like Envoy's std::map, so tokens come out in the same order
  private readonly headers: HeaderSpec[];
  private readonly params: Array<[string, IssuerChecker]>;
  private readonly cookies: Array<[string, IssuerChecker]>;
  private readonly cookieNames: Map<string, IssuerChecker>;
  private readonly sanitize: string[];

  constructor(providers: readonly ProviderLocations[]) {
    const headers = new Map<string, HeaderSpec>();
    const params = new Map<string, IssuerChecker>();
    const cookies = new Map<string, IssuerChecker>();
    const sanitize = new Set<string>();
    const addHeader = (issuer: string, name: string, prefix: string) => {
      const header = name.toLowerCase();
      const key = header + prefix;
      let spec = headers.get(key);
      if (!spec) headers.set(key, (spec = { header, prefix, issuers: new IssuerChecker() }));
      spec.issuers.add(issuer);
    };
    const add = (m: Map<string, IssuerChecker>, issuer: string, name: string) => {
      let c = m.get(name);
      if (!c) m.set(name, (c = new IssuerChecker()));
      c.add(issuer);
    };
    for (const p of providers) {
      for (const h of p.fromHeaders) addHeader(p.issuer, h.name, h.valuePrefix);
      for (const n of p.fromParams) add(params, p.issuer, n);
      for (const n of p.fromCookies) add(cookies, p.issuer, n);
      if (p.fromHeaders.length === 0 && p.fromParams.length === 0 && p.fromCookies.length === 0) {
        addHeader(p.issuer, 'authorization', BEARER);
        add(params, p.issuer, ACCESS_TOKEN);
      }
      for (const h of p.headersToSanitize) sanitize.add(h.toLowerCase());
    }
    this.headers = byKey(headers).map(([, v]) => v);
    this.params = byKey(params);
    this.cookies = byKey(cookies);
    this.cookieNames = cookies;
    this.sanitize = [...sanitize];
  }

  /** Drops client-sent copies of the headers the filter writes after a successful verification. */
  sanitizeHeaders(h: RequestHeaders): void {
    for (const name of this.sanitize) h.remove(name);
  }

  extract(h: RequestHeaders): TokenLocation[] {
    const out: TokenLocation[] = [];
    for (const spec of this.headers) {
      const values = h.getAll(spec.header);
      for (const v of values) {
        let token = v;
        if (spec.prefix) {
          const pos = v.indexOf(spec.prefix);
          if (pos < 0) continue;
          token = tokenAfter(v, pos + spec.prefix.length);
        }
        out.push(new Location(token, spec.issuers, Where.Header, spec.header));
      }
    }
    if (this.params.length > 0 && h.path.includes('?')) {
      for (const [name, issuers] of this.params) {
        const v = h.queryParam(name);
        if (v !== undefined) out.push(new Location(v, issuers, Where.Param, name));
      }
    }
    if (this.cookies.length > 0 && h.has('cookie')) {
      const found = parseCookies(h, this.cookieNames);
      for (const [name, issuers] of this.cookies) {
        const v = found.get(name);
        if (v !== undefined) out.push(new Location(v, issuers, Where.Cookie, name));
      }
    }
    return out;
  }
}
