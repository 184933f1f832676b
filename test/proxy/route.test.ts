// Route tables as Envoy documents them (pure, no sockets): virtual host domain matching, route
// matching, first-match order, actions (rewrites, redirects, weighted clusters, direct responses),
// header mutations and the errors invalid configs produce.
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { RouteConfigurationSchema } from '../../src/gen/envoy/config/route/v3/route_pb';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { compileRouteConfiguration, selectRoute } from '../../src/proxy/route/compile';
import { pickWeighted, redirectLocation, rewritePath } from '../../src/proxy/route/action';
import { expectedTimeoutMs } from '../../src/proxy/http/router';
import { applyRequestOps, applyResponseOps } from '../../src/proxy/route/header-ops';
import type { CompiledRouteConfig, RouteRequest } from '../../src/proxy/route/types';
import { ResponseHeaders } from '../../src/proxy/codec/headers';
import { StreamInfo } from '../../src/proxy/stream-info';
import { pb } from './helpers';
import { plainConnection } from '../helpers/connection';

const noPerFilter = () => new Map();

function compile(rc: JsonObject): CompiledRouteConfig {
  return compileRouteConfiguration(pb(RouteConfigurationSchema, rc), { parsePerFilter: noPerFilter });
}

interface Req {
  authority?: string;
  path?: string;
  method?: string;
  headers?: Record<string, string | string[]>;
  metadata?: Record<string, JsonObject>;
  random?: number;
  scheme?: string;
}

function req(r: Req): RouteRequest {
  return {
    headers: new RequestHeaders(r.method ?? 'GET', r.path ?? '/', r.authority ?? 'example.com', r.scheme ?? 'http', { ...(r.headers ?? {}) }),
    dynamicMetadata: r.metadata ? new Map(Object.entries(r.metadata)) : undefined,
    tlsPresented: false,
    tlsValidated: false,
    random: r.random ?? 0.5,
  };
}

/** Name of the virtual host chosen for an authority ('' for none). */
function vhostFor(rc: CompiledRouteConfig, authority: string): string {
  return rc.findVirtualHost(authority)?.name ?? '';
}

t.test('virtual host domain matching', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      { name: 'exact', domains: ['www.example.com', 'api.example.com:8080'] },
      { name: 'suffix', domains: ['*.example.com'] },
      { name: 'longer-suffix', domains: ['*-bar.example.com'] },
      { name: 'prefix', domains: ['foo.*'] },
      { name: 'longer-prefix', domains: ['foo.bar.*'] },
      { name: 'v6', domains: ['[::1]'] },
      { name: 'default', domains: ['*'] },
    ],
  });
  const cases: Array<[string, string]> = [
    ['www.example.com', 'exact'],
    ['WWW.Example.COM', 'exact'],
    ['api.example.com:8080', 'exact'],
    ['api.example.com', 'suffix'],
    ['www.example.com:80', 'default'], // the port is part of the host unless ignored
    ['x.y.example.com', 'suffix'],
    ['baz-bar.example.com', 'longer-suffix'],
    ['-bar.example.com', 'suffix'],
    ['example.com', 'default'],
    ['foo.com', 'prefix'],
    ['foo.bar.com', 'longer-prefix'],
    ['foo.', 'default'],
    ['[::1]', 'v6'],
    ['other.org', 'default'],
  ];
  for (const [host, want] of cases) t.equal(vhostFor(rc, host), want, host);
  const ignore = compile({
    name: 'r',
    ignore_port_in_host_matching: true,
    virtual_hosts: [
      { name: 'a', domains: ['a.com'] },
      { name: 'v6', domains: ['[::1]'] },
    ],
  });
  t.equal(vhostFor(ignore, 'a.com:9090'), 'a', 'port ignored');
  t.equal(vhostFor(ignore, '[::1]:80'), 'v6', 'IPv6 literal with port');
  t.equal(vhostFor(ignore, 'b.com'), '', 'no default vhost → none');
});

