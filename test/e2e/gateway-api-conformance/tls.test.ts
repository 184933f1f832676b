// Gateway API v1.3.0 conformance, the GATEWAY-TLS profile's tests Istio 1.26 passes that this runner can evaluate,
// against the built programs with no cluster, with PILOT_ENABLE_ALPHA_GATEWAY_API=true (Istio's flag for TLSRoute):
// the rig, expectations and status checks of conformance.test.ts (cases.json, read from the suite's Go source). The
// suite's TLS request (conformance/utils/tls: an HTTPS request whose SNI is the route's hostname, the server's
// certificate checked against the backend's) is made here with Node's TLS client: a reply from the right echo backend
// over a certificate only that backend holds proves the Gateway passed the TLS stream through by SNI.
// Beyond the suite (v1.3.0 has no such test): two TLSRoutes on one passthrough listener reach two backends by SNI, and
// a name no route claims gets no answer.
// The profile's count is checked against the README's table, as conformance.test.ts checks its rows.
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import t, { type Test } from 'tap';
import { makeServerCert } from '../../helpers/agent';
import { built } from '../../helpers/binary';
import type { EchoRequest } from '../../helpers/echo-backend';
import { dataPlanes } from '../../helpers/envoy';
import { REPO } from '../../helpers/spec';
import { tempDir } from '../../helpers/temp';
import { checkCall, compare, type ExpectedResponse, type Reply } from './expect';
import { type Doc, gateways, parseDocs } from './manifests';
import { type ConformanceRig, manifestDocs, startConformanceRig } from './rig';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
t.setTimeout(3 * 60_000);

interface Case {
  shortName: string;
  features: string[];
  manifests: string[] | null;
  responses: ExpectedResponse[];
  calls: Array<{ fn: string; args: unknown[] }>;
}

const CASES = JSON.parse(fs.readFileSync(new URL('cases.json', import.meta.url), 'utf8')) as Case[];
const CONTROLLER = 'mesh.io/gateway-controller';

/**
 * GATEWAY-TLS (core: Gateway, ReferenceGrant, TLSRoute): Istio 1.26 passes 11 core and 2 extended tests. Run here: the
 * profile's own, the TLSRoute tests. The Gateway tests every Gateway profile shares (GatewayInvalidRouteKind,
 * GatewayInvalidTLSConfiguration, the four GatewaySecret* tests) run in conformance.test.ts (counted under GATEWAY-HTTP,
 * each needing a router of its own, which would take this file past its minute). Not run anywhere yet:
 * GatewayClassObservedGenerationBump, GatewayObservedGenerationBump, GatewayModifyListeners (their checks are code the
 * extractor does not read) and the extended GatewayInfrastructure and GatewayStaticAddresses.
 */
const RUN: readonly string[] = ['TLSRouteSimpleSameNamespace', 'TLSRouteInvalidReferenceGrant'];

const INFRA = 'gateway-conformance-infra';
const APP = 'gateway-conformance-app-backend';

/** Our own manifests beyond the suite: SNI routing to two backends. */
function extraDocs(): Doc[] {
  return parseDocs(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-tls-extra, namespace: ${INFRA}}
spec:
  gatewayClassName: mesh
  listeners:
  - name: passthrough
    port: 443
    protocol: TLS
    hostname: "*.example.com"
    tls: {mode: Passthrough}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: sni-abc, namespace: ${INFRA}}
spec:
  parentRefs: [{name: gateway-tls-extra, sectionName: passthrough}]
  hostnames: [abc.example.com]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: sni-def, namespace: ${INFRA}}
