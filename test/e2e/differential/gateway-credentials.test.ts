// The differential harness's credentialName origination and wss scenario (issue 27, item 3), at the gateway:
// TLS origination from a DestinationRule whose `credentialName` names a Secret (SIMPLE with the CA from a generic
// Secret's `cacert`, MUTUAL with a kubernetes.io/tls Secret's key pair and `ca.crt`, and a Secret holding another
// CA, which must fail verification), served to the gateway by the daemon over SDS (`kubernetes://<name>` and
// `<name>-cacert`), and a WebSocket over TLS (wss) terminated at a Gateway HTTPS server whose certificate is a
// credentialName Secret too. Why the gateway: Istio 1.26's ClientTLSSettings.credentialName applies to a sidecar
// only when the DestinationRule has a workloadSelector, and "otherwise only at gateways" (istio/api
// networking/v1alpha3/destination_rule.proto); the daemon follows that (src/xds/gen/tls.ts). Run through the built
// gateway on our engine and on the real Envoy (test/helpers/differential.ts) and compared as the client and the
// TLS backends (SNI, ALPN, client certificate) observed them. Certificates are made once with openssl.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type Scenario } from '../../helpers/differential';
import { httpsRequest, issue, startTlsEchoBackend, startWebSocketBackend, webSocketExchange, type Pem } from '../../helpers/differential-clients';
import { gatewayDoc, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../../helpers/mesh-yaml';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A Secret in mesh-system (the gateway's namespace: a proxy reads only its own namespace's credentials). */
const secretDoc = (name: string, type: string, data: Record<string, string>) => `apiVersion: v1
kind: Secret
metadata: {name: ${name}, namespace: mesh-system}
type: ${type}
data:
${Object.entries(data)
  .map(([k, v]) => `  ${k}: ${b64(v)}\n`)
  .join('')}`;

const host = (b: string) => `${b}.demo.svc.cluster.local`;

const destinationRule = (name: string, tls: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ${name}, namespace: mesh-system}
spec:
  host: ${host(name)}
  trafficPolicy:
    tls: ${tls}
`;

interface Pki {
  backendCa: Pem;
  secure: Pem;
  clientCa: Pem;
  gatewayClient: Pem;
  otherCa: Pem;
  gw: Pem;
}

function makePki(dir: string): Pki {
  const backendCa = issue(dir, 'backend-ca');
  const clientCa = issue(dir, 'client-ca');
  const serverCa = issue(dir, 'server-ca');
  return {
    backendCa,
    secure: issue(dir, 'secure.example', { ca: backendCa, san: 'DNS:secure.example' }),
    clientCa,
    gatewayClient: issue(dir, 'gateway-client', { ca: clientCa, san: 'URI:spiffe://example.org/gateway' }),
    otherCa: issue(dir, 'other-ca'),
    gw: issue(dir, 'gw.example', { ca: serverCa, san: 'DNS:gw.example' }),
  };
}

function config(p: Parameters<Scenario['config']>[0], k: Pki): string {
  const origin = (name: string) => `  - match: [{uri: {prefix: /origin/${name}}}]
    route: [{destination: {host: ${host(`cred-${name}`)}, port: {number: 80}}}]
`;
  return yamlDocs(
    gatewayDoc(p.gw, {
      servers: `  - port: {number: ${p.extra['https']}, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: gw-cert}
`,
    }),
    secretDoc('gw-cert', 'kubernetes.io/tls', { 'tls.crt': k.gw.cert, 'tls.key': k.gw.key }),
    // the generic form: the CA under `cacert`, no key pair (SIMPLE needs only the CA)
    secretDoc('backend-ca', 'Opaque', { cacert: k.backendCa.cert }),
    secretDoc('gateway-client', 'kubernetes.io/tls', { 'tls.crt': k.gatewayClient.cert, 'tls.key': k.gatewayClient.key, 'ca.crt': k.backendCa.cert }),
    secretDoc('other-ca', 'Opaque', { cacert: k.otherCa.cert }),
    serviceEntryDoc('ws', { targetPort: p.backends['ws'] }),
    ...['simple', 'bad-ca'].map((n) => serviceEntryDoc(`cred-${n}`, { targetPort: p.backends['tls-simple'] })),
    serviceEntryDoc('cred-mutual', { targetPort: p.backends['tls-mutual'] }),
    destinationRule('cred-simple', '{mode: SIMPLE, credentialName: backend-ca, sni: secure.example}'),
    destinationRule('cred-mutual', '{mode: MUTUAL, credentialName: gateway-client, sni: secure.example}'),
    destinationRule('cred-bad-ca', '{mode: SIMPLE, credentialName: other-ca, sni: secure.example}'),
    virtualServiceDoc('routes', {
      http: `${['simple', 'mutual', 'bad-ca'].map(origin).join('')}  - match: [{uri: {prefix: /ws}}]
    route: [{destination: {host: ${host('ws')}, port: {number: 80}}}]\n`,
    }),
  );
}

t.test('differential: credentialName origination and wss at the gateway', { skip: envoyMissing() }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-diff-cred-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const k = makePki(dir);
  const wss = { servername: 'gw.example', alpn: ['http/1.1'] };
  const scenario: Scenario = {
    name: 'gateway-credentials',
    backends: [],
    servers: {
      'tls-simple': (t) => startTlsEchoBackend(t, 'tls-simple', { cert: k.secure }),
      'tls-mutual': (t) => startTlsEchoBackend(t, 'tls-mutual', { cert: k.secure, ca: k.clientCa }),
      ws: (t) => startWebSocketBackend(t, 'ws'),
    },
    extraPorts: ['https'],
    config: (p) => config(p, k),
    // the HTTPS listener has its certificate and both credentialName clusters their secrets
    ready: {
      name: 'ready',
      path: '/',
      client: async (p) => {
        const all = await Promise.all([
          httpsRequest(p.extra['https']!, { path: '/origin/simple/ready', host: 'gw.example' }, wss),
          httpsRequest(p.extra['https']!, { path: '/origin/mutual/ready', host: 'gw.example' }, wss),
        ]);
        return { status: all.every((o) => o['status'] === 200) ? 200 : 0 };
      },
    },
    requests: [
      { name: 'origin-credential-simple', path: '/origin/simple/x' },
      { name: 'origin-credential-mutual', path: '/origin/mutual/x?y=1' },
      { name: 'origin-credential-bad-ca', path: '/origin/bad-ca/x' },
      {
        name: 'wss',
        path: '/ws/chat',
        client: (p) => webSocketExchange(p.extra['https']!, { path: '/ws/chat', host: 'gw.example' }, ['one', 'two'], wss),
      },
      {
        name: 'wss-no-route',
        path: '/nowhere',
        client: (p) => webSocketExchange(p.extra['https']!, { path: '/nowhere', host: 'gw.example' }, ['one'], wss),
      },
      { name: 'ws-plain', path: '/ws/plain', client: (p) => webSocketExchange(p.gw, { path: '/ws/plain' }, ['three']) },
    ],
  };
  await compareScenario(t, scenario, knownDifferences());
});
