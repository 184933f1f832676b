// WasmPlugin (Istio's ValidateWasmPlugin, same messages). URLs are read as Go's net/url reads them:
// a leading `word:` is a scheme (so `localhost:5000/x` has the scheme "localhost"), and a URL with no
// scheme is retried with `http://` in front.
import type { Config } from '../types';
import { at, dot, type Report } from './report';
import { checkSelectorAndRefs } from './security';

const SCHEMES = new Set(['', 'file', 'http', 'https', 'oci']);

/** Go's getScheme: the scheme, '' when there is none, or an error for a leading ':'. */
function goScheme(u: string): { scheme: string; rest: string } | { error: string } {
  for (let i = 0; i < u.length; i++) {
    const c = u[i]!;
    if (/[a-zA-Z]/.test(c)) continue;
    if (/[0-9+.-]/.test(c)) {
      if (i === 0) return { scheme: '', rest: u };
      continue;
    }
    if (c === ':') return i === 0 ? { error: 'missing protocol scheme' } : { scheme: u.slice(0, i).toLowerCase(), rest: u.slice(i + 1) };
    return { scheme: '', rest: u };
  }
  return { scheme: '', rest: u };
}

/** url.ParseRequestURI's verdict: the scheme, or the reason it does not parse. */
function parseRequestURI(u: string): { scheme: string } | { error: string } {
  const quoted = JSON.stringify(u);
  if (/[\x00-\x1f\x7f]/.test(u)) return { error: `parse ${quoted}: net/url: invalid control character in URL` };
  const s = goScheme(u);
  if ('error' in s) return { error: `parse ${quoted}: ${s.error}` };
  let rest = s.rest;
  const q = rest.indexOf('?');
  if (q >= 0) rest = rest.slice(0, q);
  if (!rest.startsWith('/')) {
    if (s.scheme !== '') return { scheme: s.scheme }; // opaque
    return { error: `parse ${quoted}: invalid URI for request` };
  }
  let path = rest;
  if (s.scheme !== '' && rest.startsWith('//') && !rest.startsWith('///')) {
    const slash = rest.indexOf('/', 2);
    const authority = slash < 0 ? rest.slice(2) : rest.slice(2, slash);
    path = slash < 0 ? '' : rest.slice(slash);
    const host = authority.slice(authority.lastIndexOf('@') + 1);
    const hostErr = goHostError(host);
    if (hostErr) return { error: `parse ${quoted}: ${hostErr}` };
  }
  const bad = /%(?![0-9a-fA-F]{2})/.exec(path);
  if (bad) return { error: `parse ${quoted}: invalid URL escape ${JSON.stringify(path.slice(bad.index, bad.index + 3))}` };
  return { scheme: s.scheme };
}

function goHostError(host: string): string | undefined {
  let h = host;
  let port = '';
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    if (end < 0) return 'missing \']\' in host';
    port = h.slice(end + 1);
    h = '';
  } else {
    const colon = h.lastIndexOf(':');
    if (colon >= 0) {
      port = h.slice(colon);
      h = h.slice(0, colon);
    }
  }
  if (port !== '' && !/^:[0-9]*$/.test(port)) return `invalid port ${JSON.stringify(port)} after host`;
  const badChar = /[^A-Za-z0-9\-._~!$&'()*+,;=%]/.exec(h);
  if (badChar) return `invalid character ${JSON.stringify(badChar[0])} in host name`;
  return undefined;
}

/** strictParseURL + the scheme check of validateWasmPluginURL. */
export function wasmPluginUrlError(pluginURL: string | undefined): string | undefined {
  if (!pluginURL) return 'url field needs to be set';
  let parsed = parseRequestURI(pluginURL);
  if ('error' in parsed) {
    const retry = parseRequestURI('http://' + pluginURL);
    if ('error' in retry) return `failed to parse url: ${parsed.error}`;
    parsed = retry;
  }
  if (!SCHEMES.has(parsed.scheme)) return `url contains unsupported scheme: ${parsed.scheme}`;
  return undefined;
}

export function validateWasmPlugin(c: Config<'WasmPlugin'>, r: Report): void {
  const s = c.spec;
  checkSelectorAndRefs(s, r);
  r.error('spec.url', wasmPluginUrlError(s.url));
  if (s.sha256) {
    if (s.sha256.length !== 64) r.error('spec.sha256', 'sha256 field must be 64 characters long');
    else if (!/^[a-f0-9]{64}$/.test(s.sha256)) r.error('spec.sha256', 'sha256 field must match [a-f0-9]{64} pattern');
  }
  if ((s.imagePullSecret ?? '').length > 253) r.error('spec.imagePullSecret', 'imagePullSecret field must be less than 253 characters long');
  if ((s.pluginName ?? '').length > 256) r.error('spec.pluginName', 'pluginName field must be less than 255 characters long');
  checkVmConfig(s.vmConfig, r);
  // Istio stops at the first bad selector or port.
  (s.match ?? []).some((sel, i) =>
    (sel.ports ?? []).some((p, j) => {
      const n = p.number ?? 0;
      if (n > 0 && n <= 65535) return false;
      r.error(dot(at(dot(at('spec.match', i), 'ports'), j), 'number'), `spec.Match[${i}].Ports[${j}] is out of range: ${n}`);
      return true;
    }),
  );
}

/** validateWasmPluginVMConfig: the first problem only, as Istio returns it. */
function checkVmConfig(vm: Config<'WasmPlugin'>['spec']['vmConfig'], r: Report): void {
  const seen = new Set<string>();
  for (const [i, env] of (vm?.env ?? []).entries()) {
    const p = at('spec.vmConfig.env', i);
    const name = env.name ?? '';
    let err: string | undefined;
    if (name === '') err = 'spec.vmConfig.env invalid';
    else if (name.length > 256) err = 'env.name field must be less than 255 characters long';
    else if (seen.has(name)) err = 'duplicate env';
    else if ((env.valueFrom ?? 'INLINE') !== 'INLINE' && env.value) err = 'value may only be set when valueFrom is INLINE';
    seen.add(name);
    if (err) {
      r.error(p, err);
      return;
    }
  }
}