spec:
  parentRefs: [{name: gateway-tls-extra, sectionName: passthrough}]
  hostnames: [def.example.com]
  rules: [{backendRefs: [{name: tls-backend, namespace: ${APP}, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: tls-from-infra, namespace: ${APP}}
spec:
  from: [{group: gateway.networking.k8s.io, kind: TLSRoute, namespace: ${INFRA}}]
  to: [{group: "", kind: Service, name: tls-backend}]
`);
}

/** The suite's TLS request: HTTPS to the Gateway's port with this SNI, the server certificate checked against `ca`. */
function tlsRequest(port: number, sni: string, ca: string, reqPath: string): Promise<Reply & { error?: string }> {
  return new Promise((resolve) => {
    const req = https.request({ host: '127.0.0.1', port, servername: sni, ca, path: reqPath, headers: { host: sni }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        let echo: EchoRequest | undefined;
        try {
          const j = JSON.parse(body) as EchoRequest;
          if (typeof j.pod === 'string') echo = j;
        } catch {
          // not an echo backend's answer
        }
        const headers: Record<string, string[]> = {};
        for (let i = 0; i < res.rawHeaders.length; i += 2) (headers[res.rawHeaders[i]!.toLowerCase()] ??= []).push(res.rawHeaders[i + 1]!);
        resolve({ status: res.statusCode ?? 0, headers, ...(echo ? { echo } : {}) });
      });
    });
    // a refused or reset connection, or a certificate that is not the expected one: the suite retries until it passes
    req.on('error', (e) => resolve({ status: 0, headers: {}, error: e.message }));
    req.setTimeout(5_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** MakeTLSRequestAndExpectEventuallyConsistentResponse: two answers in a row as expected, within 8 s. */
async function eventuallyTls(port: number, sni: string, ca: string, e: ExpectedResponse): Promise<string | undefined> {
  const deadline = Date.now() + 8_000;
  let why: string | undefined;
  let streak = 0;
  while (Date.now() < deadline) {
    const r = await tlsRequest(port, sni, ca, e.Request.Path ?? '/');
    why = r.error ?? compare(e, e.Request.Path ?? '/', r);
    streak = why ? 0 : streak + 1;
    if (streak >= 2) return undefined;
    if (why) await sleep(200);
  }
  return why;
}

async function statusHolds(rig: ConformanceRig, fn: string, args: unknown[]): Promise<string | undefined> {
  let why: string | undefined = 'not checked';
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && (why = checkCall(fn, args, await rig.status(), CONTROLLER))) await sleep(200);
  return why;
}

/** The first TLSRoute's hostname: what GatewayAndTLSRoutesMustBeAccepted returns (`hostnames[0]` in cases.json). */
function firstHostname(docs: readonly Doc[]): string | undefined {
  return (docs.find((d) => d.kind === 'TLSRoute')?.spec?.['hostnames'] as string[] | undefined)?.[0];
}

async function runCase(t: Test, rig: ConformanceRig, c: Case, ca: string): Promise<string[]> {
  const docs = (c.manifests ?? []).flatMap((m) => manifestDocs(m));
  const failures: string[] = [];
  rig.apply(docs);
  await rig.routersFor(gateways([...manifestDocs('base.yaml'), ...docs]).map((g) => `${g.ns}/${g.name}`));
  for (const call of c.calls) {
    if ((call as { local?: boolean }).local) {
      // a helper of the suite's own files: GetTLSSecret reads the certificate its TLS client trusts (here the
      // passthrough backend's, `ca`); any other is not something this runner does
      const nn = call.args[0] as { Name?: string; Namespace?: string } | undefined;
      const why =
        call.fn !== 'GetTLSSecret'
          ? `the runner does not do ${call.fn}`
          : rig.secretCert(`${nn?.Namespace}/${nn?.Name}`)
            ? undefined
            : `no Secret ${nn?.Namespace}/${nn?.Name}`;
      t.equal(why, undefined, `helper: ${call.fn}`);
      if (why) failures.push(`${call.fn}: ${why}`);
      continue;
    }
    const why = await statusHolds(rig, call.fn, call.args);
    t.equal(why, undefined, `status: ${call.fn}`);
    if (why) failures.push(`${call.fn}: ${why}`);
  }
  for (const e of c.responses) {
    const host = firstHostname(docs);
    const gw = docs.find((d) => d.kind === 'Gateway');
    const listener = (gw?.spec?.['listeners'] as Array<{ port: number }> | undefined)?.[0];
    if (!host || !gw || !listener) {
      t.fail('the runner cannot evaluate the TLS request: no TLSRoute hostname or Gateway listener');
      failures.push('no TLSRoute hostname or Gateway listener');
      continue;
    }
    const expected: ExpectedResponse = { ...e, Request: { ...e.Request, Host: host } };
    const port = rig.listenerPort(`${gw.metadata!.namespace}/${gw.metadata!.name}`, listener.port);
    const why = await eventuallyTls(port, host, ca, expected);
    t.equal(why, undefined, `TLS request with SNI ${host} reaches ${e.Backend}`);
    if (why) failures.push(`TLS ${host}: ${why}`);
  }
  rig.apply(undefined);
  return failures;
}

const planes = dataPlanes().filter((p) => (process.env['MESH_CONFORMANCE_PLANES'] ?? 'engine,envoy').split(',').includes(p));
for (const plane of planes) {
  t.test(`GATEWAY-TLS conformance, data plane ${plane}`, async (t) => {
    const dir = tempDir(t, 'mesh-gwtls-');
    // each TLS backend's own certificate, for the names it is reached by (the suite's tls-passthrough-checks-certificate)
    const cert = (name: string, san: string) => {
      const d = path.join(dir, name);
      fs.mkdirSync(d);
      const c = makeServerCert(d, san);
      return { ca: fs.readFileSync(c.ca, 'utf8'), cert: fs.readFileSync(c.cert, 'utf8'), key: fs.readFileSync(c.key, 'utf8') };
    };
    const infraCert = cert('infra', 'abc.example.com');
    const appCert = cert('app', 'def.example.com');
    const cases = RUN.map((n) => {
      const c = CASES.find((x) => x.shortName === n);
      if (!c) throw new Error(`no conformance test ${n} in cases.json`);
      return c;
    });
    const extra = extraDocs();
    const rig = await startConformanceRig(t, {
      tests: [...cases.map((c) => (c.manifests ?? []).flatMap((m) => manifestDocs(m))), extra],
      dataPlane: plane,
      env: { PILOT_ENABLE_ALPHA_GATEWAY_API: 'true' },
      tlsBackends: new Map([
        [`${INFRA}/tls-backend`, infraCert],
        [`${APP}/tls-backend`, appCert],
      ]),
    });
    let passed = 0;
    for (const c of cases) {
      let failures: string[] = ['the test did not finish'];
      await t.test(c.shortName, async (t) => {
        failures = await runCase(t, rig, c, infraCert.ca);
      });
      if (failures.length === 0) passed++;
    }

    await t.test('beyond the suite: SNI picks the backend', async (t) => {
      rig.apply(extra);
      await rig.routersFor([`${INFRA}/gateway-tls-extra`]);
      const port443 = rig.listenerPort(`${INFRA}/gateway-tls-extra`, 443);
      const want = (backend: string, ns: string, host: string): ExpectedResponse => ({
        Request: { Host: host, Path: '/' },
        Backend: backend,
        Namespace: ns,
      });
      t.equal(
        await eventuallyTls(port443, 'abc.example.com', infraCert.ca, want('tls-backend', INFRA, 'abc.example.com')),
        undefined,
        'abc.example.com: the infra tls-backend',
      );
      t.equal(
        await eventuallyTls(port443, 'def.example.com', appCert.ca, want('tls-backend', APP, 'def.example.com')),
        undefined,
        'def.example.com: the app tls-backend',
      );
      // no route claims this name: no filter chain matches, the connection is closed before any certificate
      const none = await tlsRequest(port443, 'nothing.example.com', infraCert.ca, '/');
      t.ok(none.error !== undefined && none.status === 0, `nothing.example.com: no answer (${none.error})`);
      rig.apply(undefined);
    });

    const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Gateway API'));
    t.comment(`${plane} GATEWAY-TLS: ${passed} of ${cases.length} passed`);
    const row = new RegExp(`\\|\\s*GATEWAY-TLS\\s*\\|\\s*${plane}\\s*\\|\\s*(\\d+)\\s*\\|\\s*(\\d+)\\s*\\|`).exec(table);
    t.ok(row, `README table has a row for GATEWAY-TLS on ${plane}`);
    t.equal(Number(row?.[2]), cases.length, `README table: GATEWAY-TLS tests run on ${plane}`);
    t.ok(passed >= Number(row?.[1]), `README table: GATEWAY-TLS on ${plane}: ${passed} passed, the README says ${row?.[1]}`);
  });
}
