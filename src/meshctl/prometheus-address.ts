// Where meshctl finds Prometheus, for `x metrics` and `dashboard metrics-ui`. istioctl 1.26 (metrics.go,
// dashboard.go) lists the pods labelled `app.kubernetes.io/name=prometheus` in the mesh namespace and
// port-forwards to the first one's 9090. With a cluster we find the same pod and reach its pod IP directly,
// as target.ts reaches proxies (no kubelet stream is needed for that). On purpose beyond istioctl: with no
// cluster, MESH_PROMETHEUS_URL names the server, else Prometheus's own default address http://localhost:9090;
// MESH_PROMETHEUS_URL also wins over a cluster (a Prometheus outside it).
import { CommandError, type RunContext } from '../cli/context';
import { joinHostPort } from '../lib/hostport';
import { meshctlOrchClient, orchConfigPath } from './orch';

export const PROMETHEUS_URL_ENV = 'MESH_PROMETHEUS_URL';
export const PROMETHEUS_SELECTOR = 'app.kubernetes.io/name=prometheus';
export const PROMETHEUS_PORT = 9090;
export const DEFAULT_PROMETHEUS_URL = `http://localhost:${PROMETHEUS_PORT}`;

export interface PrometheusPod {
  name: string;
  namespace: string;
  ip: string;
}

/** The first Prometheus pod of the first namespace that has one (istioctl's inferPodMeta), with its IP. */
export async function findPrometheusPod(ctx: RunContext, namespaces: readonly string[], notFound: string): Promise<PrometheusPod> {
  const client = await meshctlOrchClient(ctx, 'finding Prometheus');
  for (const ns of namespaces) {
    let list: { items?: Array<{ metadata?: { name?: string; namespace?: string }; status?: { podIP?: string } }> };
    try {
      list = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods`, { labelSelector: PROMETHEUS_SELECTOR })) as typeof list;
    } catch {
      continue;
    }
    const pod = list.items?.[0];
    if (!pod) continue;
    const ip = pod.status?.podIP;
    if (!ip) throw new CommandError(`Prometheus pod ${pod.metadata?.name}.${ns} has no IP address yet`);
    return { name: pod.metadata?.name ?? '', namespace: pod.metadata?.namespace ?? ns, ip };
  }
  throw new CommandError(notFound);
}

export function meshNamespace(ctx: RunContext): string {
  return (ctx.flags['meshNamespace'] as string | undefined) || 'mesh-system';
}

/**
 * The base URL of the Prometheus HTTP API: MESH_PROMETHEUS_URL, else with a cluster the Prometheus pod of the
 * mesh namespace at `podPort` (`x metrics` looks nowhere else, as istioctl), else http://localhost:9090.
 * `notFound` is istioctl's message when there is no such pod (`x metrics` and `dashboard` word it differently).
 */
export async function findPrometheus(
  ctx: RunContext,
  namespaces: readonly string[] = [meshNamespace(ctx)],
  podPort = PROMETHEUS_PORT,
  notFound = 'no Prometheus pods found',
): Promise<string> {
  const named = ctx.env[PROMETHEUS_URL_ENV];
  if (named) return named.replace(/\/$/, '');
  if (!orchConfigPath(ctx)) return DEFAULT_PROMETHEUS_URL;
  const pod = await findPrometheusPod(ctx, namespaces, notFound);
  return `http://${joinHostPort(pod.ip, podPort)}`;
}
