// The orchestrator's Nodes as the registries read them: not a config Kind, only each node's topology labels
// (Istio's node locality for pods), and subscribers told when a node's locality appears, changes or goes.
import type { RawObject } from './informer';
import { type NodeLocality, nodeLocalityOf } from './resources';

export class NodeLocalities {
  private readonly nodes = new Map<string, NodeLocality>();
  private readonly subscribers = new Set<(nodeName: string) => void>();

  constructor(private readonly log: { error(msg: string): void }) {}

  get size(): number {
    return this.nodes.size;
  }

  /** Topology of a node from its labels, or undefined for an unknown node. */
  get(nodeName: string): NodeLocality | undefined {
    return this.nodes.get(nodeName);
  }

  subscribe(handler: (nodeName: string) => void): () => void {
    this.subscribers.add(handler);
    return () => this.subscribers.delete(handler);
  }

  /** A Node event from the informer. */
  onNode(raw: RawObject, deleted: boolean): void {
    const name = raw.metadata.name ?? '';
    const before = this.nodes.get(name);
    if (deleted) {
      this.nodes.delete(name);
    } else {
      const labels = (raw.metadata.labels ?? {}) as Record<string, string>;
      this.nodes.set(name, nodeLocalityOf(labels));
      // Only the labels are read: drop the rest (node status lists every image on the node).
      for (const k of Object.keys(raw)) if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') delete raw[k];
      delete raw.metadata.managedFields;
    }
    const after = this.nodes.get(name);
    if (JSON.stringify(before) === JSON.stringify(after)) return;
    for (const h of this.subscribers) {
      try {
        h(name);
      } catch (e) {
        this.log.error(`node subscriber failed for ${name}: ${(e as Error).message}`);
      }
    }
  }
}
