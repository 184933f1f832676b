// Manifest parsing: multi-document YAML, JSON (object, array), Lists, unknown kinds, our groups and
// Istio's, namespace defaulting, and errors that name file, document and resource.
import t from 'tap';
import { formatConfigError } from '../../src/config/errors';
import { convertObject, DEFAULT_NAMESPACE, parseDocuments } from '../../src/config/parse';
import { kindOf, pluralOf, SCHEMAS } from '../../src/config/schemas';
import { configKey } from '../../src/config/types';

t.test('schemas: accepted apiVersions per kind', async (t) => {
  for (const v of ['networking.mesh.io/v1', 'networking.istio.io/v1', 'networking.istio.io/v1beta1', 'networking.istio.io/v1alpha3'])
    for (const k of ['Gateway', 'VirtualService', 'DestinationRule', 'ServiceEntry', 'WorkloadEntry', 'WorkloadGroup', 'Sidecar'])
      t.equal(kindOf(v, k), k, `${v} ${k}`);
  for (const v of ['security.mesh.io/v1', 'security.istio.io/v1', 'security.istio.io/v1beta1'])
    for (const k of ['RequestAuthentication', 'AuthorizationPolicy', 'PeerAuthentication']) t.equal(kindOf(v, k), k, `${v} ${k}`);
  t.equal(kindOf('security.istio.io/v1alpha3', 'AuthorizationPolicy'), undefined, 'security has no v1alpha3');
  t.equal(kindOf('networking.istio.io/v1', 'AuthorizationPolicy'), undefined, 'kinds stay in their group');
  t.equal(kindOf('v1', 'Service'), 'Service');
  t.equal(kindOf('v1', 'Pod'), 'Pod');
  t.equal(kindOf('v1', 'Namespace'), 'Namespace');
  t.equal(kindOf('discovery.k8s.io/v1', 'EndpointSlice'), 'EndpointSlice');
  t.equal(kindOf('discovery.k8s.io/v1beta1', 'EndpointSlice'), undefined);
  t.equal(kindOf('apps/v1', 'Deployment'), undefined);
  t.equal(pluralOf('VirtualService'), 'virtualservices');
  t.equal(pluralOf('AuthorizationPolicy'), 'authorizationpolicies');
  t.equal(pluralOf('ServiceEntry'), 'serviceentries');
  t.same(SCHEMAS.VirtualService.watch, [
    { group: 'networking.mesh.io', version: 'v1' },
    { group: 'networking.istio.io', version: 'v1' },
  ]);
  t.same(SCHEMAS.EndpointSlice.watch, [{ group: 'discovery.k8s.io', version: 'v1' }]);
  t.equal(SCHEMAS.Namespace.clusterScoped, true);
});

const MULTI = `# a comment before the first document
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: reviews
  labels: {app: reviews}
  annotations: {note: hello}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata:
  name: reviews
  namespace: prod
spec:
  host: reviews
  trafficPolicy: ~
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v1}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
  portLevelMtls:
    8080: {mode: DISABLE}
`;

t.test('multi-document YAML', async (t) => {
  const r = parseDocuments(MULTI, 'cfg/all.yaml');
  t.same(r.errors, []);
  t.same(r.configs.map(configKey), ['VirtualService/default/reviews', 'DestinationRule/prod/reviews', 'PeerAuthentication/istio-system/default']);
  const [vs, dr, pa] = r.configs;
  t.equal(vs!.apiVersion, 'networking.istio.io/v1beta1', 'apiVersion kept as written');
  t.equal(vs!.meta.namespace, DEFAULT_NAMESPACE, 'namespace defaults to default');
  t.same(vs!.meta.labels, { app: 'reviews' });
  t.same(vs!.meta.annotations, { note: 'hello' });
  t.same(vs!.spec, { hosts: ['reviews'], http: [{ route: [{ destination: { host: 'reviews', subset: 'v1' } }] }] });
  t.equal(vs!.source, 'cfg/all.yaml[0]');
  t.same(dr!.spec, { host: 'reviews' }, 'null members mean unset');
  t.equal(dr!.source, 'cfg/all.yaml[1]');
  t.equal(pa!.source, 'cfg/all.yaml[4]', 'empty documents still count');
  t.same((pa!.spec as { portLevelMtls: unknown }).portLevelMtls, { 8080: { mode: 'DISABLE' } });
  t.equal(r.warnings.length, 1);
  t.same(r.warnings[0], { source: 'cfg/all.yaml', document: '[3]', line: 24, message: 'unknown kind Deployment (apiVersion apps/v1): skipped' });
});

