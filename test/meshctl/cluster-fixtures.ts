// What the cluster tests of meshctl share: the built meshctl run as a user runs it, and a revision installed
// as `meshctl install --revision <rev>` would install it (its injection webhook, its daemon Service and its
// injector ConfigMap, taken from `meshctl manifest generate`), without a running daemon.
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { DIST, exec, type ExecResult } from '../helpers/binary';
import { objectPath, type Kube, type Obj } from '../helpers/kube';

export const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };

export function meshctl(args: string[], env: Record<string, string> = {}, input?: string): Promise<ExecResult> {
  return exec(MESHCTL, args, { env: { ...ENV, ...env }, input });
}

const KEPT = new Set(['MutatingWebhookConfiguration', 'Service', 'ConfigMap']);

/** Creates the revision's webhook, daemon Service and injector ConfigMap; returns them as created. */
export async function installRevision(kube: Kube, revision: string): Promise<Obj[]> {
  const r = await meshctl(['manifest', 'generate', '--revision', revision]);
  if (r.code !== 0) throw new Error(`manifest generate: ${r.stderr}`);
  const objects = parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => !!o && KEPT.has(o.kind))
    .filter((o) => o.kind !== 'Service' || o.metadata.labels?.app === 'meshd')
    .filter((o) => o.kind !== 'ConfigMap' || o.metadata.name.startsWith('mesh-sidecar-injector'));
  if (!(await kube.api.find('/api/v1/namespaces/mesh-system'))) {
    await kube.api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } });
  }
  for (const o of objects) await kube.api.apply(o);
  return Promise.all(objects.map((o) => kube.api.get(objectPath(o))));
}

/** No line of a stack trace and no Node warning in `text`. */
export function noStack(text: string): boolean {
  return !/\n\s+at |TypeError|DEP0\d+|node:internal/.test(text);
}
