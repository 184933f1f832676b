// Remote clusters joined at run time by secrets (Istio's multicluster secret controller,
// pkg/kube/multicluster): every Secret labelled `mesh/multiCluster: "true"` (Istio's
// `istio/multiCluster` too) in --clusterRegistriesNamespace holds one client configuration per key, the
// key being the remote cluster's ID. Each remote cluster gets its own client and a store of its Services,
// EndpointSlices, Pods, Namespaces and Nodes (configuration stays with the config cluster); the caller
// turns each into a registry. A key that changes restarts its cluster, one that goes removes it, and the
// ID of the config cluster itself is never taken from a secret.
//
// Readiness waits for the remote clusters present at start to sync, but no longer than
// PILOT_REMOTE_CLUSTER_TIMEOUT (0 = no limit); one that took too long is counted in
// remote_cluster_sync_timeouts_total.
import { createHash } from 'node:crypto';
import { createOrchClient, type OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { OrchConfigStore } from '../config/orch/source';
import { localityString } from '../config/orch/resources';
import type { LabelSelector } from '../config/meshconfig';
import { registerScope } from '../lib/log';
import { defineCounter, defineGauge } from '../lib/metrics';

const log = registerScope('secretcontroller', 'multicluster secret controller');

/** Secret labels that make a remote-cluster secret: ours, then Istio's. */
export const MULTICLUSTER_SECRET_LABELS = ['mesh/multiCluster', 'istio/multiCluster'] as const;

const managedClusters = defineGauge({
  name: 'meshd_managed_clusters',
  help: 'Number of clusters managed by the discovery daemon',
  labelNames: ['cluster_type'] as const,
});
const syncTimeouts = defineCounter({
  name: 'remote_cluster_sync_timeouts_total',
  help: 'Number of times remote clusters took too long to sync, causing slow startup that excludes remote clusters.',
  labelNames: ['cluster'] as const,
});

export interface RemoteCluster {
  readonly id: string;
  /** `namespace/name` of the secret that configured it. */
  readonly secret: string;
  readonly client: OrchClient;
  readonly store: OrchConfigStore;
  /** `region/zone/subzone` of one of its nodes. */
  nodeLocality(nodeName: string): string | undefined;
  /** Synced, or its PILOT_REMOTE_CLUSTER_TIMEOUT passed. */
  hasSynced(): boolean;
  syncStatus(): 'syncing' | 'synced' | 'timeout' | 'closed';
}

/** One cluster as `/debug/clusterz` lists it (Istio's pkg/cluster DebugInfo; the config cluster has no secret). */
export interface ClusterDebugInfo {
  id: string;
  secretName: string;
  syncStatus: 'syncing' | 'synced' | 'timeout' | 'closed';
}

export interface MulticlusterOptions {
  /** Client of the config cluster, where the secrets are read. */
  client: OrchClient;
  /** --clusterRegistriesNamespace. */
  namespace: string;
  /** --clusterID: never replaced by a secret. */
  localClusterId: string;
  /** PILOT_REMOTE_CLUSTER_TIMEOUT in ms; 0 = readiness waits for every remote cluster. */
  remoteSyncTimeoutMs: number;
  /** PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS. */
  allowInsecure: readonly string[];
  /** --orchApiQPS / --orchApiBurst / user agent, for the remote clients. */
  qps?: number;
  burst?: number;
  userAgent?: string;
  watchNamespace?: string;
  discoverySelectors?: readonly LabelSelector[];
  /** A remote cluster was added (or replaced after its configuration changed: removed first). */
  added(c: RemoteCluster): void;
  removed(c: RemoteCluster): void;
}

class Remote implements RemoteCluster {
  private synced = false;
  private timedOut = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly id: string,
    readonly secret: string,
    readonly sha: string,
    readonly client: OrchClient,
    readonly store: OrchConfigStore,
    timeoutMs: number,
  ) {
    store.whenSynced().then(
      () => {
        this.synced = true;
        log.info(`remote cluster ${id} synced`, { secret });
      },
      () => undefined,
    );
    if (timeoutMs > 0) {
      this.timer = setTimeout(() => {
        if (!this.synced && !this.closed) {
          log.error(`remote cluster ${id} failed to sync after ${timeoutMs / 1000}s`);
          syncTimeouts.inc({ cluster: id });
        }
        this.timedOut = true;
      }, timeoutMs);
      this.timer.unref();
    }
  }

  nodeLocality(nodeName: string): string | undefined {
    return localityString(this.store.nodeLocality(nodeName)) || undefined;
  }

  hasSynced(): boolean {
    return this.closed || this.synced || this.timedOut;
  }

  syncStatus(): 'syncing' | 'synced' | 'timeout' | 'closed' {
    if (this.closed) return 'closed';
    if (this.synced) return 'synced';
    return this.timedOut ? 'timeout' : 'syncing';
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.store.close();
  }
}

