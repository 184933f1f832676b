// A real Kubernetes API server per test file (../shared/kube: kube-apiserver v1.36, etcd, controller
// manager on free loopback ports), stopped in teardown, and a small REST client for the test's own
// reads and writes (plain HTTPS with the admin client certificate: the code under test has its own client).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { parseAllDocuments } from 'yaml';
import https from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO, SHARED } from './spec';
import tap from 'tap';

const run = promisify(execFile);

/**
 * ../shared/kube beside the checkout; from a git worktree elsewhere, beside the main checkout that owns
 * the repository.
 */
function kubeDir(): string {
  const candidates = [path.join(SHARED, 'kube')];
  try {
    const common = execFileSync('git', ['rev-parse', '--path-format=absolute', '--git-common-dir'], { cwd: REPO, encoding: 'utf8' }).trim();
    candidates.push(path.resolve(common, '../../shared/kube'));
  } catch {
    // not a git checkout: only the first place applies
  }
  return candidates.find((c) => existsSync(path.join(c, 'start'))) ?? candidates[0]!;
}

export const KUBE_DIR = kubeDir();

export interface KubeOptions {
  /** `--with-crds` (default all). */
  crds?: 'all' | 'istio' | 'mesh' | 'none';
  /** `--no-controller-manager` (faster; no EndpointSlices for selector Services, see the README). */
  controllerManager?: boolean;
  /** `--audit`: every request as a JSON line in `<dir>/audit.log`. */
  audit?: boolean;
  extraArgs?: string[];
}