t.test('route matching', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        routes: [
          { name: 'exact-path', match: { path: '/exact' }, direct_response: { status: 200 } },
          { name: 'ci-prefix', match: { prefix: '/CI/', case_sensitive: false }, direct_response: { status: 200 } },
          { name: 'regex', match: { safe_regex: { regex: '/items/[0-9]+' } }, direct_response: { status: 200 } },
          { name: 'sep', match: { path_separated_prefix: '/api' }, direct_response: { status: 200 } },
          { name: 'hdr-exact', match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { exact: 'v1' } }] }, direct_response: { status: 200 } },
          {
            name: 'hdr-prefix',
            match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { prefix: 'pre' } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-suffix',
            match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { suffix: 'fix' } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-contains',
            match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { contains: 'mid' } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-regex',
            match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { safe_regex: { regex: 'r[0-9]' } } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-ignore-case',
            match: { prefix: '/h', headers: [{ name: 'x-a', string_match: { exact: 'CASE', ignore_case: true } }] },
            direct_response: { status: 200 },
          },
          { name: 'hdr-present', match: { prefix: '/h', headers: [{ name: 'x-p', present_match: true }] }, direct_response: { status: 200 } },
          {
            name: 'hdr-range',
            match: { prefix: '/h', headers: [{ name: 'x-n', range_match: { start: 10, end: 20 } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-invert',
            match: { prefix: '/inv', headers: [{ name: 'x-b', string_match: { exact: 'no' }, invert_match: true }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-absent',
            match: { prefix: '/abs', headers: [{ name: 'x-c', present_match: true, invert_match: true }] },
            direct_response: { status: 200 },
          },
          {
            name: 'hdr-empty',
            match: { prefix: '/empty', headers: [{ name: 'x-d', string_match: { exact: '' }, treat_missing_header_as_empty: true }] },
            direct_response: { status: 200 },
          },
          {
            name: 'method',
            match: { prefix: '/m', headers: [{ name: ':method', string_match: { exact: 'POST' } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'query',
            match: { prefix: '/q', query_parameters: [{ name: 'debug', string_match: { exact: 'on' } }] },
            direct_response: { status: 200 },
          },
          {
            name: 'query-present',
            match: { prefix: '/q', query_parameters: [{ name: 'flag', present_match: true }] },
            direct_response: { status: 200 },
          },
          {
            name: 'claim',
            match: {
              prefix: '/jwt',
              dynamic_metadata: [
                {
                  filter: 'envoy.filters.http.jwt_authn',
                  path: [{ key: 'payload' }, { key: 'group' }],
                  value: { string_match: { exact: 'admins' } },
                },
              ],
            },
            direct_response: { status: 200 },
          },
          {
            name: 'claim-list',
            match: {
              prefix: '/jwt',
              dynamic_metadata: [
                {
                  filter: 'envoy.filters.http.jwt_authn',
                  path: [{ key: 'payload' }, { key: 'roles' }],
                  value: { list_match: { one_of: { string_match: { exact: 'dev' } } } },
                },
              ],
            },
            direct_response: { status: 200 },
          },
          {
            name: 'claim-not',
            match: {
              prefix: '/jwt',
              dynamic_metadata: [
                {
                  filter: 'envoy.filters.http.jwt_authn',
                  path: [{ key: 'payload' }, { key: 'iss' }],
                  value: { string_match: { exact: 'evil' } },
                  invert: true,
                },
              ],
            },
            direct_response: { status: 200 },
          },
          {
            name: 'fraction',
            match: { prefix: '/canary', runtime_fraction: { default_value: { numerator: 25, denominator: 'HUNDRED' } } },
            direct_response: { status: 200 },
          },
          { name: 'grpc', match: { prefix: '/svc', grpc: {} }, direct_response: { status: 200 } },
          { name: 'catch-all', match: { prefix: '/' }, direct_response: { status: 200 } },
        ],
      },
    ],
  });
  const cases: Array<[string, Req]> = [
    ['exact-path', { path: '/exact' }],
    ['exact-path', { path: '/exact?x=1' }],
    ['catch-all', { path: '/exact/more' }],
    ['ci-prefix', { path: '/ci/x' }],
    ['regex', { path: '/items/42' }],
    ['regex', { path: '/items/42?q=1' }],
    ['catch-all', { path: '/items/42x' }],
    ['sep', { path: '/api' }],
    ['sep', { path: '/api/v1' }],
    ['sep', { path: '/api?x' }],
    ['catch-all', { path: '/apix' }],
    ['hdr-exact', { path: '/h', headers: { 'x-a': 'v1' } }],
    ['hdr-prefix', { path: '/h', headers: { 'x-a': 'prefix-val' } }],
    ['hdr-suffix', { path: '/h', headers: { 'x-a': 'a-suffix' } }],
    ['hdr-contains', { path: '/h', headers: { 'x-a': 'xxmidxx' } }],
    ['hdr-regex', { path: '/h', headers: { 'x-a': 'r7' } }],
    ['catch-all', { path: '/h', headers: { 'x-a': 'r77' } }],
    ['hdr-ignore-case', { path: '/h', headers: { 'x-a': 'case' } }],
    ['hdr-present', { path: '/h', headers: { 'x-p': '' } }],
    ['hdr-range', { path: '/h', headers: { 'x-n': '15' } }],
    ['catch-all', { path: '/h', headers: { 'x-n': '20' } }],
    ['catch-all', { path: '/h', headers: { 'x-n': 'abc' } }],
    ['hdr-exact', { path: '/h', headers: { 'x-a': ['v1'] } }],
    // each field of a repeated header is matched on its own, as Envoy 1.39 (CVE-2026-26308; fixtures/path-header-cases.ts)
    ['hdr-exact', { path: '/h', headers: { 'x-a': ['v2', 'v1'] } }],
    ['catch-all', { path: '/h', headers: { 'x-a': ['v2', 'v3'] } }],
    ['hdr-invert', { path: '/inv', headers: { 'x-b': 'yes' } }],
    ['catch-all', { path: '/inv', headers: { 'x-b': 'no' } }],
    ['catch-all', { path: '/inv' }],
    ['hdr-absent', { path: '/abs' }],
    ['catch-all', { path: '/abs', headers: { 'x-c': 'here' } }],
    ['hdr-empty', { path: '/empty' }],
    ['method', { path: '/m', method: 'POST' }],
    ['catch-all', { path: '/m', method: 'GET' }],
    ['query', { path: '/q?debug=on' }],
    ['catch-all', { path: '/q?debug=off' }],
    ['query-present', { path: '/q?flag' }],
    ['query', { path: '/q?x=1&debug=o%6E' }],
    ['claim', { path: '/jwt', metadata: { 'envoy.filters.http.jwt_authn': { payload: { group: 'admins' } } } }],
    ['claim-list', { path: '/jwt', metadata: { 'envoy.filters.http.jwt_authn': { payload: { group: 'users', roles: ['qa', 'dev'] } } } }],
    ['claim-not', { path: '/jwt', metadata: { 'envoy.filters.http.jwt_authn': { payload: { iss: 'good' } } } }],
    ['claim-not', { path: '/jwt' }],
    ['catch-all', { path: '/jwt', metadata: { 'envoy.filters.http.jwt_authn': { payload: { iss: 'evil' } } } }],
    ['fraction', { path: '/canary', random: 0.1 }],
    ['catch-all', { path: '/canary', random: 0.3 }],
    ['grpc', { path: '/svc', headers: { 'content-type': 'application/grpc+proto' } }],
    ['catch-all', { path: '/svc', headers: { 'content-type': 'application/json' } }],
  ];
  for (const [want, r] of cases) t.equal(selectRoute(rc, req(r))?.route.name, want, `${r.path} ${JSON.stringify(r.headers ?? r.metadata ?? {})}`);
});

t.test('first match wins and a vhost without a matching route gives no route', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        routes: [
          { name: 'first', match: { prefix: '/a' }, direct_response: { status: 200 } },
          { name: 'second', match: { prefix: '/ab' }, direct_response: { status: 200 } },
        ],
      },
    ],
  });
  t.equal(selectRoute(rc, req({ path: '/abc' }))?.route.name, 'first');
  t.equal(selectRoute(rc, req({ path: '/zzz' })), undefined);
});

