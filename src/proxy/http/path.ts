// The HTTP connection manager's path handling before routing (Envoy ConnectionManagerUtility::
// maybeNormalizePath): fragments refused, escaped slashes per path_with_escaped_slashes_action, then
// normalize_path — Envoy runs Chromium's URL path canonicalizer, which is more than RFC 3986: `\` is a
// slash, `%00` fails, invalid escapes pass, kept escapes keep their case — then merge_slashes. Only the
// path part is touched; the query string is kept as it came. Checked byte for byte against Envoy 1.36.2
// and 1.39.3 (test/proxy/fixtures/path-header-cases.ts); `.;`/`..;` segments follow 1.39.

import {
  HttpConnectionManager_PathWithEscapedSlashesAction as Escaped,
  type HttpConnectionManager,
} from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';

export type EscapedSlashesAction = 'keep' | 'reject' | 'redirect' | 'forward';

export interface PathOptions {
  normalize: boolean;
  mergeSlashes: boolean;
  escapedSlashes: EscapedSlashesAction;
}

/** The path fields of an HttpConnectionManager (IMPLEMENTATION_SPECIFIC_DEFAULT is KEEP_UNCHANGED in Envoy). */
export function pathOptionsOf(proto: HttpConnectionManager): PathOptions {
  const esc = proto.pathWithEscapedSlashesAction;
  return {
    normalize: proto.normalizePath ?? false,
    mergeSlashes: proto.mergeSlashes,
    escapedSlashes:
      esc === Escaped.REJECT_REQUEST
        ? 'reject'
        : esc === Escaped.UNESCAPE_AND_REDIRECT
          ? 'redirect'
          : esc === Escaped.UNESCAPE_AND_FORWARD
            ? 'forward'
            : 'keep',
  };
}

export type PathResult = { action: 'continue' | 'redirect'; path: string } | { action: 'reject' };

// kPathCharLookup of the Chromium URL canonicalizer Envoy's normalize_path runs (url_canon_path.cc, the
// table with UNESCAPE that Envoy's snapshot and the googleurl it links carry): what each byte becomes in a path.
const PASS = 0;
const SPECIAL = 1;
const ESCAPE = 3;
const UNESCAPE = 4;
const INVALID = 9;
const CHAR_CLASS = new Uint8Array(256).fill(ESCAPE);
for (let c = 0x21; c < 0x7f; c++) CHAR_CLASS[c] = PASS;
for (const c of '"#<>?\\^`{|}%') CHAR_CLASS[c.charCodeAt(0)] = ESCAPE;
for (const c of '-_~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz') CHAR_CLASS[c.charCodeAt(0)] = UNESCAPE;
CHAR_CLASS[0x2e] = SPECIAL;
CHAR_CLASS[0] = INVALID;
const HEX = '0123456789ABCDEF';

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/** The byte of a valid `%XX` at i, or -1. */
function escapedAt(s: string, i: number): number {
  if (s.charCodeAt(i) !== 37 || i + 2 >= s.length) return -1;
  const h = hexValue(s.charCodeAt(i + 1));
  const l = hexValue(s.charCodeAt(i + 2));
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

/** Chromium IsDot: a literal dot is 1 long, `%2e` 3. */
function dotLength(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 46) return 1;
  return c === 37 && escapedAt(s, i) === 0x2e ? 3 : 0;
}

const isSlash = (c: number): boolean => c === 47 || c === 92;

/**
 * How many characters after a dot belong to it, and what the segment is (Chromium ClassifyAfterDot). Envoy
 * 1.39 also takes a segment of literal `.` or `..` followed by `;params` as that dot segment, up to the next
 * `/` (strip_dotdot_segments_with_parameters): Tomcat and Jetty read `/..;/` as `/../`, so the policy has to.
 */
function classifyAfterDot(s: string, i: number, literalDot: boolean): { kind: 'none' | 'cur' | 'up'; consumed: number } {
  if (i >= s.length) return { kind: 'cur', consumed: 0 };
  const c = s.charCodeAt(i);
  if (isSlash(c)) return { kind: 'cur', consumed: 1 };
  if (c === 59 && literalDot) return { kind: 'cur', consumed: paramsLength(s, i) };
  const second = dotLength(s, i);
  if (second) {
    const after = i + second;
    if (after >= s.length) return { kind: 'up', consumed: second };
    if (isSlash(s.charCodeAt(after))) return { kind: 'up', consumed: second + 1 };
    if (s.charCodeAt(after) === 59 && literalDot && second === 1) return { kind: 'up', consumed: second + paramsLength(s, after) };
  }
  return { kind: 'none', consumed: 0 };
}

/** `;params` from i to the next `/` (consumed with it) or the end. */
function paramsLength(s: string, i: number): number {
  const slash = s.indexOf('/', i);
  return slash < 0 ? s.length - i : slash - i + 1;
}

function pushEscaped(out: string[], byte: number): void {
  out.push('%', HEX[byte >> 4]!, HEX[byte & 15]!);
}

/**
 * Chromium CanonicalizePath as Envoy's normalize_path runs it: dot segments resolved (escaped dots too, never
 * above the root), `\` taken as `/`, escapes of unreserved characters decoded and other valid escapes kept
 * as written, characters a path may not hold escaped; undefined when it holds `%00` (Envoy answers 400).
 */
