// A live mesh with no cluster for meshctl's end-to-end tests (meshctl-live, meshctl-bugreport): the gateway's
// configuration, its daemon on Istio's fixed ports, meshctl run in the pod, and how the tests follow the processes
// they start in a network namespace.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { DIST, exec, type ExecResult } from './binary';
import { httpGetIn, spawnIn } from './netns';
import { gatewayConfig } from './mesh-yaml';
import { waitFor } from './wait';

/** A Gateway on 8081 routing to a static backend; plaintext mesh (the agents have no workload certificate). */
export const GATEWAY_CONFIG = `${gatewayConfig(8081)}---
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
  await waitFor(
    () => `${why()}\n(no 200 from ${url})`,
    () => httpGetIn(ns, url).status === 200,
    { timeoutMs: ms, intervalMs: 250 },
  );
}

/**
 * Starts the built daemon in pod `ns` on Istio's fixed ports (xDS 15010, HTTP 8080, monitoring 15014) with
 * GATEWAY_CONFIG in `<dir>/config`, writes `<dir>/mesh.yaml` pointing agents at it in plaintext, and waits until
 * it is ready. Returns the environment every process of the mesh starts from.
 */
export async function startLiveDiscovery(t: Test, ns: string, dir: string, out: string[]): Promise<NodeJS.ProcessEnv> {
  fs.mkdirSync(path.join(dir, 'config'));
  fs.writeFileSync(path.join(dir, 'config', 'gateway.yaml'), GATEWAY_CONFIG);
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), 'defaultConfig:\n  discoveryAddress: 127.0.0.1:15010\n  controlPlaneAuthPolicy: NONE\n');
  const base = { PATH: process.env.PATH, HOME: dir };
  const args = [
    'discovery',
    '--configDir',
    path.join(dir, 'config'),
    '--grpcAddr',
    '127.0.0.1:15010',
    '--httpAddr',
    '127.0.0.1:8080',
    '--monitoringAddr',
    '127.0.0.1:15014',
    '--ctrlz_port',
    '0',
  ];
  watch(t, 'discovery', spawnIn(ns, path.join(DIST, 'pilot-discovery'), args, { env: base }), out);
  await waitForOk(ns, 'http://127.0.0.1:8080/ready', () => `the daemon did not start:\n${out.join('').slice(-6000)}`);
  return base;
}

/** A home directory under `dir` whose ~/.meshctl/config.yaml (as ~/.istioctl/config.yaml is for istioctl) points meshctl at the live daemon. */
export function meshctlHome(dir: string): string {
  const home = path.join(dir, 'home');
  fs.mkdirSync(path.join(home, '.meshctl'), { recursive: true });
  fs.writeFileSync(path.join(home, '.meshctl', 'config.yaml'), 'xds-address: 127.0.0.1:15010\nplaintext: true\n');
  return home;
}

/** Runs the built meshctl inside pod `ns`. */
export function meshctlIn(ns: string, args: readonly string[], o: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<ExecResult> {
  return exec('ip', ['netns', 'exec', ns, path.join(DIST, 'meshctl'), ...args], o);
}
