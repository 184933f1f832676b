// The node untaint controller (Istio's pilot/pkg/controllers/untaint, behind
// PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS): nodes are created with the cni.mesh.io/not-ready taint so that
// no pod lands on them before the CNI plugin is installed; once the mesh-cni node agent pod on a node is
// Ready, the taint is removed.
import { registerScope } from '../lib/log';
import type { OrchClient } from '../config/orch';
import { ResourceInformer, type RawObject } from '../config/orch/informer';

const log = registerScope('untaint', 'CNI node-untaint controller');

export const NOT_READY_TAINT = 'cni.mesh.io/not-ready';
/** Labels of the install-cni DaemonSet's pods. */
export const CNI_POD_LABELS: Readonly<Record<string, string>> = { 'k8s-app': 'mesh-cni-node' };
const MAX_ATTEMPTS = 5;

interface Taint {
  key?: string;
  [k: string]: unknown;
}
interface NodeObject {
  metadata: { name: string };
  spec?: { taints?: Taint[] | null };
}
interface PodObject {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec?: { nodeName?: string };
  status?: { conditions?: Array<{ type?: string; status?: string }> | null };
}

/** The Ready condition is True (Kubernetes' IsPodReadyConditionTrue). */
export function podReady(p: PodObject): boolean {
  return (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export function hasNotReadyTaint(n: NodeObject): boolean {
  return (n.spec?.taints ?? []).some((t) => t.key === NOT_READY_TAINT);
}

/**
 * The JSON patch that removes our taint only if the node's taints are still what we read (a concurrent
 * writer, or another replica of the daemon, makes it fail instead of losing their change).
 */
export function untaintPatch(n: NodeObject): unknown[] | undefined {
  const taints = n.spec?.taints ?? [];
  const kept = taints.filter((t) => t.key !== NOT_READY_TAINT);
  if (kept.length === taints.length) return undefined;
  return [
    { op: 'test', path: '/spec/taints', value: taints },
    { op: 'replace', path: '/spec/taints', value: kept },
  ];
}

export class NodeUntainter {
  private readonly nodes = new Map<string, NodeObject>();
  private readonly cniPods = new Map<string, PodObject>();
  private readonly nodeInformer: ResourceInformer;
  private readonly podInformer: ResourceInformer;
  private readonly queued = new Set<string>();
  private readonly attempts = new Map<string, number>();
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  /** `namespace`: where the CNI node agent runs (--cniNamespace, else the daemon's namespace). */
  constructor(
    private readonly client: OrchClient,
    readonly namespace: string,
  ) {
    this.nodeInformer = new ResourceInformer(
      client,
      { path: '/api/v1/nodes', log },
      {
        add: (o) => this.nodeChanged(o),
        update: (o) => this.nodeChanged(o),
        delete: (o) => void this.nodes.delete(String(o.metadata.name)),
      },
    );
    const selector = Object.entries(CNI_POD_LABELS)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    this.podInformer = new ResourceInformer(
      client,
      { path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`, labelSelector: selector, log },
      {
        add: (o) => this.podChanged(o),
        update: (o) => this.podChanged(o),
        delete: (o) => void this.cniPods.delete(String(o.metadata.name)),
      },
    );
  }

  start(): void {
    log.info(`starting node untainter for pods labelled ${JSON.stringify(CNI_POD_LABELS)} in ${this.namespace}`);
    this.nodeInformer.start();
    this.podInformer.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    await Promise.all([this.nodeInformer.stop(), this.podInformer.stop()]);
    await this.running;
  }

  private nodeChanged(o: RawObject): void {
    const node = o as unknown as NodeObject;
    this.nodes.set(node.metadata.name, node);
    if (hasNotReadyTaint(node) && this.readyCniPodOn(node.metadata.name)) this.enqueue(node.metadata.name);
  }

  private podChanged(o: RawObject): void {
    const pod = o as unknown as PodObject;
    this.cniPods.set(pod.metadata.name, pod);
    const nodeName = pod.spec?.nodeName;
    if (!nodeName || !podReady(pod)) return;
    log.debug(`pod ${pod.metadata.name} on node ${nodeName} ready!`);
    const node = this.nodes.get(nodeName);
    if (node && hasNotReadyTaint(node)) this.enqueue(nodeName);
  }

  private readyCniPodOn(nodeName: string): boolean {
    for (const p of this.cniPods.values()) if (p.spec?.nodeName === nodeName && podReady(p)) return true;
    return false;
  }

  private enqueue(name: string): void {
    if (this.stopped) return;
    this.queued.add(name);
    this.running ??= this.drain().finally(() => (this.running = undefined));
  }

  private async drain(): Promise<void> {
    while (!this.stopped && this.queued.size > 0) {
      const name = this.queued.values().next().value as string;
      this.queued.delete(name);
      try {
        await this.reconcileNode(name);
        this.attempts.delete(name);
      } catch (e) {
        log.error(`failed to remove readiness taint from node ${name}: ${(e as Error).message}`);
        const n = (this.attempts.get(name) ?? 0) + 1;
        if (n >= MAX_ATTEMPTS) {
          this.attempts.delete(name);
          continue;
        }
        this.attempts.set(name, n);
        const timer = setTimeout(
          () => {
            this.timers.delete(timer);
            this.enqueue(name);
          },
          5 * 2 ** n,
        );
        this.timers.add(timer);
      }
    }
  }

  private async reconcileNode(name: string): Promise<void> {
    const node = this.nodes.get(name);
    if (!node) return;
    const patch = untaintPatch(node);
    if (!patch) return;
    log.debug(`removing readiness taint from node ${name}`);
    await this.client.request('PATCH', `/api/v1/nodes/${encodeURIComponent(name)}`, { body: patch, contentType: 'application/json-patch+json' });
    log.info(`removed readiness taint ${NOT_READY_TAINT} from node ${name}`);
  }
}
