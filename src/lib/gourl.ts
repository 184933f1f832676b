// Go's net/url parser (url.Parse and url.ParseRequestURI, Go 1.24), for the checks Istio and Kubernetes make
// with it: Kubernetes' CEL `isURL()`/`url()` (k8s.io/apiserver/pkg/cel/library/urls.go: ParseRequestURI, then
// Parse) in the CRD rules, and Istio's WasmPlugin URL check. Only what decides acceptance and the parts those
// callers read (scheme, host, path, query) are kept; errors carry Go's text (`parse "x": invalid URI for request`).
import { goQuote } from './duration';

export interface GoURL {
  scheme: string;
  opaque: string;
  user?: string;
  host: string;
  path: string;
  rawQuery: string;
  fragment: string;
}

export class GoURLError extends Error {}

type Mode = 'path' | 'host' | 'zone' | 'userPassword' | 'fragment';

const isHex = (c: string): boolean => /^[0-9a-fA-F]$/.test(c);
const isAlnum = (c: string): boolean => /^[a-zA-Z0-9]$/.test(c);

/** shouldEscape for the modes parsing checks (host and zone: which ASCII bytes may appear unescaped). */
function shouldEscape(c: string, mode: Mode): boolean {
  if (isAlnum(c)) return false;
  if ((mode === 'host' || mode === 'zone') && `!$&'()*+,;=:[]<>"`.includes(c)) return false;
  if ('-_.~'.includes(c)) return false;
  if ('$&+,/:;=?@'.includes(c)) {
    if (mode === 'path') return c === '?';
    if (mode === 'userPassword') return c === '@' || c === '/' || c === '?' || c === ':';
    if (mode === 'fragment') return false;
  }
  if (mode === 'fragment' && '!()*'.includes(c)) return false;
  return true;
}

/** Go's unescape: only its verdict matters here, so the text is returned decoded the simple way. */
function unescape(s: string, mode: Mode): string {
  for (let i = 0; i < s.length;) {
    const c = s[i]!;
    if (c === '%') {
      if (i + 2 >= s.length || !isHex(s[i + 1]!) || !isHex(s[i + 2]!)) throw new GoURLError(`invalid URL escape ${goQuote(s.slice(i, i + 3))}`);
      // RFC 3986 §3.2.2: in a host, %-escapes are for non-ASCII bytes only (and %25, the RFC 6874 zone separator)
      if (mode === 'host' && parseInt(s[i + 1]!, 16) < 8 && s.slice(i, i + 3) !== '%25')
        throw new GoURLError(`invalid URL escape ${goQuote(s.slice(i, i + 3))}`);
      if (mode === 'zone') {
        const v = parseInt(s.slice(i + 1, i + 3), 16);
        if (s.slice(i, i + 3) !== '%25' && v !== 0x20 && shouldEscape(String.fromCharCode(v), 'host'))
          throw new GoURLError(`invalid URL escape ${goQuote(s.slice(i, i + 3))}`);
      }
      i += 3;
      continue;
    }
    if ((mode === 'host' || mode === 'zone') && c.charCodeAt(0) < 0x80 && shouldEscape(c, mode))
      throw new GoURLError(`invalid character ${goQuote(c)} in host name`);
    i++;
  }
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** getScheme: a leading `word:` is a scheme; a leading ':' is an error. */
function getScheme(raw: string): { scheme: string; rest: string } {
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (/[a-zA-Z]/.test(c)) continue;
    if (/[0-9+.-]/.test(c)) {
      if (i === 0) return { scheme: '', rest: raw };
      continue;
    }
    if (c === ':') {
      if (i === 0) throw new GoURLError('missing protocol scheme');
      return { scheme: raw.slice(0, i), rest: raw.slice(i + 1) };
    }
    return { scheme: '', rest: raw };
  }
  return { scheme: '', rest: raw };
}

const validOptionalPort = (p: string): boolean => p === '' || /^:[0-9]*$/.test(p);

