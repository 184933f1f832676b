// Credentials over ADS as Istio 1.26's SecretGen answers them: the cases of pilot/pkg/xds/sds_test.go
// (TestGenerateSDS) with `istio-system` as `mesh-system`, certificates made here with openssl, plus the
// kubernetes.io/tls key names, stringData, cross-namespace and kubernetes-gateway:// refusals, and
// Istio's sdsNeedsPush (a full push reaches SDS only with a Secret among the changed configs).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { fromBinary } from '@bufbuild/protobuf';
import type { Config } from '../../../src/config/types';
import type { Proxy } from '../../../src/discovery/model';
import type { PushContext } from '../../../src/discovery/push-context';
import { cfg } from '../../discovery/fixtures';
import { SecretSchema } from '../../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { parseResourceName, secretGenerator, type SecretAuthorizer } from '../../../src/xds/gen/sds';
import { typeNeedsFullPush } from '../../../src/xds/server/needs-push';
import { newPushRequest } from '../../../src/xds/server/push-request';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { tempDir } from '../../helpers/temp';
import { EC_P256_KEY } from '../../helpers/openssl';

const dir = tempDir(t, 'mesh-sds-gen-');

let n = 0;
/** A self-signed certificate and key (PEM), valid for a day unless `days` says otherwise. */
function pair(cn: string): { cert: string; key: string } {
  const base = path.join(dir, String(++n));
  execFileSync('openssl', ['req', '-x509', ...EC_P256_KEY, '-subj', `/CN=${cn}`, '-days', '1', '-keyout', `${base}.key`, '-out', `${base}.crt`], {
    stdio: 'ignore',
  });
  return { cert: fs.readFileSync(`${base}.crt`, 'utf8'), key: fs.readFileSync(`${base}.key`, 'utf8') };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
function secret(name: string, data: Record<string, string>, namespace = 'mesh-system', stringData?: Record<string, string>): Config<'Secret'> {
  return {
    kind: 'Secret',
    apiVersion: 'v1',
    meta: { name, namespace, labels: {}, annotations: {} },
    spec: { data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])), ...(stringData ? { stringData } : {}) },
  };
}

const def = pair('default');
const dns = pair('dns');
const root = pair('root');
const split = pair('split');
const splitRoot = pair('split-root');
const crl = 'not-really-a-crl';

const generic = secret('generic', { cert: def.cert, key: def.key });
const genericMtls = secret('generic-mtls', { cert: dns.cert, key: dns.key, cacert: root.cert });
const genericMtlsCrl = secret('generic-mtls-crl', { cert: dns.cert, key: dns.key, cacert: root.cert, crl });
const caOnly = secret('ca-only', { cacert: root.cert });
const genericSplit = secret('generic-mtls-split', { cert: split.cert, key: split.key });
const genericSplitCa = secret('generic-mtls-split-cacert', { cacert: splitRoot.cert });
const tricky = secret('tricky-cacert', { cert: dns.cert, key: dns.key, cacert: root.cert });
const bookinfo = secret('bookinfo-certs', { cert: def.cert, key: def.key }, 'bookinfo');
const tlsForm = secret('tls-form', { 'tls.crt': dns.cert, 'tls.key': dns.key, 'ca.crt': root.cert, 'tls.ocsp-staple': 'staple' });
const written = secret('string-data', { 'tls.crt': def.cert, 'tls.key': def.key }, 'mesh-system', { 'tls.crt': dns.cert });
const other = secret('other-ns', { cert: def.cert, key: def.key }, 'elsewhere');
const emptyKeys = secret('empty', { cert: '', key: '' });
const wrongKeys = secret('wrong', { foo: 'x', bar: 'y' });

const ALL = [
  generic,
  genericMtls,
  genericMtlsCrl,
  caOnly,
  genericSplit,
  genericSplitCa,
  tricky,
  bookinfo,
  tlsForm,
  written,
  other,
  emptyKeys,
  wrongKeys,
];
const secrets = { get: (ns: string, name: string) => ALL.find((s) => s.meta.namespace === ns && s.meta.name === name) };