t.test('path rewrites', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        routes: [
          { name: 'p', match: { prefix: '/old/' }, route: { cluster: 'c', prefix_rewrite: '/new/' } },
          { name: 'exact', match: { path: '/exact' }, route: { cluster: 'c', prefix_rewrite: '/other' } },
          { name: 'ci', match: { prefix: '/ci', case_sensitive: false }, route: { cluster: 'c', prefix_rewrite: '/x' } },
          {
            name: 'rx',
            match: { prefix: '/rx/' },
            route: { cluster: 'c', regex_rewrite: { pattern: { regex: '^/rx/([^/]+)/(.*)$' }, substitution: '/\\2/\\1' } },
          },
        ],
      },
    ],
  });
  const rewrite = (path: string) => {
    const r = req({ path });
    const sel = selectRoute(rc, r)!;
    const a = sel.route.action;
    if (a.kind !== 'route') throw new Error('not a route');
    return rewritePath(a.pathRewrite, path, sel.route.prefixLength(r));
  };
  t.equal(rewrite('/old/thing?q=1'), '/new/thing?q=1');
  t.equal(rewrite('/exact?q=1'), '/other?q=1');
  t.equal(rewrite('/CI/rest'), '/x/rest');
  t.equal(rewrite('/rx/a/b/c?z'), '/b/c/a?z', 'regex with capture groups, query kept');
});

