// Which clusters `meshctl analyze` reads (istioctl 1.26 analyze.go: the CLI client, then --remote-contexts
// or, without them, every remote secret of the system namespace) and the namespace checks istioctl makes.
// Differs on purpose: with no cluster configured and files given (and --use-kube not set explicitly),
// istioctl fails; we analyze the files and say so in one line.
import { CommandError, flagBool, flagList, flagString, type RunContext } from '../../cli/context';
import type { OrchClient } from '../../config/orch/client';
import { MULTICLUSTER_SECRET_LABELS } from '../../multicluster';
import { apiStatus, contextNamespace, meshctlOrchClient, orchConfigPath, withOneLineErrors } from '../orch';
import { type LiveCluster, mergeRemote, readCluster } from './live';

export interface LiveInput extends LiveCluster {
  /** The context's namespace, for a run without -n. */
  namespace: string;
}

/** The remote clusters: --remote-contexts, else the remote secrets' client configurations. */
async function remoteClients(ctx: RunContext, local: OrchClient, meshNamespace: string): Promise<Array<{ name: string; client: OrchClient }>> {
  const contexts = flagList(ctx, 'remote-contexts');
  if (contexts.length > 0)
    return Promise.all(contexts.map(async (c) => ({ name: c, client: await meshctlOrchClient(ctx, 'analyze --remote-contexts', c) })));
  const out: Array<{ name: string; client: OrchClient }> = [];
  const { createOrchClient } = await import('../../config/orch/client');
  for (const label of MULTICLUSTER_SECRET_LABELS) {
    const l = (await local.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/secrets`, { labelSelector: `${label}=true` })) as {
      items?: Array<{ metadata: { name: string }; data?: Record<string, string> }>;
    };
    for (const s of l.items ?? []) {
      for (const [key, value] of Object.entries(s.data ?? {})) {
        const origin = `remote secret ${meshNamespace}/${s.metadata.name} key ${key}`;
        try {
          const c = await createOrchClient({
            kubeconfig: { text: Buffer.from(value, 'base64').toString('utf8'), origin },
            userAgent: 'meshctl',
            contentType: 'json',
          });
          out.push({ name: key, client: withOneLineErrors(c, origin) });
        } catch (e) {
          throw new CommandError((e as Error).message);
        }
      }
    }
  }
  return out;
}

/**
 * The cluster's objects, or undefined for a files-only run; 'namespace-missing' when the namespace asked for
 * does not exist (istioctl prints that and exits 0).
 */
export async function liveInput(ctx: RunContext, haveFiles: boolean, meshNamespace: string): Promise<LiveInput | 'namespace-missing' | undefined> {
  if (!flagBool(ctx, 'use-kube')) return undefined;
  if (!orchConfigPath(ctx) && haveFiles && !ctx.changed.has('use-kube')) {
    ctx.stderr.write('No cluster configured (no --orchconfig, ORCHCONFIG, KUBECONFIG or ~/.kube/config): analyzing the files only.\n');
    return undefined;
  }
  const client = await meshctlOrchClient(ctx, 'analyze (--use-kube=true, the default)');
  const namespace = flagString(ctx, 'namespace') || contextNamespace(client) || 'default';
  try {
    await client.getJson(`/api/v1/namespaces/${encodeURIComponent(namespace)}`);
  } catch (e) {
    if (apiStatus(e) !== 404) throw e;
    ctx.stderr.write(`namespace ${JSON.stringify(namespace)} not found\n`);
    return 'namespace-missing';
  }
  const revision = flagString(ctx, 'revision');
  const [local, remotes] = await Promise.all([
    readCluster(client, { meshNamespace, revision, cluster: 'local' }),
    remoteClients(ctx, client, meshNamespace),
  ]);
  let resources = local.resources;
  const missing = [...local.missing];
  for (const r of remotes) {
    const c = await readCluster(r.client, { meshNamespace, revision, cluster: r.name });
    resources = mergeRemote(resources, c.resources);
    missing.push(...c.missing.map((m) => `${m} in ${r.name}`));
  }
  return { ...local, resources, missing, namespace };
}
