// WasmPlugin (Istio's ValidateWasmPlugin, same messages). URLs are read as Go's net/url reads them:
// a leading `word:` is a scheme (so `localhost:5000/x` has the scheme "localhost"), and a URL with no
// scheme is retried with `http://` in front.
import { GoURLError, parseRequestURI } from '../../lib/gourl';
import type { Config } from '../types';
import { at, dot, type Report } from './report';
import { checkSelectorAndRefs } from './security';

const SCHEMES = new Set(['', 'file', 'http', 'https', 'oci']);

/** url.ParseRequestURI's verdict: the scheme, or Go's error text. */
function requestScheme(u: string): { scheme: string } | { error: string } {
  try {
    return { scheme: parseRequestURI(u).scheme };
  } catch (e) {
    if (e instanceof GoURLError) return { error: e.message };
    throw e;
  }
}

/** strictParseURL + the scheme check of validateWasmPluginURL. */
export function wasmPluginUrlError(pluginURL: string | undefined): string | undefined {
  if (!pluginURL) return 'url field needs to be set';
  let parsed = requestScheme(pluginURL);
  if ('error' in parsed) {
    const retry = requestScheme('http://' + pluginURL);
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