t.test('redirect locations (Envoy newUri)', async (t) => {
  const cases: Array<[string, JsonObject, Req, string]> = [
    ['https redirect drops :80', { https_redirect: true }, { authority: 'a.com:80', path: '/p?q' }, 'https://a.com/p?q'],
    ['scheme redirect keeps other ports', { scheme_redirect: 'https' }, { authority: 'a.com:8080', path: '/p' }, 'https://a.com:8080/p'],
    ['port redirect replaces the port', { port_redirect: 8443 }, { authority: 'a.com:8080', path: '/p' }, 'http://a.com:8443/p'],
    ['host redirect', { host_redirect: 'b.com' }, { authority: 'a.com', path: '/p' }, 'http://b.com/p'],
    ['path redirect keeps query', { path_redirect: '/new' }, { authority: 'a.com', path: '/old?x=1' }, 'http://a.com/new?x=1'],
    ['path redirect with its own query', { path_redirect: '/new?y=2' }, { authority: 'a.com', path: '/old?x=1' }, 'http://a.com/new?y=2'],
    ['strip query', { path_redirect: '/new', strip_query: true }, { authority: 'a.com', path: '/old?x=1' }, 'http://a.com/new'],
    // Istio sets path_redirect to the VirtualService's redirect.uri, '' when absent: Envoy then keeps the path
    [
      'empty path redirect keeps the path',
      { scheme_redirect: 'https', path_redirect: '' },
      { authority: 'a.com', path: '/p?q' },
      'https://a.com/p?q',
    ],
    ['prefix rewrite', { prefix_rewrite: '/v2/' }, { authority: 'a.com', path: '/v1/items?x' }, 'http://a.com/v2/items?x'],
    [
      'https port 443 dropped for http',
      { scheme_redirect: 'http' },
      { authority: 'a.com:443', path: '/', headers: { 'x-forwarded-proto': 'https' } },
      'http://a.com/',
    ],
  ];
  for (const [name, redirect, r, want] of cases) {
    const rc = compile({
      name: 'r',
      virtual_hosts: [
        {
          name: 'v',
          domains: ['*'],
          routes: [
            { match: { prefix: '/v1/' }, redirect },
            { match: { prefix: '/' }, redirect },
          ],
        },
      ],
    });
    const rq = req(r);
    const sel = selectRoute(rc, rq)!;
    const a = sel.route.action;
    if (a.kind !== 'redirect') throw new Error('not a redirect');
    t.equal(redirectLocation(a, rq.headers, sel.route.prefixLength(rq)), want, name);
  }
  const codes = compile({
    name: 'r',
    virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, redirect: { response_code: 'PERMANENT_REDIRECT' } }] }],
  });
  const a = selectRoute(codes, req({}))!.route.action;
  t.equal(a.kind === 'redirect' ? a.status : 0, 308);
});

