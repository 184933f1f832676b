// A live mesh with no cluster for meshctl's end-to-end tests (meshctl-live, meshctl-bugreport): the gateway's
// configuration, and how the tests follow the processes they start in a network namespace.
import type { ChildProcess } from 'node:child_process';
import type { Test } from 'tap';
import { httpGetIn } from './netns';
import { waitFor } from './wait';

/** A Gateway on 8081 routing to a static backend; plaintext mesh (the agents have no workload certificate). */
export const GATEWAY_CONFIG = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8081, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: mesh-system}
spec:
  hosts: [backend.example.com]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 127.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: gw, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - route:
    - destination: {host: backend.example.com, port: {number: 80}}
---
# The agents here talk plaintext to discovery and get no workload certificate: with mesh mTLS (the
# PERMISSIVE default) the sidecar's inbound chains would wait for one, as Envoy waits for SDS secrets.
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: DISABLE}
`;

/** Collects a child's output under `[name]`, and kills it in teardown. */
export function watch(t: Test, name: string, child: ChildProcess, out: string[]): void {
  child.stdout!.on('data', (d) => out.push(`[${name}] ${d}`));
  child.stderr!.on('data', (d) => out.push(`[${name}] ${d}`));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
}

/** Waits for a 200 from `url` inside the pod `ns`. */
export async function waitForOk(ns: string, url: string, why: () => string, ms = 60_000): Promise<void> {
  await waitFor(() => `${why()}\n(no 200 from ${url})`, () => httpGetIn(ns, url).status === 200, { timeoutMs: ms, intervalMs: 250 });
}
