// The differential harness for sidecars with capture (issue 27, item 3): the pods of scripts/lib/mesh-pods.mjs
// (network namespaces, `mesh-iptables` capture, an agent per pod as uid 1337, the app as another user,
// pilot-discovery in a world namespace) started with each pod's data plane chosen — our engine, or the real Envoy
// as the agent's child (ProxyConfig.binaryPath) — and one list of steps (config files written, then calls made from
// inside the pods or the world) observed the same way on every run, so two runs compare field by field with
// differential.ts's comparison. Pods: A (10.89.1.2) and C (10.89.3.2) call, B (10.89.2.2, service VIP 10.89.9.12)
// answers; `external` adds an app in the world (10.89.1.1 seen from A) that no registry names, for passthrough.
// Observations follow what Envoy's docs say a client or upstream sees (router, HCM, XFCC); only what differs from
// run to run is normalised: request/trace ids (presence kept) and the hash of a workload certificate in XFCC
// (replaced by the name of the pod whose certificate it is: each run makes its own certificates).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { DIST } from './binary';
import { type DataPlane, envoyPath } from './envoy';
import { tempDir } from './temp';
import { waitFor } from './wait';
import { ANY, cellOf, differences, type KnownDifference, normaliseHeaders, type Observation, wherePattern } from './differential';
import { callIn, httpGetIn, meshAddr, sh, startApp, startMesh, type Mesh, type MeshPod } from '../../scripts/lib/mesh-pods.mjs';

export type Pod = 'a' | 'b' | 'c';
export const PODS: readonly Pod[] = ['a', 'b', 'c'];
/** Each pod's data plane in one run. */
export type Planes = Record<Pod, DataPlane>;
export const allOn = (plane: DataPlane): Planes => ({ a: plane, b: plane, c: plane });

/** Addresses the steps name (pods are numbered as startMesh numbers them: a 1, b 2, c 3). */
export const ADDR = {
  pod: (p: Pod) => meshAddr.pod(PODS.indexOf(p) + 1),
  vip: (p: Pod) => meshAddr.vip(PODS.indexOf(p) + 1),
  /** the world's side of A's link, where the `external` app listens */
  external: meshAddr.gateway(1),
};
export const hostOf = (p: Pod) => `${p}.${p}.svc.cluster.local`;

/**
 * An HTTP/2 exchange (h2c by prior knowledge, as an app speaks to its sidecar): gRPC when `grpc` gives the
 * messages (sent one by one; with `stream`, each after the answer to the one before), else one request.
 */
export interface H2Exchange {
  path: string;
  method?: string;
  /** default the call's `host`, else `<to>:<port>` */
  authority?: string;
  headers?: Record<string, string>;
  body?: string;
  grpc?: string[];
  stream?: boolean;
}

/** One call: HTTP/1.1 (default), HTTP/2 or gRPC, a TCP line, or the certificate a TLS server shows (openssl s_client from the world). */
export interface MeshCall {
  name: string;
  /** the caller: a pod's app (captured) or a plain client in the world (no sidecar) */
  from: Pod | 'world';
  kind?: 'http' | 'h2' | 'tcp' | 'tls-san';
  /** kind h2: what is sent */
  h2?: H2Exchange;
  /** an address or a name the pod resolves */
  to: string;
  port: number;
  /** HTTP: Host header (default none: the address) */
  host?: string;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** TCP: the line sent (default `ping`) */
  line?: string;
}

export interface MeshStep {
  name: string;
  /** config files written into the daemon's watched directory before the step (null: removed) */
  files?: Record<string, string | null>;
  /**
   * calls repeated until `ok` holds of each one's observation: the step's config has reached the proxies (on
   * Envoy, connections opened before a listener update keep the old filter chain until drained, so a pod
   * whose calls the step observes needs a check of its own)
   */
  until?: Array<{ call: MeshCall; ok: (o: Observation) => boolean }>;
  calls: MeshCall[];
}

export interface MeshScenario {
  name: string;
  pods?: Partial<Record<Pod, Omit<MeshPod, 'name' | 'binaryPath'>>>;
  /** config files beside the registry from the start */
  config?: Record<string, string>;
  meshConfig?: string;
  /** an app in the world on 8080 (HTTP) and 7000 (TCP), unknown to the mesh */
  external?: boolean;
  steps: MeshStep[];
}

export interface MeshRun {
  observations: Record<string, Observation>;
  nacks: string[];
}