t.test('require_tls redirects plain requests to https', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [{ name: 'v', domains: ['*'], require_tls: 'ALL', routes: [{ match: { prefix: '/' }, route: { cluster: 'c' } }] }],
  });
  const plain = selectRoute(rc, req({ authority: 'a.com:80', path: '/x' }))!;
  t.equal(plain.route.action.kind, 'redirect');
  const rq = req({ authority: 'a.com:80', path: '/x' });
  t.equal(plain.route.action.kind === 'redirect' ? redirectLocation(plain.route.action, rq.headers, 0) : '', 'https://a.com/x');
  t.equal(selectRoute(rc, req({ path: '/x', scheme: 'https' }))!.route.action.kind, 'route');
});

t.test('weighted clusters', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        routes: [
          {
            match: { prefix: '/' },
            route: {
              weighted_clusters: {
                clusters: [
                  { name: 'a', weight: 20 },
                  { name: 'b', weight: 80 },
                  { name: 'zero', weight: 0 },
                ],
              },
            },
          },
        ],
      },
    ],
  });
  const a = selectRoute(rc, req({}))!.route.action;
  if (a.kind !== 'route' || a.cluster.kind !== 'weighted') throw new Error('expected weighted');
  t.equal(pickWeighted(a.cluster, 0)?.name, 'a');
  t.equal(pickWeighted(a.cluster, 0.199)?.name, 'a');
  t.equal(pickWeighted(a.cluster, 0.2)?.name, 'b');
  t.equal(pickWeighted(a.cluster, 0.999)?.name, 'b');
  const counts: Record<string, number> = {};
  for (let i = 0; i < 1000; i++) {
    const n = pickWeighted(a.cluster, i / 1000)!.name;
    counts[n] = (counts[n] ?? 0) + 1;
  }
  t.same(counts, { a: 200, b: 800 }, 'uniform randoms split 20/80, weight 0 never chosen');
  t.throws(
    () =>
      compile({
        name: 'r',
        virtual_hosts: [
          {
            name: 'v',
            domains: ['*'],
            routes: [{ match: { prefix: '/' }, route: { weighted_clusters: { total_weight: 100, clusters: [{ name: 'a', weight: 20 }] } } }],
          },
        ],
      }),
    /Sum of weights in the weighted_cluster should add up to 100/,
  );
});

t.test('route actions: timeouts, retries, direct responses', async (t) => {
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        retry_policy: { retry_on: '5xx', num_retries: 4 },
        routes: [
          { name: 'default-timeout', match: { prefix: '/d' }, route: { cluster: 'c' } },
          {
            name: 'no-timeout',
            match: { prefix: '/n' },
            route: {
              cluster: 'c',
              timeout: '0s',
              retry_policy: { retry_on: 'connect-failure,retriable-status-codes', retriable_status_codes: [409], per_try_timeout: '0.25s' },
            },
          },
          { name: 'direct', match: { prefix: '/x' }, direct_response: { status: 503, body: { inline_string: 'maintenance' } } },
        ],
      },
    ],
  });
  const act = (p: string) => selectRoute(rc, req({ path: p }))!;
  const d = act('/d');
  t.equal(d.route.action.kind === 'route' && d.route.action.timeoutMs, 15000, 'Envoy default route timeout 15 s');
  t.equal(d.vhost.retry?.numRetries, 4, 'virtual host retry policy');
  const n = act('/n').route.action;
  t.equal(n.kind === 'route' && n.timeoutMs, 0, 'timeout 0 disables it');
  t.same(
    n.kind === 'route' && n.retry
      ? { on: [...n.retry.retryOn], codes: [...n.retry.retriableStatusCodes], ptt: n.retry.perTryTimeoutMs, num: n.retry.numRetries }
      : undefined,
    { on: ['connect-failure', 'retriable-status-codes'], codes: [409], ptt: 250, num: 1 },
  );
  const x = act('/x').route.action;
  t.equal(x.kind === 'direct' && x.body?.toString(), 'maintenance');
  t.throws(
    () =>
      compile({
        name: 'big',
        virtual_hosts: [
          {
            name: 'v',
            domains: ['*'],
            routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'x'.repeat(5000) } } }],
          },
        ],
      }),
    /response body size is 5000 bytes; maximum is 4096/,
  );
  // Envoy ignores retry_on values it does not know (RetryStateImpl::parseRetryOn(...).first) and keeps the rest
  const odd = compile({
    name: 'odd',
    virtual_hosts: [
      { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c', retry_policy: { retry_on: 'sometimes, 5xx' } } }] },
    ],
  });
  const oa = selectRoute(odd, req({ path: '/' }))!.route.action;
  t.same(oa.kind === 'route' ? [...(oa.retry?.retryOn ?? [])] : undefined, ['5xx'], 'an unknown retry_on value is ignored, the known ones kept');
});

