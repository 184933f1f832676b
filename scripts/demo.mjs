// The main job on loopback: JWT claim routing at an ingress gateway (doc 1). A token issuer with a JWKS
// endpoint, the discovery daemon on examples/claim-routing, the httpbin-like sample workload and an ingress
// gateway (`pilot-agent proxy router`), then ready-to-paste curl commands with real tokens. The control plane
// is secured as it is out of the box: the gateway proves who it is to the daemon's CA with a token from the
// same issuer (JWT_RULE, the no-cluster credential), gets its SPIFFE certificate and speaks xDS over mutual
// TLS to :15012, trusting the root the daemon published.
// `npm run demo -- gateway` runs the plain gateway example (examples/gateway) instead; `npm run demo -- mesh`
// runs east-west mutual TLS between captured pods in network namespaces (root; scripts/lib/mesh-demo.mjs).
// Ctrl-C stops everything and removes what the demo created.
//   npm run demo        (after npm run build)
//   node demo.mjs       (in the release tarball, where this script sits beside the executable, bundled)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startIssuer } from '../examples/claim-routing/issuer.mjs';
import { runMeshDemo } from './lib/mesh-demo.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
// The release tarball holds this script (bundled) beside the executable and examples/; a checkout has it
// in scripts/ with the executable in dist/.
const inTarball = existsSync(path.join(here, 'mesh')) && existsSync(path.join(here, 'examples'));
const root = inTarball ? here : path.resolve(here, '..');
const dist = inTarball ? here : path.join(root, 'dist');
const children = [];
const created = [];
let issuer;

function start(name, file, args, env = {}, cwd = root) {
  const child = spawn(file, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const prefix = `[${name}] `;
  for (const s of [child.stdout, child.stderr]) s.on('data', (d) => process.stdout.write(d.toString().replace(/^(?=.)/gm, prefix)));
  child.on('exit', (code) => {
    if (!stopping) {
      console.error(`${name} exited with ${code}; stopping the demo`);
      stop(1);
    }
  });
  children.push(child);
  return child;
}

let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  const exits = children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => new Promise((r) => c.once('exit', r)));
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  const force = setTimeout(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')), 5000);
  await Promise.all(exits);
  clearTimeout(force);
  await issuer?.close();
  for (const dir of created) rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}