/** What a caller observed of one HTTP reply: the app's JSON structurally (with every header it got), else as text. */
function observeHttp(r: Record<string, unknown>, hashes: Record<string, string>): Observation {
  if ('error' in r) return { error: r['error'] };
  const text = Object.entries(hashes).reduce((s, [hex, pod]) => s.replaceAll(hex, `<certificate of ${pod}>`), String(r['body']));
  let app: Record<string, unknown> | undefined;
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (typeof v['server'] === 'string') app = v;
  } catch {
    // not the app's JSON: a proxy's own answer
  }
  const drop = new Set(['date', 'server', ...(app ? ['content-length'] : [])]);
  const o: Observation = { status: r['status'], headers: normaliseHeaders((r['headers'] ?? {}) as Record<string, string>, drop) };
  if (app) o['app'] = { ...app, headers: normaliseHeaders((app['headers'] ?? {}) as Record<string, string>, new Set()) };
  else o['body'] = text;
  return o;
}

/**
 * What a caller observed of an HTTP/2 exchange: as observeHttp for a plain request; for gRPC the status, response
 * headers, trailers (absent for a trailers-only answer) and messages.
 */
function observeH2(r: Record<string, unknown>, hashes: Record<string, string>): Observation {
  if ('error' in r || !('messages' in r)) return observeHttp(r, hashes);
  const o: Observation = {
    status: r['status'],
    headers: normaliseHeaders((r['headers'] ?? {}) as Record<string, string>, new Set(['date', 'server'])),
  };
  if (r['trailers']) o['trailers'] = normaliseHeaders(r['trailers'] as Record<string, string>, new Set());
  o['messages'] = r['messages'];
  return o;
}

/** The SAN of the certificate a TLS server at `to:port` shows a client holding A's certificate (ALPN istio-http/1.1). */
function tlsSan(mesh: Mesh, c: MeshCall): Observation {
  const id = mesh.identitiesDir;
  const r = sh(
    [
      'ip',
      'netns',
      'exec',
      mesh.world,
      'openssl',
      's_client',
      '-connect',
      `${c.to}:${c.port}`,
      '-alpn',
      'istio-http/1.1',
      '-cert',
      `${id}/a.pem`,
      '-key',
      `${id}/a.key`,
    ],
    { input: '' },
  );
  const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(r.stdout)?.[0];
  return pem ? { san: new crypto.X509Certificate(pem).subjectAltName } : { error: 'no certificate shown' };
}

function call(mesh: Mesh, c: MeshCall, hashes: Record<string, string>): Observation {
  const ns = c.from === 'world' ? mesh.world : mesh.ns[c.from]!;
  const asApp = c.from !== 'world';
  if (c.kind === 'tls-san') return tlsSan(mesh, c);
  if (c.kind === 'tcp') return callIn(ns, asApp, 'tcp', c.to, String(c.port), c.line ?? 'ping');
  if (c.kind === 'h2') {
    const x = { authority: c.host, ...c.h2, headers: { 'x-echo-headers': '1', ...c.h2?.headers } };
    return observeH2(callIn(ns, asApp, 'h2', c.to, String(c.port), JSON.stringify(x)), hashes);
  }
  const more = JSON.stringify({ method: c.method ?? 'GET', headers: { 'x-echo-headers': '1', ...c.headers } });
  return observeHttp(callIn(ns, asApp, 'http', c.to, String(c.port), c.host ?? '', c.path ?? '/hello', more), hashes);
}

/** sha256 of each pod's certificate (XFCC's Hash), to the pod's name. */
function certificateHashes(mesh: Mesh): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of PODS) {
    const pem = fs.readFileSync(path.join(mesh.identitiesDir, `${p}.pem`), 'utf8');
    out[crypto.createHash('sha256').update(new crypto.X509Certificate(pem).raw).digest('hex')] = p;
  }
  return out;
}

/**
 * Every sign of a rejected config in a run: the daemon's pilot_total_xds_rejects above zero and its `ACK ERROR`
 * lines, an agent's `rejected` lines, and each Envoy's own `update_rejected` counters above zero.
 */
function meshNacks(mesh: Mesh, planes: Planes): string[] {
  const metrics = httpGetIn(mesh.world, 'http://127.0.0.1:15014/metrics').body;
  const out = [
    ...metrics.split('\n').filter((l) => /^pilot_total_xds_rejects\b/.test(l) && !/ 0$/.test(l)),
    ...mesh.discovery
      .out()
      .split('\n')
      .filter((l) => l.includes('ACK ERROR')),
  ];
  for (const p of PODS) {
    out.push(
      ...mesh.sidecars[p]!.out()
        .split('\n')
        .filter((l) => /gRPC config for \S+ rejected/.test(l)),
    );
    if (planes[p] !== 'envoy') continue;
    const stats = httpGetIn(mesh.ns[p]!, 'http://127.0.0.1:15000/stats?filter=update_rejected');
    if (stats.status !== 200) out.push(`${p}: Envoy's stats unreadable (${stats.status})`);
    out.push(
      ...stats.body
        .split('\n')
        .filter((l) => /update_rejected: [1-9]/.test(l))
        .map((l) => `${p}: ${l}`),
    );
  }
  return out;
}

