// exportTo semantics shared by services, VirtualServices and DestinationRules: `*` everyone, `.` the
// config's own namespace, `~` nobody, otherwise the listed namespaces. Empty means the mesh default `*`.

export function isExportedTo(exportTo: readonly string[] | undefined, ownNamespace: string, proxyNamespace: string): boolean {
  if (!exportTo || exportTo.length === 0) return true;
  for (const e of exportTo) {
    if (e === '*') return true;
    if (e === '~') continue;
    if (e === '.' ? ownNamespace === proxyNamespace : e === proxyNamespace) return true;
  }
  return false;
}

/** Configs ordered as Istio orders them: oldest first, then by namespace and name. */
export function byAge<T extends { meta: { creationTimestamp?: string; namespace: string; name: string } }>(a: T, b: T): number {
  const ta = a.meta.creationTimestamp ? Date.parse(a.meta.creationTimestamp) || 0 : 0;
  const tb = b.meta.creationTimestamp ? Date.parse(b.meta.creationTimestamp) || 0 : 0;
  if (ta !== tb) return ta - tb;
  if (a.meta.namespace !== b.meta.namespace) return a.meta.namespace < b.meta.namespace ? -1 : 1;
  return a.meta.name < b.meta.name ? -1 : a.meta.name > b.meta.name ? 1 : 0;
}
