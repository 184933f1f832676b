// What the router writes into the request it forwards when a route rewrites the Host, and which route's decorator
// an egress request carries when a filter (jwt_authn with clear_route_cache) made the HCM pick its route again.
// The same static bootstrap runs on our engine and, where it is installed, on the real Envoy; the expected values
// are Envoy 1.36's:
// - RouteEntryImplBase::finalizeRequestHeaders (source/common/router/config_impl.cc): header mutations, then the
//   Host (finalizeHostHeader: host_rewrite_literal, host_rewrite_header, host_rewrite_path_regex on the path as it
//   arrived), then the path; each through Http::Utility::updateAuthority (source/common/http/utility.cc), which
//   appends the old Host to x-forwarded-host only for a route with append_x_forwarded_host (and not twice in a row)
//   and keeps it in x-envoy-original-host unless the router suppresses Envoy's headers; a weighted cluster's
//   host_rewrite_literal sets the Host before the route's own finalization, as a plain set;
// - auto_host_rewrite: UpstreamRequest::onPoolReady (source/common/router/upstream_request.cc), the chosen
//   host's hostname through the same updateAuthority;
// - the decorator: since 1.36 (envoyproxy/envoy#40336, runtime guard trace_refresh_after_route_refresh on by
//   default) the connection manager refreshes its tracing when a route is picked again, so the route the router
//   forwards on names the operation (ActiveStream::refreshTracing).
import t from 'tap';
import http from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { JsonObject } from '@bufbuild/protobuf';
import * as jose from 'jose';
import { dataPlanes, envoyPath, type DataPlane } from '../helpers/envoy';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';
import { hcm, listenerJson, sock, startProxy } from './helpers';

const dir = tempDir(t, 'mesh-router-rewrite-');

const HOST = 'gw.example';

interface Seen {
  host: string;
  path: string;
  headers: http.IncomingHttpHeaders;
}

/** A backend that answers every request with what it received, as JSON. */
async function echo(t: { teardown(f: () => unknown): void }): Promise<number> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const seen: Seen = { host: req.headers.host ?? '', path: req.url ?? '', headers: req.headers };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(seen));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return (server.address() as { port: number }).port;
}

function get(
  port: number,
  p: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; seen?: Seen }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, headers: { host: HOST, ...headers }, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, seen: res.statusCode === 200 ? (JSON.parse(body) as Seen) : undefined }),
      );
    });
    req.setTimeout(10_000, () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end();
  });
}

const route = (match: JsonObject, action: JsonObject, extra: JsonObject = {}): JsonObject => ({
  match,
  route: 'weighted_clusters' in action ? action : { cluster: 'echo', ...action },
  ...extra,
});

/** Routes of the listener that rewrites hosts. */
const REWRITE_ROUTES: JsonObject[] = [
  route({ prefix: '/lit' }, { host_rewrite_literal: 'lit.example' }),
  route({ prefix: '/hdr' }, { host_rewrite_header: 'x-host' }),
  route(
    { prefix: '/rx/' },
    { prefix_rewrite: '/z/', host_rewrite_path_regex: { pattern: { regex: '^/rx/([^/]+)/.*$' }, substitution: '\\1.example' } },
  ),
  route({ prefix: '/auto-none' }, { auto_host_rewrite: true }),
  route({ prefix: '/auto' }, { cluster: 'named', auto_host_rewrite: true }),
  route({ prefix: '/xfh-only' }, { append_x_forwarded_host: true }),
  route({ prefix: '/xfh' }, { host_rewrite_literal: 'lit.example', append_x_forwarded_host: true }),
  route(
    { prefix: '/wc-route' },
    { weighted_clusters: { clusters: [{ name: 'echo', weight: 1, host_rewrite_literal: 'wc.example' }] }, host_rewrite_literal: 'route.example' },
  ),
  route({ prefix: '/wc' }, { weighted_clusters: { clusters: [{ name: 'echo', weight: 1, host_rewrite_literal: 'wc.example' }] } }),
  route({ prefix: '/ophdr' }, { host_rewrite_header: 'x-host' }, { request_headers_to_add: [{ header: { key: 'x-host', value: 'added.example' } }] }),
  route(
    { prefix: '/order' },
    { host_rewrite_literal: 'lit.example', prefix_rewrite: '/o' },
    {
      request_headers_to_add: [
        { header: { key: 'x-seen-host', value: '%REQ(:authority)%' } },
        { header: { key: 'x-seen-path', value: '%REQ(:path)%' } },
      ],
    },
  ),
  route({ prefix: '/' }, {}),
];

