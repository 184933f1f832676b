// A RequestAuthentication whose key set has no usable key (issue 24 item 1). Envoy refuses such a jwt_authn
// config outright (filter_factory.cc validateJwtConfig: "Provider '…' in jwt_authn config has invalid local jwks:
// …"), which NACKs the whole listener: with the key set inlined as is, the gateway never served with such an issuer
// present, and a DENY AuthorizationPolicy added later never took effect. The daemon now sends Istio's
// reject-everything key set in its place. Checked with the built programs:
// - a static bootstrap with `{"keys":[]}` beside a good provider: the engine (`pilot-agent envoy -c`) and, where
//   installed, the real Envoy both refuse it, naming the provider;
// - the same bootstrap with the placeholder key set the daemon sends instead: both serve, the good issuer's token
//   200, the other issuer's 401 with the same reason, no token 200;
// - the built daemon and gateway: the RequestAuthentication applies and a DENY policy added afterwards is enforced.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import * as jose from 'jose';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing, type DataPlane } from '../helpers/envoy';
import { startGateway } from '../helpers/gateway';
import { httpBootstrap, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePort } from '../helpers/ports';
import { gatewayConfig } from '../helpers/mesh-yaml';
import { summarize } from '../helpers/agent';
import { createFakeJwks } from '../../src/security/jwks/keyset';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const GOOD = 'https://good.example';
const EMPTY = 'https://empty.example';
const EMPTY_JWKS = '{"keys":[]}';

interface Keys {
  jwks: string;
  token(iss: string): Promise<string>;
}

async function keys(): Promise<Keys> {
  const { publicKey, privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: 'k1', alg: 'RS256' };
  return {
    jwks: JSON.stringify({ keys: [jwk] }),
    token: (iss) =>
      new jose.SignJWT({ sub: 'alice' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(iss).setExpirationTime('1h').sign(privateKey),
  };
}

/** A static bootstrap: one listener whose jwt_authn holds the good provider and another one (as Istio builds it). */
async function bootstrap(backend: number, goodJwks: string, otherJwks: string): Promise<{ port: number; config: object }> {
  const jwtAuthn = {
    '@type': 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication',
    providers: {
      good: { issuer: GOOD, local_jwks: { inline_string: goodJwks } },
      empty: { issuer: EMPTY, local_jwks: { inline_string: otherJwks } },
    },
    rules: [
      {
        match: { prefix: '/' },
        requires: { requires_any: { requirements: [{ provider_name: 'good' }, { provider_name: 'empty' }, { allow_missing: {} }] } },
      },
    ],
  };
  const port = await freePort();
  const routeConfig = {
    name: 'local',
    virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'backend' } }] }],
  };
  return {
    port,
    config: httpBootstrap({
      port,
      admin: await freePort(),
      routeConfig,
      httpFilters: [{ name: 'envoy.filters.http.jwt_authn', typed_config: jwtAuthn }],
      clusters: [loopbackCluster('backend', backend)],
    }),
  };
}

type Verdicts = { refused: string } | { good: number; empty: number; emptyBody: string; none: number };

/** Runs one data plane on the bootstrap: either it refuses it, or it serves and answers three requests. */
async function verdicts(t: Test, plane: DataPlane, k: Keys, backend: number, otherJwks: string): Promise<Verdicts> {
  const b = await bootstrap(backend, k.jwks, otherJwks);
  const run = await runStatic(t, plane, b.config, b.port);
  if ('refused' in run) return run;
  const bearer = async (iss: string) => ({ authorization: `Bearer ${await k.token(iss)}` });
  const empty = await run.get('/', await bearer(EMPTY));
  return { good: (await run.get('/', await bearer(GOOD))).status, empty: empty.status, emptyBody: empty.body, none: (await run.get('/')).status };
}

async function backendPort(t: Test): Promise<number> {
  const srv = http.createServer((_req, res) => res.end('backend\n'));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return (srv.address() as { port: number }).port;
}

