// The differential harness's protocol scenario (issue 27, item 3): HTTP/2 by prior knowledge (h2c), gRPC (unary, an
// error status with trailers, a trailers-only answer, a call with no route), WebSockets (the upgrade through the
// gateway, frames both ways) and TCP (a Gateway TCP server per port, a VirtualService `tcp` route choosing the
// backend), run through the built gateway on our engine and on the real Envoy (test/helpers/differential.ts) and
// compared as the client and backends observed them. Config shapes are Istio's (Gateway servers of protocol HTTP
// and TCP, ServiceEntry ports of protocol GRPC and TCP, VirtualService http and tcp routes).
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type DiffRequest, type Scenario } from '../../helpers/differential';
import {
  grpcCall,
  h2Request,
  startGrpcBackend,
  startTcpBackend,
  startWebSocketBackend,
  tcpExchange,
  webSocketExchange,
} from '../../helpers/differential-clients';
import { gatewayDoc, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../../helpers/mesh-yaml';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const host = (b: string) => `${b}.demo.svc.cluster.local`;
const to = (b: string, port = 80) => `route: [{destination: {host: ${host(b)}, port: {number: ${port}}}}]`;

const HTTP = `  - match: [{uri: {prefix: /test.Echo/}}]
    ${to('grpc', 9090)}
  - match: [{uri: {prefix: /ws}}]
    ${to('ws')}
  - match: [{uri: {prefix: /echo}}]
    ${to('a')}
`;

const scenario: Scenario = {
  name: 'gateway-protocols',
  backends: ['a'],
  servers: {
    grpc: (t) => startGrpcBackend(t, 'grpc'),
    ws: (t) => startWebSocketBackend(t, 'ws'),
    'tcp-a': (t) => startTcpBackend(t, 'tcp-a'),
    'tcp-b': (t) => startTcpBackend(t, 'tcp-b'),
  },
  extraPorts: ['tcpA', 'tcpB'],
  config: (p) =>
    yamlDocs(
      gatewayDoc(p.gw, {
        servers: ['tcpA', 'tcpB']
          .map((n) => `  - port: {number: ${p.extra[n]}, name: ${n.toLowerCase()}, protocol: TCP}\n    hosts: ["*"]\n`)
          .join(''),
      }),
      serviceEntryDoc('a', { targetPort: p.backends['a'] }),
      serviceEntryDoc('ws', { targetPort: p.backends['ws'] }),
      serviceEntryDoc('grpc', { protocol: 'GRPC', port: 9090, targetPort: p.backends['grpc'] }),
      serviceEntryDoc('tcp-a', { protocol: 'TCP', port: 9000, targetPort: p.backends['tcp-a'] }),
      serviceEntryDoc('tcp-b', { protocol: 'TCP', port: 9000, targetPort: p.backends['tcp-b'] }),
      virtualServiceDoc('http', { http: HTTP }),
      `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tcp, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  tcp:
  - match: [{port: ${p.extra['tcpA']}}]
    ${to('tcp-a', 9000)}
  - match: [{port: ${p.extra['tcpB']}}]
    ${to('tcp-b', 9000)}
`,
    ),
  ready: { name: 'ready', path: '/echo/ready' },
  requests: [
    { name: 'h1-echo', path: '/echo/h1' },
    { name: 'h2c-get', path: '/echo/h2c?x=1', client: (p) => h2Request(p.gw, { path: '/echo/h2c?x=1', headers: { 'x-custom': 'h2' } }) },
    {
      name: 'h2c-post-body',
      path: '/echo/post',
      client: (p) => h2Request(p.gw, { method: 'POST', path: '/echo/post', body: 'hello over h2', headers: { 'content-type': 'text/plain' } }),
    },
    { name: 'h2c-no-route', path: '/nowhere', client: (p) => h2Request(p.gw, { path: '/nowhere' }) },
    { name: 'grpc-unary', path: '/test.Echo/Say', client: (p) => grpcCall(p.gw, '/test.Echo/Say', 'hello') },
    { name: 'grpc-error', path: '/test.Echo/Fail', client: (p) => grpcCall(p.gw, '/test.Echo/Fail', 'x') },
    { name: 'grpc-trailers-only', path: '/test.Echo/Deny', client: (p) => grpcCall(p.gw, '/test.Echo/Deny', 'x') },
    { name: 'grpc-no-route', path: '/missing.Svc/Call', client: (p) => grpcCall(p.gw, '/missing.Svc/Call', 'x') },
    { name: 'websocket', path: '/ws/chat', client: (p) => webSocketExchange(p.gw, { path: '/ws/chat' }, ['one', 'two']) },
    { name: 'websocket-no-route', path: '/nowhere', client: (p) => webSocketExchange(p.gw, { path: '/nowhere' }, ['one']) },
    { name: 'tcp-a', path: '', client: (p) => tcpExchange(p.extra['tcpA']!, 'ping on a') },
    { name: 'tcp-b', path: '', client: (p) => tcpExchange(p.extra['tcpB']!, 'ping on b') },
  ] satisfies DiffRequest[],
};

t.test('differential: HTTP/2, gRPC, WebSockets and TCP at the gateway', { skip: envoyMissing() }, async (t) => {
  await compareScenario(t, scenario, knownDifferences());
});