interface HostCase {
  name: string;
  path: string;
  headers?: Record<string, string>;
  suppress?: boolean;
  /** What the backend sees: Host, path, x-envoy-original-host, x-forwarded-host (undefined: absent). */
  host: string;
  seenPath?: string;
  originalHost: string | undefined;
  xfh?: string | undefined;
  /** x-seen-host / x-seen-path, written by request_headers_to_add from :authority and :path. */
  seenHost?: string;
  seenHostPath?: string;
}

const HOST_CASES: HostCase[] = [
  { name: 'host_rewrite_literal', path: '/lit', host: 'lit.example', originalHost: HOST },
  { name: 'host_rewrite_header', path: '/hdr', headers: { 'x-host': 'h.example' }, host: 'h.example', originalHost: HOST },
  { name: 'host_rewrite_header without the header', path: '/hdr', host: HOST, originalHost: undefined },
  { name: 'host_rewrite_header read after the route adds it', path: '/ophdr', host: 'added.example', originalHost: HOST },
  {
    name: 'header mutations see the Host and path as they arrived',
    path: '/order/x',
    host: 'lit.example',
    seenPath: '/o/x',
    originalHost: HOST,
    seenHost: HOST,
    seenHostPath: '/order/x',
  },
  {
    name: 'host_rewrite_path_regex on the path as it arrived, before prefix_rewrite',
    path: '/rx/foo/bar?q=1',
    host: 'foo.example',
    seenPath: '/z/foo/bar?q=1',
    originalHost: HOST,
  },
  { name: 'auto_host_rewrite to the endpoint hostname', path: '/auto', host: 'named.example', originalHost: HOST },
  { name: 'auto_host_rewrite, the endpoint has no hostname', path: '/auto-none', host: HOST, originalHost: undefined },
  { name: 'append_x_forwarded_host with a rewrite', path: '/xfh', host: 'lit.example', originalHost: HOST, xfh: HOST },
  {
    name: 'append_x_forwarded_host, the client sent the same host last',
    path: '/xfh',
    headers: { 'x-forwarded-host': `a.example,${HOST}` },
    host: 'lit.example',
    originalHost: HOST,
    xfh: `a.example,${HOST}`,
  },
  { name: 'append_x_forwarded_host without a rewrite', path: '/xfh-only', host: HOST, originalHost: undefined, xfh: undefined },
  { name: "a weighted cluster's host_rewrite_literal", path: '/wc', host: 'wc.example', originalHost: undefined },
  { name: "a weighted cluster's and the route's host_rewrite_literal", path: '/wc-route', host: 'route.example', originalHost: 'wc.example' },
  {
    name: 'no rewrite, the client sent x-envoy-original-host',
    path: '/plain',
    headers: { 'x-envoy-original-host': 'c.example' },
    host: HOST,
    originalHost: 'c.example',
  },
  {
    name: 'a rewrite replaces what the client sent',
    path: '/lit',
    headers: { 'x-envoy-original-host': 'c.example' },
    host: 'lit.example',
    originalHost: HOST,
  },
  { name: 'suppress_envoy_headers', path: '/lit', suppress: true, host: 'lit.example', originalHost: undefined },
  { name: 'suppress_envoy_headers, auto_host_rewrite', path: '/auto', suppress: true, host: 'named.example', originalHost: undefined },
];

const ISS = 'https://issuer.example';

