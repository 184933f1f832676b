// The differential harness's TLS scenario (issue 27, item 3): TLS termination at the gateway — SIMPLE from files
// and from a credentialName Secret (served by the daemon over SDS) on one port, the server chosen by SNI; MUTUAL
// from files and from a credentialName Secret with ca.crt; ALPN (http/1.1, none, h2); gRPC over h2; a TLS server
// terminating into a TCP route; PASSTHROUGH routed by SNI (a VirtualService `tls` route) — and TLS origination to TLS
// backends (DestinationRule tls SIMPLE with caCertificates and sni, MUTUAL with a client certificate, and two
// failing verifications: an untrusted CA, a subjectAltName that does not match). Run through the built gateway
// on our engine and on the real Envoy (test/helpers/differential.ts) and compared as the client (handshake,
// status, headers) and the backends (SNI, ALPN, client certificate, XFCC) observed them. Config shapes are Istio's
// Gateway `tls` and DestinationRule `trafficPolicy.tls`; certificates are made once with openssl, so both runs
// present the same ones.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type DiffRequest, type Scenario } from '../../helpers/differential';
import {
  grpcCall,
  h2Request,
  httpsRequest,
  issue,
  startGrpcBackend,
  startTcpBackend,
  startTlsEchoBackend,
  tcpExchange,
  type ClientTls,
  type Pem,
} from '../../helpers/differential-clients';
import { gatewayDoc, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../../helpers/mesh-yaml';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A kubernetes.io/tls Secret in mesh-system (plus ca.crt for MUTUAL), as `kubectl create secret` writes it. */
const secretDoc = (name: string, pem: Pem, ca?: Pem) => `apiVersion: v1
kind: Secret
metadata: {name: ${name}, namespace: mesh-system}
type: kubernetes.io/tls
data:
  tls.crt: ${b64(pem.cert)}
  tls.key: ${b64(pem.key)}
${ca ? `  ca.crt: ${b64(ca.cert)}\n` : ''}`;

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
  serverCa: Pem;
  a: Pem;
  b: Pem;
  gw: Pem;
  clientCa: Pem;
  client: Pem;
  stranger: Pem;
  backendCa: Pem;
  secure: Pem;
  gatewayClient: Pem;
}

function makePki(dir: string): Pki {
  const serverCa = issue(dir, 'server-ca');
  const clientCa = issue(dir, 'client-ca');
  const backendCa = issue(dir, 'backend-ca');
  const otherCa = issue(dir, 'other-ca');
  return {
    serverCa,
    a: issue(dir, 'a.example', { ca: serverCa, san: 'DNS:a.example' }),
    b: issue(dir, 'b.example', { ca: serverCa, san: 'DNS:b.example' }),
    gw: issue(dir, 'gw.example', { ca: serverCa, san: 'DNS:gw.example' }),
    clientCa,
    client: issue(dir, 'client', { ca: clientCa, san: 'DNS:client.example,URI:spiffe://example.org/client' }),
    stranger: issue(dir, 'stranger', { ca: otherCa, san: 'DNS:stranger.example' }),
    backendCa,
    secure: issue(dir, 'secure.example', { ca: backendCa, san: 'DNS:secure.example' }),
    gatewayClient: issue(dir, 'gateway-client', { ca: clientCa, san: 'URI:spiffe://example.org/gateway' }),
  };
}

