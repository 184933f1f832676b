// The same bytes to the built binary (`pilot-agent envoy -c`, our engine) and to the installed real Envoy,
// both loading the same static bootstrap: one listener per path setting (Istio's pathNormalization mapping
// plus the other escaped-slash actions) and one with RBAC header rules and route header conditions. The
// verdicts (status, and the path the backend got) must be the same. Rows whose Envoy answer changed in a
// later Envoy than the installed one (CVE-2026-26308's per-value matching, `..;` segments; both measured
// on 1.39.3) are compared only from that version on and reported as skipped otherwise. Skips entirely
// when no Envoy is installed.
import t, { type Test } from 'tap';
import { spawn, execFileSync } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { DIST, built } from '../helpers/binary';
import { envoyMissing, envoyPath } from '../helpers/envoy';
import { echoed, rawExchange, rawRequest, startEchoBackend, type RawAnswer } from '../helpers/raw-http';
import { freePorts } from '../helpers/ports';
import { HEADER_CASES, PATH_CASES, PATH_MODE_HCM, PATH_MODES } from '../proxy/fixtures/path-header-cases';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** The version the header fix and `..;` handling were measured in; older Envoys answer the old way. */
const FIXED_IN = '1.39';

function versionAtLeast(have: string, want: string): boolean {
  const a = have.split('.').map(Number);
  const b = want.split('.').map(Number);
  for (let i = 0; i < b.length; i++) if ((a[i] ?? 0) !== b[i]) return (a[i] ?? 0) > b[i]!;
  return true;
}

const sock = (port: number) => ({ socket_address: { address: '127.0.0.1', port_value: port } });
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };

function hcm(name: string, extra: Record<string, unknown>, filters: unknown[], routes: unknown[]) {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: name,
      ...extra,
      http_filters: [...filters, ROUTER],
      route_config: { name, virtual_hosts: [{ name, domains: ['*'], routes }] },
    },
  };
}

/** The header listener: RBAC DENY `/h/<i>` when case i's matcher matches; route `/r/<i>` answers 418 on it. */
function headerListener(port: number) {
  const policies: Record<string, unknown> = {};
  const routes: unknown[] = [];
  HEADER_CASES.forEach((c, i) => {
    policies[`h${i}`] = {
      permissions: [{ and_rules: { rules: [{ url_path: { path: { exact: `/h/${i}` } } }, { header: c.matcher }] } }],
      principals: [{ any: true }],
    };
    routes.push({ match: { path: `/r/${i}`, headers: [c.matcher] }, direct_response: { status: 418 } });
  });
  // Istio's notValues: not_rule over the header rule
  policies['notv'] = {
    permissions: [
      {
        and_rules: {
          rules: [
            { url_path: { path: { exact: '/notv' } } },
            { not_rule: { or_rules: { rules: [{ header: { name: 'x-notv', string_match: { exact: 'good' } } }] } } },
          ],
        },
      },
    ],
    principals: [{ any: true }],
  };
  routes.push({ match: { prefix: '/' }, route: { cluster: 'echo' } });
  const rbac = {
    name: 'envoy.filters.http.rbac',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC', rules: { action: 'DENY', policies } },
  };
  return { name: 'headers', address: sock(port), filter_chains: [{ filters: [hcm('headers', {}, [rbac], routes)] }] };
}

/**
 * The JWT listener: jwt_authn (local JWKS) copies the `group` claim into x-group (claim_to_headers appends,
 * Envoy's addCopy) and clears the route cache; a route on `x-group: admin` answers 418.
 */
function jwtListener(port: number, jwks: string) {
  const jwt = {
    name: 'envoy.filters.http.jwt_authn',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication',
      providers: {
        p: {
          issuer: 'parity',
          local_jwks: { inline_string: jwks },
          forward: true,
          clear_route_cache: true,
          claim_to_headers: [{ header_name: 'x-group', claim_name: 'group' }],
        },
      },
      rules: [{ match: { prefix: '/' }, requires: { provider_name: 'p' } }],
    },
  };
  const routes = [
    { match: { prefix: '/', headers: [{ name: 'x-group', string_match: { exact: 'admin' } }] }, direct_response: { status: 418 } },
    { match: { prefix: '/' }, route: { cluster: 'echo' } },
  ];
  return { name: 'jwt', address: sock(port), filter_chains: [{ filters: [hcm('jwt', {}, [jwt], routes)] }] };
}

