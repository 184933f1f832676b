// Doc 1 §7 as real processes: the built pilot-discovery (--configDir) fetching keys from a live JWKS server,
// the built `pilot-agent proxy router` with its proxy engine, and a workload behind a ServiceEntry. Every row
// of the table is a request with a real signed token (or none) at the gateway's listener; plus a key
// rotation picked up after the refresh interval, and a key server that is down rejecting every token. Each
// scenario runs with our engine and with the real Envoy as the gateway's data plane (same table, no NACK).
import t, { type Test } from 'tap';
import { built } from '../helpers/binary';
import { summarize } from '../helpers/agent';
import { type RunningDaemon } from '../helpers/daemon';
import { startGateway, type Reply } from '../helpers/gateway';
import { DATA_PLANES, dataPlaneMissing, nacks, type DataPlane } from '../helpers/envoy';
// @ts-expect-error the demo's issuer is plain JavaScript
import { startIssuer } from '../../examples/claim-routing/issuer.mjs';
import { waitFor } from '../helpers/wait';
import { gatewayDoc, serviceEntryDoc } from '../helpers/mesh-yaml';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

interface Issuer {
  issuer: string;
  jwksUri: string;
  mint(claims?: Record<string, unknown>, o?: { issuer?: string; exp?: number; nbf?: number }): Promise<string>;
  mintBadSignature(claims?: Record<string, unknown>): Promise<string>;
  rotate(): Promise<void>;
  setUp(v: boolean): void;
  close(): Promise<void>;
}

function config(o: { gwPort: number; backendPort: number; jwksUri: string; issuer: string }): string {
  const claimRoute = (name: string, prefix: string, header: string, value: string) => `  - name: ${name}
    match:
    - uri: {prefix: ${prefix}}
      headers:
        "${header}": {exact: "${value}"}
    route: [{destination: {host: workload.demo.svc.cluster.local, port: {number: 8000}}}]
`;
  return `${gatewayDoc(o.gwPort, { name: 'gateway' })}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: claims, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [mesh-system/gateway]
  http:
${claimRoute('list-claim', '/headers', '@request.auth.claims.groups', 'group1')}${claimRoute('string-claim', '/team', '@request.auth.claims.team', 'payments')}${claimRoute('nested-dot', '/nested-dot', '@request.auth.claims.org.unit', 'eng')}${claimRoute('nested-brackets', '/nested-brackets', '@Request.Auth.Claims[org][unit]', 'eng')}${claimRoute('dotted-name', '/dotted', '@request.auth.claims[example.com/role]', 'admin')}  - name: token-required
    match: [{uri: {prefix: /secure}}]
    route: [{destination: {host: workload.demo.svc.cluster.local, port: {number: 8000}}}]
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: issuer, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules:
  - issuer: ${o.issuer}
    jwksUri: ${o.jwksUri}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: token-required, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - from: [{source: {notRequestPrincipals: ["*"]}}]
    to: [{operation: {paths: ["/secure", "/secure/*"]}}]
---
${serviceEntryDoc('workload', { port: 8000, targetPort: o.backendPort })}`;
}

interface Rig {
  get: (p: string, token?: string) => Promise<Reply>;
  daemon: RunningDaemon;
  agentOut: () => string;
  /** Signs of a rejected config (none expected on either data plane). */
  nacks: () => Promise<string[]>;
}

async function rig(t: Test, issuer: Issuer, dataPlane: DataPlane, env: NodeJS.ProcessEnv = {}): Promise<Rig> {
  const gw = await startGateway(t, {
    config: (p) => config({ gwPort: p.gw, backendPort: p.backend, jwksUri: issuer.jwksUri, issuer: issuer.issuer }),
    daemonEnv: env,
    dataPlane,
  });
  return {
    get: (p, token) => gw.get(p, token ? { authorization: `Bearer ${token}` } : {}),
    daemon: gw.daemon,
    agentOut: gw.agentOut,
    nacks: () => nacks(gw.daemon, gw.agentOut()),
  };
}

const now = () => Math.floor(Date.now() / 1000);