function config(p: Parameters<Scenario['config']>[0], k: Pki): string {
  const x = p.extra;
  const servers = `  - port: {number: ${x['https']}, name: https-a, protocol: HTTPS}
    hosts: [a.example]
    tls: {mode: SIMPLE, serverCertificate: ${k.a.certFile}, privateKey: ${k.a.keyFile}}
  - port: {number: ${x['https']}, name: https-b, protocol: HTTPS}
    hosts: [b.example]
    tls: {mode: SIMPLE, credentialName: b-cert}
  - port: {number: ${x['mutual']}, name: https-mutual, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: MUTUAL, serverCertificate: ${k.gw.certFile}, privateKey: ${k.gw.keyFile}, caCertificates: ${k.clientCa.certFile}}
  - port: {number: ${x['mutualCred']}, name: https-mutual-cred, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: MUTUAL, credentialName: mutual-cred}
  - port: {number: ${x['tlsTcp']}, name: tls-tcp, protocol: TLS}
    hosts: ["*"]
    tls: {mode: SIMPLE, serverCertificate: ${k.gw.certFile}, privateKey: ${k.gw.keyFile}}
  - port: {number: ${x['passthrough']}, name: tls-passthrough, protocol: TLS}
    hosts: [secure.example]
    tls: {mode: PASSTHROUGH}
`;
  const origin = (name: string) => `  - match: [{uri: {prefix: /origin/${name}}}]
    route: [{destination: {host: ${host(`secure-${name}`)}, port: {number: 80}}}]
`;
  return yamlDocs(
    gatewayDoc(p.gw, { servers }),
    secretDoc('b-cert', k.b),
    secretDoc('mutual-cred', k.gw, k.clientCa),
    serviceEntryDoc('a', { targetPort: p.backends['a'] }),
    ...['simple', 'bad-ca', 'bad-san'].map((n) => serviceEntryDoc(`secure-${n}`, { targetPort: p.backends['tls-simple'] })),
    serviceEntryDoc('secure-mutual', { targetPort: p.backends['tls-mutual'] }),
    serviceEntryDoc('secure-pass', { protocol: 'TLS', port: 443, targetPort: p.backends['tls-simple'] }),
    serviceEntryDoc('grpc', { protocol: 'GRPC', port: 9090, targetPort: p.backends['grpc'] }),
    serviceEntryDoc('tcp', { protocol: 'TCP', port: 9000, targetPort: p.backends['tcp'] }),
    destinationRule('secure-simple', `{mode: SIMPLE, caCertificates: ${k.backendCa.certFile}, sni: secure.example}`),
    destinationRule(
      'secure-mutual',
      `{mode: MUTUAL, clientCertificate: ${k.gatewayClient.certFile}, privateKey: ${k.gatewayClient.keyFile}, caCertificates: ${k.backendCa.certFile}, sni: secure.example}`,
    ),
    destinationRule('secure-bad-ca', `{mode: SIMPLE, caCertificates: ${k.serverCa.certFile}, sni: secure.example}`),
    destinationRule(
      'secure-bad-san',
      `{mode: SIMPLE, caCertificates: ${k.backendCa.certFile}, sni: secure.example, subjectAltNames: [other.example]}`,
    ),
    virtualServiceDoc('routes', {
      http: `${['simple', 'mutual', 'bad-ca', 'bad-san'].map(origin).join('')}  - match: [{uri: {prefix: /test.Echo/}}]
    route: [{destination: {host: ${host('grpc')}, port: {number: 9090}}}]
  - route: [{destination: {host: ${host('a')}, port: {number: 80}}}]\n`,
    }),
    `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tls-routes, namespace: mesh-system}
spec:
  hosts: [secure.example]
  gateways: [gw]
  tls:
  - match: [{port: ${x['passthrough']}, sniHosts: [secure.example]}]
    route: [{destination: {host: ${host('secure-pass')}, port: {number: 443}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tcp-routes, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  tcp:
  - match: [{port: ${x['tlsTcp']}}]
    route: [{destination: {host: ${host('tcp')}, port: {number: 9000}}}]
`,
  );
}