async function waitReady(url, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what} did not become ready at ${url}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const example = process.argv[2] ?? 'claim-routing';
if (!['claim-routing', 'gateway', 'mesh'].includes(example)) {
  console.error(`unknown example ${JSON.stringify(example)}: claim-routing (default), gateway or mesh`);
  process.exit(2);
}
if (example === 'mesh') {
  await runMeshDemo({ dist });
  // stays up: runMeshDemo exits the process on Ctrl-C, SIGTERM or a failed start
  setInterval(() => undefined, 1 << 30);
  await new Promise(() => undefined);
}
// Every fixed port the demo's programs bind. A port another program holds would otherwise surface as a
// Node stack trace or a child exiting mid-start: say which one, once, before starting anything.
const PORTS = [
  [19443, 'the token issuer'],
  [19090, 'the httpbin sample'],
  [15010, 'pilot-discovery (xDS)'],
  [15012, 'pilot-discovery (secured xDS and CA)'],
  [15017, 'pilot-discovery (webhooks)'],
  [8080, 'pilot-discovery (debug HTTP)'],
  [15014, 'pilot-discovery (metrics)'],
  [18080, 'the gateway (listener)'],
  [15000, 'the gateway (admin)'],
  [15020, 'the gateway (status)'],
  [15021, 'the gateway (health)'],
  [15090, 'the gateway (Prometheus stats)'],
];
for (const [port, who] of PORTS) {
  const err = await new Promise((resolve) => {
    const s = createServer()
      .once('error', resolve)
      .listen(port, '127.0.0.1', () => s.close(() => resolve(undefined)));
  });
  if (err) {
    console.error(
      `npm run demo: port ${port} on 127.0.0.1, needed by ${who}, is ${err.code === 'EADDRINUSE' ? 'in use by another program' : `not available (${err.code ?? err.message})`}; stop that program (ss -ltnp 'sport = :${port}' shows it) and run the demo again`,
    );
    process.exit(1);
  }
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
const exampleDir = path.join(root, 'examples', example);
// config/ holds only resources (what --configDir serves); mesh.yaml beside it is the gateway's mesh config.
const configDir = path.join(exampleDir, 'config');
// The issuer comes first: the daemon trusts it for workload identities (JWT_RULE) and, in claim-routing,
// fetches its key set when it first generates the gateway's config.
issuer = await startIssuer({ port: 19443 });

start('httpbin', process.execPath, [path.join(root, 'examples/httpbin.mjs'), '19090']);
// The daemon's working directory holds its CA root (./var/lib/mesh/ca) and the root it publishes
// (./var/run/secrets/mesh/root-cert.pem) for workloads to trust.
const daemonDir = mkdtempSync(path.join(tmpdir(), 'mesh-discovery-'));
created.push(daemonDir);
start(
  'discovery',
  path.join(dist, 'pilot-discovery'),
  [
    'discovery',
    '--configDir',
    configDir,
    '--grpcAddr',
    '127.0.0.1:15010',
    '--secureGRPCAddr',
    '127.0.0.1:15012',
    '--httpsAddr',
    '127.0.0.1:15017',
    '--httpAddr',
    '127.0.0.1:8080',
    '--monitoringAddr',
    '127.0.0.1:15014',
  ],
  {
    // A workload with no cluster authenticates with a token of this issuer: sub system:serviceaccount:<ns>:<sa>.
    JWT_RULE: JSON.stringify({ issuer: issuer.issuer, jwks_uri: issuer.jwksUri, audiences: ['mesh-ca'] }),
  },
  daemonDir,
);
await waitReady('http://127.0.0.1:8080/ready', 'pilot-discovery');
// The gateway's working directory holds its bootstrap, xDS and SDS sockets and its token, as a pod's would.
const gwDir = mkdtempSync(path.join(tmpdir(), 'mesh-gateway-'));
created.push(gwDir);
mkdirSync(path.join(gwDir, 'var/run/secrets/tokens'), { recursive: true });
const identityToken = await issuer.mint(
  { sub: 'system:serviceaccount:mesh-system:ingressgateway' },
  { audience: 'mesh-ca', exp: Math.floor(Date.now() / 1000) + 24 * 3600 },
);
writeFileSync(path.join(gwDir, 'var/run/secrets/tokens/mesh-token'), identityToken, { mode: 0o600 });
const publishedRoot = path.join(daemonDir, 'var/run/secrets/mesh/root-cert.pem');
start(
  'gateway',
  path.join(dist, 'pilot-agent'),
  ['proxy', 'router', '--meshConfig', path.join(exampleDir, 'mesh.yaml')],
  {
    POD_NAME: 'gateway-0',
    POD_NAMESPACE: 'mesh-system',
    SERVICE_ACCOUNT: 'ingressgateway',
    INSTANCE_IP: '127.0.0.1',
    MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
    // Trust the root the daemon published, for xDS and for the CA.
    XDS_ROOT_CA: publishedRoot,
    CA_ROOT_CA: publishedRoot,
  },
  gwDir,
);
await waitReady('http://127.0.0.1:15021/healthz/ready', 'the gateway');

const identity = `
The gateway holds the certificate spiffe://cluster.local/ns/mesh-system/sa/ingressgateway from the daemon's
CA (xDS and CA on :15012 over mutual TLS; the root is ${publishedRoot}):

  curl -s http://127.0.0.1:15020/stats/prometheus | grep '^cert_expiry_seconds'   # seconds until it is renewed… and expires
  curl -s http://127.0.0.1:15014/metrics | grep '^ca_server_success_cert_issuance_count'`;

if (example === 'claim-routing') {
  const good = await issuer.mint({ groups: ['group1'], team: 'payments' });
  const other = await issuer.mint({ groups: ['group2'] });
  const bad = await issuer.mintBadSignature({ groups: ['group1'] });
  const expired = await issuer.mint({ groups: ['group1'] }, { exp: Math.floor(Date.now() / 1000) - 600 });
  console.log(`
mesh is running on loopback: a token issuer (${issuer.jwksUri}), discovery (xDS :15010, secured xDS and
CA :15012, debug :8080, metrics :15014), the ingress gateway (listener :18080, admin :15000, status :15020/:15021) and the httpbin
sample (:19090). GET /headers is routed only for a valid token whose groups claim holds group1
(examples/claim-routing/config/gateway.yaml); GET /get needs any valid token (authorizationpolicy.yaml). Try:

  TOKEN=${good}
  curl -si http://127.0.0.1:18080/headers -H "Authorization: Bearer $TOKEN"   # 200 from the workload

  curl -si http://127.0.0.1:18080/headers                                     # 404: no token, no claim, no route
  curl -si http://127.0.0.1:18080/headers -H "Authorization: Bearer ${other}"   # 404: valid token, groups [group2]
  curl -si http://127.0.0.1:18080/headers -H "Authorization: Bearer ${bad}"   # 401: bad signature
  curl -si http://127.0.0.1:18080/headers -H "Authorization: Bearer ${expired}"   # 401: expired
  curl -si http://127.0.0.1:18080/get                                         # 403: the policy requires a token
  curl -si http://127.0.0.1:18080/get -H "Authorization: Bearer $TOKEN"       # 200

  curl -s http://127.0.0.1:15000/config_dump | grep -A3 jwt_authn   # the gateway's jwt_authn filter (inline JWKS)
  curl -s http://127.0.0.1:15014/metrics | grep jwks                # the daemon's key-set fetches
${identity}

Ctrl-C stops everything.`);
} else {
  console.log(`
mesh is running on loopback: discovery (xDS :15010, secured xDS and CA :15012, debug :8080, metrics
:15014), the ingress gateway (listener :18080, admin :15000, status :15020/:15021), the httpbin sample
(:19090) and the token issuer the daemon trusts for workload identities (${issuer.jwksUri}). Try:

  curl -s http://127.0.0.1:18080/headers                 # routed by the gateway to the sample workload
  curl -si http://127.0.0.1:18080/nowhere                # 404 from the gateway: no route
  curl -s http://127.0.0.1:15000/config_dump | head -40  # the gateway's config, Envoy's shape
  curl -s http://127.0.0.1:8080/debug/adsz               # the daemon's view of connected proxies
  ${inTarball ? './' : 'dist/'}pilot-agent request GET config_dump | head        # the same through the agent
  curl -s http://127.0.0.1:18080/get                     # routed too; now delete its line, \`- uri: {prefix: /get}\`, in
                                                         # examples/gateway/config/gateway.yaml and curl it again: 404 from
                                                         # the gateway within a second, /headers still 200, no restart
${identity}

Ctrl-C stops everything.`);
}