t.test('JSON: object, array, List', async (t) => {
  const obj = { apiVersion: 'networking.istio.io/v1', kind: 'ServiceEntry', metadata: { name: 'ext', namespace: 'ns1' }, spec: { hosts: ['a.com'] } };
  const one = parseDocuments(JSON.stringify(obj), 'se.json');
  t.same(one.configs.map(configKey), ['ServiceEntry/ns1/ext']);
  t.equal(one.configs[0]!.source, 'se.json[0]');
  const arr = parseDocuments(JSON.stringify([obj, { ...obj, metadata: { name: 'ext2' } }]), 'se.json');
  t.same(
    arr.configs.map((c) => c.source),
    ['se.json[0]', 'se.json[1]'],
  );
  t.equal(arr.configs[1]!.meta.namespace, 'default');
  const list = parseDocuments(
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [obj, { apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { ports: [{ port: 80 }] } }],
    }),
    'l.json',
  );
  t.same(list.configs.map(configKey), ['ServiceEntry/ns1/ext', 'Service/default/s']);
  t.same(
    list.configs.map((c) => c.source),
    ['l.json[0].items[0]', 'l.json[0].items[1]'],
  );
  const yamlList = parseDocuments(
    'apiVersion: v1\nkind: VirtualServiceList\nitems:\n- apiVersion: networking.istio.io/v1\n  kind: VirtualService\n  metadata: {name: a}\n  spec: {hosts: [a]}\n',
    'l.yaml',
  );
  t.same(
    yamlList.configs.map((c) => c.source),
    ['l.yaml[0].items[0]'],
    'typed lists (kubectl get -o yaml)',
  );
  const bad = parseDocuments('{"apiVersion": "v1", ', 'broken.json');
  t.equal(bad.errors.length, 1);
  t.equal(bad.errors[0]!.source, 'broken.json');
  t.match(bad.errors[0]!.message, /^invalid JSON: /);
});

t.test('Kubernetes objects', async (t) => {
  const r = parseDocuments(
    `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  labels: {kubernetes.io/service-name: reviews}
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: true}
ports:
- {name: http, port: 9080, protocol: TCP}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: prod, uid: u1, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  serviceAccountName: reviews
  nodeName: n1
  volumes: [{name: v}]
  containers: [{name: app, image: x, ports: [{containerPort: 9080}]}]
status:
  podIP: 10.0.0.1
  phase: Running
  hostIP: 192.168.0.1
---
apiVersion: v1
kind: Namespace
metadata: {name: prod, namespace: ignored, labels: {istio-injection: enabled}}
`,
    'k8s.yaml',
  );
  t.same(r.errors, []);
  const [slice, pod, ns] = r.configs;
  t.same(slice!.spec, {
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready: true } }],
    ports: [{ name: 'http', port: 9080, protocol: 'TCP' }],
  });
  t.same(slice!.meta.labels, { 'kubernetes.io/service-name': 'reviews' });
  t.same(pod!.spec, { serviceAccountName: 'reviews', nodeName: 'n1', containers: [{ name: 'app', ports: [{ containerPort: 9080 }] }] });
  t.same(pod!.status, { podIP: '10.0.0.1', phase: 'Running' });
  t.equal(pod!.meta.uid, 'u1');
  t.equal(pod!.meta.creationTimestamp, '2025-01-01T00:00:00Z');
  t.equal(ns!.meta.namespace, '', 'cluster-scoped: no namespace');
  t.equal(configKey(ns!), 'Namespace//prod');
});

t.test('errors name the source, document and resource', async (t) => {
  const r = parseDocuments(
    `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {namespace: x}
spec: {}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, labels: {a: 1}}
spec: []
---
kind: Gateway
metadata: {name: gw2}
---
just a string
---
a: [1
`,
    'gw.yaml',
  );
  t.same(r.configs, []);
  t.same(r.errors.map(formatConfigError).slice(0, 5), [
    'gw.yaml[0] (line 1) Gateway: metadata.name: name is required',
    'gw.yaml[1] (line 6) Gateway/default/gw: metadata.labels[a]: must be a string, got integer',
    'gw.yaml[1] (line 6) Gateway/default/gw: spec: must be an object, got array',
    'gw.yaml[2] (line 11): apiVersion: apiVersion must be set (a string)',
    'gw.yaml[3] (line 14): a document must be an object with apiVersion and kind, got string',
  ]);
  t.equal(r.errors.length, 6);
  t.match(r.errors[5], { source: 'gw.yaml', document: '[4]', line: 16, message: /^invalid YAML: / });
});

t.test('apiVersions we do not serve are skipped with a warning', async (t) => {
  const r = parseDocuments('apiVersion: networking.istio.io/v2\nkind: VirtualService\nmetadata: {name: a}\n', 'v.yaml');
  t.same(r.configs, []);
  t.same(r.errors, []);
  t.equal(r.warnings.length, 1);
  t.match(
    r.warnings[0]!.message,
    /^apiVersion networking\.istio\.io\/v2 is not served for kind VirtualService \(accepted: networking\.mesh\.io\/v1, networking\.istio\.io\/v1, /,
  );
});

t.test('convertObject: typed watch items without apiVersion/kind', async (t) => {
  const r = convertObject(
    { metadata: { name: 'svc', namespace: 'prod', creationTimestamp: new Date('2025-02-03T04:05:06Z') }, spec: { ports: [{ port: 80 }] } },
    { source: 'orchestrator' },
    'Service',
  );
  t.same(r.errors, []);
  t.equal(r.config!.kind, 'Service');
  t.equal(r.config!.apiVersion, 'v1');
  t.equal(r.config!.meta.creationTimestamp, '2025-02-03T04:05:06.000Z');
  t.equal(r.config!.source, 'orchestrator');
});
