// Without an API server, nothing applied Istio's CRD schemas and their CEL rules (x-kubernetes-validations):
// an AuthorizationPolicy with serviceAccounts beside namespaces, a PeerAuthentication with an empty
// portLevelMtls and a WasmPlugin with an invalid url were accepted by `meshctl validate -f` and served from
// --configDir. The built binaries must now reject them with the API server's message, and the daemon keep
// serving the last good version. Expected messages: Istio 1.26.8's CRD test cases
// (pkg/config/validation/testdata/crds, vendored in test/config/fixtures/istio-crd-validation) and the rule
// messages of its crd-all.gen.yaml, in the words of kube-apiserver 1.36 (test/config/crd-validation-apiserver.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');

const AUTHZ_GOOD = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: authz, namespace: demo}
spec:
  rules:
  - from:
    - source:
        serviceAccounts: ["bar/sa"]
`;
const AUTHZ_BAD = AUTHZ_GOOD.replace('serviceAccounts: ["bar/sa"]', 'serviceAccounts: ["bar/sa"]\n        namespaces: ["bar"]');
const PEER_GOOD = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: peer, namespace: demo}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls:
    "8080": {mode: DISABLE}
`;
const PEER_BAD = PEER_GOOD.replace('portLevelMtls:\n    "8080": {mode: DISABLE}', 'portLevelMtls: {}');
const WASM_GOOD = `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: wasm, namespace: demo}
spec:
  url: oci://example.com/filter:v1
`;
const WASM_BAD = WASM_GOOD.replace('oci://example.com/filter:v1', 'fake://example.com');

const CASES = [
  {
    kind: 'AuthorizationPolicy',
    name: 'authz',
    good: AUTHZ_GOOD,
    bad: AUTHZ_BAD,
    error: 'AuthorizationPolicy/demo/authz: spec.rules[0].from[0].source: Invalid value: Cannot set serviceAccounts with namespaces or principals',
  },
  {
    kind: 'PeerAuthentication',
    name: 'peer',
    good: PEER_GOOD,
    bad: PEER_BAD,
    error: 'PeerAuthentication/demo/peer: spec.portLevelMtls: Invalid value: 0: spec.portLevelMtls in body should have at least 1 properties',
  },
  {
    kind: 'WasmPlugin',
    name: 'wasm',
    good: WASM_GOOD,
    bad: WASM_BAD,
    error: 'WasmPlugin/demo/wasm: spec.url: Invalid value: "fake://example.com": url must have schema one of [http, https, file, oci]',
  },
];

const tmp = tempDir(t, 'crd-validation-');

t.test("meshctl validate -f rejects what the CRD rules reject, with the API server's message", async (t) => {
  for (const c of CASES) {
    const good = path.join(tmp, `${c.name}-good.yaml`);
    const bad = path.join(tmp, `${c.name}-bad.yaml`);
    fs.writeFileSync(good, c.good);
    fs.writeFileSync(bad, c.bad);
    const ok = await exec(MESHCTL, ['validate', '-f', good]);
    t.equal(ok.code, 0, `${c.kind}: the good version is valid: ${ok.stderr}`);
    const r = await exec(MESHCTL, ['validate', '-f', bad]);
    t.equal(r.code, 1, `${c.kind}: rejected`);
    t.equal(r.stderr, `Error: 1 error occurred:\n\t* ${c.error}\n\n\n`, `${c.kind}: the message names the resource and the field`);
  }
});

t.test('--configDir: the bad versions are rejected and the last good ones keep serving', async (t) => {
  const dir = path.join(tmp, 'config');
  fs.mkdirSync(dir);
  for (const c of CASES) fs.writeFileSync(path.join(dir, `${c.name}.yaml`), c.good);
  const daemon = await startDaemon(['--configDir', dir]);
  t.teardown(() => daemon.stop());
  const configz = async () =>
    (await (await fetch(`http://${daemon.http}/debug/configz`)).json()) as Array<{
      kind: string;
      metadata: { name: string };
      spec: Record<string, unknown>;
    }>;
  const served = async (c: (typeof CASES)[number]) => (await configz()).find((x) => x.kind === c.kind && x.metadata.name === c.name);
  await waitFor(
    () => `the good versions were not served:\n${daemon.log()}`,
    async () => (await Promise.all(CASES.map(served))).every(Boolean),
    { timeoutMs: 20_000 },
  );
  const before = await Promise.all(CASES.map(served));

  for (const c of CASES) fs.writeFileSync(path.join(dir, `${c.name}.yaml`), c.bad);
  await waitFor(
    () => `the bad versions were not rejected:\n${daemon.log()}`,
    () => CASES.every((c) => daemon.log().includes(c.error.slice(c.error.indexOf(': ') + 2))),
    { timeoutMs: 20_000 },
  );
  for (const c of CASES) t.match(daemon.log(), c.error.slice(c.error.indexOf(': ') + 2), `${c.kind}: the log gives the API server's message`);
  const after = await Promise.all(CASES.map(served));
  t.same(after, before, 'the last good versions keep serving');
});

t.test('meshctl analyze on files reports the CRD rule as a schema validation error (IST0106)', async (t) => {
  const f = path.join(tmp, 'analyze-authz.yaml');
  fs.writeFileSync(f, AUTHZ_BAD);
  const r = await exec(MESHCTL, ['analyze', '--use-kube=false', '-A', f]);
  t.equal(r.code, 79, 'istioctl analyze: errors found');
  t.match(
    r.stdout,
    `Error [IST0106] (AuthorizationPolicy demo/authz ${f}:1) Schema validation error: Invalid value: Cannot set serviceAccounts with namespaces or principals\n`,
  );
  fs.writeFileSync(f, AUTHZ_GOOD);
  const ok = await exec(MESHCTL, ['analyze', '--use-kube=false', '-A', f]);
  t.notMatch(ok.stdout, 'IST0106', 'the good version has no schema error');
});
