// `meshctl remote-clusters`: the clusters each daemon reads and their sync state, from its `/debug/clusterz`
// (istioctl 1.26 istioctl/pkg/proxyconfig/clusters.go, table NAME SECRET STATUS ISTIOD, here MESHD; rows by
// daemon name, as later Istio releases sort them). With a cluster: the running pods labelled app=meshd in the
// system namespace (and mesh.io/rev=<revision> with --revision), each asked on its monitoring port (the
// `prometheus.io/port` annotation, else 15014), as Istio's AllDiscoveryDo does: through the API server's
// port-forward (so the daemon sees a loopback caller: it answers its debug pages to loopback and authenticated
// callers only). Differs on purpose: the pod's IP is tried first, as `admin log` does, and the forward only when
// that is unreachable or refused (a machine inside the pod network needs no kubelet in the path). With an
// xDS address configured (MESHCTL_XDS_ADDRESS or ~/.meshctl/config.yaml; it wins over the cluster) or no cluster:
// that daemon, asked for the page over ADS (type istio.io/debug) and named by its control plane ID.
import net from 'node:net';
import { CommandError, flagString, type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { probe, tunnel, type PodPort } from './dashboard-tunnel';
import { joinHostPort } from '../lib/hostport';
import { TabWriter } from '../lib/tabwriter';
import { meshctlOrchClient, orchConfigPath } from './orch';
import { connectionFailure } from './orch-errors';
import { controlPlaneInfo, xdsOptions, xdsRequest } from './xds';

/** One row of `/debug/clusterz` (Istio's cluster.DebugInfo). */
export interface ClusterInfo {
  id: string;
  secretName: string;
  syncStatus: string;
}

const MONITORING_PORT = 15014;
const PAGE = 'debug/clusterz';

/** The table: one row per cluster of each daemon, daemons by name. */
export function clustersTable(byDaemon: ReadonlyMap<string, readonly ClusterInfo[]>): string {
  // tabwriter.Init(out, 0, 8, 5, ' ', 0)
  const w = new TabWriter(0, 5).row('NAME', 'SECRET', 'STATUS', 'MESHD');
  for (const daemon of [...byDaemon.keys()].sort()) {
    for (const c of byDaemon.get(daemon)!) w.row(c.id, c.secretName, c.syncStatus, daemon);
  }
  return w.flush();
}

function parse(daemon: string, body: string): ClusterInfo[] {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (Array.isArray(parsed)) return parsed as ClusterInfo[];
  } catch {
    // said below
  }
  throw new CommandError(`meshd ${daemon} answered ${PAGE} with something that is not a list of clusters: ${JSON.stringify(body.slice(0, 120))}`);
}

interface Pod {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  status?: { podIP?: string };
}

/** Istio's FindIstiodMonitoringPort. */
function monitoringPort(pod: Pod): number {
  const v = pod.metadata.annotations?.['prometheus.io/port'];
  return v !== undefined && /^[+-]?\d+$/.test(v) ? Number(v) : MONITORING_PORT;
}

async function listDaemonPods(client: OrchClient, ctx: RunContext, meshNamespace: string): Promise<Pod[]> {
  const revision = flagString(ctx, 'revision');
  const selector = revision ? `app=meshd,mesh.io/rev=${revision}` : 'app=meshd';
  const list = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/pods`, {
    labelSelector: selector,
    fieldSelector: 'status.phase=Running',
  })) as { items?: Pod[] };
  return list.items ?? [];
}

/** The page from the pod's IP: its answer, or why it could not be had there. */
async function atPodIp(url: string): Promise<{ status: number; body: string } | { failed: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (res.status === 401) return { failed: `${url} answered 401: meshd serves its debug pages to loopback and authenticated callers only` };
    return { status: res.status, body: await res.text() };
  } catch (e) {
    return { failed: `cannot reach ${url}: ${connectionFailure(e)}` };
  }
}

/** The page through the API server's port-forward to the pod (the daemon then sees a loopback caller). */
async function throughForward(client: OrchClient, to: PodPort): Promise<{ status: number; body: string }> {
  await probe(client, to);
  let forwardError = '';
  const local = net.createServer((c) => tunnel(client, to, c, (m) => (forwardError ||= m)));
  await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
  try {
    const res = await fetch(`http://127.0.0.1:${(local.address() as net.AddressInfo).port}/${PAGE}`, { signal: AbortSignal.timeout(30_000) });
    return { status: res.status, body: await res.text() };
  } catch (e) {
    throw new Error(forwardError || connectionFailure(e));
  } finally {
    local.close();
  }
}

async function fromPods(ctx: RunContext, meshNamespace: string): Promise<Map<string, ClusterInfo[]>> {
  const client = await meshctlOrchClient(ctx, 'remote-clusters');
  try {
    const pods = await listDaemonPods(client, ctx, meshNamespace);
    if (pods.length === 0) throw new CommandError('unable to find any meshd instances');
    const out = new Map<string, ClusterInfo[]>();
    for (const pod of pods) {
      const ref = `${pod.metadata.name}.${pod.metadata.namespace}`;
      const ip = pod.status?.podIP;
      const port = monitoringPort(pod);
      const direct = ip ? await atPodIp(`http://${joinHostPort(ip, port)}/${PAGE}`) : { failed: 'the pod has no IP address yet' };
      let got: { status: number; body: string };
      if ('failed' in direct) {
        try {
          got = await throughForward(client, { namespace: pod.metadata.namespace, pod: pod.metadata.name, port });
        } catch (e) {
          throw new CommandError(`meshd pod ${ref}: ${direct.failed}; through the API server's port-forward: ${(e as Error).message}`);
        }
      } else got = direct;
      if (got.status !== 200) throw new CommandError(`unexpected status code: ${got.status} (meshd pod ${ref}, ${PAGE})`);
      if (got.body.length > 0) out.set(pod.metadata.name, parse(pod.metadata.name, got.body));
    }
    return out;
  } finally {
    client.close();
  }
}

async function fromAddress(ctx: RunContext): Promise<Map<string, ClusterInfo[]>> {
  const o = xdsOptions(ctx);
  if (!o.address) {
    throw new CommandError(
      'remote-clusters needs the orchestrator API (give --orchconfig, or set ORCHCONFIG or KUBECONFIG) or the address of a daemon ' +
        '(set MESHCTL_XDS_ADDRESS, or put xds-address in $HOME/.meshctl/config.yaml)',
    );
  }
  const res = await xdsRequest(o, 'istio.io/debug', ['clusterz']);
  const id = controlPlaneInfo(res).ID;
  const body = res.resources.map((r) => Buffer.from(r.value).toString()).join('');
  // The page answers 400 with no body on a daemon that reads no orchestrator API (no clusters to list).
  if (body.trim() === '') throw new CommandError(`meshd ${id} lists no clusters: it reads no orchestrator API (${PAGE} answered nothing)`);
  return new Map([[id, parse(id, body)]]);
}

export const run: Handler = async (ctx) => {
  // A daemon address given explicitly wins over the cluster: it reaches a daemon the pod IPs may not.
  const o = xdsOptions(ctx);
  const byDaemon = orchConfigPath(ctx) && !o.address ? await fromPods(ctx, o.meshNamespace) : await fromAddress(ctx);
  ctx.stdout.write(clustersTable(byDaemon));
  return 0;
};
