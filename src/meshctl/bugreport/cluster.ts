// What `meshctl bug-report` collects with a cluster (istioctl 1.26 tools/bug-report/pkg/bugreport and
// pkg/content): orchestrator objects and events under `cluster/`, the daemon pods' debug pages and logs under
// `mesh/<ns>/<pod>/`, and each proxy pod's admin dumps and container log under `proxies/<ns>/<pod>/`. Differs on
// purpose: objects are read through the API (JSON) instead of by running kubectl; pods' pages are read through the
// API server's pod proxy (`pods/<name>:<port>/proxy/<path>`) instead of a port-forward; whatever cannot be fetched
// is named with the reason in bug-report.log.
import type { OrchClient } from '../../config/orch/client';
import { PROXY_CONTAINER } from '../../config/containers';
import { apiStatus } from '../orch';
import { orchErrorText } from '../orch-errors';
import { isSelected, type ClusterTree, type SelectionSpec } from './filter';

type Obj = Record<string, any>;

/** The daemon's container and the port of its debug pages (pilot-discovery's monitoring port). */
const DAEMON_CONTAINER = 'discovery';
const DAEMON_DEBUG_PORT = 15014;
const PROXY_ADMIN_PORT = 15000;

/** The cluster-wide reads: file name under `cluster/` → API path. */
export const CLUSTER_READS: ReadonlyArray<[string, string]> = [
  ['namespaces', '/api/v1/namespaces'],
  ['nodes', '/api/v1/nodes'],
  ['pods', '/api/v1/pods'],
  ['services', '/api/v1/services'],
  ['endpointslices', '/apis/discovery.k8s.io/v1/endpointslices'],
  ['deployments', '/apis/apps/v1/deployments'],
  ['daemonsets', '/apis/apps/v1/daemonsets'],
  ['statefulsets', '/apis/apps/v1/statefulsets'],
  ['configmaps', '/api/v1/configmaps'],
  ['secrets', '/api/v1/secrets'],
  ['events', '/api/v1/events'],
  ['mutatingwebhookconfigurations', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations'],
  ['validatingwebhookconfigurations', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations'],
  ['crds', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'],
];

/** API groups whose custom resources go into `cluster/crs`: mesh's and Istio's, and the Gateway API. */
const CR_GROUP = /(\.mesh\.io|\.istio\.io|^gateway\.networking\.k8s\.io)$/;

export interface ClusterSink {
  put(name: string, body: string): void;
  note(line: string): void;
}

function kindOf(file: string): string | undefined {
  return file === 'secrets' ? 'Secret' : undefined;
}

async function read(client: OrchClient, sink: ClusterSink, what: string, p: string): Promise<Obj | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await client.getJson(p)) as Obj;
    } catch (e) {
      // 429: the server asks to come back (e.g. a CRD's storage still initializing); a few short retries.
      if (apiStatus(e) === 429 && attempt < 5) {
        await new Promise((r) => setTimeout(r, 500 * attempt));
        continue;
      }
      sink.note(`could not fetch ${what} (${p}): ${orchErrorText(e, client.server)}`);
      return undefined;
    }
  }
}

async function readText(client: OrchClient, sink: ClusterSink, what: string, p: string, query?: Record<string, string>): Promise<string | undefined> {
  try {
    return (await client.request('GET', p, { text: true, query })) as string;
  } catch (e) {
    const why = apiStatus(e) === undefined ? orchErrorText(e, client.server) : (e as Error).message;
    sink.note(`could not fetch ${what}: ${why}`);
    return undefined;
  }
}

