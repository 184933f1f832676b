// `npm run demo -- mesh`: east-west traffic between three pods on this machine (network namespaces), each
// captured by `pilot-agent mesh-iptables` with a sidecar as uid 1337, pilot-discovery in a fourth namespace.
// Mesh-wide STRICT mutual TLS and an AuthorizationPolicy on B allowing only A's identity. Prints commands to
// try, stays up until Ctrl-C (or SIGTERM), then removes every namespace, process and file it made, as it does
// when the start fails. Where Prometheus is installed (Debian's `prometheus`), it runs beside discovery and
// scrapes each pod's merged 15020 endpoint by file service discovery, for `meshctl x metrics`.
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Cleanup, httpGetIn, meshAddr, meshPodsUnavailable, spiffeOf, startMesh } from './mesh-pods.mjs';
import { prometheusPath, startPrometheus } from './prometheus.mjs';
import { waitFor } from './wait.mjs';

const STRICT = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: STRICT}
`;

// What an installed mesh's ConfigMap holds (the chart names the prometheus metrics provider when telemetry is on,
// as Istio's does), so the sidecars report Istio's standard metrics; access logs in Istio's default format go to
// each sidecar's log.
const MESH_CONFIG = 'accessLogFile: /dev/stdout\ndefaultProviders:\n  metrics: [prometheus]\n';

const ALLOW_ONLY_A = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-a, namespace: b}
spec:
  selector: {matchLabels: {app: b}}
  action: ALLOW
  rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/a]}}]}]
`;

/**
 * The demo's mesh as `startMesh` takes it: three pods, each named as its workload (as the injector sets it from the
 * pod's owner: `meshctl x metrics b.b` names it), mesh-wide STRICT, B allowing only A, the installed mesh config.
 * `binaryPath(pod)`: a real Envoy as that pod's data plane (the differential tests run the demo on Envoy too).
 */
export function meshDemoMesh(binaryPath = () => undefined) {
  return {
    pods: ['a', 'b', 'c'].map((name) => ({ name, env: { MESH_META_WORKLOAD_NAME: name }, binaryPath: binaryPath(name) })),
    config: { 'peer-authentication.yaml': STRICT, 'authorization-policy.yaml': ALLOW_ONLY_A },
    meshConfig: MESH_CONFIG,
  };
}

/** Why the demo cannot run here (the one message a user sees), or false. */
export function meshDemoUnavailable(dist) {
  const missing = meshPodsUnavailable({ openssl: true });
  if (missing) {
    return `npm run demo -- mesh ${missing}: it runs each pod in a network namespace with iptables capture rules, so it needs root, iproute2 (ip netns), iptables, util-linux (setpriv) and openssl`;
  }
  if (!existsSync(path.join(dist, 'pilot-agent'))) return `${path.join(dist, 'pilot-agent')} is missing: run \`npm run build\` first`;
  return false;
}