export class MulticlusterController {
  private readonly informers: ResourceInformer[] = [];
  /** Secret key → cluster ID → cluster. */
  private readonly bySecret = new Map<string, Map<string, Remote>>();
  /** Secrets as last seen by each label's informer, merged: a secret with both labels counts once. */
  private readonly secrets = new Map<string, Map<string, Record<string, string>>>();
  private discoverySelectors: readonly LabelSelector[];
  /** Clusters being created (`secret|id|sha`): a second event meanwhile must not create them twice. */
  private readonly pending = new Set<string>();
  private closed = false;

  constructor(private readonly o: MulticlusterOptions) {
    this.discoverySelectors = o.discoverySelectors ?? [];
    managedClusters.set({ cluster_type: 'local' }, 1);
    managedClusters.set({ cluster_type: 'remote' }, 0);
  }

  start(): this {
    log.info(`Starting multicluster remote secrets controller (namespace ${this.o.namespace})`);
    for (const label of MULTICLUSTER_SECRET_LABELS) {
      const seen = new Map<string, Record<string, string>>();
      this.secrets.set(label, seen);
      const on = (o: RawObject, gone: boolean) => {
        const key = `${o.metadata.namespace}/${o.metadata.name}`;
        if (gone) seen.delete(key);
        else seen.set(key, (o.data ?? {}) as Record<string, string>);
        // Only what is read is kept: the informer's cache holds the object.
        delete o.data;
        delete o.stringData;
        this.reconcile(key);
      };
      const inf = new ResourceInformer(
        this.o.client,
        { path: `/api/v1/namespaces/${encodeURIComponent(this.o.namespace)}/secrets`, labelSelector: `${label}=true`, log },
        { add: (o) => on(o, false), update: (o) => on(o, false), delete: (o) => on(o, true) },
      );
      this.informers.push(inf);
      inf.start();
    }
    return this;
  }

  /** The secrets present at start are processed, and their clusters synced or timed out. */
  hasSynced(): boolean {
    if (!this.informers.every((i) => i.hasSynced())) return false;
    return this.clusters().every((c) => c.hasSynced());
  }

  clusters(): RemoteCluster[] {
    return [...this.bySecret.values()].flatMap((m) => [...m.values()]);
  }

  /** Istio's ListRemoteClusters after the config cluster: each secret's clusters, by secret then ID. */
  debugInfo(): ClusterDebugInfo[] {
    return this.clusters()
      .map((c) => ({ id: c.id, secretName: c.secret, syncStatus: c.syncStatus() }))
      .sort((a, b) => (a.secretName === b.secretName ? (a.id < b.id ? -1 : 1) : a.secretName < b.secretName ? -1 : 1));
  }