/** Orchestrator objects and events; returns the pods (for the daemon and proxies), [] when they could not be read. */
export async function collectObjects(client: OrchClient, sink: ClusterSink, context: string): Promise<Obj[]> {
  sink.put('cluster/cluster-context', `server: ${client.server}\ncontext: ${context || '(current)'}\n`);
  let pods: Obj[] = [];
  for (const [file, p] of CLUSTER_READS) {
    const list = await read(client, sink, file, p);
    if (!list) continue;
    const kind = kindOf(file);
    const items = ((list.items ?? []) as Obj[]).map((o) => (kind ? { kind, ...o } : o));
    if (file === 'pods') pods = items;
    sink.put(`cluster/${file}`, JSON.stringify(items, null, 2) + '\n');
  }
  const crds = await read(client, sink, 'crds', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions');
  const crs: Obj[] = [];
  for (const crd of (crds?.items ?? []) as Obj[]) {
    if (!CR_GROUP.test(crd.spec?.group ?? '')) continue;
    const version = ((crd.spec.versions ?? []) as Obj[]).find((v) => v.storage)?.name ?? crd.spec.versions?.[0]?.name;
    const list = await read(
      client,
      sink,
      `${crd.spec.names.plural}.${crd.spec.group}`,
      `/apis/${crd.spec.group}/${version}/${crd.spec.names.plural}`,
    );
    crs.push(...((list?.items ?? []) as Obj[]));
  }
  sink.put('cluster/crs', JSON.stringify(crs, null, 2) + '\n');
  return pods;
}

function podProxy(pod: Obj, port: number, page: string): string {
  return `/api/v1/namespaces/${encodeURIComponent(pod.metadata.namespace)}/pods/${encodeURIComponent(pod.metadata.name)}:${port}/proxy/${page}`;
}

function logPath(pod: Obj): string {
  return `/api/v1/namespaces/${encodeURIComponent(pod.metadata.namespace)}/pods/${encodeURIComponent(pod.metadata.name)}/log`;
}

/** A container's log into `file`; an empty answer (a pod that never ran on a node gets 204) is said in the log. */
async function containerLog(client: OrchClient, sink: ClusterSink, pod: Obj, container: string, file: string): Promise<void> {
  const what = `${pod.metadata.namespace}/${pod.metadata.name} log of container ${container}`;
  const log = await readText(client, sink, what, logPath(pod), { container });
  if (log === undefined) return;
  if (log === '')
    sink.note(`${what}: the API server answered with no log (the pod has not run on a node${pod.spec?.nodeName ? '' : ': it has none assigned'})`);
  sink.put(file, log);
}

/** The daemon pods of the mesh namespace (label app=meshd), by name. */
export function daemonPods(pods: Obj[], meshNamespace: string): Obj[] {
  return pods
    .filter((p) => p.metadata.namespace === meshNamespace && p.metadata.labels?.app === 'meshd')
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
}

/** Each daemon pod's debug pages (through the API server's pod proxy) and its log, into mesh/<ns>/<pod>/. */
export async function collectDaemons(client: OrchClient, sink: ClusterSink, daemons: Obj[], pages: readonly string[]): Promise<void> {
  for (const pod of daemons) {
    const dir = `mesh/${pod.metadata.namespace}/${pod.metadata.name}`;
    // The pod object itself: the folder says which pod it was even when none of its pages could be read.
    sink.put(`${dir}/pod`, JSON.stringify(pod, null, 2) + '\n');
    for (const page of pages) {
      const body = await readText(client, sink, `${dir} debug/${page}`, podProxy(pod, DAEMON_DEBUG_PORT, `debug/${page}`));
      if (body !== undefined) sink.put(`${dir}/debug/${page}`, body);
    }
    await containerLog(client, sink, pod, DAEMON_CONTAINER, `${dir}/discovery.log`);
  }
}

/** The pods with a proxy container that --include/--exclude select. */
export function proxyPods(pods: Obj[], include: SelectionSpec[], exclude: SelectionSpec[]): Obj[] {
  const tree: ClusterTree = { tree: {}, labels: {}, annotations: {} };
  const out: Obj[] = [];
  for (const p of pods) {
    if (!((p.spec?.containers ?? []) as Obj[]).some((c) => c.name === PROXY_CONTAINER)) continue;
    const key = `${p.metadata.namespace}/${p.metadata.name}`;
    tree.labels[key] = p.metadata.labels ?? {};
    tree.annotations[key] = p.metadata.annotations ?? {};
    const owner = ((p.metadata.ownerReferences ?? []) as Obj[])[0]?.name ?? p.metadata.name;
    const workload = owner.replace(/-[a-z0-9]{5,10}$/, '');
    if (isSelected(include, exclude, tree, [p.metadata.namespace, workload, p.metadata.name, PROXY_CONTAINER])) out.push(p);
  }
  return out;
}

/** Each proxy pod's admin pages (through the pod proxy) and its proxy container's log, into proxies/<ns>/<pod>/. */
export async function collectProxies(client: OrchClient, sink: ClusterSink, pods: Obj[], adminPaths: readonly string[]): Promise<void> {
  for (const pod of pods) {
    const dir = `proxies/${pod.metadata.namespace}/${pod.metadata.name}`;
    sink.put(`${dir}/pod`, JSON.stringify(pod, null, 2) + '\n');
    for (const u of adminPaths) {
      const body = await readText(client, sink, `${dir} ${u}`, podProxy(pod, PROXY_ADMIN_PORT, u));
      if (body !== undefined) sink.put(`${dir}/${u}`, body);
    }
    await containerLog(client, sink, pod, PROXY_CONTAINER, `${dir}/${PROXY_CONTAINER}.log`);
  }
}
