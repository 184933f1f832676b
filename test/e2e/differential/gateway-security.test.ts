// The differential harness's security scenario (issue 27, item 3): the claim-routing demo's own config
// (examples/claim-routing/config, its fixed ports replaced by the rig's) plus AuthorizationPolicies denying by
// header and by claim, run through the built gateway on our engine and on the real Envoy
// (test/helpers/differential.ts). JWT errors (401 and www-authenticate), claim routing (404 without the claim),
// RBAC allow/deny by path, header and claim must look the same to the client and the backend on both, but for
// the README's listed differences. Tokens are minted once, so both runs send the same bytes.
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type DiffRequest, type Scenario } from '../../helpers/differential';
import { exampleConfig } from '../../helpers/differential-clients';
import { yamlDocs } from '../../helpers/mesh-yaml';
// @ts-expect-error the demo's issuer is plain JavaScript
import { startIssuer } from '../../../examples/claim-routing/issuer.mjs';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

interface Issuer {
  issuer: string;
  jwksUri: string;
  mint(claims?: Record<string, unknown>, o?: { issuer?: string; exp?: number; nbf?: number }): Promise<string>;
  mintBadSignature(claims?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

/** The demo's documents with its fixed ports (gateway 18080, httpbin 19090, issuer 19443) replaced. */
const demoConfig = (gw: number, httpbin: number, jwksUri: string) =>
  exampleConfig('claim-routing', { '18080': String(gw), '19090': String(httpbin), 'http://127.0.0.1:19443/jwks.json': jwksUri });

const EXTRA = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: more, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [mesh-system/gateway]
  http:
  - match: [{uri: {prefix: /admin}}, {uri: {prefix: /open}}]
    route: [{destination: {host: httpbin.demo.svc.cluster.local, port: {number: 8000}}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: admins-only, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/admin*"]}}]
    when: [{key: "request.auth.claims[role]", notValues: [admin]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: blocked-header, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - to: [{operation: {methods: [GET], paths: ["/open*"]}}]
    when: [{key: "request.headers[x-block]", values: ["yes"]}]
`;

const now = () => Math.floor(Date.now() / 1000);

t.test('differential: JWT, claim routing and RBAC at the gateway (the claim-routing demo)', { skip: envoyMissing() }, async (t) => {
  const issuer: Issuer = await startIssuer({ port: 0 });
  t.teardown(() => issuer.close());
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const valid = await issuer.mint({ groups: ['group1', 'group7'], role: 'admin' });
  const req = (name: string, p: string, headers: Record<string, string> = {}): DiffRequest => ({ name, path: p, headers });
  const scenario: Scenario = {
    name: 'gateway-security',
    backends: ['httpbin'],
    config: (p) => yamlDocs(demoConfig(p.gw, p.backends['httpbin']!, issuer.jwksUri), EXTRA),
    gateway: { daemonEnv: { PILOT_JWT_PUB_KEY_REFRESH_INTERVAL: '1s' } },
    // the first config may predate the daemon's first key fetch
    ready: req('ready', '/headers', bearer(valid)),
    requests: [
      req('claim-route-no-token', '/headers'),
      req('claim-route-valid', '/headers', bearer(valid)),
      req('claim-route-other-group', '/headers', bearer(await issuer.mint({ groups: ['group2'] }))),
      req('bad-signature', '/headers', bearer(await issuer.mintBadSignature({ groups: ['group1'] }))),
      req('expired', '/headers', bearer(await issuer.mint({ groups: ['group1'] }, { exp: now() - 600 }))),
      req('wrong-issuer', '/headers', bearer(await issuer.mint({ groups: ['group1'] }, { issuer: 'https://someone-else.example.com' }))),
      req('not-a-jwt', '/headers', bearer('abc.def')),
      req('token-required-none', '/get'),
      req('token-required-valid', '/get?x=1', bearer(valid)),
      req('token-required-bad', '/get', bearer(await issuer.mintBadSignature())),
      req('claim-deny-admin', '/admin/panel', bearer(valid)),
      req('claim-deny-user', '/admin/panel', bearer(await issuer.mint({ role: 'user' }))),
      req('claim-deny-no-token', '/admin/panel'),
      req('header-deny', '/open/x', { 'x-block': 'yes' }),
      req('header-allow', '/open/x', { 'x-block': 'no' }),
      { name: 'header-deny-other-method', method: 'POST', path: '/open/x', headers: { 'x-block': 'yes' }, body: 'b' },
    ],
  };
  await compareScenario(t, scenario, knownDifferences());
});
