import type { MeshPod } from './mesh-pods.mjs';

export function meshDemoMesh(binaryPath?: (pod: string) => string | undefined): {
  pods: MeshPod[];
  config: Record<string, string>;
  meshConfig: string;
};
export function meshDemoUnavailable(dist: string): string | false;
export function runMeshDemo(o: { dist: string }): Promise<void>;
