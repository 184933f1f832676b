// The install plan (Istio's operator/pkg/install: the installer's component order, the owner labels it sets
// for pruning and uninstall) and its dry-run text: pure functions of the merged IstioOperator, shared by the
// install/upgrade/uninstall handlers (command.ts) and the applier (apply.ts).
import { buildInfo } from '../lib/buildinfo';
import type { MergedOperator } from './operator';
import { objectYaml, renderAll, sortObjects, type Obj } from './render';
import { getString } from './tree';

/** Istio's installer order: base before discovery and CNI, discovery before the gateways. */
const INSTALL_ORDER = ['Base', 'Pilot', 'Cni', 'Nodeproxy', 'IngressGateways', 'EgressGateways'];
/** The components as install and uninstall name them to the user. */
export const COMPONENT_TEXT: Record<string, string> = {
  Base: 'Mesh core',
  Pilot: 'Meshd',
  Cni: 'CNI',
  Nodeproxy: 'Node proxy',
  IngressGateways: 'Ingress gateways',
  EgressGateways: 'Egress gateways',
};

/** The labels the installer puts on every object it applies (Istio's getOwnerLabels), for pruning and uninstall. */
export function ownerLabels(iop: Record<string, unknown>, component: string): Record<string, string> {
  const labels: Record<string, string> = {
    'operator.mesh.io/managed': 'Reconcile',
    'operator.mesh.io/version': buildInfo().version,
  };
  const name = getString(iop, 'metadata.name');
  if (name) labels['install.operator.mesh.io/owning-resource'] = name;
  const ns = getString(iop, 'metadata.namespace');
  if (ns) labels['install.operator.mesh.io/owning-resource-namespace'] = ns;
  labels['mesh.io/rev'] = getString(iop, 'spec.values.revision') || 'default';
  if (component) labels['operator.mesh.io/component'] = component;
  return labels;
}

export interface InstallPlan {
  namespace: string;
  profile: string;
  revision: string;
  /** Per component in install order: the objects, labelled, sorted. */
  steps: Array<{ component: string; objects: Obj[] }>;
  warnings: string[];
}

export function installPlan(m: MergedOperator): InstallPlan {
  const g = renderAll(m);
  const steps: InstallPlan['steps'] = [];
  for (const name of INSTALL_ORDER) {
    const objects = g.components.filter((c) => c.component.name === name).flatMap((c) => c.objects);
    if (!objects.length) continue;
    const labels = ownerLabels(m.iop, name);
    for (const o of objects) o.metadata = { ...o.metadata, labels: { ...(o.metadata?.labels ?? {}), ...labels } };
    steps.push({ component: name, objects: sortObjects(objects) });
  }
  return {
    namespace: getString(m.iop, 'metadata.namespace') || 'mesh-system',
    profile: getString(m.iop, 'spec.profile') || 'default',
    revision: getString(m.iop, 'spec.values.revision') || 'default',
    steps,
    warnings: g.warnings,
  };
}

export function objectRef(o: Obj): string {
  const ns = o.metadata?.namespace ? `${o.metadata.namespace}/` : '';
  return `${o.kind} ${ns}${o.metadata?.name}`;
}

/** What `install --dry-run` prints: the plan line by line, then the manifests that would be applied. */
export function dryRunText(plan: InstallPlan): string {
  const lines = [
    `Dry run: nothing is applied. This would install the mesh ${buildInfo().version} ${JSON.stringify(plan.profile)} profile` +
      ` (revision ${plan.revision}) into the cluster:`,
    `  Namespace ${plan.namespace} (created if missing)`,
  ];
  for (const s of plan.steps) {
    lines.push(`${COMPONENT_TEXT[s.component] ?? s.component}:`);
    for (const o of s.objects) lines.push(`  apply ${objectRef(o)}`);
  }
  const docs = plan.steps.flatMap((s) => s.objects).map((o) => objectYaml(o) + '\n---\n');
  return lines.join('\n') + '\n\n' + docs.join('');
}
