// The Host a route rewrites (src/proxy/http/authority.ts) as tables: which host each rewrite names
// (RouteEntryImplBase::finalizeHostHeader, Envoy 1.36 config_impl.cc) and what Http::Utility::updateAuthority
// (utility.cc) leaves in Host, x-forwarded-host and x-envoy-original-host. The same behaviour through real sockets,
// beside the real Envoy, is test/proxy/router-rewrite-envoy.test.ts.
import t from 'tap';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { routeHostRewrite, updateAuthority } from '../../src/proxy/http/authority';
import { globalReplacer } from '../../src/lib/re2';
import type { HostRewrite } from '../../src/proxy/route/types';

const req = (path: string, authority: string, h: Record<string, string | string[]> = {}) =>
  new RequestHeaders('GET', path, authority, 'http', { ...h });

t.test('the host a route rewrite names', async (t) => {
  const rx: HostRewrite = { kind: 'pathRegex', replace: globalReplacer('^/rx/([^/]+)/.*$', '\\1.example') };
  const cases: Array<[string, HostRewrite, RequestHeaders, string]> = [
    ['none', { kind: 'none' }, req('/', 'a'), ''],
    ['auto (the router picks it with the host)', { kind: 'auto' }, req('/', 'a'), ''],
    ['literal', { kind: 'literal', value: 'lit.example' }, req('/', 'a'), 'lit.example'],
    ['header', { kind: 'header', header: 'x-host' }, req('/', 'a', { 'x-host': 'h.example' }), 'h.example'],
    ['header: its first value', { kind: 'header', header: 'x-host' }, req('/', 'a', { 'x-host': ['one.example', 'two.example'] }), 'one.example'],
    ['header absent', { kind: 'header', header: 'x-host' }, req('/', 'a'), ''],
    ['header empty', { kind: 'header', header: 'x-host' }, req('/', 'a', { 'x-host': '' }), ''],
    ['path regex on the path without its query', rx, req('/rx/foo/bar?q=/rx/x/', 'a'), 'foo.example'],
    // RE2::GlobalReplace leaves a path it does not match as it is, and Envoy takes that as the host
    ['path regex that does not match', rx, req('/other', 'a'), '/other'],
  ];
  for (const [name, r, h, want] of cases) t.equal(routeHostRewrite(r, h), want, name);
});

t.test('updateAuthority: Host, x-forwarded-host, x-envoy-original-host', async (t) => {
  interface Case {
    name: string;
    authority: string;
    xfh?: string;
    appendXfh: boolean;
    keepOld: boolean;
    host: string;
    wantXfh: string | undefined;
    wantOriginal: string | undefined;
  }
  const cases: Case[] = [
    { name: 'rewrite', authority: 'gw', appendXfh: false, keepOld: true, host: 'new', wantXfh: undefined, wantOriginal: 'gw' },
    { name: 'suppressed Envoy headers', authority: 'gw', appendXfh: false, keepOld: false, host: 'new', wantXfh: undefined, wantOriginal: undefined },
    { name: 'x-forwarded-host started', authority: 'gw', appendXfh: true, keepOld: true, host: 'new', wantXfh: 'gw', wantOriginal: 'gw' },
    {
      name: 'x-forwarded-host appended, bare comma',
      authority: 'gw',
      xfh: 'a',
      appendXfh: true,
      keepOld: true,
      host: 'new',
      wantXfh: 'a,gw',
      wantOriginal: 'gw',
    },
    {
      name: 'x-forwarded-host already ends with the host',
      authority: 'gw',
      xfh: 'a,gw',
      appendXfh: true,
      keepOld: true,
      host: 'new',
      wantXfh: 'a,gw',
      wantOriginal: 'gw',
    },
    {
      name: 'empty tokens do not count',
      authority: 'gw',
      xfh: 'gw,',
      appendXfh: true,
      keepOld: true,
      host: 'new',
      wantXfh: 'gw,',
      wantOriginal: 'gw',
    },
    {
      name: 'tokens are not trimmed',
      authority: 'gw',
      xfh: 'a, gw',
      appendXfh: true,
      keepOld: true,
      host: 'new',
      wantXfh: 'a, gw,gw',
      wantOriginal: 'gw',
    },
    { name: 'nothing but commas', authority: 'gw', xfh: ',', appendXfh: true, keepOld: true, host: 'new', wantXfh: ',', wantOriginal: 'gw' },
    { name: 'no Host to keep', authority: '', appendXfh: true, keepOld: true, host: 'new', wantXfh: undefined, wantOriginal: undefined },
  ];
  for (const c of cases) {
    const h = req('/', c.authority, c.xfh === undefined ? {} : { 'x-forwarded-host': c.xfh });
    updateAuthority(h, c.host, c.appendXfh, c.keepOld);
    t.same([h.authority, h.get('x-forwarded-host'), h.get('x-envoy-original-host')], [c.host, c.wantXfh, c.wantOriginal], c.name);
  }
});
