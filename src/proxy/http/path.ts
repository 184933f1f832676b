// The HTTP connection manager's path handling before routing (Envoy ConnectionManagerUtility::
// maybeNormalizePath): escaped slashes per path_with_escaped_slashes_action, then RFC 3986 normalisation
// (percent-encoding case, decoding of unreserved characters, dot segments), then merge_slashes. Only
// the path part is touched; the query string is kept as it came.

export type EscapedSlashesAction = 'keep' | 'reject' | 'redirect' | 'forward';

export interface PathOptions {
  normalize: boolean;
  mergeSlashes: boolean;
  escapedSlashes: EscapedSlashesAction;
}

export type PathResult = { action: 'continue' | 'redirect'; path: string } | { action: 'reject' };

const UNRESERVED = /[A-Za-z0-9\-._~]/;

function splitQuery(p: string): [string, string] {
  const q = p.search(/[?#]/);
  return q >= 0 ? [p.slice(0, q), p.slice(q)] : [p, ''];
}

/** Percent-encoding to upper case, unreserved characters decoded; undefined for a malformed escape. */
function normalizeEncoding(p: string): string | undefined {
  if (!p.includes('%')) return p;
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c !== '%') {
      out += c;
      continue;
    }
    const hex = p.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
    const ch = String.fromCharCode(parseInt(hex, 16));
    out += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    i += 2;
  }
  return out;
}

/** RFC 3986 §5.2.4 remove_dot_segments. */
export function removeDotSegments(path: string): string {
  const input = path.split('/');
  const out: string[] = [];
  for (let i = 0; i < input.length; i++) {
    const seg = input[i]!;
    if (seg === '.') {
      if (i === input.length - 1) out.push('');
      continue;
    }
    if (seg === '..') {
      if (out.length > 1) out.pop();
      if (i === input.length - 1) out.push('');
      continue;
    }
    out.push(seg);
  }
  let r = out.join('/');
  if (!r.startsWith('/')) r = `/${r}`;
  return r;
}

/** Paths with nothing to normalise (the common case) skip the work. */
const NEEDS_WORK = /%|\/\.|\/\/|\\/;

export function processPath(fullPath: string, o: PathOptions): PathResult {
  if (fullPath.charCodeAt(0) === 47 && !NEEDS_WORK.test(fullPath)) return { action: 'continue', path: fullPath };
  let [path, rest] = splitQuery(fullPath);
  let action: 'continue' | 'redirect' = 'continue';
  if (o.escapedSlashes !== 'keep' && /%2f|%5c/i.test(path)) {
    if (o.escapedSlashes === 'reject') return { action: 'reject' };
    path = path.replace(/%2f/gi, '/').replace(/%5c/gi, '\\');
    if (o.escapedSlashes === 'redirect') action = 'redirect';
  }
  if (o.normalize) {
    if (!path.startsWith('/')) return { action: 'reject' };
    const enc = normalizeEncoding(path);
    if (enc === undefined) return { action: 'reject' };
    path = removeDotSegments(enc);
  }
  if (o.mergeSlashes) path = path.replace(/\/{2,}/g, '/');
  return { action, path: path + rest };
}
