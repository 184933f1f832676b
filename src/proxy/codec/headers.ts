// Request and response header maps. Names are lower case; several values of one header are kept as
// an array and read joined with ',' (Envoy's getAllOfHeaderAsString). Pseudo-headers of requests are
// fields so routing and filters read `:path`/`:authority` without touching the map.
import type { HeaderSource } from '../format/substitution';

export type RawHeaders = Record<string, string | string[] | undefined>;

/**
 * HTTP/2 header fields as Envoy keeps them: Node's header object joins a repeated field with ', ', which
 * would hide `x-block: yes` behind `no, yes` from per-value matching, so every name received more than once
 * (`rawHeaders`, flat name/value list) gets its values back as a list — except cookie, whose HTTP/2 crumbs
 * are one header joined with '; ' (RFC 9113 §8.2.3), as Node already did.
 */
export function withRepeatedFields(joined: RawHeaders, rawHeaders: readonly string[]): RawHeaders {
  let seen: Map<string, string[]> | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name === 'cookie' || name.charCodeAt(0) === 58) continue;
    seen ??= new Map();
    const list = seen.get(name);
    if (list) list.push(rawHeaders[i + 1]!);
    else seen.set(name, [rawHeaders[i + 1]!]);
  }
  if (!seen) return joined;
  const out: RawHeaders = { ...joined };
  for (const [name, values] of seen) if (values.length > 1) out[name] = values;
  return out;
}

export class HeaderMap implements HeaderSource {
  constructor(public h: RawHeaders = {}) {}

  get(name: string): string | undefined {
    const v = this.h[name];
    if (v === undefined) return undefined;
    return typeof v === 'string' ? v : v.join(',');
  }
  getAll(name: string): string[] {
    const v = this.h[name];
    return v === undefined ? [] : typeof v === 'string' ? [v] : v;
  }
  has(name: string): boolean {
    return this.h[name] !== undefined;
  }
  set(name: string, value: string): void {
    this.h[name] = value;
  }
  add(name: string, value: string): void {
    const v = this.h[name];
    if (v === undefined) this.h[name] = value;
    else if (typeof v === 'string') this.h[name] = [v, value];
    else v.push(value);
  }
  remove(name: string): void {
    if (this.h[name] !== undefined) delete this.h[name];
  }
}

export class RequestHeaders extends HeaderMap {
  constructor(
    public method: string,
    public path: string,
    public authority: string,
    public scheme: string,
    h: RawHeaders,
  ) {
    super(h);
  }

  override get(name: string): string | undefined {
    if (name.charCodeAt(0) === 58 /* : */) {
      switch (name) {
        case ':method':
          return this.method;
        case ':path':
          return this.path;
        case ':authority':
          return this.authority;
        case ':scheme':
          return this.scheme;
        default:
          return undefined;
      }
    }
    if (name === 'host') return this.authority;
    return super.get(name);
  }

  override has(name: string): boolean {
    return name.charCodeAt(0) === 58 || name === 'host' ? this.get(name) !== undefined : super.has(name);
  }

  override getAll(name: string): string[] {
    if (name.charCodeAt(0) !== 58 && name !== 'host') return super.getAll(name);
    const v = this.get(name);
    return v === undefined ? [] : [v];
  }

  override set(name: string, value: string): void {
    if (name.charCodeAt(0) === 58 || name === 'host') {
      this.setPseudo(name, value);
      return;
    }
    super.set(name, value);
  }

  private setPseudo(name: string, value: string): void {
    switch (name) {
      case ':method':
        this.method = value;
        break;
      case ':path':
        this.path = value;
        break;
      case 'host':
      case ':authority':
        this.authority = value;
        break;
      case ':scheme':
        this.scheme = value;
        break;
    }
  }

  /** Path without query and fragment. */
  pathOnly(): string {
    const p = this.path;
    const q = p.indexOf('?');
    const f = p.indexOf('#');
    const end = q >= 0 ? (f >= 0 ? Math.min(q, f) : q) : f;
    return end >= 0 ? p.slice(0, end) : p;
  }

  private query: Map<string, string> | undefined;
  /** First value of each query parameter, decoded (parsed on first use). */
  queryParam(name: string): string | undefined {
    if (!this.query) {
      this.query = new Map();
      const q = this.path.indexOf('?');
      if (q >= 0) {
        const f = this.path.indexOf('#', q);
        for (const part of this.path.slice(q + 1, f >= 0 ? f : undefined).split('&')) {
          if (!part) continue;
          const eq = part.indexOf('=');
          const k = safeDecode(eq >= 0 ? part.slice(0, eq) : part);
          if (!this.query.has(k)) this.query.set(k, eq >= 0 ? safeDecode(part.slice(eq + 1)) : '');
        }
      }
    }
    return this.query.get(name);
  }
  /** Forgets parsed query parameters after a path change. */
  pathChanged(): void {
    this.query = undefined;
  }
}

function safeDecode(s: string): string {
  if (!s.includes('%') && !s.includes('+')) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

export class ResponseHeaders extends HeaderMap {
  constructor(
    public status: number,
    h: RawHeaders = {},
  ) {
    super(h);
  }
  override get(name: string): string | undefined {
    if (name === ':status') return String(this.status);
    return super.get(name);
  }
}

/** Connection-specific headers that never cross a proxy (RFC 9110 §7.6.1, plus HTTP/2's ban list). */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'http2-settings']);
