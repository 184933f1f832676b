// mesh_build (Istio's istio_build, pkg/version/stats.go RecordComponentBuildTag): one sample per program,
// labelled with the component and the build's tag. Defined once for every program that records it.
import { buildInfo } from './buildinfo';
import { defineGauge } from './metrics';

const meshBuild = defineGauge<'component' | 'tag'>({ name: 'mesh_build', help: 'Mesh component build info', labelNames: ['component', 'tag'] });

export function recordComponentBuildTag(component: string, tag = buildInfo().tag): void {
  meshBuild.set({ component, tag }, 1);
}