t.test('invalid route configurations name the field', async (t) => {
  t.throws(
    () =>
      compile({
        name: 'dup',
        virtual_hosts: [
          { name: 'a', domains: ['x.com'] },
          { name: 'b', domains: ['X.com'] },
        ],
      }),
    /Only unique values for domains are permitted\. Duplicate entry of domain x\.com/,
  );
  t.throws(
    () =>
      compile({
        name: 'rx',
        virtual_hosts: [{ name: 'a', domains: ['*'], routes: [{ match: { safe_regex: { regex: '(unclosed' } }, route: { cluster: 'c' } }] }],
      }),
    /route_config 'rx'\.virtual_hosts\[0\]\.routes\[0\]\.match\.safe_regex: invalid regex '\(unclosed': error parsing regexp/,
  );
  t.throws(
    () =>
      compile({
        name: 'la',
        virtual_hosts: [{ name: 'a', domains: ['*'], routes: [{ match: { safe_regex: { regex: '(?=x)' } }, route: { cluster: 'c' } }] }],
      }),
    /invalid regex/,
    'lookarounds are not RE2',
  );
  t.throws(
    () =>
      compile({
        name: 'h',
        virtual_hosts: [
          {
            name: 'a',
            domains: ['*'],
            routes: [{ match: { prefix: '/' }, route: { cluster: 'c' }, request_headers_to_add: [{ header: { key: ':path', value: '/x' } }] }],
          },
        ],
      }),
    /':-prefixed' or host headers may not be modified/,
  );
  const validated = () =>
    compileRouteConfiguration(
      pb(RouteConfigurationSchema, {
        name: 'v',
        virtual_hosts: [{ name: 'a', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'missing' } }] }],
      }),
      { parsePerFilter: noPerFilter, clusterExists: () => false, isStatic: true },
    );
  t.throws(validated, /route: unknown cluster 'missing'/, 'static route configs validate clusters');
});