function proxy(namespace: string | undefined, type: Proxy['type'] = 'router'): Proxy {
  return {
    nodeId: `${type}~10.0.0.1~gw.${namespace ?? 'mesh-system'}~${namespace ?? 'mesh-system'}.svc.cluster.local`,
    type,
    ipAddresses: ['10.0.0.1'],
    id: `gw.${namespace ?? 'mesh-system'}`,
    namespace: namespace ?? 'mesh-system',
    dnsDomain: 'svc.cluster.local',
    metadata: { raw: {} } as Proxy['metadata'],
    labels: {},
    proxyless: false,
    ...(namespace ? { verifiedIdentity: { trustDomain: 'cluster.local', namespace, serviceAccount: 'gw' } } : {}),
  };
}

interface Expected {
  key?: string;
  cert?: string;
  caCert?: string;
  caCrl?: string;
  staple?: string;
}

const text = (d: { specifier: { case?: string; value?: unknown } } | undefined) =>
  d?.specifier.case === 'inlineBytes' ? Buffer.from(d.specifier.value as Uint8Array).toString('utf8') : undefined;

/** A Gateway a router serves: its namespace, one server's TLS, and whether the Gateway API translation made it. */
interface Served {
  namespace: string;
  credentialName: string;
  mode?: 'SIMPLE' | 'MUTUAL';
  gatewayApi?: boolean;
}

/** The one thing the generator reads of a push context: the servers of the router's merged gateway. */
function pushServing(served: readonly Served[]): PushContext {
  const servers = served.map((g, i) => ({
    gateway: cfg(
      'Gateway',
      g.namespace,
      `gw-${i}`,
      { servers: [] },
      g.gatewayApi ? { annotations: { 'internal.mesh.io/parents': `Gateway/web/https.${g.namespace}` } } : {},
    ),
    gatewayName: `${g.namespace}/gw-${i}`,
    server: {
      port: { number: 443, name: 'https', protocol: 'HTTPS' },
      hosts: ['*'],
      tls: { mode: g.mode ?? 'SIMPLE', credentialName: g.credentialName },
    },
    hosts: [{ namespace: '*', host: '*' }],
  }));
  return {
    mergedGateway: () => ({ gatewayNames: new Set(), ports: [{ port: 443, kind: 'tls', servers }], serversByRouteName: new Map() }),
  } as unknown as PushContext;
}

function run(p: Proxy, names: string[], authorize: SecretAuthorizer = () => true, served: readonly Served[] = []): Record<string, Expected> {
  const gen = secretGenerator({ secrets, authorize });
  const req = newPushRequest(pushServing(served), { full: true });
  const out: Record<string, Expected> = {};
  for (const r of gen.generate(p, { typeUrl: TYPE_URL.secret, resourceNames: new Set(names), wildcard: false }, req).resources) {
    const s = fromBinary(SecretSchema, r.resource.value);
    t.equal(s.name, r.name, `${r.name}: the Secret is named as the resource`);
    const e: Expected = {};
    if (s.type.case === 'tlsCertificate') {
      e.cert = text(s.type.value.certificateChain);
      e.key = text(s.type.value.privateKey);
      if (s.type.value.ocspStaple) e.staple = text(s.type.value.ocspStaple);
    } else if (s.type.case === 'validationContext') {
      e.caCert = text(s.type.value.trustedCa);
      if (s.type.value.crl) e.caCrl = text(s.type.value.crl);
    }
    out[r.name] = e;
  }
  return out;
}

const ALL_RESOURCES = [
  'kubernetes://generic',
  'kubernetes://generic-mtls',
  'kubernetes://generic-mtls-cacert',
  'kubernetes://ca-only-cacert',
  'kubernetes://generic-mtls-split',
  'kubernetes://generic-mtls-split-cacert',
  'kubernetes://generic-mtls-crl',
  'kubernetes://generic-mtls-crl-cacert',
];
const denied: SecretAuthorizer = () => new Error('not authorized');

