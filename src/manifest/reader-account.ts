// The reader account `meshctl create-remote-secret --create-service-account` applies (istioctl's
// generateServiceAccountYAML): the charts rendered with the system namespace set, keeping the
// `mesh-reader-service-account` ServiceAccount (base chart) and the `mesh-reader-clusterrole…` ClusterRole and
// ClusterRoleBinding (discovery chart), as Istio keeps `istio-reader-*`. --manifests picks the charts.
import { mergeInputs } from './operator';
import { renderAll, type Obj } from './render';
import { manifestSource } from './source';

export function readerAccountObjects(manifests: string, namespace: string): Obj[] {
  const merged = mergeInputs({ files: [], sets: [`values.global.meshNamespace=${namespace}`], manifests, revision: '' }, manifestSource);
  return renderAll(merged)
    .components.filter((c) => c.component.name === 'Base' || c.component.name === 'Pilot')
    .flatMap((c) => c.objects)
    .filter(
      (o) =>
        ((o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding') && String(o.metadata?.name).startsWith('mesh-reader-clusterrole')) ||
        (o.kind === 'ServiceAccount' && o.metadata?.name === 'mesh-reader-service-account'),
    );
}