/** How many times in a row a step's `until` checks must hold. */
const UNTIL_IN_A_ROW = 5;

/** Runs the scenario's steps on a mesh whose pods have `planes`, in the subtest `t` (torn down at its end). */
export async function runMeshScenario(t: Test, s: MeshScenario, planes: Planes): Promise<MeshRun> {
  const dir = tempDir(t, 'mesh-diff-');
  // the sidecars (uid 1337) live in subdirectories
  fs.chmodSync(dir, 0o755);
  const mesh = await startMesh(t, {
    dist: DIST,
    dir,
    pods: PODS.map((name) => ({ ...s.pods?.[name], name, binaryPath: planes[name] === 'envoy' ? envoyPath() : undefined })),
    config: s.config,
    meshConfig: s.meshConfig,
    prefix: 'mdiff',
    // the agent's output through a pipe, as a container runtime gives it: Envoy opens the mesh's
    // `accessLogFile: /dev/stdout`, which fails (ENXIO, every listener refused) on the socket node's spawn makes
    sidecarCommand: () => ['sh', '-c', '"$@" | cat', 'sh', path.join(DIST, 'pilot-agent')],
  });
  if (s.external) await startApp(t, mesh.world, 'external', { httpPort: 8080, tcpPort: 7000 });
  const hashes = certificateHashes(mesh);
  const logs = () => PODS.map((p) => `--- ${p}:\n${mesh.sidecars[p]!.out().slice(-2000)}`).join('\n');
  const observations: Record<string, Observation> = {};
  for (const step of s.steps) {
    for (const [file, yaml] of Object.entries(step.files ?? {})) {
      const f = path.join(mesh.configDir, file);
      if (yaml === null) fs.rmSync(f, { force: true });
      else fs.writeFileSync(f, yaml);
    }
    for (const until of step.until ?? []) {
      // in a row: each proxy thread keeps its own upstream connections, and one opened before the update may
      // answer once more by the old filter chain before it drains
      let streak = 0;
      await waitFor(
        () => `${s.name}: step ${step.name} never took effect (${until.call.name}: ${JSON.stringify(call(mesh, until.call, hashes))})\n${logs()}`,
        () => (streak = until.ok(call(mesh, until.call, hashes)) ? streak + 1 : 0) >= UNTIL_IN_A_ROW,
        { timeoutMs: 60_000, intervalMs: 100 },
      );
    }
    for (const c of step.calls) observations[c.name] = call(mesh, c, hashes);
  }
  return { observations, nacks: meshNacks(mesh, planes) };
}

export const planesName = (p: Planes) => PODS.map((x) => `${x}=${p[x]}`).join(' ');

/**
 * Checks two runs of `name`: the same observations but exactly the `known` differences listed for `name` (each
 * must still show with the listed values), `left` in the table's engine column and `right` in Envoy's.
 */
export function expectListed(
  t: Test,
  name: string,
  left: Record<string, Observation>,
  right: Record<string, Observation>,
  known: readonly KnownDifference[],
): void {
  const found = differences(name, left, right);
  const mine = known.filter((k) => k.where.startsWith(`${name}/`));
  const same = (listedValue: string | undefined, seen: string | undefined) => listedValue === ANY || listedValue === seen;
  const listed = (k: KnownDifference, d: (typeof found)[number]) =>
    wherePattern(k.where).test(d.where) && same(k.engine, d.engine) && same(k.envoy, d.envoy);
  const unlisted = found.filter((d) => !mine.some((k) => listed(k, d)));
  const gone = mine.filter((k) => !found.some((d) => listed(k, d)));
  for (const d of unlisted) t.comment(`| \`${d.where}\` | ${cellOf(d.engine)} | ${cellOf(d.envoy)} |`);
  t.same(unlisted, [], `${name}: the two runs observed the same, but for the README's listed differences`);
  t.same(gone, [], `${name}: every listed difference still shows (else remove its README row)`);
}

/**
 * What the reference run (Envoy's) must have observed of some calls, so that two runs cannot agree on a broken
 * mesh: each call's observation matches (t.match) its expected shape.
 */
export function expectObserved(t: Test, observations: Record<string, Observation>, expected: Record<string, object>): void {
  for (const [name, shape] of Object.entries(expected)) t.match(observations[name], shape, `${name}: as Envoy's documentation says`);
}