for (const plane of DATA_PLANES) {
  t.test(`doc 1 §7: claim routing at the ingress gateway (${plane})`, { skip: dataPlaneMissing(plane) }, async (t) => {
    const issuer: Issuer = await startIssuer({ port: 0 });
    t.teardown(() => issuer.close());
    const r = await rig(t, issuer, plane, { PILOT_JWT_PUB_KEY_REFRESH_INTERVAL: '1s' });
    const valid = await issuer.mint({ groups: ['group1', 'group7'], team: 'payments', org: { unit: 'eng' }, 'example.com/role': 'admin' });

    // The gateway's first config may predate the daemon's first key fetch: wait until a valid token routes.
    await waitFor(
      () => `a valid token never routed:\n${summarize(r.agentOut())}`,
      async () => (await r.get('/headers', valid)).status === 200,
      { timeoutMs: 30_000, intervalMs: 50 },
    );

    t.test('no token, claim route configured → 404', async (t) => {
      t.equal((await r.get('/headers')).status, 404);
    });
    t.test('no token, authorization policy requiring a token → 403', async (t) => {
      t.equal((await r.get('/secure')).status, 403);
      t.equal((await r.get('/secure', valid)).status, 200, 'with a token the same path is routed');
    });
    t.test('invalid tokens → 401 from the validation, with www-authenticate', async (t) => {
      const cases: Array<[string, Promise<string>]> = [
        ['bad signature', issuer.mintBadSignature({ groups: ['group1'] })],
        ['expired', issuer.mint({ groups: ['group1'] }, { exp: now() - 600 })],
        ['wrong issuer', issuer.mint({ groups: ['group1'] }, { issuer: 'https://someone-else.example.com' })],
        ['not yet valid', issuer.mint({ groups: ['group1'] }, { nbf: now() + 600 })],
        ['not a JWT', Promise.resolve('abc.def')],
      ];
      for (const [what, token] of cases) {
        const res = await r.get('/headers', await token);
        t.equal(res.status, 401, what);
        t.match(String(res.headers['www-authenticate']), /^Bearer realm="http:\/\/.+\/headers", error="invalid_token"$/, `${what}: www-authenticate`);
      }
      t.equal((await r.get('/secure', await issuer.mintBadSignature())).status, 401, 'an invalid token is 401 before authorization');
    });
    t.test('valid token without the required claim value → 404', async (t) => {
      t.equal((await r.get('/headers', await issuer.mint({ groups: ['group2'] }))).status, 404, 'list claim without the value');
      t.equal((await r.get('/headers', await issuer.mint({ groups: 'group10' }))).status, 404, 'string claim, other value');
      t.equal((await r.get('/team', await issuer.mint({ team: 'billing' }))).status, 404);
      t.equal((await r.get('/nested-dot', await issuer.mint({ org: { unit: 'ops' } }))).status, 404);
      t.equal((await r.get('/nested-dot', await issuer.mint({ 'org.unit': 'eng' }))).status, 404, 'a dotted name is not the nested claim');
    });
    t.test('valid token with the claim value and matching path → 200 from the workload', async (t) => {
      for (const [p, token] of [
        ['/headers', valid],
        ['/headers', await issuer.mint({ groups: 'group1' })],
        ['/team', valid],
        ['/nested-dot', valid],
        ['/nested-brackets', valid],
        ['/dotted', valid],
      ] as const) {
        const res = await r.get(p, token);
        t.equal(res.status, 200, p);
        t.equal(JSON.parse(res.body).workload, 'demo', `${p}: answered by the workload`);
      }
    });
    t.test('key rotation at the JWKS server is picked up after the refresh interval', async (t) => {
      await issuer.rotate();
      const fresh = await issuer.mint({ groups: ['group1'] });
      await waitFor(
        () => 'a token of the rotated key never verified',
        async () => (await r.get('/headers', fresh)).status === 200,
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      t.equal((await r.get('/headers', valid)).status, 401, 'tokens of the retired key are rejected');
    });
    t.test('no config rejected', async (t) => t.same(await r.nacks(), []));
  });

  t.test(`a key server that is down: every token is rejected, none accepted (${plane})`, { skip: dataPlaneMissing(plane) }, async (t) => {
    const issuer: Issuer = await startIssuer({ port: 0 });
    t.teardown(() => issuer.close());
    issuer.setUp(false);
    const r = await rig(t, issuer, plane);
    const token = await issuer.mint({ groups: ['group1'] });
    t.equal((await r.get('/headers', token)).status, 401, 'valid-looking token, keys unknown');
    t.equal((await r.get('/secure', token)).status, 401);
    t.equal((await r.get('/headers')).status, 404, 'no token: not validated, no claim route');
    t.match(await fetch(`http://${r.daemon.monitoring}/metrics`).then((x) => x.text()), /pilot_jwks_resolver_network_fetch_fail_total [1-9]/);
    t.same(await r.nacks(), [], 'no config rejected');
  });
}
