// The Host a route rewrites, as Envoy 1.36's router writes it: RouteEntryImplBase::finalizeHostHeader
// (source/common/router/config_impl.cc) picks the new host — host_rewrite_literal, else the first value of
// host_rewrite_header, else host_rewrite_path_regex applied to the path as it arrived (before the route rewrites the
// path), an empty result meaning no rewrite — and Http::Utility::updateAuthority (source/common/http/utility.cc)
// writes it: the old Host appended to x-forwarded-host for a route with append_x_forwarded_host (not when it is
// already the last value there), kept in x-envoy-original-host unless the router suppresses Envoy's headers, then
// replaced. auto_host_rewrite goes through the same updateAuthority when an upstream host is chosen
// (UpstreamRequest::onPoolReady). Checked against the real Envoy 1.36.2 by test/proxy/router-rewrite-envoy.test.ts.
import type { RequestHeaders } from '../codec/headers';
import type { HostRewrite } from '../route/types';

const XFH = 'x-forwarded-host';
export const ORIGINAL_HOST = 'x-envoy-original-host';

/** The host a route's rewrite names for this request ('' for none); auto_host_rewrite is the router's, later. */
export function routeHostRewrite(r: HostRewrite, h: RequestHeaders): string {
  switch (r.kind) {
    case 'literal':
      return r.value;
    case 'header':
      return h.getAll(r.header)[0] ?? '';
    case 'pathRegex':
      return r.replace(h.pathOnly());
    default:
      return '';
  }
}

/** Http::Utility::updateAuthority: the Host becomes `hostname`, the old one kept where the route and router say. */
export function updateAuthority(h: RequestHeaders, hostname: string, appendXfh: boolean, keepOld: boolean): void {
  const old = h.authority;
  if (appendXfh && old) {
    // appended only when not the last value already (append_xfh_idempotent: StringUtil::splitToken drops empty
    // tokens, and a value of nothing but commas is left alone), joined by a bare comma
    const xfh = h.get(XFH);
    if (!xfh) h.set(XFH, old);
    else {
      const last = xfh
        .split(',')
        .filter((v) => v !== '')
        .at(-1);
      if (last !== undefined && last !== old) h.set(XFH, `${xfh},${old}`);
    }
  }
  if (keepOld && old) h.set(ORIGINAL_HOST, old);
  h.authority = hostname;
}