function parseHost(host: string): string {
  if (host.startsWith('[')) {
    const i = host.lastIndexOf(']');
    if (i < 0) throw new GoURLError("missing ']' in host");
    const colonPort = host.slice(i + 1);
    if (!validOptionalPort(colonPort)) throw new GoURLError(`invalid port ${goQuote(colonPort)} after host`);
    const zone = host.slice(0, i).indexOf('%25');
    if (zone >= 0) return unescape(host.slice(0, zone), 'host') + unescape(host.slice(zone, i), 'zone') + unescape(host.slice(i), 'host');
  } else {
    const i = host.lastIndexOf(':');
    if (i >= 0) {
      const colonPort = host.slice(i);
      if (!validOptionalPort(colonPort)) throw new GoURLError(`invalid port ${goQuote(colonPort)} after host`);
    }
  }
  return unescape(host, 'host');
}

const validUserinfo = (s: string): boolean => /^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$/.test(s);

function parseAuthority(authority: string): { user?: string; host: string } {
  const i = authority.lastIndexOf('@');
  const host = parseHost(i < 0 ? authority : authority.slice(i + 1));
  if (i < 0) return { host };
  const userinfo = authority.slice(0, i);
  if (!validUserinfo(userinfo)) throw new GoURLError('net/url: invalid userinfo');
  for (const part of userinfo.split(':')) unescape(part, 'userPassword');
  return { user: userinfo, host };
}

function parse(raw: string, viaRequest: boolean): GoURL {
  if (/[\x00-\x1f\x7f]/.test(raw)) throw new GoURLError('net/url: invalid control character in URL');
  if (raw === '' && viaRequest) throw new GoURLError('empty url');
  const u: GoURL = { scheme: '', opaque: '', host: '', path: '', rawQuery: '', fragment: '' };
  if (raw === '*') return { ...u, path: '*' };
  const s = getScheme(raw);
  u.scheme = s.scheme.toLowerCase();
  let rest = s.rest;
  if (rest.endsWith('?') && rest.split('?').length === 2) rest = rest.slice(0, -1);
  else {
    const q = rest.indexOf('?');
    if (q >= 0) {
      u.rawQuery = rest.slice(q + 1);
      rest = rest.slice(0, q);
    }
  }
  if (!rest.startsWith('/')) {
    if (u.scheme !== '') return { ...u, opaque: rest }; // a rootless path (RFC 3986) is opaque
    if (viaRequest) throw new GoURLError('invalid URI for request');
    const segment = rest.split('/')[0]!;
    if (segment.includes(':')) throw new GoURLError('first path segment in URL cannot contain colon');
  }
  if ((u.scheme !== '' || (!viaRequest && !rest.startsWith('///'))) && rest.startsWith('//')) {
    let authority = rest.slice(2);
    rest = '';
    const slash = authority.indexOf('/');
    if (slash >= 0) {
      rest = authority.slice(slash);
      authority = authority.slice(0, slash);
    }
    const a = parseAuthority(authority);
    u.host = a.host;
    if (a.user !== undefined) u.user = a.user;
  }
  u.path = unescape(rest, 'path');
  return u;
}

function wrap(raw: string, f: () => GoURL): GoURL {
  try {
    return f();
  } catch (e) {
    if (e instanceof GoURLError) throw new GoURLError(`parse ${goQuote(raw)}: ${e.message}`);
    throw e;
  }
}

/** url.ParseRequestURI: an absolute URI or an absolute path, no fragment split. Throws GoURLError. */
export function parseRequestURI(raw: string): GoURL {
  return wrap(raw, () => parse(raw, true));
}

/** url.Parse: any URL reference; the fragment after '#' is split off first. Throws GoURLError. */
export function parseURL(raw: string): GoURL {
  return wrap(raw, () => {
    const hash = raw.indexOf('#');
    const u = parse(hash < 0 ? raw : raw.slice(0, hash), false);
    if (hash >= 0) u.fragment = unescape(raw.slice(hash + 1), 'fragment');
    return u;
  });
}