/** Routes of the listener that traces as egress, behind jwt_authn (claim_to_headers, clear_route_cache). */
const DECORATED_ROUTES: JsonObject[] = [
  route({ prefix: '/dec', headers: [{ name: 'x-group', string_match: { exact: 'b' } }] }, {}, { decorator: { operation: 'op-b' } }),
  route({ prefix: '/dec' }, {}, { decorator: { operation: 'op-a' } }),
  route({ prefix: '/late', headers: [{ name: 'x-group', string_match: { exact: 'b' } }] }, {}, { decorator: { operation: 'op-late' } }),
  route({ prefix: '/keep', headers: [{ name: 'x-group', string_match: { exact: 'b' } }] }, {}),
  route({ prefix: '/keep' }, {}, { decorator: { operation: 'op-keep' } }),
  route(
    { prefix: '/quiet', headers: [{ name: 'x-group', string_match: { exact: 'b' } }] },
    {},
    { decorator: { operation: 'op-quiet', propagate: false } },
  ),
  route({ prefix: '/quiet' }, {}, { decorator: { operation: 'op-loud' } }),
];

interface DecoratorCase {
  name: string;
  path: string;
  /** Sign a token with group b (the claim the routes match once jwt_authn copied it into x-group). */
  token: boolean;
  ingress?: boolean;
  headers?: Record<string, string>;
  status: number;
  /** x-envoy-decorator-operation the backend saw (egress) or the response carried (ingress). */
  operation: string | undefined;
}

const DECORATOR_CASES: DecoratorCase[] = [
  { name: 'no token: the route matched on arrival', path: '/dec', token: false, status: 200, operation: 'op-a' },
  { name: 'the claim picks another route: its decorator', path: '/dec', token: true, status: 200, operation: 'op-b' },
  { name: 'no route on arrival, the claim picks one', path: '/late', token: true, status: 200, operation: 'op-late' },
  { name: 'the route picked again has no decorator: the first one stays', path: '/keep', token: true, status: 200, operation: 'op-keep' },
  { name: 'the route picked again does not propagate: the first one stays', path: '/quiet', token: true, status: 200, operation: 'op-loud' },
  {
    name: 'ingress: the response names the operation of the route picked again',
    path: '/dec',
    token: true,
    ingress: true,
    status: 200,
    operation: 'op-b',
  },
  {
    name: 'ingress, the caller named the operation: the route picked again does not answer with its own',
    path: '/dec',
    token: true,
    ingress: true,
    headers: { 'x-envoy-decorator-operation': 'caller-op' },
    status: 200,
    operation: undefined,
  },
  {
    name: 'ingress, the caller named the operation, no route picked again',
    path: '/dec',
    token: false,
    ingress: true,
    headers: { 'x-envoy-decorator-operation': 'caller-op' },
    status: 200,
    operation: undefined,
  },
];