function signedToken(): { jwks: string; token: string } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' };
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const signed = `${b64({ alg: 'RS256', kid: 'k1', typ: 'JWT' })}.${b64({ iss: 'parity', sub: 's', group: 'user', exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return { jwks: JSON.stringify({ keys: [jwk] }), token: `${signed}.${sign('sha256', Buffer.from(signed), privateKey).toString('base64url')}` };
}

const JWT = signedToken();

function bootstrap(admin: number, ports: number[], echo: number) {
  const listeners: unknown[] = PATH_MODES.map((m, i) => ({
    name: m,
    address: sock(ports[i]!),
    filter_chains: [{ filters: [hcm(m, PATH_MODE_HCM[m], [], [{ match: { prefix: '/' }, route: { cluster: 'echo' } }])] }],
  }));
  listeners.push(headerListener(ports[PATH_MODES.length]!), jwtListener(ports[PATH_MODES.length + 1]!, JWT.jwks));
  return {
    node: { id: 'router~127.0.0.1~parity.mesh-system~mesh-system.svc.cluster.local', cluster: 'parity' },
    admin: { address: sock(admin) },
    static_resources: {
      listeners,
      clusters: [
        {
          name: 'echo',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: 'echo', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock(echo) } }] }] },
        },
      ],
    },
  };
}

interface Plane {
  ports: number[];
}

async function startPlane(t: Test, dir: string, name: string, cmd: string, args: string[], echo: number): Promise<Plane> {
  // all different: a port just released may be offered again, and two listeners on one address are refused
  const named = await freePorts(...Array.from({ length: PATH_MODES.length + 3 }, (_, i) => `p${i}`));
  const [admin, ...ports] = Object.values(named) as [number, ...number[]];
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(bootstrap(admin, ports, echo)));
  const child = spawn(cmd, [...args, '-c', file, '--log-level', 'error', '--disable-hot-restart'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await waitFor(
    () => `${name} not ready:\n${out}`,
    async () =>
      (
        await fetch(`http://127.0.0.1:${admin}/ready`)
          .then((r) => r.text())
          .catch(() => '')
      ).trim() === 'LIVE',
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  return { ports };
}

/** What a client can tell apart: the status, and for a forwarded request the path the backend got. */
function verdict(a: RawAnswer): string {
  const seen = echoed(a);
  if (seen) return `200 ${seen.path}`;
  return a.status === 307 ? `307 ${a.headers['location']}` : String(a.status);
}

t.test('the built binary and Envoy answer the same bytes the same way', { skip: envoyMissing() }, async (t) => {
  const envoy = envoyPath()!;
  const version = /version: [0-9a-f]+\/(\d+\.\d+\.\d+)/.exec(execFileSync(envoy, ['--version'], { encoding: 'utf8' }))?.[1] ?? '0';
  const fixed = versionAtLeast(version, FIXED_IN);
  t.comment(`Envoy ${version}${fixed ? '' : `: rows that changed in ${FIXED_IN} are skipped`}`);
  const dir = tempDir(t, 'mesh-parity-');
  const echo = await startEchoBackend(t);
  const ours = await startPlane(t, dir, 'engine', path.join(DIST, 'pilot-agent'), ['envoy'], echo);
  const theirs = await startPlane(t, dir, 'envoy', envoy, [], echo);
  const both = async (listener: number, bytes: string): Promise<[string, string]> => [
    verdict(await rawExchange(ours.ports[listener]!, bytes)),
    verdict(await rawExchange(theirs.ports[listener]!, bytes)),
  ];

  for (const c of PATH_CASES) {
    const comparable = !c.since || versionAtLeast(version, c.since);
    for (let m = 0; m < PATH_MODES.length; m++) {
      const what = `${PATH_MODES[m]} GET ${c.path}`;
      if (!comparable) {
        t.comment(`not compared: ${what} (Envoy ${version} predates ${c.since})`);
        continue;
      }
      const [a, b] = await both(m, rawRequest(c.path));
      t.equal(a, b, what);
    }
  }
  for (const extra of ['/a#frag', '../%2Fa../b', '*']) {
    const [a, b] = await both(1, rawRequest(extra));
    t.equal(a, b, `BASE GET ${extra}`);
  }

  const H = PATH_MODES.length;
  for (const [i, c] of HEADER_CASES.entries()) {
    if (c.unfixed && !fixed) {
      t.comment(`not compared: ${c.what} (Envoy ${version} predates the CVE-2026-26308 fix)`);
      continue;
    }
    const [a, b] = await both(H, rawRequest(`/h/${i}`, c.fields));
    t.equal(a.split(' ')[0], b.split(' ')[0], `RBAC: ${c.what}`);
    const [ra, rb] = await both(H, rawRequest(`/r/${i}`, c.fields));
    t.equal(ra.split(' ')[0], rb.split(' ')[0], `route: ${c.what}`);
  }
  const notv: Array<Array<readonly [string, string]>> = [
    [['x-notv', 'good']],
    [['x-notv', 'evil']],
    [],
    [
      ['x-notv', 'good'],
      ['x-notv', 'evil'],
    ],
  ];
  for (const fields of notv) {
    if (fields.length > 1 && !fixed) continue;
    const [a, b] = await both(H, rawRequest('/notv', fields));
    t.equal(a.split(' ')[0], b.split(' ')[0], `notValues: ${JSON.stringify(fields)}`);
  }

  // JWT claim headers: the verified claim is appended to what the client sent, and each value is matched
  const J = PATH_MODES.length + 1;
  const bearer = ['authorization', `Bearer ${JWT.token}`] as const;
  for (const [what, fields] of [
    ['token only', [bearer]],
    ['token and a spoofed x-group: admin', [['x-group', 'admin'], bearer]],
    ['no token', [['x-group', 'admin']]],
  ] as const) {
    const [a, b] = await both(J, rawRequest('/j', fields));
    t.equal(a.split(' ')[0], b.split(' ')[0], `jwt claim header: ${what} (${a.split(' ')[0]})`);
  }
});