export interface Kube {
  kubeconfig: string;
  dir: string;
  env: Record<string, string>;
  api: KubeApi;
  stop(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Starts an instance (8–20 s), registered for teardown on `t`. */
export async function startKube(t: Teardown, o: KubeOptions = {}): Promise<Kube> {
  const args = ['--owner', String(process.pid), '--with-crds', o.crds ?? 'all'];
  if (o.controllerManager === false) args.push('--no-controller-manager');
  if (o.audit) args.push('--audit');
  args.push(...(o.extraArgs ?? []));
  const { stdout } = await run(path.join(KUBE_DIR, 'start'), args, { encoding: 'utf8', timeout: 240_000, maxBuffer: 16 << 20 });
  const kubeconfig = stdout.trim().split('\n').pop()!;
  const dir = path.dirname(kubeconfig);
  const env = Object.fromEntries(
    readFileSync(path.join(dir, 'env'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  let stopped: Promise<void> | undefined;
  const kube: Kube = {
    kubeconfig,
    dir,
    env,
    api: new KubeApi(env),
    stop: () => (stopped ??= run(path.join(KUBE_DIR, 'stop'), [dir], { timeout: 60_000 }).then(() => undefined)),
  };
  t.teardown(() => kube.stop());
  return kube;
}

/** Applies CRDs of `which` (istio|mesh|all) to the instance through ../shared/kube/crds.mjs. */
export async function applyCrds(kube: Kube, which: 'istio' | 'mesh' | 'all'): Promise<void> {
  await run(process.execPath, [path.join(KUBE_DIR, 'crds.mjs'), 'apply', kube.kubeconfig, which], { timeout: 120_000 });
}

/**
 * Applies the vendored Gateway API v1.3.0 CRDs (manifests/gateway-api, Istio 1.26's version) of `channel` and waits
 * until each is Established.
 */
export async function applyGatewayApiCrds(kube: Kube, channel: 'standard' | 'experimental' = 'standard'): Promise<void> {
  const file = path.join(REPO, 'manifests/gateway-api/v1.3.0', `${channel}-install.yaml.gz`);
  const docs = parseAllDocuments(gunzipSync(readFileSync(file)).toString('utf8'))
    .map((d) => d.toJS() as Obj | null)
    .filter((d): d is Obj => !!d && d.kind === 'CustomResourceDefinition');
  for (const crd of docs) await kube.api.apply(crd);
  const deadline = Date.now() + 60_000;
  for (const crd of docs) {
    for (;;) {
      const cur = await kube.api.get(objectPath(crd));
      if ((cur.status?.conditions ?? []).some((c: Obj) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata.name} not Established after 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    message: string,
  ) {
    super(message);
  }
}

export type Obj = Record<string, any>;

/** Admin REST calls against the instance; non-2xx answers throw KubeApiError (status and body). */
export class KubeApi {
  private readonly agent: https.Agent;
  readonly url: string;

  constructor(env: Record<string, string>, user?: { cert: string; key: string }) {
    this.url = env.API_URL!;
    this.agent = new https.Agent({
      ca: readFileSync(env.KUBE_CA!),
      cert: readFileSync(user?.cert ?? env.KUBE_CLIENT_CERT!),
      key: readFileSync(user?.key ?? env.KUBE_CLIENT_KEY!),
      keepAlive: true,
      maxSockets: 16,
    });
  }

  request(method: string, p: string, body?: unknown, contentType = 'application/json'): Promise<Obj> {
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
      const req = https.request(
        new URL(this.url + p),
        {
          method,
          agent: this.agent,
          headers: { accept: 'application/json', ...(payload !== undefined ? { 'content-type': contentType } : {}) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if (status < 200 || status > 299) {
              reject(new KubeApiError(status, text, `${method} ${p}: ${status} ${text.slice(0, 400)}`));
              return;
            }
            try {
              resolve(text ? (JSON.parse(text) as Obj) : {});
            } catch (e) {
              reject(e);
            }
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  get(p: string): Promise<Obj> {
    return this.request('GET', p);
  }

  /** GET, or undefined on 404. */
  async find(p: string): Promise<Obj | undefined> {
    try {
      return await this.get(p);
    } catch (e) {
      if (e instanceof KubeApiError && e.status === 404) return undefined;
      throw e;
    }
  }

  create(collection: string, obj: Obj): Promise<Obj> {
    return this.request('POST', collection, obj);
  }

  /** Server-side apply of `obj` at its own path (the field manager owns what it sets). */
  apply(obj: Obj, fieldManager = 'mesh-test'): Promise<Obj> {
    return this.request('PATCH', `${objectPath(obj)}?fieldManager=${fieldManager}&force=true`, obj, 'application/apply-patch+yaml');
  }

  /** JSON merge patch of an object or of its status (`sub` = 'status'). */
  merge(p: string, patch: Obj, sub?: 'status'): Promise<Obj> {
    return this.request('PATCH', sub ? `${p}/${sub}` : p, patch, 'application/merge-patch+json');
  }

  delete(p: string, query = ''): Promise<Obj> {
    return this.request('DELETE', p + query);
  }

  /** Deletes, ignoring 404. */
  async remove(p: string, query = ''): Promise<void> {
    try {
      await this.delete(p, query);
    } catch (e) {
      if (!(e instanceof KubeApiError && e.status === 404)) throw e;
    }
  }

  close(): void {
    this.agent.destroy();
  }
}

const CORE_PLURALS: Record<string, string> = {
  Namespace: 'namespaces',
  Service: 'services',
  Pod: 'pods',
  Node: 'nodes',
  Secret: 'secrets',
  ConfigMap: 'configmaps',
  ServiceAccount: 'serviceaccounts',
  EndpointSlice: 'endpointslices',
  Lease: 'leases',
  CustomResourceDefinition: 'customresourcedefinitions',
};

/** REST path of an object from its apiVersion, kind, namespace and name (lower-case plural of the kind). */
export function objectPath(obj: Obj): string {
  const av = obj.apiVersion as string;
  const base = av.includes('/') ? `/apis/${av}` : `/api/${av}`;
  const plural = CORE_PLURALS[obj.kind as string] ?? `${(obj.kind as string).toLowerCase()}s`;
  const ns = obj.metadata?.namespace as string | undefined;
  const name = obj.metadata.name as string;
  return ns ? `${base}/namespaces/${ns}/${plural}/${name}` : `${base}/${plural}/${name}`;
}

// -------------------------------------------------------------------------------------------------
// Objects tests write often

export function namespace(name: string, labels: Record<string, string> = {}): Obj {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

export function node(name: string, labels: Record<string, string> = {}): Obj {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels } };
}

export function service(
  ns: string,
  name: string,
  o: { selector?: Record<string, string>; ports?: Obj[]; labels?: Record<string, string>; annotations?: Record<string, string>; spec?: Obj } = {},
): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns, labels: o.labels ?? {}, annotations: o.annotations ?? {} },
    spec: { ports: o.ports ?? [{ name: 'http', port: 80, targetPort: 8080 }], ...(o.selector ? { selector: o.selector } : {}), ...o.spec },
  };
}

export function pod(ns: string, name: string, o: { labels?: Record<string, string>; nodeName?: string; serviceAccount?: string } = {}): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: o.labels ?? {} },
    spec: {
      ...(o.nodeName ? { nodeName: o.nodeName } : {}),
      ...(o.serviceAccount ? { serviceAccountName: o.serviceAccount } : {}),
      containers: [{ name: 'app', image: 'example.invalid/app:1', ports: [{ containerPort: 8080, name: 'http' }] }],
    },
  };
}

/** The status a kubelet would write: Running with `ip`, Ready as given. */
export function podStatus(ip: string, ready = true, phase = 'Running'): Obj {
  return {
    status: {
      phase,
      podIP: ip,
      podIPs: [{ ip }],
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }],
    },
  };
}

export interface SliceEndpoint {
  ip: string;
  pod?: string;
  nodeName?: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

export function endpointSlice(
  ns: string,
  name: string,
  svc: string,
  eps: SliceEndpoint[],
  ports: Obj[] = [{ name: 'http', port: 8080, protocol: 'TCP' }],
): Obj {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports,
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      conditions: {
        ...(e.ready !== undefined ? { ready: e.ready } : {}),
        ...(e.serving !== undefined ? { serving: e.serving } : {}),
        ...(e.terminating !== undefined ? { terminating: e.terminating } : {}),
      },
      ...(e.pod ? { targetRef: { kind: 'Pod', name: e.pod, namespace: ns } } : {}),
      ...(e.nodeName ? { nodeName: e.nodeName } : {}),
    })),
  };
}