const cases: Array<{
  name: string;
  proxy: Proxy;
  resources: string[];
  authorize?: SecretAuthorizer;
  served?: Served[];
  expect: Record<string, Expected>;
}> = [
  {
    name: 'simple',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://generic'],
    expect: { 'kubernetes://generic': { key: def.key, cert: def.cert } },
  },
  {
    name: 'sidecar',
    proxy: proxy('mesh-system', 'sidecar'),
    resources: ['kubernetes://generic'],
    expect: { 'kubernetes://generic': { key: def.key, cert: def.cert } },
  },
  { name: 'unauthenticated', proxy: proxy(undefined), resources: ['kubernetes://generic'], expect: {} },
  {
    name: 'multiple',
    proxy: proxy('mesh-system'),
    resources: ALL_RESOURCES,
    expect: {
      'kubernetes://generic': { key: def.key, cert: def.cert },
      'kubernetes://generic-mtls': { key: dns.key, cert: dns.cert },
      'kubernetes://ca-only-cacert': { caCert: root.cert },
      'kubernetes://generic-mtls-cacert': { caCert: root.cert },
      'kubernetes://generic-mtls-split': { key: split.key, cert: split.cert },
      'kubernetes://generic-mtls-split-cacert': { caCert: splitRoot.cert },
      'kubernetes://generic-mtls-crl': { key: dns.key, cert: dns.cert },
      'kubernetes://generic-mtls-crl-cacert': { caCert: root.cert, caCrl: crl },
    },
  },
  {
    name: 'unknown',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://generic', 'foo://invalid', 'kubernetes://not-found', 'default', 'builtin://'],
    expect: { 'kubernetes://generic': { key: def.key, cert: def.cert } },
  },
  { name: 'unauthorized', proxy: proxy('mesh-system'), resources: ['kubernetes://generic'], authorize: denied, expect: {} },
  {
    name: 'partially unauthorized: CA certificates only',
    proxy: proxy('mesh-system'),
    resources: ALL_RESOURCES,
    authorize: denied,
    expect: {
      'kubernetes://ca-only-cacert': { caCert: root.cert },
      'kubernetes://generic-mtls-split-cacert': { caCert: splitRoot.cert },
      'kubernetes://generic-mtls-crl-cacert': { caCert: root.cert, caCrl: crl },
      'kubernetes://generic-mtls-cacert': { caCert: root.cert },
    },
  },
  {
    name: 'tricky cacert name: no private key through a -cacert name',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://tricky-cacert', 'kubernetes://tricky-cacert-cacert'],
    authorize: denied,
    expect: { 'kubernetes://tricky-cacert': { caCert: root.cert }, 'kubernetes://tricky-cacert-cacert': { caCert: root.cert } },
  },
  {
    name: 'same secret with and without namespace in resource name',
    proxy: proxy('bookinfo'),
    resources: ['kubernetes://bookinfo-certs', 'kubernetes://bookinfo/bookinfo-certs'],
    expect: {
      'kubernetes://bookinfo-certs': { key: def.key, cert: def.cert },
      'kubernetes://bookinfo/bookinfo-certs': { key: def.key, cert: def.cert },
    },
  },
  {
    name: 'another namespace is refused, even when listing is allowed',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://elsewhere/other-ns'],
    expect: {},
  },
  {
    name: 'kubernetes-gateway:// that no Gateway of the proxy names: refused',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://mesh-system/generic'],
    expect: {},
  },
  {
    name: "kubernetes-gateway:// of a Gateway in the proxy's namespace, its Secret there too: served without asking",
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://mesh-system/generic'],
    authorize: denied,
    served: [{ namespace: 'mesh-system', credentialName: 'kubernetes-gateway://mesh-system/generic', gatewayApi: true }],
    expect: { 'kubernetes-gateway://mesh-system/generic': { key: def.key, cert: def.cert } },
  },
  {
    name: "a MUTUAL server's -cacert companion is verified with it",
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://mesh-system/generic-mtls', 'kubernetes-gateway://mesh-system/generic-mtls-cacert'],
    served: [{ namespace: 'mesh-system', credentialName: 'kubernetes-gateway://mesh-system/generic-mtls', mode: 'MUTUAL', gatewayApi: true }],
    expect: {
      'kubernetes-gateway://mesh-system/generic-mtls': { key: dns.key, cert: dns.cert },
      'kubernetes-gateway://mesh-system/generic-mtls-cacert': { caCert: root.cert },
    },
  },
  {
    name: 'a Gateway in another namespace than the proxy verifies nothing',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://bookinfo/bookinfo-certs'],
    served: [{ namespace: 'bookinfo', credentialName: 'kubernetes-gateway://bookinfo/bookinfo-certs', gatewayApi: true }],
    expect: {},
  },
  {
    name: "another namespace's Secret, named by a Gateway the Gateway API translation made (it checked the ReferenceGrant): served",
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://bookinfo/bookinfo-certs'],
    served: [{ namespace: 'mesh-system', credentialName: 'kubernetes-gateway://bookinfo/bookinfo-certs', gatewayApi: true }],
    expect: { 'kubernetes-gateway://bookinfo/bookinfo-certs': { key: def.key, cert: def.cert } },
  },
  {
    name: "another namespace's Secret, named by a hand-written Gateway (no grant was checked): refused",
    proxy: proxy('mesh-system'),
    resources: ['kubernetes-gateway://bookinfo/bookinfo-certs'],
    served: [{ namespace: 'mesh-system', credentialName: 'kubernetes-gateway://bookinfo/bookinfo-certs' }],
    expect: {},
  },
  {
    name: 'kubernetes.io/tls keys: tls.crt/tls.key, ca.crt for the -cacert companion, the OCSP staple',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://tls-form', 'kubernetes://tls-form-cacert'],
    expect: { 'kubernetes://tls-form': { key: dns.key, cert: dns.cert, staple: 'staple' }, 'kubernetes://tls-form-cacert': { caCert: root.cert } },
  },
  {
    name: 'stringData is written over data',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://string-data'],
    expect: { 'kubernetes://string-data': { key: def.key, cert: dns.cert } },
  },
  {
    name: 'empty or missing keys give nothing',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://empty', 'kubernetes://wrong', 'kubernetes://wrong-cacert'],
    expect: {},
  },
  {
    name: 'authorization still pending: CA certificates only for now',
    proxy: proxy('mesh-system'),
    resources: ['kubernetes://generic', 'kubernetes://generic-mtls-cacert'],
    authorize: () => undefined,
    expect: { 'kubernetes://generic-mtls-cacert': { caCert: root.cert } },
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    t.same(run(c.proxy, c.resources, c.authorize, c.served), c.expect);
  });
}

