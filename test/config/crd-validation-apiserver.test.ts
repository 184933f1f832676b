// mesh's CRD check (src/config/crd) against the real thing: Istio 1.26.8's CRD test documents, and the inputs of
// issue 24 item 7, sent to a real kube-apiserver 1.36 holding Istio's CRDs (../shared/kube, dry run, unknown
// fields ignored) and to mesh. The verdict and each field error (apimachinery's `field: body`, compared as a
// set: the API server walks maps in random order) must be the same.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import t from 'tap';
import { validateCustomResource } from '../../src/config/crd';
import { parseDocuments } from '../../src/config/parse';
import { SCHEMAS } from '../../src/config/schemas';
import { REPO, SHARED } from '../helpers/spec';

const KUBE = path.join(SHARED, 'kube');
const out = execFileSync(path.join(KUBE, 'start'), ['--owner', String(process.pid), '--no-controller-manager', '--with-crds', 'istio'], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
  timeout: 180_000,
});
const dir = path.dirname(out.trim().split('\n').pop()!);
t.teardown(() => execFileSync(path.join(KUBE, 'stop'), [dir], { stdio: 'inherit' }));
const env = Object.fromEntries(
  readFileSync(path.join(dir, 'env'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
);
const agent = new https.Agent({ ca: readFileSync(env.KUBE_CA!), cert: readFileSync(env.KUBE_CLIENT_CERT!), key: readFileSync(env.KUBE_CLIENT_KEY!) });

interface Cause {
  field?: string;
  message: string;
}

function create(urlPath: string, body: unknown): Promise<{ status: number; causes: Cause[]; message: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(new URL(urlPath, env.API_URL), { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      let data = '';
      res.on('data', (d) => (data += d));
      res.on('end', () => {
        const s = JSON.parse(data) as { message?: string; details?: { causes?: Cause[] } };
        resolve({ status: res.statusCode ?? 0, causes: s.details?.causes ?? [], message: s.message ?? '' });
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const EXTRA = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: empty-port-level-no-selector}
spec:
  portLevelMtls: {}
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: null-optional-field}
spec:
  url: http://test
  sha256: null
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: two-uri-matchers}
spec:
  hosts: [a]
  http:
  - match: [{uri: {exact: /a, prefix: /b}}]
    route: [{destination: {host: a}}]
`;

t.test('the same verdict and the same field errors as kube-apiserver', async (t) => {
  const fixtures = path.join(REPO, 'test/config/fixtures/istio-crd-validation');
  const texts = readdirSync(fixtures)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => ({ name: f, text: readFileSync(path.join(fixtures, f), 'utf8') }));
  let n = 0;
  for (const { name, text } of [...texts, { name: 'extra.yaml', text: EXTRA }]) {
    const parsed = parseDocuments(text, name);
    for (const c of parsed.configs) {
      const obj = { ...parsed.objects.get(c)! };
      delete obj._err;
      obj.metadata = { ...(obj.metadata as object), namespace: 'default' };
      const [group, version] = String(obj.apiVersion).split('/');
      const r = await create(`/apis/${group}/${version}/namespaces/default/${SCHEMAS[c.kind].plural}?dryRun=All&fieldValidation=Ignore`, obj);
      // metadata is checked for every kind elsewhere (validateMetadata), not here
      const kube = r.causes
        .filter((x) => !x.field?.startsWith('metadata.'))
        .map((x) => `${x.field ?? ''}: ${x.message}`)
        .sort();
      const mesh = validateCustomResource(c.kind, obj)
        .map((e) => `${e.field}: ${e.body}`)
        .sort();
      t.same(mesh, kube, `${name}/${c.meta.name}: ${r.status === 201 ? 'accepted' : r.message}`);
      n++;
    }
  }
  t.equal(n, 104, 'every document was sent');
});