async function startPlane(
  t: { teardown(f: () => unknown): void },
  plane: DataPlane,
  echoPort: number,
  jwks: string,
): Promise<{ rewrite: number; suppress: number; egress: number; ingress: number }> {
  const [rewrite, suppress, egress, ingress, admin] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  const rc = (routes: JsonObject[]): JsonObject => ({ name: 'r', virtual_hosts: [{ name: 'v', domains: ['*'], routes }] });
  const jwt: JsonObject = {
    name: 'envoy.filters.http.jwt_authn',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication',
      providers: {
        p: {
          issuer: ISS,
          local_jwks: { inline_string: jwks },
          claim_to_headers: [{ header_name: 'x-group', claim_name: 'group' }],
          clear_route_cache: true,
        },
      },
      rules: [{ match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'p' }, { allow_missing: {} }] } } }],
    },
  };
  const suppressRouter = {
    http_filters: [
      {
        name: 'envoy.filters.http.router',
        typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router', suppress_envoy_headers: true },
      },
    ],
  };
  const traced = { tracing: {} };
  const bootstrap = {
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: sock('127.0.0.1', admin) },
    static_resources: {
      listeners: [
        listenerJson('rewrite', rewrite, hcm({ routeConfig: rc(REWRITE_ROUTES) })),
        listenerJson('suppress', suppress, hcm({ routeConfig: rc(REWRITE_ROUTES), extra: suppressRouter })),
        listenerJson('egress', egress, hcm({ routeConfig: rc(DECORATED_ROUTES), httpFilters: [jwt], extra: traced }), {
          traffic_direction: 'OUTBOUND',
        }),
        listenerJson('ingress', ingress, hcm({ routeConfig: rc(DECORATED_ROUTES), httpFilters: [jwt], extra: traced }), {
          traffic_direction: 'INBOUND',
        }),
      ],
      clusters: [
        {
          name: 'echo',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: 'echo', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', echoPort) } }] }] },
        },
        {
          name: 'named',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: {
            cluster_name: 'named',
            endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', echoPort), hostname: 'named.example' } }] }],
          },
        },
      ],
    },
  };
  if (plane === 'engine') {
    const r = await startProxy(bootstrap);
    t.teardown(() => r.close());
    return { rewrite, suppress, egress, ingress };
  }
  const file = path.join(dir, `${plane}.json`);
  writeFileSync(file, JSON.stringify(bootstrap));
  const child: ChildProcess = spawn(envoyPath()!, ['-c', file, '--base-id', String(admin), '-l', 'error', '--concurrency', '1'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await waitForValue(
    `${plane} ready`,
    async () => {
      if (child.exitCode !== null) throw new Error(`${plane} exited ${child.exitCode}: ${out}`);
      return (await fetch(`http://127.0.0.1:${admin}/ready`).catch(() => undefined))?.status === 200;
    },
    { timeoutMs: 30_000, intervalMs: 20 },
  );
  return { rewrite, suppress, egress, ingress };
}

t.test('host rewrites and decorators of routes picked again, on our engine and on Envoy', async (t) => {
  const echoPort = await echo(t);
  const { publicKey, privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: 'k', alg: 'RS256' };
  const token = await new jose.SignJWT({ iss: ISS, sub: 'u', group: 'b' }).setProtectedHeader({ alg: 'RS256', kid: 'k' }).sign(privateKey);
  for (const plane of dataPlanes()) {
    await t.test(plane, async (t) => {
      const ports = await startPlane(t, plane, echoPort, JSON.stringify({ keys: [jwk] }));
      for (const c of HOST_CASES) {
        const r = await get(c.suppress ? ports.suppress : ports.rewrite, c.path, c.headers);
        t.equal(r.status, 200, `${c.name}: status`);
        t.equal(r.seen?.host, c.host, `${c.name}: Host`);
        t.equal(r.seen?.headers['x-envoy-original-host'], c.originalHost, `${c.name}: x-envoy-original-host`);
        if (c.seenPath !== undefined) t.equal(r.seen?.path, c.seenPath, `${c.name}: path`);
        if (c.seenHost !== undefined) t.equal(r.seen?.headers['x-seen-host'], c.seenHost, `${c.name}: x-seen-host`);
        if (c.seenHostPath !== undefined) t.equal(r.seen?.headers['x-seen-path'], c.seenHostPath, `${c.name}: x-seen-path`);
        if ('xfh' in c) t.equal(r.seen?.headers['x-forwarded-host'], c.xfh, `${c.name}: x-forwarded-host`);
      }
      for (const c of DECORATOR_CASES) {
        const r = await get(c.ingress ? ports.ingress : ports.egress, c.path, {
          ...c.headers,
          ...(c.token ? { authorization: `Bearer ${token}` } : {}),
        });
        t.equal(r.status, c.status, `${c.name}: status`);
        const op = c.ingress ? r.headers['x-envoy-decorator-operation'] : r.seen?.headers['x-envoy-decorator-operation'];
        t.equal(op, c.operation, `${c.name}: x-envoy-decorator-operation`);
      }
    });
  }
});
