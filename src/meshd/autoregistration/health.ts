// The `Healthy` condition of WorkloadEntries (Istio's autoregistration internal/health and internal/state):
// reports queue per entry (the latest wins) and are written to the status by the daemon controlling the
// entry only, never over a condition probed later; the condition is removed when a health-checked workload
// is gone for good.
import type { ConfigStore } from '../../config/store';
import type { Config } from '../../config/types';
import type { Scope } from '../../lib/log';
import { ReconcileQueue } from '../../lib/reconcile-queue';
import {
  annotation,
  CONDITION_HEALTHY,
  isStaleReport,
  withCondition,
  withoutCondition,
  WORKLOAD_CONTROLLER,
  type Condition,
  type WorkloadEntryObject,
} from './entry';
import type { WorkloadEntryApi } from './orch-api';

/** Istio's maxRetries. */
const MAX_ATTEMPTS = 5;

/** The entry a report is for. */
export interface HealthTarget {
  proxyId: string;
  namespace: string;
  entryName: string;
  /** apiVersion of the entry when known (the store may not have seen an entry just created). */
  apiVersion?: string;
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class WorkloadEntryHealth {
  private readonly items = new Map<string, HealthTarget & { condition: Condition }>();
  private readonly queue: ReconcileQueue;

  constructor(private readonly o: { store: ConfigStore; api: WorkloadEntryApi; instanceId: string; log: Scope }) {
    this.queue = new ReconcileQueue({ name: 'healthcheck', reconcile: (k) => this.update(k), log: o.log, maxAttempts: MAX_ATTEMPTS, baseDelayMs: 5 });
  }

  /** Istio's QueueWorkloadEntryHealth. */
  report(target: HealthTarget, condition: Condition): void {
    const k = `${target.namespace}/${target.entryName}`;
    this.items.set(k, { ...target, condition });
    this.queue.add(k);
  }

  /** Istio's UpdateHealth. */
  private async update(key: string): Promise<void> {
    const item = this.items.get(key);
    if (!item) return;
    const { namespace, entryName, condition } = item;
    const apiVersion = this.o.store.get('WorkloadEntry', namespace, entryName)?.apiVersion ?? item.apiVersion;
    const wle = apiVersion ? await this.o.api.get(apiVersion, namespace, entryName) : undefined;
    if (!wle) throw new Error(`failed to update health status for ${item.proxyId}: WorkloadEntry ${namespace} not found`);
    if (this.items.get(key) === item) this.items.delete(key);
    if (annotation(wle.metadata.annotations, WORKLOAD_CONTROLLER) !== this.o.instanceId) return;
    if (isStaleReport(wle.status?.conditions, condition)) return;
    const next: WorkloadEntryObject = { ...wle, status: { ...(wle.status ?? {}), conditions: withCondition(wle.status?.conditions, condition) } };
    try {
      await this.o.api.updateStatus(next);
    } catch (e) {
      // retried (unless a newer report came meanwhile), from a fresh read
      if (!this.items.has(key)) this.items.set(key, item);
      throw new Error(`error while updating WorkloadEntry health status for ${item.proxyId}: ${errorMessage(e)}`);
    }
    this.o.log.debug(`updated health status of ${item.proxyId} to ${condition.status}`);
  }

  /** Istio's DeleteHealthCondition; a missing entry is not an error. */
  async deleteCondition(wle: Config<'WorkloadEntry'>): Promise<void> {
    const cur = await this.o.api.get(wle.apiVersion, wle.meta.namespace, wle.meta.name);
    if (!cur) return;
    await this.o.api.updateStatus({
      ...cur,
      status: { ...(cur.status ?? {}), conditions: withoutCondition(cur.status?.conditions, CONDITION_HEALTHY) },
    });
  }

  stop(): Promise<void> {
    return this.queue.stop();
  }
}