export function canonicalizePath(path: string): string | undefined {
  const out: string[] = [];
  if (!isSlash(path.charCodeAt(0))) out.push('/');
  let ok = true;
  // where in `out` a `%` not starting a valid escape went (Chromium's CheckForNestedEscapes)
  let lastInvalidPercent = -10;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c > 0xff) {
      for (const b of Buffer.from(String.fromCodePoint(path.codePointAt(i)!), 'utf8')) pushEscaped(out, b);
      if (c >= 0xd800 && c <= 0xdbff) i++;
      continue;
    }
    const cls = CHAR_CLASS[c]!;
    if (!(cls & SPECIAL)) {
      out.push(path[i]!);
      continue;
    }
    const dot = dotLength(path, i);
    if (dot) {
      if (out.length > 0 && out[out.length - 1] === '/') {
        const r = classifyAfterDot(path, i + dot, dot === 1);
        if (r.kind === 'none') out.push('.');
        else if (r.kind === 'up') backUpToPreviousSlash(out);
        i += (r.kind === 'none' ? 0 : r.consumed) + dot - 1;
      } else {
        out.push('.');
        i += dot - 1;
      }
    } else if (c === 92) {
      out.push('/');
    } else if (c === 37) {
      const v = escapedAt(path, i);
      if (v < 0) {
        lastInvalidPercent = out.length;
        out.push('%');
        continue;
      }
      const vc = CHAR_CLASS[v]!;
      if (vc === UNESCAPE) {
        out.push(String.fromCharCode(v));
        if (lastInvalidPercent >= out.length - 3) checkNestedEscape(path, i + 3, lastInvalidPercent, out);
      } else {
        out.push('%', path[i + 1]!, path[i + 2]!);
        if (vc === INVALID) ok = false;
      }
      i += 2;
    } else if (cls === INVALID) {
      pushEscaped(out, c);
      ok = false;
    } else {
      pushEscaped(out, c);
    }
  }
  return ok ? out.join('') : undefined;
}

/** Drops the last segment of `out`, which ends with `/`, stopping at the root. */
function backUpToPreviousSlash(out: string[]): void {
  let i = out.length - 1;
  if (i === 0) return;
  i--;
  while (out[i] !== '/' && i > 0) i--;
  out.length = i + 1;
}

/**
 * An unescaped character just after an invalid `%` must not make a new valid escape (`%%30%30` would read as
 * `%00` on a second pass): that `%` becomes `%25`, as Chromium's CheckForNestedEscapes does.
 */
function checkNestedEscape(path: string, next: number, pct: number, out: string[]): void {
  const length = out.length;
  const last = out[length - 1]!;
  const appendNext = pct === length - 2;
  if (appendNext) {
    if (next >= path.length || path.charCodeAt(next) >= 0x80) return;
    out.push(path[next]!);
  }
  if (hexValue(out[pct + 1]!.charCodeAt(0)) >= 0 && hexValue(out[pct + 2]!.charCodeAt(0)) >= 0) {
    if (!appendNext) out.push(out[pct + 1]!);
    out[pct + 1] = '2';
    out[pct + 2] = '5';
    out.push(last);
  } else if (appendNext) {
    out.length = length;
  }
}

/** Paths with nothing any setting would change (the common case) skip the work. */
const NEEDS_WORK = /[%\\#"<>^`{|}\u0000-\u0020\u007f-\uffff]|\/\.|\/\//;

/**
 * Envoy ConnectionManagerUtility::maybeNormalizePath: a fragment is refused whatever the settings; then
 * escaped slashes per path_with_escaped_slashes_action, normalize_path (Chromium's canonicalizer above),
 * merge_slashes. Only the part before `?` is touched. Istio's BASE / MERGE_SLASHES /
 * DECODE_AND_MERGE_SLASHES are these settings (pilot/pkg/networking/core/listener.go).
 */
export function processPath(fullPath: string, o: PathOptions): PathResult {
  if (fullPath.charCodeAt(0) === 47 && !NEEDS_WORK.test(fullPath)) return { action: 'continue', path: fullPath };
  // envoy.reloadable_features.http_reject_path_with_fragment (on in every Envoy Istio ships)
  if (fullPath.includes('#')) return { action: 'reject' };
  if (fullPath.charCodeAt(0) !== 47) return { action: 'reject' };
  const q = fullPath.indexOf('?');
  let path = q >= 0 ? fullPath.slice(0, q) : fullPath;
  const rest = q >= 0 ? fullPath.slice(q) : '';
  let action: 'continue' | 'redirect' = 'continue';
  if (o.escapedSlashes !== 'keep' && /%2f|%5c/i.test(path)) {
    if (o.escapedSlashes === 'reject') return { action: 'reject' };
    path = path.replace(/%2f/gi, '/').replace(/%5c/gi, '\\');
    if (o.escapedSlashes === 'redirect') action = 'redirect';
  }
  if (o.normalize) {
    const canonical = canonicalizePath(path);
    if (canonical === undefined) return { action: 'reject' };
    path = canonical;
  }
  if (o.mergeSlashes) path = path.replace(/\/{2,}/g, '/');
  return { action, path: path + rest };
}
