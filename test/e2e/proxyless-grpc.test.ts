// Issue "pilot-discovery", done means #1: a proxyless gRPC client (@grpc/grpc-js + @grpc/grpc-js-xds),
// bootstrapped against the daemon's plain xDS port, calls a service defined only by ServiceEntry +
// WorkloadEntry files in --configDir, then follows a VirtualService weight change and a WorkloadEntry
// removal without restarting.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { mkdtempSync, rmSync, writeFileSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { built } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { startDaemon } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

// A unary method with raw bytes both ways: no .proto needed for the test service.
const raw = (b: Buffer) => b;
const ECHO: grpc.ServiceDefinition = {
  Who: {
    path: '/mesh.test.Echo/Who',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
};

async function backend(name: string): Promise<{ port: number; server: grpc.Server }> {
  const server = new grpc.Server();
  server.addService(ECHO, { Who: (_call: unknown, cb: (e: null, b: Buffer) => void) => cb(null, Buffer.from(name)) });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, server };
}

const HOST = 'echo.demo.svc.cluster.local';

function serviceEntry(): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [${HOST}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: demo}
spec:
  host: ${HOST}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`;
}

function workloadEntry(name: string, version: string, port: number): string {
  return `apiVersion: networking.istio.io/v1beta1
kind: WorkloadEntry
metadata: {name: ${name}, namespace: demo}
spec:
  address: 127.0.0.1
  ports: {grpc: ${port}}
  labels: {app: echo, version: ${version}}
`;
}

function virtualService(v1: number, v2: number): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [${HOST}]
  http:
  - route:
    - {destination: {host: ${HOST}, subset: v1, port: {number: 7070}}, weight: ${v1}}
    - {destination: {host: ${HOST}, subset: v2, port: {number: 7070}}, weight: ${v2}}
`;
}

function virtualServiceNoSubset(): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [${HOST}]
  http:
  - route:
    - {destination: {host: ${HOST}, port: {number: 7070}}}
`;
}

t.test('proxyless gRPC client follows file config', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-grpc-'));
  const a = await backend('a');
  const b = await backend('b');
  t.teardown(() => {
    a.server.forceShutdown();
    b.server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  });
  writeFileSync(path.join(dir, 'echo.yaml'), serviceEntry());
  writeFileSync(path.join(dir, 'we-a.yaml'), workloadEntry('echo-a', 'v1', a.port));
  writeFileSync(path.join(dir, 'we-b.yaml'), workloadEntry('echo-b', 'v2', b.port));
  writeFileSync(path.join(dir, 'vs.yaml'), virtualService(100, 0));

  const daemon = await startDaemon(['--configDir', dir]);
  t.teardown(() => daemon.stop());

  const bootstrap = JSON.stringify({
    xds_servers: [{ server_uri: daemon.grpc, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
    node: {
      id: 'sidecar~127.0.0.1~client-0.demo~demo.svc.cluster.local',
      metadata: { GENERATOR: 'grpc', NAMESPACE: 'demo', LABELS: { app: 'client' } },
      // grpc-js-xds rejects a bootstrap whose node has no locality.
      locality: {},
    },
  });
  const client = spawn(process.execPath, [path.join(REPO, 'test/e2e/fixtures/xds-echo-client.cjs'), `xds:///${HOST}:7070`], {
    env: { ...process.env, GRPC_XDS_BOOTSTRAP_CONFIG: bootstrap },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.teardown(() => {
    client.kill();
  });
  const replies = readline.createInterface({ input: client.stdout! })[Symbol.asyncIterator]();
  /** Distinct workloads that answered n calls, sorted and joined; any failed call makes it '' (not yet converged). */
  const sample = async (n: number) => {
    client.stdin!.write(`${n}\n`);
    const line = (await replies.next()).value as string;
    const r = JSON.parse(line) as { answers: Record<string, number>; errors: Record<string, number> };
    lastErrors = r.errors;
    return Object.keys(r.errors).length ? '' : Object.keys(r.answers).sort().join(',');
  };
  let lastErrors: Record<string, number> = {};

  await waitFor(
    () => `never routed to a only\n${daemon.log()}`,
    async () => (await sample(5)) === 'a',
    { timeoutMs: 20_000 },
  );
  t.pass('100/0 → every call reaches the v1 workload');

  writeFileSync(path.join(dir, 'vs.yaml'), virtualService(0, 100));
  await waitFor(
    () => `weight change not followed\n${daemon.log()}`,
    async () => (await sample(5)) === 'b',
    { timeoutMs: 20_000 },
  );
  t.pass('0/100 after editing the VirtualService file → every call reaches v2');

  writeFileSync(path.join(dir, 'vs.yaml'), virtualService(50, 50));
  await waitFor(
    () => `50/50 not followed\n${daemon.log()}`,
    async () => (await sample(20)) === 'a,b',
    { timeoutMs: 20_000 },
  );
  t.pass('50/50 → both workloads answer');

  // Without subsets the route's one cluster holds both workloads; removing one WorkloadEntry is then an
  // endpoint-only change the client must follow.
  writeFileSync(path.join(dir, 'vs.yaml'), virtualServiceNoSubset());
  await waitFor(
    () => `unsubsetted route not followed ${JSON.stringify(lastErrors)}\n${daemon.log()}`,
    async () => (await sample(20)) === 'a,b',
    { timeoutMs: 20_000 },
  );
  unlinkSync(path.join(dir, 'we-b.yaml'));
  await waitFor(
    () => `WorkloadEntry removal not followed ${JSON.stringify(lastErrors)}\n${daemon.log()}`,
    async () => (await sample(20)) === 'a',
    { timeoutMs: 20_000 },
  );
  t.pass('removing the v2 WorkloadEntry file leaves only v1 answering');

  writeFileSync(
    path.join(dir, 'vs.yaml'),
    'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: echo, namespace: demo}\nspec:\n  hosts: []\n  http: [{route: [{destination: {host: ""}}]}]\n',
  );
  // The rejection names the file, the resource and the field.
  await waitFor(
    () => `invalid edit not reported\n${daemon.log()}`,
    () => /vs\.yaml.*VirtualService\/demo\/echo.*spec\.http\[0\]\.route\[0\]\.destination\.host/.test(daemon.log()),
    { timeoutMs: 10_000 },
  );
  t.equal(await sample(10), 'a', 'an invalid edit is rejected and the last good VirtualService keeps serving');
  const metrics = await (await fetch(`http://${daemon.monitoring}/metrics`)).text();
  t.match(metrics, /pilot_total_rejected_configs\{[^}]*\} [1-9]/, 'the rejection is counted');
});