  /** A mesh config change: remote clusters filter their namespaces the same way. */
  setDiscoverySelectors(selectors: readonly LabelSelector[]): void {
    this.discoverySelectors = selectors;
    for (const c of this.clusters()) c.store.setDiscoverySelectors(selectors);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.informers.map((i) => i.stop()));
    for (const [secret, m] of this.bySecret) for (const c of [...m.values()]) await this.remove(secret, c);
  }

  // ---------------------------------------------------------------------------------------------

  /** Brings the clusters of one secret in line with its data (Istio's addSecret / deleteSecret). */
  private reconcile(secretKey: string): void {
    if (this.closed) return;
    let data: Record<string, string> | undefined;
    for (const seen of this.secrets.values()) data ??= seen.get(secretKey);
    const existing = this.bySecret.get(secretKey) ?? new Map<string, Remote>();
    this.bySecret.set(secretKey, existing);
    for (const [id, c] of [...existing]) {
      if (!data || !(id in data)) {
        log.info(`Deleting cluster_id=${id} configured by secret=${secretKey}`);
        void this.remove(secretKey, c);
      }
    }
    for (const [id, b64] of Object.entries(data ?? {})) {
      if (id === this.o.localClusterId) {
        log.info(`ignoring cluster ${id} from secret ${secretKey} as it would overwrite the config cluster`);
        continue;
      }
      const text = Buffer.from(b64, 'base64').toString('utf8');
      const sha = createHash('sha256').update(text).digest('hex');
      const prev = existing.get(id);
      if (this.pending.has(`${secretKey}|${id}|${sha}`)) continue;
      if (prev) {
        if (prev.sha === sha) continue; // unchanged kubeconfig
        log.info(`Update cluster ${id} (secret ${secretKey}): its client configuration changed`);
        void this.remove(secretKey, prev);
      } else if (this.clusters().some((c) => c.id === id)) {
        log.warn(
          `cluster ${id} from secret ${secretKey} has already been registered by ${this.clusters().find((c) => c.id === id)!.secret}: ignored`,
        );
        continue;
      } else {
        log.info(`Adding cluster ${id} (secret ${secretKey})`);
      }
      void this.add(secretKey, id, text, sha);
    }
    if (existing.size === 0 && !data) this.bySecret.delete(secretKey);
  }

  private async add(secretKey: string, id: string, text: string, sha: string): Promise<void> {
    const token = `${secretKey}|${id}|${sha}`;
    this.pending.add(token);
    try {
      await this.create(secretKey, id, text, sha);
    } finally {
      this.pending.delete(token);
    }
  }

  private async create(secretKey: string, id: string, text: string, sha: string): Promise<void> {
    let client: OrchClient;
    try {
      client = await createOrchClient({
        kubeconfig: { text, origin: `secret ${secretKey} key ${id}`, allowInsecure: this.o.allowInsecure },
        ...(this.o.qps !== undefined ? { qps: this.o.qps } : {}),
        ...(this.o.burst !== undefined ? { burst: this.o.burst } : {}),
        ...(this.o.userAgent ? { userAgent: this.o.userAgent } : {}),
      });
    } catch (e) {
      log.error(`Add cluster ${id}: create remote cluster failed: ${(e as Error).message}`);
      return;
    }
    if (this.closed) {
      client.close();
      return;
    }
    const store = new OrchConfigStore({
      client,
      closeClient: true,
      clusterID: id,
      meshConfigs: false,
      ...(this.o.watchNamespace ? { watchNamespace: this.o.watchNamespace } : {}),
      discoverySelectors: this.discoverySelectors,
    }).start();
    const c = new Remote(id, secretKey, sha, client, store, this.o.remoteSyncTimeoutMs);
    let m = this.bySecret.get(secretKey);
    if (!m) this.bySecret.set(secretKey, (m = new Map()));
    m.set(id, c);
    this.record();
    this.o.added(c);
  }

  private async remove(secretKey: string, c: Remote): Promise<void> {
    const m = this.bySecret.get(secretKey);
    if (m?.get(c.id) === c) m.delete(c.id);
    if (m && m.size === 0) this.bySecret.delete(secretKey);
    this.record();
    this.o.removed(c);
    await c.close();
  }

  private record(): void {
    const n = this.clusters().length;
    managedClusters.set({ cluster_type: 'remote' }, n);
    log.info(`Number of remote clusters: ${n}`);
  }
}