t.test('header mutations: append actions, removals, substitutions and precedence', async (t) => {
  const rc = compile({
    name: 'r',
    request_headers_to_add: [{ header: { key: 'x-level', value: 'config' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }],
    virtual_hosts: [
      {
        name: 'v',
        domains: ['*'],
        request_headers_to_add: [{ header: { key: 'x-level', value: 'vhost' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }],
        routes: [
          {
            match: { prefix: '/' },
            route: { cluster: 'c' },
            request_headers_to_add: [
              { header: { key: 'x-add', value: 'two' }, append_action: 'APPEND_IF_EXISTS_OR_ADD' },
              { header: { key: 'x-absent', value: 'set' }, append_action: 'ADD_IF_ABSENT' },
              { header: { key: 'x-keep', value: 'new' }, append_action: 'ADD_IF_ABSENT' },
              { header: { key: 'x-only-if', value: 'no' }, append_action: 'OVERWRITE_IF_EXISTS' },
              { header: { key: 'x-client', value: '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%' } },
              { header: { key: 'x-level', value: 'route' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
            ],
            request_headers_to_remove: ['x-secret'],
            response_headers_to_add: [{ header: { key: 'x-served-by', value: 'mesh' } }],
            response_headers_to_remove: ['x-internal'],
          },
        ],
      },
    ],
  });
  const r = req({ headers: { 'x-add': 'one', 'x-keep': 'old', 'x-secret': 's' } });
  const sel = selectRoute(rc, r)!;
  const info = new StreamInfo(plainConnection({ remoteAddress: '10.1.2.3', localPort: 80 }));
  const ctx = { info, request: r.headers };
  for (const ops of [sel.route.headerOps, sel.vhost.headerOps, sel.config.headerOps]) applyRequestOps(ops, r.headers, ctx);
  t.same(r.headers.getAll('x-add'), ['one', 'two'], 'APPEND_IF_EXISTS_OR_ADD appends');
  t.equal(r.headers.get('x-absent'), 'set');
  t.equal(r.headers.get('x-keep'), 'old', 'ADD_IF_ABSENT keeps an existing value');
  t.equal(r.headers.get('x-only-if'), undefined, 'OVERWRITE_IF_EXISTS adds nothing');
  t.equal(r.headers.get('x-client'), '10.1.2.3', 'substitution');
  t.equal(r.headers.get('x-secret'), undefined, 'removed');
  t.equal(r.headers.get('x-level'), 'config', 'by default the route config is applied last and wins');
  const resp = new ResponseHeaders(200, { 'x-internal': 'yes' });
  applyResponseOps(sel.route.headerOps, resp, ctx);
  t.equal(resp.get('x-served-by'), 'mesh');
  t.equal(resp.get('x-internal'), undefined);
});

t.test('routes with the same retry policy share one compiled policy; no upgrade_configs share one empty map', async (t) => {
  const policy = {
    retry_on: 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes',
    num_retries: 2,
    retriable_status_codes: [503],
  };
  const rc = compile({
    name: 'r',
    virtual_hosts: [
      { name: 'a', domains: ['a'], routes: [{ match: { prefix: '/' }, route: { cluster: 'a', retry_policy: policy } }] },
      { name: 'b', domains: ['b'], routes: [{ match: { prefix: '/' }, route: { cluster: 'b', retry_policy: policy } }] },
      { name: 'c', domains: ['c'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c', retry_policy: { ...policy, num_retries: 3 } } }] },
      {
        name: 'd',
        domains: ['d'],
        routes: [{ match: { prefix: '/' }, route: { cluster: 'd', retry_policy: { ...policy, retriable_status_codes: [502] } } }],
      },
      { name: 'e', domains: ['e'], routes: [{ match: { prefix: '/' }, route: { cluster: 'e', upgrade_configs: [{ upgrade_type: 'WebSocket' }] } }] },
    ],
  });
  const action = (host: string) => {
    const a = selectRoute(rc, req({ authority: host }))!.route.action;
    if (a.kind !== 'route') throw new Error(`${host}: not a forwarding route`);
    return a;
  };
  t.equal(action('a').retry, action('b').retry, 'equal policies: one object');
  t.not(action('a').retry, action('c').retry, 'another num_retries: its own');
  t.not(action('a').retry, action('d').retry, 'other status codes: its own');
  t.same([...action('a').retry!.retryOn], ['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'retriable-status-codes']);
  t.same([...action('a').retry!.retriableStatusCodes], [503]);
  t.same([...action('d').retry!.retriableStatusCodes], [502]);
  t.equal(action('c').retry!.numRetries, 3);
  t.equal(action('a').upgradeTypes, action('b').upgradeTypes, 'no upgrade_configs: the shared empty map');
  t.same([...action('e').upgradeTypes], [['websocket', true]]);
});

t.test('x-envoy-expected-rq-timeout-ms (Envoy finalTimeout): the per-try time-out when shorter or the only one', async (t) => {
  for (const [global, perTry, want] of [
    [15000, 0, 15000],
    [0, 2000, 2000], // Istio's routes have timeout 0s: a VirtualService retry's perTryTimeout is what is sent
    [300, 100, 100],
    [300, 300, 300],
    [300, 500, 300], // a per-try time-out at or beyond the route's is ignored
    [0, 0, 0], // no header
  ] as const)
    t.equal(expectedTimeoutMs(global, perTry), want, `route ${global} ms, per try ${perTry} ms`);
});
