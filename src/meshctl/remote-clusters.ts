// `meshctl remote-clusters`: the clusters each daemon reads and their sync state, from its `/debug/clusterz`
// (istioctl 1.26 istioctl/pkg/proxyconfig/clusters.go, table NAME SECRET STATUS ISTIOD, here MESHD; rows by
// daemon name, as later Istio releases sort them). With a cluster: the running pods labelled app=meshd in the
// system namespace (and mesh.io/rev=<revision> with --revision), each asked on its monitoring port (the
// `prometheus.io/port` annotation, else 15014), as Istio's AllDiscoveryDo does. Differs on purpose: Istio
// port-forwards through the kubelet; we reach the pod's IP, as `admin log` does (the daemon answers its debug pages
// to loopback and authenticated callers only, so from outside the pod network an xDS address is the way). With an
// xDS address configured (MESHCTL_XDS_ADDRESS or ~/.meshctl/config.yaml; it wins over the cluster) or no cluster:
// that daemon, asked for the page over ADS (type istio.io/debug) and named by its control plane ID.
import { CommandError, flagString, type Handler, type RunContext } from '../cli/context';
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

async function fromPods(ctx: RunContext, meshNamespace: string): Promise<Map<string, ClusterInfo[]>> {
  const client = await meshctlOrchClient(ctx, 'remote-clusters');
  let pods: Pod[];
  try {
    const revision = flagString(ctx, 'revision');
    const selector = revision ? `app=meshd,mesh.io/rev=${revision}` : 'app=meshd';
    const list = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/pods`, {
      labelSelector: selector,
      fieldSelector: 'status.phase=Running',
    })) as { items?: Pod[] };
    pods = list.items ?? [];
  } finally {
    client.close();
  }
  if (pods.length === 0) throw new CommandError('unable to find any meshd instances');
  const out = new Map<string, ClusterInfo[]>();
  for (const pod of pods) {
    const ip = pod.status?.podIP;
    if (!ip) throw new CommandError(`pod ${pod.metadata.name}.${pod.metadata.namespace} has no IP address yet`);
    const url = `http://${joinHostPort(ip, monitoringPort(pod))}/${PAGE}`;
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new CommandError(`cannot reach meshd pod ${pod.metadata.name}.${pod.metadata.namespace} at ${url}: ${connectionFailure(e)}`);
    }
    if (res.status === 401) {
      throw new CommandError(
        `unexpected status code: 401 (${url}): meshd serves its debug pages to loopback and authenticated callers only; ` +
          `forward its xDS port to this machine and give that address in MESHCTL_XDS_ADDRESS (with MESHCTL_PLAINTEXT=true for :15010)`,
      );
    }
    if (res.status !== 200) throw new CommandError(`unexpected status code: ${res.status} (${url})`);
    const body = await res.text();
    if (body.length > 0) out.set(pod.metadata.name, parse(pod.metadata.name, body));
  }
  return out;
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
