// The label selector of a workload named on the dashboard's command line (`deployment/meshd`): istioctl's
// InferPodInfoFromTypedResource reads the workload's spec.selector and takes a pod it selects.
import { CommandError } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { apiStatus } from './orch';

const RESOURCES: Readonly<Record<string, string>> = {
  deployment: 'apis/apps/v1/namespaces/%/deployments',
  statefulset: 'apis/apps/v1/namespaces/%/statefulsets',
  daemonset: 'apis/apps/v1/namespaces/%/daemonsets',
  replicaset: 'apis/apps/v1/namespaces/%/replicasets',
  job: 'apis/batch/v1/namespaces/%/jobs',
};
const ALIASES: Readonly<Record<string, string>> = {
  deployments: 'deployment',
  deploy: 'deployment',
  statefulsets: 'statefulset',
  sts: 'statefulset',
  daemonsets: 'daemonset',
  ds: 'daemonset',
  replicasets: 'replicaset',
  rs: 'replicaset',
  jobs: 'job',
};

/** `k=v,k2=v2` from the workload's matchLabels. */
export async function workloadSelector(client: OrchClient, kind: string, name: string, namespace: string): Promise<string> {
  const k = ALIASES[kind] ?? kind;
  const base = RESOURCES[k];
  if (!base) throw new CommandError(`unsupported resource type "${kind}": name a pod or a workload`);
  let obj: { spec?: { selector?: { matchLabels?: Record<string, string> } } };
  try {
    obj = (await client.getJson(`/${base.replace('%', encodeURIComponent(namespace))}/${encodeURIComponent(name)}`)) as typeof obj;
  } catch (e) {
    if (apiStatus(e) === 404) throw new CommandError(`${k} "${name}" not found in namespace "${namespace}"`);
    throw new CommandError((e as Error).message);
  }
  const labels = obj.spec?.selector?.matchLabels ?? {};
  if (!Object.keys(labels).length) throw new CommandError(`${k} ${namespace}/${name} has no selector`);
  return Object.entries(labels)
    .map(([a, b]) => `${a}=${b}`)
    .join(',');
}
