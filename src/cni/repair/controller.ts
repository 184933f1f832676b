// The race repair controller (Istio's cni/pkg/repair): watches the pods of this node through the
// orchestrator API and, for pods whose validation init container says the CNI plugin was not there
// when they started, labels them (for an operator or a controller to act on) or deletes them (so they
// are recreated with the plugin in place), leaving an Event on each.
import { randomBytes } from 'node:crypto';
import { registerScope } from '../../lib/log';
import { defineCounter } from '../../lib/metrics';
import { OrchApiError, type OrchClient } from '../../config/orch';
import { ResourceInformer, type RawObject } from '../../config/orch/informer';
import { matchesFilter, type PodLike, type RepairFilter } from './filter';

const log = registerScope('cni-agent', 'CNI agent');
const informerLog = registerScope('controllers', 'common controller logic');

const podsRepaired = defineCounter({
  name: 'mesh_cni_repair_pods_repaired_total',
  help: 'Total number of pods repaired by repair controller',
  labelNames: ['type', 'result'] as const,
});

export const REASON_DELETE = 'DeleteBrokenPod';
export const REASON_LABEL = 'LabelBrokenPod';
/** The component named as the source of the Events the controller writes. */
export const EVENT_SOURCE = 'cni-repair';
/** Attempts per pod before the queue gives up on it (Istio: WithMaxAttempts(5)). */
const MAX_ATTEMPTS = 5;

export interface RepairConfig extends RepairFilter {
  deletePods: boolean;
  labelPods: boolean;
  labelKey: string;
  labelValue: string;
  /** Only pods scheduled to this node; "" = every node. */
  nodeName: string;
  labelSelectors: string;
  fieldSelectors: string;
}

type Pod = PodLike & {
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string> | null;
  };
};

const keyOf = (o: { metadata?: { namespace?: string; name?: string } }) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/** The field selector of the pod watch: the configured selectors plus this node. */
export function podFieldSelector(cfg: Pick<RepairConfig, 'fieldSelectors' | 'nodeName'>): string {
  const parts: string[] = [];
  if (cfg.fieldSelectors) parts.push(cfg.fieldSelectors);
  if (cfg.nodeName) parts.push(`spec.nodeName=${cfg.nodeName}`);
  return parts.join(',');
}

