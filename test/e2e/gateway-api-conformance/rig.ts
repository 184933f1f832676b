// The rig the conformance runner drives: one `pilot-discovery discovery --configDir` (plaintext xDS, no cluster)
// holding the suite's base manifests, an echo backend per Service, and one `pilot-agent proxy router` per Gateway,
// labelled `gateway.networking.k8s.io/gateway-name: <name>` as Istio's deployment controller labels a Gateway's pods.
// A test's manifests are one more file in the config directory, written for the test and removed after it, as the
// suite applies and deletes them (conformance/utils/suite: Applier, cleanup).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { stringify } from 'yaml';
import { startIssuer } from '../../ca/helpers';
import { startDiscovery, type RunningDaemon } from '../../helpers/daemon';
import { type EchoBackend, type EchoRequest, startEchoBackend, startGrpcEchoBackend } from '../../helpers/echo-backend';
import type { DataPlane } from '../../helpers/envoy';
import { startRouter, type RunningRouter } from '../../helpers/gateway';
import { freePort } from '../../helpers/ports';
import { tempDir } from '../../helpers/temp';
import { configDocs, deploymentOf, type Doc, listenerPorts, parseDocs, podName, services } from './manifests';
import type { Reply, StatusList } from './expect';

export const MANIFESTS = fileURLToPath(new URL('manifests', import.meta.url));