t.test('the authorizer is asked with the verified identity, once per generation', async (t) => {
  const asked: string[] = [];
  run(proxy('mesh-system'), ['kubernetes://generic', 'kubernetes://generic-mtls'], (sa, ns) => (asked.push(`${ns}/${sa}`), true));
  t.same(asked, ['mesh-system/gw']);
});

t.test('resource names (Istio credentials.ParseResourceName)', async (t) => {
  t.same(parseResourceName('kubernetes://name', 'ns'), { type: 'kubernetes', name: 'name', namespace: 'ns', resourceName: 'kubernetes://name' });
  t.same(parseResourceName('kubernetes://other/name', 'ns'), {
    type: 'kubernetes',
    name: 'name',
    namespace: 'other',
    resourceName: 'kubernetes://other/name',
  });
  t.same(parseResourceName('kubernetes-gateway://other/name', 'ns'), {
    type: 'kubernetes-gateway',
    name: 'name',
    namespace: 'other',
    resourceName: 'kubernetes-gateway://other/name',
  });
  t.match(String(parseResourceName('kubernetes-gateway://name', 'ns')), /Expected namespace and name/);
  t.match(String(parseResourceName('foo://invalid', 'ns')), /unknown resource type/);
});

t.test('Istio sdsNeedsPush: full pushes reach SDS only when a Secret changed', async (t) => {
  const secretType = TYPE_URL.secret;
  t.ok(typeNeedsFullPush(secretType, 'router', new Set()), 'everything may have changed');
  t.ok(typeNeedsFullPush(secretType, 'router', new Set(['Secret/mesh-system/generic'])));
  t.notOk(typeNeedsFullPush(secretType, 'router', new Set(['VirtualService/default/vs', 'Gateway/mesh-system/gw'])));
  t.ok(typeNeedsFullPush(secretType, 'router', new Set(['Gateway/mesh-system/gw', 'Secret/mesh-system/generic'])));
  t.notOk(typeNeedsFullPush(TYPE_URL.listener, 'router', new Set(['Secret/mesh-system/generic'])), 'and a Secret alone pushes no listeners');
});