let unavailable: string | false | undefined;

/** Why the real API server cannot run here (a skip reason), or false. */
export function kubeUnavailable(): string | false {
  if (unavailable !== undefined) return unavailable;
  try {
    execFileSync(path.join(KUBE_DIR, 'start'), ['--help'], { stdio: 'ignore', timeout: 10_000 });
    unavailable = false;
  } catch (e) {
    unavailable = `../shared/kube/start is not usable here: ${(e as Error).message}`;
  }
  return unavailable;
}

/**
 * The one rule for a test file whose every test needs the real API server: where it cannot run, the whole file
 * is skipped with the reason (and with CI=true, where the suite's runner fails every skip, the run fails naming
 * it). Call it before any t.before or t.test. Files with tests that need no API server skip per test instead,
 * with `{ skip: kubeUnavailable() }`.
 */
export function requireKube(): void {
  const why = kubeUnavailable();
  if (!why) return;
  tap.plan(0, why);
  tap.end();
  process.exit(0);
}

/** The API server's port (tests that forward it into a network namespace need it). */
export function kubePort(kube: Kube): number {
  return Number(new URL(kube.api.url).port);
}

/** A client configuration with the admin's bearer token, in the shape install-cni writes for the plugin. */
export function tokenKubeconfig(kube: Kube, server = kube.api.url, token = kube.env.KUBE_TOKEN!): string {
  const ca = readFileSync(kube.env.KUBE_CA!).toString('base64');
  return [
    'apiVersion: v1',
    'clusters:',
    '- cluster:',
    `    certificate-authority-data: ${ca}`,
    `    server: ${server}`,
    '  name: local',
    'contexts:',
    '- context:',
    '    cluster: local',
    '    user: mesh-cni',
    '  name: mesh-cni-context',
    'current-context: mesh-cni-context',
    'kind: Config',
    'preferences: {}',
    'users:',
    '- name: mesh-cni',
    '  user:',
    `    token: ${token}`,
    '',
  ].join('\n');
}