export function manifestDocs(file: string): Doc[] {
  return parseDocs(fs.readFileSync(path.join(MANIFESTS, file.replace(/^tests\//, 'tests/')), 'utf8'));
}

/** The Secrets the suite creates at start (conformance/utils/suite/suite.go), self-signed for the same names. */
const SECRETS = [
  ['gateway-conformance-web-backend', 'certificate', ['*']],
  ['gateway-conformance-infra', 'tls-validity-checks-certificate', ['*', '*.org']],
  ['gateway-conformance-infra', 'tls-passthrough-checks-certificate', ['abc.example.com']],
  ['gateway-conformance-app-backend', 'tls-passthrough-checks-certificate', ['abc.example.com']],
] as const;

/** kubernetes.MustCreateSelfSignedCertSecret: a self-signed certificate for `hosts` (its own CA, as the suite's). */
function selfSigned(dir: string, hosts: readonly string[]): { cert: string; key: string } {
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'tls.key',
      '-out',
      'tls.crt',
      '-days',
      '2',
      '-subj',
      '/O=gateway-conformance',
    ].concat(['-addext', `subjectAltName=${hosts.map((h) => `DNS:${h}`).join(',')}`]),
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl: ${r.stderr}`);
  return { cert: fs.readFileSync(path.join(dir, 'tls.crt'), 'utf8'), key: fs.readFileSync(path.join(dir, 'tls.key'), 'utf8') };
}

function secretDocs(dir: string): Doc[] {
  return SECRETS.map(([ns, name, hosts]) => {
    const d = path.join(dir, `${ns}-${name}`);
    fs.mkdirSync(d, { recursive: true });
    const c = selfSigned(d, hosts);
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: ns },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': Buffer.from(c.cert).toString('base64'), 'tls.key': Buffer.from(c.key).toString('base64') },
    };
  });
}

export interface ConformanceRig {
  daemon: RunningDaemon;
  /** The echo backend of each Service that selects pods (`ns/name`; Services selecting the same pods share one). */
  backends: Map<string, EchoBackend>;
  /** The echo backend standing in for each Deployment's pod (`ns/name` of the Deployment). */
  pods: Map<string, EchoBackend>;
  /** Writes (or with no docs removes) the test's manifests file. */
  apply(docs: readonly Doc[] | undefined): void;
  status(): Promise<StatusList>;
  /** Starts the routers of these Gateways (ns/name) not running yet; stops those of other non-base Gateways. */
  routersFor(gateways: readonly string[]): Promise<void>;
  listenerPort(gateway: string, port: number): number;
  /** The manifest's port of a placed listener port (for a Location header), or undefined. */
  manifestPort(port: number): number | undefined;
  /** One request; with `tls`, over TLS to that server name trusting that PEM (the suite's MakeTLSRequest). */
  request(
    port: number,
    o: { method?: string; path: string; headers: Record<string, string>; tls?: { servername: string; ca: string } },
  ): Promise<Reply>;
  /** The output of a Gateway's (`ns/name`) router so far ('' when none runs): printed when a test fails. */
  routerOut(gateway: string): string;
  /** A Secret's tls.crt (PEM) as the rig wrote it (`ns/name`), or undefined: the suite's GetTLSSecret. */
  secretCert(secret: string): string | undefined;
}

export async function startConformanceRig(
  t: Test,
  o: {
    tests: readonly Doc[][];
    dataPlane: DataPlane;
    /** More daemon environment (tls.test.ts: PILOT_ENABLE_ALPHA_GATEWAY_API). */
    env?: Record<string, string>;
    /** Services (`ns/name`) whose echo backend serves HTTPS with this PEM key pair (tls.test.ts: the tls-backends). */
    tlsBackends?: ReadonlyMap<string, { cert: string; key: string }>;
  },
): Promise<ConformanceRig> {
  const dir = tempDir(t, 'mesh-gwconf-');
  const base = manifestDocs('base.yaml');
  const all = [base, ...o.tests].flat();
  const backends = new Map<string, EchoBackend>();
  const pods = new Map<string, EchoBackend>();
  for (const svc of new Set(services(all))) {
    // a Service's endpoints are the pods it selects: one echo server per Deployment
    const dep = deploymentOf(all, svc);
    if (!dep) continue;
    const [namespace, name] = dep.split('/') as [string, string];
    // the suite's grpc-infra-backend-* Deployments run its gRPC echo server, the others its HTTP one
    const start = name.startsWith('grpc-') ? startGrpcEchoBackend : startEchoBackend;
    const tls = o.tlsBackends?.get(svc);
    if (!pods.has(dep))
      pods.set(
        dep,
        tls
          ? await startEchoBackend(t, { namespace, service: name, pod: podName(dep) }, tls)
          : await start(t, { namespace, service: name, pod: podName(dep) }),
      );
    backends.set(svc, pods.get(dep)!);
  }
  // Every port this rig hands out is different: a router's static listeners (admin, status…) once got the port a
  // Gateway listener had been given, and that router never became ready (freePort releases what it found).
  const given = new Set<number>();
  const port = async (): Promise<number> => {
    let p = await freePort();
    while (given.has(p)) p = await freePort();
    given.add(p);
    return p;
  };
  const ports = new Map<string, number>();
  for (const lp of listenerPorts(all)) ports.set(`${lp.gateway}:${lp.port}`, await port());
  const place = {
    listenerPort: (gw: string, port: number) => ports.get(`${gw}:${port}`)!,
    backendPort: (svc: string) => backends.get(svc)?.port,
    podPort: (pod: string) => [...pods.values()].find((b) => `${b.pod.namespace}/${b.pod.pod}` === pod)?.port,
  };
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  const write = (file: string, docs: readonly Doc[]) =>
    fs.writeFileSync(
      path.join(configDir, file),
      configDocs(docs, place)
        .map((d) => stringify(d))
        .join('---\n'),
    );
  const secrets = secretDocs(path.join(dir, 'secrets'));
  write('base.yaml', [...base, ...secrets]);
  // The control plane secured as out of the box (test/helpers/gateway.ts): each router authenticates to the
  // daemon's CA with a token from a loopback OIDC issuer and gets the workload certificate its clusters wait for.
  const issuer = await startIssuer(t);
  const secure = await port();
  const daemon = await startDiscovery({ configDir, securePort: secure, cwd: dir, env: { JWT_RULE: issuer.rule(), ...o.env } });
  t.teardown(() => daemon.stop());

  const baseGateways = new Set(base.filter((d) => d.kind === 'Gateway').map((d) => `${d.metadata!.namespace}/${d.metadata!.name}`));
  const routers = new Map<string, RunningRouter>();
  let routerDirs = 0;
  const startOne = async (gw: string): Promise<RunningRouter> => {
    const [ns, name] = gw.split('/') as [string, string];
    // short: the agent's unix sockets live under it (sun_path holds 108 bytes)
    const rdir = path.join(dir, `r${routerDirs++}`);
    fs.mkdirSync(rdir, { recursive: true });
    fs.mkdirSync(path.join(rdir, 'var/run/secrets/tokens'), { recursive: true });
    fs.writeFileSync(path.join(rdir, 'var/run/secrets/tokens/mesh-token'), await issuer.token({ ns, sa: 'ingressgateway', expSeconds: 4 * 3600 }));
    // the root the daemon publishes in its directory, where the agent looks for it
    fs.symlinkSync(path.join(dir, 'var/run/secrets/mesh'), path.join(rdir, 'var/run/secrets/mesh'));
    fs.writeFileSync(path.join(rdir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${secure}\n`);
    return startRouter(t, {
      dir: rdir,
      ports: { status: await port(), admin: await port(), proxyStatus: await port(), metrics: await port() },
      env: { POD_NAME: `${name}-0`, POD_NAMESPACE: ns, MESH_METAJSON_LABELS: JSON.stringify({ 'gateway.networking.k8s.io/gateway-name': name }) },
      dataPlane: o.dataPlane,
      daemonLog: () => daemon.log(),
    });
  };
  return {
    daemon,
    backends,
    pods,
    apply: (docs) => {
      const file = path.join(configDir, 'test.yaml');
      if (docs) write('test.yaml', docs);
      else fs.rmSync(file, { force: true });
    },
    status: async () => (await (await fetch(`http://${daemon.http}/debug/gateway-status`)).json()) as StatusList,
    routersFor: async (gateways) => {
      for (const [gw, r] of routers)
        if (!baseGateways.has(gw) && !gateways.includes(gw)) {
          await r.stop();
          routers.delete(gw);
        }
      // a router that does not get ready names its Gateway (the caller fails the test with it)
      await Promise.all(
        gateways
          .filter((gw) => !routers.has(gw))
          .map(async (gw) =>
            routers.set(
              gw,
              await startOne(gw).catch((e: Error) => {
                throw new Error(`router of ${gw}: ${e.message}`);
              }),
            ),
          ),
      );
    },
    listenerPort: place.listenerPort,
    manifestPort: (port) => {
      for (const [k, v] of ports) if (v === port) return Number(k.slice(k.lastIndexOf(':') + 1));
      return undefined;
    },
    request: (port, r) => request(port, r),
    routerOut: (gw) => routers.get(gw)?.out() ?? '',
    secretCert: (secret) => {
      const d = secrets.find((x) => `${x.metadata?.namespace}/${x.metadata?.name}` === secret);
      return d && Buffer.from((d['data'] as Record<string, string>)['tls.crt']!, 'base64').toString('utf8');
    },
  };
}

/**
 * The suite's client is Go's: crypto/x509 VerifyHostname matches a DNS SAN label by label, a `*` standing for any
 * one leftmost label (`*.org` covers `example.org`), where Node's checkServerIdentity refuses a wildcard over two
 * labels. The suite's Secret for HTTPRouteHTTPSListener is `*.org`, so its client's rule is the one to apply.
 */
function goVerifyHostname(host: string, cert: { subjectaltname?: string }): Error | undefined {
  const sans = (cert.subjectaltname ?? '')
    .split(', ')
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4).toLowerCase());
  const want = host.toLowerCase().replace(/\.$/, '').split('.');
  const matches = (pattern: string): boolean => {
    const p = pattern.replace(/\.$/, '').split('.');
    return p.length === want.length && p.every((l, i) => (i === 0 && l === '*') || l === want[i]);
  };
  return sans.some(matches) ? undefined : new Error(`x509: certificate is valid for ${sans.join(', ')}, not ${host}`);
}

