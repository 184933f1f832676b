// meshConfig discoverySelectors over the orchestrator's Namespaces (Istio's discovery namespaces filter,
// pkg/kube/namespace/filter.go): every Namespace's labels as last seen, and which namespaces the selectors
// select; no selectors select every namespace. Cluster-scoped objects are always in scope.
import { type LabelSelector, namespaceSelected } from '../meshconfig';
import type { Kind } from '../types';

export class NamespaceFilter {
  private readonly labels = new Map<string, Readonly<Record<string, string>>>();
  private readonly selected = new Set<string>();

  /** `changed` hears of each namespace that joins or leaves the selection. */
  constructor(
    private selectors: readonly LabelSelector[],
    private readonly changed: (namespace: string, selected: boolean) => void,
  ) {}

  /** The selectors select some namespaces only. */
  get filtering(): boolean {
    return this.selectors.length > 0;
  }

  /** New selectors (a mesh config change): every known namespace is looked at again. */
  setSelectors(selectors: readonly LabelSelector[]): void {
    this.selectors = selectors;
    for (const ns of this.labels.keys()) this.update(ns);
  }

  /** A Namespace appeared or changed. */
  setLabels(namespace: string, labels: Readonly<Record<string, string>>): void {
    this.labels.set(namespace, labels);
    this.update(namespace);
  }

  /** A Namespace went away. */
  remove(namespace: string): void {
    this.labels.delete(namespace);
    this.update(namespace);
  }

  /** Whether objects of `namespace` are served. */
  inScope(namespace: string): boolean {
    return !this.filtering || this.selected.has(namespace);
  }

  /** Whether the object stored under `Kind/namespace/name` is served (a Namespace: when it is selected). */
  keyInScope(kind: Kind, key: string): boolean {
    if (!this.filtering) return true;
    const rest = key.slice(kind.length + 1);
    const ns = rest.slice(0, rest.indexOf('/'));
    if (kind === 'Namespace') return this.selected.has(rest.slice(rest.indexOf('/') + 1));
    return ns === '' || this.selected.has(ns);
  }

  private update(ns: string): void {
    const labels = this.labels.get(ns);
    const now = labels !== undefined && namespaceSelected(this.selectors, labels);
    if (now === this.selected.has(ns)) return;
    if (now) this.selected.add(ns);
    else this.selected.delete(ns);
    this.changed(ns, now);
  }
}
