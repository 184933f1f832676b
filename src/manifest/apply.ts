// The cluster side of install and uninstall (Istio's operator/pkg/install and uninstall): server-side apply of
// each component's objects in dependency order with the installer's owner labels, waiting for Deployments and
// DaemonSets to become ready, and removal of what an installation left, found by those labels.
import { CommandError, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { buildInfo } from '../lib/buildinfo';
import { confirm } from '../meshctl/confirm';
import { apiStatus, meshctlOrchClient } from '../meshctl/orch';
import { COMPONENT_TEXT, objectRef, type InstallPlan } from './plan';
import type { Obj } from './render';
import { verifyInstall } from './verify';

const FIELD_MANAGER = 'mesh-operator';

interface Resource {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

const RESOURCES: readonly Resource[] = [
  { group: '', version: 'v1', kind: 'Namespace', plural: 'namespaces', namespaced: false },
  { group: '', version: 'v1', kind: 'ServiceAccount', plural: 'serviceaccounts', namespaced: true },
  { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
  { group: '', version: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
  { group: '', version: 'v1', kind: 'Service', plural: 'services', namespaced: true },
  { group: '', version: 'v1', kind: 'Pod', plural: 'pods', namespaced: true },
  { group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
  { group: 'apps', version: 'v1', kind: 'DaemonSet', plural: 'daemonsets', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'Role', plural: 'roles', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole', plural: 'clusterroles', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRoleBinding', plural: 'clusterrolebindings', namespaced: false },
  { group: 'policy', version: 'v1', kind: 'PodDisruptionBudget', plural: 'poddisruptionbudgets', namespaced: true },
  { group: 'autoscaling', version: 'v2', kind: 'HorizontalPodAutoscaler', plural: 'horizontalpodautoscalers', namespaced: true },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    kind: 'MutatingWebhookConfiguration',
    plural: 'mutatingwebhookconfigurations',
    namespaced: false,
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    kind: 'ValidatingWebhookConfiguration',
    plural: 'validatingwebhookconfigurations',
    namespaced: false,
  },
  { group: 'apiextensions.k8s.io', version: 'v1', kind: 'CustomResourceDefinition', plural: 'customresourcedefinitions', namespaced: false },
];

function resourceOf(o: Obj): Resource {
  const api = String(o.apiVersion);
  const [group, version] = api.includes('/') ? api.split('/') : ['', api];
  const r = RESOURCES.find((x) => x.group === group && x.kind === o.kind);
  if (!r) throw new CommandError(`${objectRef(o)}: kind ${o.kind} (${api}) is not one the installer knows how to apply`);
  return { ...r, version: version! };
}

function collectionPath(r: Resource, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return r.namespaced && namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${r.plural}` : `${base}/${r.plural}`;
}

function objectPath(o: Obj): string {
  const r = resourceOf(o);
  return `${collectionPath(r, o.metadata?.namespace)}/${encodeURIComponent(o.metadata.name)}`;
}

async function serverSideApply(client: OrchClient, o: Obj): Promise<void> {
  try {
    await client.request('PATCH', objectPath(o), {
      body: o,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  } catch (e) {
    throw new CommandError(
      `failed to update resource with server-side apply for obj ${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}: ${(e as Error).message}`,
    );
  }
}

/** Why each Deployment/DaemonSet among `objects` is not ready yet (empty when all are). */
async function notReady(client: OrchClient, objects: Obj[]): Promise<string[]> {
  const out: string[] = [];
  for (const o of objects) {
    if (o.kind !== 'Deployment' && o.kind !== 'DaemonSet') continue;
    let cur: Obj;
    try {
      cur = (await client.getJson(objectPath(o))) as Obj;
    } catch (e) {
      out.push(`${o.kind}/${o.metadata.namespace}/${o.metadata.name} (${(e as Error).message})`);
      continue;
    }
    const st = cur.status ?? {};
    if (o.kind === 'Deployment') {
      const want = cur.spec?.replicas ?? 1;
      if ((st.readyReplicas ?? 0) < want || (st.updatedReplicas ?? 0) < want) out.push(`Deployment/${o.metadata.namespace}/${o.metadata.name}`);
    } else {
      const want = st.desiredNumberScheduled ?? 0;
      if ((st.numberReady ?? 0) < want || (st.updatedNumberScheduled ?? 0) < want) out.push(`DaemonSet/${o.metadata.namespace}/${o.metadata.name}`);
    }
  }
  return out;
}

async function waitReady(client: OrchClient, objects: Obj[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pending = await notReady(client, objects);
    if (!pending.length) return;
    if (Date.now() >= deadline) {
      throw new CommandError(`failed to wait for resource: resources not ready after ${Math.round(timeoutMs / 1000)}s: ${pending.join(', ')}`);
    }
    await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(50, deadline - Date.now()))));
  }
}

async function ensureNamespace(client: OrchClient, ns: string): Promise<void> {
  try {
    await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}`);
    return;
  } catch (e) {
    if (apiStatus(e) !== 404 && !/not ?found/i.test((e as Error).message)) throw new CommandError(`namespace ${ns}: ${(e as Error).message}`);
  }
  await serverSideApply(client, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'mesh.io/rev': 'default' } } });
}