t.test('differential: TLS termination and origination at the gateway', { skip: envoyMissing() }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-diff-tls-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const k = makePki(dir);
  const h1: ClientTls = { alpn: ['http/1.1'] };
  const https = (name: string, port: string, r: { path: string; host?: string; headers?: Record<string, string> }, o: ClientTls): DiffRequest => ({
    name,
    path: r.path,
    client: (p) => httpsRequest(p.extra[port]!, r, o),
  });
  const spoof = { 'x-forwarded-client-cert': 'By=spiffe://spoofed;Hash=00' };
  const scenario: Scenario = {
    name: 'gateway-tls',
    backends: ['a'],
    servers: {
      'tls-simple': (t) => startTlsEchoBackend(t, 'tls-simple', { cert: k.secure }),
      'tls-mutual': (t) => startTlsEchoBackend(t, 'tls-mutual', { cert: k.secure, ca: k.clientCa }),
      grpc: (t) => startGrpcBackend(t, 'grpc'),
      tcp: (t) => startTcpBackend(t, 'tcp'),
    },
    extraPorts: ['https', 'mutual', 'mutualCred', 'tlsTcp', 'passthrough'],
    config: (p) => config(p, k),
    // every TLS listener has its certificates (credentialName ones come from the daemon over SDS)
    ready: {
      name: 'ready',
      path: '/',
      client: async (p) => {
        const all = await Promise.all([
          httpsRequest(p.extra['https']!, { path: '/ready', host: 'b.example' }, { ...h1, servername: 'b.example' }),
          httpsRequest(p.extra['https']!, { path: '/ready', host: 'a.example' }, { ...h1, servername: 'a.example' }),
          httpsRequest(p.extra['mutual']!, { path: '/ready' }, { ...h1, servername: 'gw.example', cert: k.client }),
          httpsRequest(p.extra['mutualCred']!, { path: '/ready' }, { ...h1, servername: 'gw.example', cert: k.client }),
        ]);
        return { status: all.every((o) => o['status'] === 200) ? 200 : 0 };
      },
    },
    requests: [
      https('sni-a-files', 'https', { path: '/echo/a', host: 'a.example', headers: spoof }, { ...h1, servername: 'a.example' }),
      https('sni-b-credential', 'https', { path: '/echo/b', host: 'b.example' }, { ...h1, servername: 'b.example' }),
      https('sni-unknown', 'https', { path: '/echo/c', host: 'c.example' }, { ...h1, servername: 'c.example' }),
      https('no-sni', 'https', { path: '/echo/none', host: 'a.example' }, h1),
      https('alpn-none', 'https', { path: '/echo/no-alpn', host: 'a.example' }, { servername: 'a.example' }),
      https('host-not-on-server', 'https', { path: '/echo/other', host: 'b.example' }, { ...h1, servername: 'a.example' }),
      {
        name: 'h2-alpn',
        path: '/echo/h2',
        client: (p) => h2Request(p.extra['https']!, { path: '/echo/h2', host: 'a.example' }, { servername: 'a.example' }),
      },
      https('mutual-files', 'mutual', { path: '/echo/m', headers: spoof }, { ...h1, servername: 'gw.example', cert: k.client }),
      https('mutual-no-cert', 'mutual', { path: '/echo/m' }, { ...h1, servername: 'gw.example' }),
      https('mutual-other-ca', 'mutual', { path: '/echo/m' }, { ...h1, servername: 'gw.example', cert: k.stranger }),
      https('mutual-credential', 'mutualCred', { path: '/echo/mc' }, { ...h1, servername: 'gw.example', cert: k.client }),
      https('mutual-credential-no-cert', 'mutualCred', { path: '/echo/mc' }, { ...h1, servername: 'gw.example' }),
      {
        name: 'mutual-h2',
        path: '/echo/mh2',
        client: (p) => h2Request(p.extra['mutual']!, { path: '/echo/mh2' }, { servername: 'gw.example', cert: k.client }),
      },
      {
        name: 'grpc-over-tls',
        path: '/test.Echo/Say',
        client: (p) => grpcCall(p.extra['https']!, '/test.Echo/Say', 'over tls', { host: 'a.example', tls: { servername: 'a.example' } }),
      },
      { name: 'tls-to-tcp', path: '', client: (p) => tcpExchange(p.extra['tlsTcp']!, 'over tls', { servername: 'gw.example' }) },
      https('passthrough', 'passthrough', { path: '/pass', host: 'secure.example' }, { ...h1, servername: 'secure.example' }),
      https('passthrough-other-sni', 'passthrough', { path: '/pass', host: 'other.example' }, { ...h1, servername: 'other.example' }),
      { name: 'origin-simple', path: '/origin/simple/x' },
      { name: 'origin-mutual', path: '/origin/mutual/x' },
      { name: 'origin-bad-ca', path: '/origin/bad-ca/x' },
      { name: 'origin-bad-san', path: '/origin/bad-san/x' },
    ],
  };
  await compareScenario(t, scenario, knownDifferences());
});
