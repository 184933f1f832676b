// `meshctl x injector list` (istioctl 1.26 istioctl/pkg/injector/injector-list.go): which injection webhook each
// namespace reaches and which revision its pods were injected by, then each webhook with the namespaces it injects
// and the proxy image its revision's injector configuration names. Texts and labels renamed (MESH-REVISION,
// `<non-mesh>`, mesh-injection, sidecar.mesh.io/status); Go's map order is replaced by sorted rows.
import { type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { labelSelectorMatches } from '../config/meshconfig';
import { TabWriter } from '../lib/tabwriter';
import { commandNamespace, withOrch } from './orch';

type Obj = Record<string, any>;

const REV = 'mesh.io/rev';
const INJECTION_LABEL = 'mesh-injection';
const STATUS_ANNOTATION = 'sidecar.mesh.io/status';
const INJECT = 'sidecar.mesh.io/inject';
/** inject.IgnoredNamespaces: never injected, never listed. */
const IGNORED = ['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage'];
const NAMESPACE_HOOKS = ['rev.namespace.sidecar-injector.mesh.io', 'namespace.sidecar-injector.mesh.io'];

function labels(o: Obj): Record<string, string> {
  return o.metadata?.labels ?? {};
}

/** The first webhook configuration one of whose webhooks selects the namespace (istioctl's getInjector). */
function injectorOf(ns: Obj, hooks: Obj[]): Obj | undefined {
  return hooks.find((h) => (h.webhooks ?? []).some((w: Obj) => labelSelectorMatches(w.namespaceSelector ?? {}, labels(ns))));
}

/** The revision injecting the namespace: its webhook's, else `MISSING/<label>` when labelled for a webhook that is absent. */
export function injectedRevision(ns: Obj, hooks: Obj[]): string {
  const hook = injectorOf(ns, hooks);
  if (hook) return labels(hook)[REV] ?? '';
  const rev = labels(ns)[REV] ?? '';
  const old = labels(ns)[INJECTION_LABEL];
  if (rev === '' && (old === undefined || old === 'disabled')) return '';
  return rev !== '' ? `MISSING/${rev}` : `MISSING/${INJECTION_LABEL}`;
}

function podRevision(pod: Obj): string {
  try {
    return String(JSON.parse(pod.metadata?.annotations?.[STATUS_ANNOTATION] ?? '')?.revision ?? '');
  } catch {
    return '';
  }
}

function injectionDisabled(pod: Obj): boolean {
  const v = labels(pod)[INJECT] ?? pod.metadata?.annotations?.[INJECT] ?? '';
  return v.toLowerCase() === 'false';
}

interface Count {
  pods: number;
  disabled: number;
  needsRestart: number;
}

function renderCount(rev: string, c: Count): string {
  if (c.pods === 0) return '<no pods>';
  let text = String(c.pods);
  if (c.disabled > 0) text += ` (injection disabled: ${c.disabled})`;
  if (c.needsRestart > 0) text += ` NEEDS RESTART: ${c.needsRestart}`;
  return `${rev}: ${text}`;
}

/** The first table: per namespace, its injecting revision and its pods counted by the revision that injected them. */
export function namespaceTable(namespaces: Obj[], hooks: Obj[], podsByNs: Map<string, Obj[]>): string {
  const w = new TabWriter(0, 1);
  let rows = 0;
  for (const ns of namespaces) {
    const revision = injectedRevision(ns, hooks);
    const counts = new Map<string, Count>();
    for (const pod of podsByNs.get(ns.metadata.name) ?? []) {
      const r = podRevision(pod);
      const key = r === '' ? '<non-mesh>' : r;
      const c = counts.get(key) ?? { pods: 0, disabled: 0, needsRestart: 0 };
      c.pods++;
      if (injectionDisabled(pod)) c.disabled++;
      else if (r !== revision) c.needsRestart++;
      counts.set(key, c);
    }
    if (counts.size === 0 && revision !== '') counts.set(revision, { pods: 0, disabled: 0, needsRestart: 0 });
    for (const key of [...counts.keys()].sort()) {
      if (rows++ === 0) w.row('NAMESPACE', 'MESH-REVISION', 'POD-REVISIONS');
      w.row(ns.metadata.name, revision, renderCount(key, counts.get(key)!));
    }
  }
  return rows === 0 ? 'No mesh injected namespaces present.\n' : w.flush();
}

/** injection.GetIstioProxyImage on the injector ConfigMap's `values`. */
export function proxyImage(cm: Obj): string {
  try {
    const g = JSON.parse(String(cm.data?.values ?? ''))?.global ?? {};
    const image = String(g.proxy?.image ?? '');
    return image.includes('/') ? image : `${g.hub ?? ''}/${image}:${g.tag ?? ''}`;
  } catch {
    return '';
  }
}

/** The second table: each webhook with the namespaces its namespace webhooks select. */
export function hookTable(namespaces: Obj[], hooks: Obj[], images: Map<string, string>): string {
  if (hooks.length === 0) return 'No mesh injection hooks present.\n';
  const w = new TabWriter(0, 1);
  w.row('NAMESPACES', 'INJECTOR-HOOK', 'MESH-REVISION', 'SIDECAR-IMAGE');
  for (const hook of [...hooks].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
    const rev = labels(hook)[REV] ?? '';
    const image = images.get(rev) ?? '';
    const seen = new Set<string>();
    for (const wh of hook.webhooks ?? []) {
      if (!NAMESPACE_HOOKS.includes(wh.name)) continue;
      for (const ns of namespaces) if (labelSelectorMatches(wh.namespaceSelector ?? {}, labels(ns))) seen.add(ns.metadata.name);
    }
    const matched = namespaces.map((n) => n.metadata.name as string).filter((n) => seen.has(n));
    if (matched.length === 0) w.row('DOES NOT AUTOINJECT', hook.metadata.name, rev, image);
    for (const n of matched) w.row(n, hook.metadata.name, rev, image);
  }
  return w.flush();
}

async function items(client: OrchClient, p: string, labelSelector?: string): Promise<Obj[]> {
  return (((await client.getJson(p, labelSelector ? { labelSelector } : undefined)) as Obj).items ?? []) as Obj[];
}

async function report(ctx: RunContext, client: OrchClient): Promise<string> {
  const meshNamespace = (ctx.flags['meshNamespace'] as string) || 'mesh-system';
  let namespaces = (await items(client, '/api/v1/namespaces'))
    .filter((n) => !IGNORED.includes(n.metadata.name) && n.metadata.name !== meshNamespace)
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  if (ctx.flags['namespace']) {
    const only = commandNamespace(ctx, client);
    const found = namespaces.find((n) => n.metadata.name === only);
    if (found) namespaces = [found];
  }
  const hooks = await items(client, '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', 'app=sidecar-injector');
  const podsByNs = new Map<string, Obj[]>();
  for (const p of await items(client, '/api/v1/pods')) {
    const list = podsByNs.get(p.metadata.namespace) ?? [];
    list.push(p);
    podsByNs.set(p.metadata.namespace, list);
  }
  const images = new Map<string, string>();
  for (const cm of await items(client, '/api/v1/configmaps', REV)) {
    const image = proxyImage(cm);
    if (image) images.set(labels(cm)[REV]!, image);
  }
  return namespaceTable(namespaces, hooks, podsByNs) + '\n' + hookTable(namespaces, hooks, images);
}

export const run: Handler = async (ctx) => {
  ctx.stdout.write(await withOrch(ctx, 'x injector list', (client) => report(ctx, client)));
  return 0;
};