export async function install(
  ctx: RunContext,
  plan: InstallPlan,
  o: { skipConfirmation: boolean; timeoutMs: number; verify: boolean },
): Promise<number> {
  const client = await meshctlOrchClient(ctx, 'install');
  try {
    if (!o.skipConfirmation) {
      const ok = await confirm(
        ctx,
        `This will install the mesh ${buildInfo().version} profile ${JSON.stringify(plan.profile)} into the cluster. Proceed? (y/N)`,
      );
      if (!ok) {
        ctx.stdout.write('Cancelled.\n');
        return 1;
      }
    }
    await ensureNamespace(client, plan.namespace);
    const failures: string[] = [];
    for (const step of plan.steps) {
      const text = COMPONENT_TEXT[step.component] ?? step.component;
      try {
        for (const obj of step.objects) await serverSideApply(client, obj);
        await waitReady(client, step.objects, o.timeoutMs);
        ctx.stdout.write(`✔ ${text} installed\n`);
      } catch (e) {
        ctx.stdout.write(`✘ ${text} encountered an error: ${(e as Error).message}\n`);
        // As Istio's installer: a component's dependents still run after it finished, failed or not.
        failures.push((e as Error).message);
      }
    }
    if (failures.length) throw new CommandError(`failed to install manifests: ${failures.join('; ')}`);
    ctx.stdout.write('✔ Installation complete\n');
    if (!o.verify) return 0;
    ctx.stdout.write('\n\nVerifying installation:\n');
    const v = await verifyInstall(client, plan, objectPath);
    ctx.stdout.write(v.lines.map((l) => l + '\n').join(''));
    if (v.error) throw new CommandError(`verification failed with the following error: ${v.error}`);
    return 0;
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------------------------

const NAMESPACED_PRUNED = [
  'Deployment',
  'DaemonSet',
  'Service',
  'ConfigMap',
  'Pod',
  'Secret',
  'ServiceAccount',
  'RoleBinding',
  'Role',
  'PodDisruptionBudget',
  'HorizontalPodAutoscaler',
];
const CLUSTER_CP = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'ClusterRole', 'ClusterRoleBinding'];
const ALL_CLUSTER = [...CLUSTER_CP, 'CustomResourceDefinition'];
const NON_BASE = ['Pilot', 'IngressGateways', 'EgressGateways', 'Cni', 'Nodeproxy'];

export interface UninstallOptions {
  purge: boolean;
  revision: string;
  plan?: InstallPlan;
  dryRun: boolean;
  skipConfirmation: boolean;
  verbose: boolean;
}

function gvkText(o: Obj): string {
  const api = String(o.apiVersion);
  return `${api.includes('/') ? api : `/${api}`}, Kind=${o.kind}`;
}

/** Istio's GetPrunedResources: what an uninstall removes, found by the installer's labels. */
async function prunable(client: OrchClient, o: UninstallOptions): Promise<Obj[]> {
  const kinds = o.purge ? [...NAMESPACED_PRUNED, ...ALL_CLUSTER] : [...NAMESPACED_PRUNED, ...CLUSTER_CP];
  const selector = o.purge
    ? 'operator.mesh.io/component'
    : `mesh.io/rev=${o.revision},operator.mesh.io/component in (${NON_BASE.join(',')}),operator.mesh.io/component`;
  const out: Obj[] = [];
  for (const kind of kinds) {
    const r = RESOURCES.find((x) => x.kind === kind)!;
    let res: Obj;
    try {
      res = (await client.getJson(collectionPath(r), { labelSelector: selector })) as Obj;
    } catch (e) {
      if (apiStatus(e) === 404) continue;
      throw new CommandError(`list ${r.plural}: ${(e as Error).message}`);
    }
    const apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
    for (const item of res.items ?? []) out.push({ ...item, apiVersion, kind });
  }
  if (o.plan) {
    // With -f, also what that MeshOperator would have installed (base excluded, as Istio does).
    const seen = new Set(out.map((x) => objectRef(x)));
    for (const step of o.plan.steps) {
      if (step.component === 'Base') continue;
      for (const obj of step.objects) {
        if (seen.has(objectRef(obj))) continue;
        try {
          await client.getJson(objectPath(obj));
          out.push(obj);
          seen.add(objectRef(obj));
        } catch (e) {
          if (apiStatus(e) !== 404) throw new CommandError(`${objectRef(obj)}: ${(e as Error).message}`);
        }
      }
    }
  }
  return out;
}

export async function uninstall(ctx: RunContext, o: UninstallOptions): Promise<number> {
  const client = await meshctlOrchClient(ctx, 'uninstall');
  try {
    const objects = await prunable(client, o);
    if (!objects.length) {
      ctx.stdout.write('No mesh resources found to remove.\n');
      return 0;
    }
    if (o.purge) ctx.stdout.write('All mesh resources will be pruned from the cluster\n');
    else {
      ctx.stdout.write('The following resources will be pruned from the cluster:\n');
      for (const x of objects) ctx.stdout.write(`  ${objectRef(x)}\n`);
    }
    if (!o.dryRun && !o.skipConfirmation) {
      if (!(await confirm(ctx, 'Proceed? (y/N)'))) {
        ctx.stdout.write('Cancelled.\n');
        return 1;
      }
    }
    const errs: string[] = [];
    for (const x of objects) {
      const name = `${gvkText(x)}/${x.metadata.name}.${x.metadata.namespace ?? ''}`;
      if (o.dryRun) {
        ctx.stdout.write(`Not pruning object ${name} because of dry run.\n`);
        continue;
      }
      try {
        await client.request('DELETE', objectPath(x), { body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' } });
        ctx.stdout.write(`  Removed ${name}.\n`);
      } catch (e) {
        if (apiStatus(e) === 404) ctx.stdout.write(`object: ${name} is not being deleted because it no longer exists\n`);
        else errs.push(`${name}: ${(e as Error).message}`);
      }
    }
    if (errs.length) throw new CommandError(`failed to delete control plane resources: ${errs.join('; ')}`);
    if (!o.dryRun) ctx.stdout.write('✔ Uninstall complete\n');
    return 0;
  } finally {
    client.close();
  }
}