export async function runMeshDemo({ dist }) {
  const why = meshDemoUnavailable(dist);
  if (why) {
    console.error(why);
    process.exit(1);
  }
  const cleanup = new Cleanup();
  let stopping = false;
  const stop = async (code) => {
    if (stopping) return;
    stopping = true;
    await cleanup.run();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-demo-mesh-'));
  cleanup.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // the sidecars (uid 1337) live in subdirectories
  chmodSync(dir, 0o755);
  let mesh;
  try {
    mesh = await startMesh(cleanup, {
      dist,
      dir,
      ...meshDemoMesh(),
      prefix: 'mesh-demo',
      stopSignal: 'SIGTERM',
      progress: (what) => console.log(`${what}…`),
    });
  } catch (e) {
    console.error(`the mesh demo did not start: ${e.message}`);
    await stop(1);
    return;
  }
  for (const [name, s] of Object.entries({
    discovery: mesh.discovery,
    ...mesh.sidecars,
    ...Object.fromEntries(Object.entries(mesh.apps).map(([k, v]) => [`app ${k}`, v])),
  })) {
    s.child.once('exit', (code, signal) => {
      if (stopping) return;
      console.error(`${name} exited (${code ?? signal}); stopping the demo. Its last output:\n${s.out().slice(-2000)}`);
      void stop(1);
    });
  }

  const prometheus = await startDemoPrometheus(cleanup, mesh, dir);
  const { a, b, c } = mesh.ns;
  const id = mesh.identitiesDir;
  const meshctl = path.join(dist, 'meshctl');
  // `ip netns add` mounts each namespace under /run/netns in the demo's own mount namespace. When the demo
  // itself runs inside `ip netns exec` (a mount namespace of its own), another shell sees only empty files
  // there ("setting the network namespace … failed: Invalid argument"): its commands must enter the demo's
  // mount namespace first.
  const enter = ownMountNamespace() ? `nsenter -t ${process.pid} -m ` : '';
  const ipx = (ns) => `${enter}ip netns exec ${ns}`;
  console.log(`
A mesh is running in network namespaces on this machine:

  ${a}  pod A ${meshAddr.pod(1)}   ${spiffeOf('a')}
  ${b}  pod B ${meshAddr.pod(2)}   ${spiffeOf('b')}   service b.b.svc.cluster.local ${meshAddr.vip(2)}:8080 (HTTP), :9000 (TCP echo), :7070 (gRPC)
  ${c}  pod C ${meshAddr.pod(3)}   ${spiffeOf('c')}
  ${mesh.world}  pilot-discovery (xDS :15010), routing between the pods

Each pod's traffic is captured by mesh-iptables into its sidecar (uid 1337); the apps run as another user.
Mesh-wide PeerAuthentication STRICT; an AuthorizationPolicy on B allows only ${spiffeOf('a')}
(config: ${mesh.configDir}, edit it live; logs: ${mesh.logs}). Try:

  ${ipx(a)} curl -s http://b.b.svc.cluster.local:8080/hello      # B's app answers; its x-forwarded-client-cert names A
  ${ipx(a)} curl -s http://${meshAddr.vip(2)}:8080/hello                 # the same by the service IP
  ${ipx(a)} bash -c 'exec 3<>/dev/tcp/${meshAddr.vip(2)}/9000; echo ping >&3; head -1 <&3'   # raw TCP through the mesh: b echo ping
  ${ipx(c)} curl -si http://b.b.svc.cluster.local:8080/hello     # 403 RBAC: access denied (C is not A)
  ${ipx(mesh.world)} curl -sS http://${meshAddr.pod(2)}:8080/hello     # plaintext from outside the mesh: refused, empty reply (STRICT)
  ${ipx(mesh.world)} openssl s_client -connect ${meshAddr.pod(2)}:8080 -alpn istio-http/1.1 -cert ${id}/a.pem -key ${id}/a.key </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName   # B's SPIFFE identity
  ${ipx(mesh.world)} ${meshctl} proxy-status --xds-address 127.0.0.1:15010 --plaintext   # the three sidecars, SYNCED
  ${ipx(a)} curl -s localhost:15000/config_dump | head -40        # A's sidecar config, Envoy's shape
  ${ipx(b)} curl -s localhost:15020/stats/prometheus | grep -c .   # B's merged metrics: its agent's, then its proxy's
${prometheus ? metricsLines(ipx(mesh.world), meshctl) : noPrometheusLine()}
The demo is ready. Ctrl-C stops everything.`);
}

const PROMETHEUS = 'http://127.0.0.1:9090';

/** Why the demo has no Prometheus: not installed (its start failure was already reported). */
function noPrometheusLine() {
  return prometheusPath() ? '' : '\n  (no Prometheus here: `apt-get install -y prometheus` adds `meshctl x metrics` to this demo)\n';
}

function metricsLines(ipxWorld, meshctl) {
  return `
Prometheus (${PROMETHEUS} in the discovery namespace, every 5 s) scrapes each pod's merged 15020 endpoint; after a
few requests from A to B:

  ${ipxWorld} ${meshctl} x metrics b.b                # server-side RPS, error RPS, p50/p90/p99 of B over 1m
  ${ipxWorld} curl -s '${PROMETHEUS}/api/v1/query?query=up'   # the three pods' scrapes
  ${ipxWorld} ${meshctl} dashboard metrics-ui --browser=false   # Prometheus's UI through a local port
`;
}

/** Prometheus in the discovery namespace scraping the pods' 15020 (file SD), or undefined when not installed. */
async function startDemoPrometheus(cleanup, mesh, dir) {
  if (!prometheusPath()) return undefined;
  const home = `${dir}/prometheus`;
  mkdirSync(home);
  const targets = Object.keys(mesh.ns).map((name, k) => ({
    targets: [`${meshAddr.pod(k + 1)}:15020`],
    // the labels Istio's kubernetes-pods job gives a pod's series
    labels: { namespace: name, pod: `${name}-1`, app: name },
  }));
  try {
    await startPrometheus(cleanup, {
      dir: home,
      port: 9090,
      netns: mesh.world,
      targets,
      interval: '5s',
      onOutput: (chunk) => appendFileSync(`${mesh.logs}/prometheus.log`, chunk),
    });
    await waitFor('Prometheus ready', () => httpGetIn(mesh.world, `${PROMETHEUS}/-/ready`).status === 200, { timeoutMs: 30_000, intervalMs: 250 });
    return PROMETHEUS;
  } catch (e) {
    console.error(`Prometheus did not start (${e.message}); the demo goes on without it`);
    return undefined;
  }
}

/**
 * True when this process has a mount namespace of its own, e.g. under `ip netns exec`: some ancestor (the
 * user's shell) has another one. Ancestors, not pid 1, whose namespace a container may not let us read.
 */
function ownMountNamespace() {
  const mnt = (pid) => {
    try {
      return readlinkSync(`/proc/${pid}/ns/mnt`);
    } catch {
      return undefined;
    }
  };
  const own = mnt('self');
  for (let pid = process.ppid; own && pid > 1;) {
    const theirs = mnt(pid);
    if (theirs === undefined) return false;
    if (theirs !== own) return true;
    // field 4 of /proc/<pid>/stat, after the parenthesised command name
    pid = Number(
      readFileSync(`/proc/${pid}/stat`, 'utf8')
        .replace(/^.*\) /s, '')
        .split(' ')[1],
    );
  }
  return false;
}