// Envoy's refusal, from filter_factory.cc and jwt_verify_lib's status text
const REFUSAL = "Provider 'empty' in jwt_authn config has invalid local jwks: Jwks doesn't have any valid public key";

t.test(
  "static bootstrap: a provider with no usable key is refused, the daemon's placeholder is not (engine and Envoy)",
  { timeout: 120_000 },
  async (t) => {
    const k = await keys();
    const backend = await backendPort(t);
    if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);
    const placeholder = createFakeJwks('https://empty.example/jwks.json');
    const served: Array<Extract<Verdicts, { good: number }>> = [];
    for (const plane of dataPlanes()) {
      const refused = await verdicts(t, plane, k, backend, EMPTY_JWKS);
      t.ok('refused' in refused, `${plane}: {"keys":[]} is refused`);
      if ('refused' in refused) t.match(refused.refused, REFUSAL, `${plane}: naming the provider and the reason`);

      const v = await verdicts(t, plane, k, backend, placeholder);
      if ('refused' in v) {
        t.fail(`${plane} refused the placeholder key set:\n${summarize(v.refused)}`);
        continue;
      }
      t.equal(v.good, 200, `${plane}: the good issuer's token is let through`);
      t.equal(v.empty, 401, `${plane}: the placeholder issuer's token is refused`);
      t.equal(v.none, 200, `${plane}: no token (allow_missing) is let through`);
      served.push(v);
    }
    if (served.length === 2) {
      t.same(served[0], served[1], 'engine verdicts = Envoy verdicts, reason included');
    }
  },
);

function meshConfig(o: { gw: number; backend: number; goodJwks: string; deny: boolean }): string {
  const deny = `---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-admin, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules: [{to: [{operation: {paths: ["/admin"]}}]}]
`;
  return `${gatewayConfig(o.gw, o.backend)}---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: issuers, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules:
  - issuer: ${GOOD}
    jwks: '${o.goodJwks}'
  - issuer: ${EMPTY}
    jwks: '${EMPTY_JWKS}'
${o.deny ? deny : ''}`;
}

t.test('gateway: an issuer with an empty key set does not freeze the listener', { timeout: 180_000 }, async (t) => {
  const k = await keys();
  let ports = { gw: 0, backend: 0 };
  const gw = await startGateway(t, {
    config: (p) => {
      ports = p;
      return meshConfig({ gw: p.gw, backend: p.backend, goodJwks: k.jwks, deny: false });
    },
  });
  const bearer = async (iss: string) => ({ authorization: `Bearer ${await k.token(iss)}` });
  await waitFor(
    () => `the gateway never served with the empty issuer present:\n${summarize(gw.agentOut())}`,
    async () => (await gw.get('/').catch(() => undefined))?.status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal((await gw.get('/', await bearer(GOOD))).status, 200, "the good issuer's token");
  t.equal((await gw.get('/', await bearer(EMPTY))).status, 401, "the empty issuer's token");
  t.equal((await gw.get('/admin')).status, 200, 'no DENY policy yet');

  fs.writeFileSync(path.join(gw.configDir, 'mesh.yaml'), meshConfig({ gw: ports.gw, backend: ports.backend, goodJwks: k.jwks, deny: true }));
  await waitFor(
    () => `the DENY policy added later never took effect:\n${summarize(gw.agentOut())}`,
    async () => (await gw.get('/admin')).status === 403,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.pass('the DENY policy added later is enforced: 403');
  t.equal((await gw.get('/', await bearer(GOOD))).status, 200, 'other paths still served');
  t.notMatch(gw.agentOut(), /invalid local jwks/, 'the listener was never refused for the key set');
  t.match(
    gw.daemon.log(),
    `The JWKS for issuer ${EMPTY} (inline jwks) has no usable key: Jwks doesn't have any valid public key`,
    "the daemon says why that issuer's tokens are refused",
  );
});
