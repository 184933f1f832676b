// Issue 24 items 2 and 3 through the built gateway (pilot-discovery --configDir + pilot-agent proxy router),
// exact bytes on raw sockets: a DENY AuthorizationPolicy on `request.headers[x-block] == yes` holds when the
// header comes twice or three times, a VirtualService header match sees every value, and for each mesh
// pathNormalization setting the policy on /admin* and the backend see the same normalized path — the rows
// being Istio's normalization tables and the attack paths, with what Envoy does for each
// (test/proxy/fixtures/path-header-cases.ts).
import t from 'tap';
import http2 from 'node:http2';
import { built } from '../helpers/binary';
import { gatewayYaml } from '../helpers/mesh-yaml';
import { startGateway } from '../helpers/gateway';
import { rawExchange, rawRequest } from '../helpers/raw-http';
import { PATH_CASES, PATH_MODES, type PathMode } from '../proxy/fixtures/path-header-cases';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

// a route on a header value, and DENY rules on a path and on a header value
const ROUTES_AND_POLICY = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: routes, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /route}, headers: {x-route: {exact: secret}}}]
    directResponse: {status: 418}
  - route: [{destination: {host: backend.demo.svc.cluster.local, port: {number: 80}}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/admin*"]}}]
  - when: [{key: "request.headers[x-block]", values: ["yes"]}]
`;

/** An HTTP/2 (prior knowledge) GET carrying one x-block field per value. */
function h2Status(port: number, p: string, values: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({ ':path': p, ':authority': 'gw.example', 'x-block': values });
    req.on('response', (h) => {
      resolve(Number(h[':status']));
      session.close();
    });
    req.on('error', reject);
    req.end();
  });
}

const SETTINGS: PathMode[] = ['NONE', 'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'];

for (const setting of SETTINGS) {
  t.test(`pathNormalization ${setting}`, async (t) => {
    const gw = await startGateway(t, {
      config: (p) => gatewayYaml(p, ROUTES_AND_POLICY),
      ...(setting === 'BASE' ? {} : { daemonMeshConfig: `pathNormalization:\n  normalization: ${setting}\n` }),
    });
    const send = (target: string, fields: ReadonlyArray<readonly [string, string]> = []) => rawExchange(gw.ports.gw, rawRequest(target, fields));
    // the policy may reach the gateway after the listener
    await t.resolves(
      (async () => {
        for (let i = 0; i < 100 && (await send('/admin')).status !== 403; i++) await new Promise((r) => setTimeout(r, 200));
      })(),
    );
    t.equal((await send('/admin')).status, 403, 'the DENY policy is in force');

    t.equal(
      (
        await send('/x', [
          ['x-block', 'no'],
          ['x-block', 'yes'],
        ])
      ).status,
      403,
      'x-block: no then yes is denied',
    );
    t.equal(
      (
        await send('/x', [
          ['x-block', 'yes'],
          ['x-block', 'no'],
        ])
      ).status,
      403,
      'x-block: yes then no is denied',
    );
    t.equal(
      (
        await send('/x', [
          ['x-block', 'no'],
          ['x-block', 'no'],
          ['x-block', 'yes'],
        ])
      ).status,
      403,
      'three copies are denied',
    );
    t.equal((await send('/x', [['x-block', 'no']])).status, 200, 'x-block: no alone is allowed');
    t.equal(
      (
        await send('/route', [
          ['x-route', 'no'],
          ['x-route', 'secret'],
        ])
      ).status,
      418,
      'the route header match sees the second value',
    );
    t.equal(await h2Status(gw.ports.gw, '/x', ['no', 'yes']), 403, 'HTTP/2: two x-block fields, no then yes, are denied');
    t.equal(await h2Status(gw.ports.gw, '/x', ['no']), 200, 'HTTP/2: x-block: no is allowed');
    t.equal((await send('/route', [['x-route', 'no']])).status, 200, 'no matching value: the default route');

    const col = PATH_MODES.indexOf(setting);
    for (const c of PATH_CASES) {
      const want = c.want[col]!;
      const a = await send(c.path);
      if (want === '400') t.equal(a.status, 400, `${c.path}: 400`);
      else if (want.startsWith('/admin')) t.equal(a.status, 403, `${c.path}: the policy on /admin* sees ${want}`);
      else {
        t.equal(a.status, 200, `${c.path}: forwarded`);
        t.equal(a.status === 200 ? (JSON.parse(a.body) as { path: string }).path : undefined, want, `${c.path}: the backend gets ${want}`);
      }
    }
    t.equal((await send('/a#frag')).status, 400, 'a fragment is refused');
  });
}