function request(
  port: number,
  r: { method?: string; path: string; headers: Record<string, string>; tls?: { servername: string; ca: string } },
): Promise<Reply> {
  return new Promise<Reply>((resolve) => {
    const o = { host: '127.0.0.1', port, method: r.method ?? 'GET', path: r.path, headers: r.headers, agent: false as const };
    const send = r.tls
      ? (cb: (res: http.IncomingMessage) => void) => https.request({ ...o, ...r.tls, checkServerIdentity: goVerifyHostname }, cb)
      : (cb: (res: http.IncomingMessage) => void) => http.request(o, cb);
    const req = send((res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        let echo: EchoRequest | undefined;
        try {
          const j = JSON.parse(body) as EchoRequest;
          if (typeof j.pod === 'string') echo = j;
        } catch {
          // not the echo backend's answer
        }
        // each header line apart, as Go's http.Header keeps them (Node's res.headers joins repeats with ", ")
        const headers: Record<string, string[]> = {};
        for (let i = 0; i < res.rawHeaders.length; i += 2) (headers[res.rawHeaders[i]!.toLowerCase()] ??= []).push(res.rawHeaders[i + 1]!);
        resolve({ status: res.statusCode ?? 0, headers, echo });
      });
    });
    // A refused or reset connection is a reply the suite retries too (its round trip fails).
    req.on('error', (err) => resolve({ status: 0, headers: {}, error: err.message }));
    req.setTimeout(10_000, () => req.destroy());
    req.end();
  });
}
