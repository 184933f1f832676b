// `install --verify`: every object of the install plan read back from the cluster, Deployments, DaemonSets and Jobs
// judged by their status, as Istio's installation verifier did (operator/pkg/verifier, Istio 1.23: verifier.go and
// k8s_util.go). Istio 1.24 removed the verifier and 1.26 still accepts `--verify` but does nothing with it; an
// operator who asks for verification gets it here. Differences on purpose: the objects are the plan just applied
// (Istio re-rendered the same IstioOperator), and mesh Deployments are those named `mesh*` in the install namespace
// (Istio counted `istio*`).
import type { OrchClient } from '../config/orch/client';
import { apiStatus } from '../meshctl/orch';
import type { InstallPlan } from './plan';
import type { Obj } from './render';

/** Why a Deployment's rollout is not finished (Istio's verifyDeploymentStatus), undefined when it is. */
export function deploymentProblem(d: Obj): string | undefined {
  const name = d.metadata?.name;
  const st = d.status ?? {};
  const progressing = (st.conditions ?? []).find((c: Obj) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded') return `deployment "${name}" exceeded its progress deadline`;
  const want = d.spec?.replicas;
  const updated = st.updatedReplicas ?? 0;
  if (typeof want === 'number' && updated < want) {
    return `waiting for deployment "${name}" rollout to finish: ${updated} out of ${want} new replicas have been updated`;
  }
  if ((st.replicas ?? 0) > updated) {
    return `waiting for deployment "${name}" rollout to finish: ${(st.replicas ?? 0) - updated} old replicas are pending termination`;
  }
  if ((st.availableReplicas ?? 0) < updated) {
    return `waiting for deployment "${name}" rollout to finish: ${st.availableReplicas ?? 0} of ${updated} updated replicas are available`;
  }
  return undefined;
}

/** Why a DaemonSet is not ready (Istio's verifyDaemonSetStatus), undefined when it is. */
export function daemonSetProblem(ds: Obj): string | undefined {
  const ref = `${ds.metadata?.namespace}/${ds.metadata?.name}`;
  const st = ds.status ?? {};
  const desired = st.desiredNumberScheduled ?? 0;
  if (desired !== (st.currentNumberScheduled ?? 0)) {
    return `waiting for daemonset ${ref} rollout to finish: ${st.currentNumberScheduled ?? 0} of ${desired} desired pods are scheduled`;
  }
  const strategy = ds.spec?.updateStrategy?.type ?? 'RollingUpdate';
  if (strategy === 'OnDelete' && (st.updatedNumberScheduled ?? 0) !== desired) {
    return `DaemonSet is not ready: ${ref}. ${st.updatedNumberScheduled ?? 0} out of ${desired} expected pods have been scheduled`;
  }
  if (strategy === 'RollingUpdate') {
    if (desired <= 0) return `DaemonSet ${ref} is not ready. Initializing, no pods are running`;
    if ((st.numberReady ?? 0) < desired) return `DaemonSet ${ref} is not ready. ${st.numberReady ?? 0} out of ${desired} expected pods are ready`;
  }
  return undefined;
}

/** Why a Job failed (Istio's verifyJobPostInstall), undefined when it did not. */
export function jobProblem(j: Obj): string | undefined {
  const failed = (j.status?.conditions ?? []).some((c: Obj) => c.type === 'Failed' && c.status !== 'False');
  return failed ? `the required Job ${j.metadata?.namespace}/${j.metadata?.name} failed` : undefined;
}

export interface VerifyOutcome {
  lines: string[];
  /** The error install ends with, undefined when verified. */
  error: string | undefined;
}

/**
 * Reads each object of the plan back (`pathOf` names its API path) and reports it as Istio's verifier did: one
 * `✔ Kind: name.namespace checked successfully` line per object, up to the first that is missing or not ready
 * (`✘ …`), then the counts.
 */
export async function verifyInstall(client: OrchClient, plan: InstallPlan, pathOf: (o: Obj) => string): Promise<VerifyOutcome> {
  const lines: string[] = [];
  let crds = 0;
  let deployments = 0;
  let daemonSets = 0;
  let failure: string | undefined;
  for (const o of plan.steps.flatMap((s) => s.objects)) {
    const ns = o.metadata?.namespace ?? plan.namespace;
    const where = `${o.kind}: ${o.metadata.name}.${ns}`;
    let cur: Obj;
    try {
      cur = (await client.getJson(pathOf(o))) as Obj;
    } catch (e) {
      const why = apiStatus(e) === 404 ? `${o.kind} ${o.metadata.name} not found` : (e as Error).message;
      lines.push(`✘ ${where}: the required ${o.kind}:${o.metadata.name} is not ready due to: ${why}`);
      failure = why;
      break;
    }
    let problem: string | undefined;
    if (o.kind === 'Deployment') {
      if (ns === plan.namespace && o.metadata.name.startsWith('mesh')) deployments++;
      problem = deploymentProblem(cur);
    } else if (o.kind === 'DaemonSet') {
      daemonSets++;
      problem = daemonSetProblem(cur);
    } else if (o.kind === 'Job') problem = jobProblem(cur);
    else if (o.kind === 'CustomResourceDefinition') crds++;
    if (problem) {
      lines.push(`✘ ${where}: mesh installation failed, incomplete or does not match the install plan: ${problem}`);
      failure = problem;
      break;
    }
    lines.push(`✔ ${where} checked successfully`);
  }
  lines.push(`Checked ${crds} custom resource definitions`, `Checked ${deployments} mesh Deployments`);
  if (daemonSets > 0) lines.push(`Checked ${daemonSets} mesh Daemonsets`);
  if (deployments === 0) {
    lines.push(failure ? `! No mesh installation found: ${failure}` : '! No mesh installation found');
    return { lines, error: 'no mesh installation found' };
  }
  if (failure) return { lines, error: 'mesh installation failed' };
  lines.push('✔ mesh is installed and verified successfully');
  return { lines, error: undefined };
}