export class RepairController {
  private readonly informer: ResourceInformer;
  private readonly pods = new Map<string, Pod>();
  private readonly queued = new Set<string>();
  private readonly attempts = new Map<string, number>();
  private running: Promise<void> | undefined;
  private stopped = false;
  private retryTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly client: OrchClient,
    private readonly cfg: RepairConfig,
  ) {
    this.informer = new ResourceInformer(
      client,
      { path: '/api/v1/pods', fieldSelector: podFieldSelector(cfg), labelSelector: cfg.labelSelectors, log: informerLog },
      {
        add: (o) => this.observe(o),
        update: (o) => this.observe(o),
        delete: (o) => {
          this.pods.delete(keyOf(o));
          this.attempts.delete(keyOf(o));
        },
      },
    );
  }

  start(): void {
    log.info('starting CNI sidecar repair controller');
    this.informer.start();
  }

  whenSynced(): Promise<void> {
    return this.informer.whenSynced();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.retryTimers) clearTimeout(t);
    await this.informer.stop();
    await this.running;
  }

  private observe(o: RawObject): void {
    const key = keyOf(o);
    this.pods.set(key, o as unknown as Pod);
    this.enqueue(key);
  }

  private enqueue(key: string): void {
    if (this.stopped) return;
    this.queued.add(key);
    this.running ??= this.drain().finally(() => (this.running = undefined));
  }

  /** One pod at a time, the newest version of each; a failed pod is retried with backoff, then dropped. */
  private async drain(): Promise<void> {
    while (!this.stopped && this.queued.size > 0) {
      const key = this.queued.values().next().value as string;
      this.queued.delete(key);
      const pod = this.pods.get(key);
      if (!pod) continue;
      try {
        await this.reconcilePod(pod);
        this.attempts.delete(key);
      } catch (e) {
        const n = (this.attempts.get(key) ?? 0) + 1;
        if (n >= MAX_ATTEMPTS) {
          log.error(`repair of pod ${key} failed ${n} times, giving up: ${(e as Error).message}`);
          this.attempts.delete(key);
          continue;
        }
        this.attempts.set(key, n);
        const delay = 5 * 2 ** n; // client-go's per-item exponential backoff from 5 ms
        log.warn(`repair of pod ${key} failed (attempt ${n}/${MAX_ATTEMPTS}), retrying in ${delay}ms: ${(e as Error).message}`);
        const timer = setTimeout(() => {
          this.retryTimers.delete(timer);
          this.enqueue(key);
        }, delay);
        this.retryTimers.add(timer);
      }
    }
  }

  async reconcilePod(pod: Pod): Promise<void> {
    if (!matchesFilter(this.cfg, pod)) return;
    // A pod already on its way out needs nothing more.
    if (pod.metadata.deletionTimestamp) return;
    log.debug(`Reconciling pod ${pod.metadata.name}`);
    if (this.cfg.deletePods) return this.deleteBrokenPod(pod);
    if (this.cfg.labelPods) return this.labelBrokenPod(pod);
  }

  private podPath(pod: Pod): string {
    return `/api/v1/namespaces/${encodeURIComponent(pod.metadata.namespace)}/pods/${encodeURIComponent(pod.metadata.name)}`;
  }

  private async deleteBrokenPod(pod: Pod): Promise<void> {
    log.info(`Pod detected as broken, deleting: ${pod.metadata.namespace}/${pod.metadata.name}`);
    try {
      // Only the pod we looked at: not a newer incarnation under the same name, nor a changed one.
      await this.client.request('DELETE', this.podPath(pod), {
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: pod.metadata.uid, resourceVersion: pod.metadata.resourceVersion } },
      });
    } catch (e) {
      await this.event(pod, REASON_DELETE, `pod detected as broken, but failed to delete: ${(e as Error).message}`);
      podsRepaired.inc({ type: 'delete', result: 'fail' });
      // The pod is gone or changed: the watch brings its new state, if any.
      if (e instanceof OrchApiError && (e.statusCode === 404 || e.statusCode === 409)) return;
      throw e;
    }
    await this.event(pod, REASON_DELETE, 'pod detected as broken, deleted');
    podsRepaired.inc({ type: 'delete', result: 'success' });
  }

  private async labelBrokenPod(pod: Pod): Promise<void> {
    const { namespace, name } = pod.metadata;
    log.info(`Pod detected as broken, adding label: ${namespace}/${name}`);
    if (this.cfg.labelKey in (pod.metadata.labels ?? {})) {
      podsRepaired.inc({ type: 'label', result: 'skip' });
      log.info(`Pod ${namespace}/${name} already has label with key ${this.cfg.labelKey}, skipping`);
      return;
    }
    log.info(`Labeling pod ${namespace}/${name} with label ${this.cfg.labelKey}=${this.cfg.labelValue}`);
    try {
      // pods/status may change metadata too and needs less privilege than pods.
      await this.client.request('PATCH', `${this.podPath(pod)}/status`, {
        body: { metadata: { labels: { [this.cfg.labelKey]: this.cfg.labelValue } } },
        contentType: 'application/merge-patch+json',
      });
    } catch (e) {
      log.error(`Failed to update pod: ${(e as Error).message}`);
      await this.event(pod, REASON_LABEL, `pod detected as broken, but failed to label: ${(e as Error).message}`);
      podsRepaired.inc({ type: 'label', result: 'fail' });
      if (e instanceof OrchApiError && e.statusCode === 404) return;
      throw e;
    }
    await this.event(pod, REASON_LABEL, 'pod detected as broken, labeled');
    podsRepaired.inc({ type: 'label', result: 'success' });
  }

  /** A Warning Event on the pod; failing to write one is logged, never fatal. */
  private async event(pod: Pod, reason: string, message: string): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const { namespace, name } = pod.metadata;
    const body = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${name}.${Date.now().toString(16)}${randomBytes(2).toString('hex')}`, namespace },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace, name, uid: pod.metadata.uid, resourceVersion: pod.metadata.resourceVersion },
      reason,
      message,
      type: 'Warning',
      source: { component: EVENT_SOURCE, ...(this.cfg.nodeName ? { host: this.cfg.nodeName } : {}) },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    try {
      await this.client.request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body });
    } catch (e) {
      log.warn(`could not write Event ${reason} for pod ${namespace}/${name}: ${(e as Error).message}`);
    }
  }
}
