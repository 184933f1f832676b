// WorkloadEntry auto-registration and health (Istio's pilot/pkg/autoregistration Controller): a proxy that
// connects with AUTO_REGISTER_GROUP gets a WorkloadEntry made from that WorkloadGroup (or the one made
// before is marked connected to this daemon); a proxy with WORKLOAD_ENTRY and a health-checked entry becomes
// that entry's controller. When the last stream of a workload ends the entry is marked disconnected and,
// auto-registered, deleted after PILOT_WORKLOAD_ENTRY_GRACE_PERIOD unless it reconnected; a periodic sweep
// (every 10 × the grace period) deletes entries left behind by a daemon that died. Health reports of the
// agent become the entry's `Healthy` condition. Entries neither auto-registered nor health-checked are
// never touched. Every daemon replica runs it for its own connections (Istio gives it no election).
import { status as grpcStatus } from '@grpc/grpc-js';
import type { ConfigStore } from '../../config/store';
import type { Config } from '../../config/types';
import { nodeLocality } from '../../discovery/proxy';
import type { ConnectionHooks, HookedConnection } from '../../xds/server';
import { registerScope } from '../../lib/log';
import { ReconcileQueue } from '../../lib/reconcile-queue';
import {
  autoRegisteredEntryName,
  CONDITION_HEALTHY,
  connected,
  disconnected,
  healthChecksEnabled,
  healthCondition,
  isAutoRegistered,
  isHealthChecked,
  shouldCleanup,
  shouldMarkConnected,
  shouldMarkDisconnected,
  workloadEntryFromGroup,
  type HealthEvent,
  type RegisteringProxy,
} from './entry';
import {
  autoRegistrationDeletes,
  autoRegistrationErrors,
  autoRegistrationSuccess,
  autoRegistrationUnregistrations,
  autoRegistrationUpdates,
} from './metrics';
import { WorkloadEntryHealth } from './health';
import { isAlreadyExists, isNotFound, type WorkloadEntryApi } from './orch-api';

const log = registerScope('wle', 'wle controller debugging');

/** Istio's maxRetries: 5 ms, 10 ms, … 80 ms between attempts. */
const MAX_ATTEMPTS = 5;
/** Istio's cleanupLimit: 20 deletions a second. */
const CLEANUP_SPACING_MS = 50;

export interface AutoRegistrationOptions {
  store: ConfigStore;
  api: WorkloadEntryApi;
  /** Istio's instanceID: the daemon's POD_NAME. */
  instanceId: string;
  /** PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION */
  autoRegistration: boolean;
  /** PILOT_ENABLE_WORKLOAD_ENTRY_HEALTHCHECKS */
  healthChecks: boolean;
  /** PILOT_WORKLOAD_ENTRY_GRACE_PERIOD */
  gracePeriodMs: number;
  /** 1.5 × --keepaliveMaxServerConnectionAge (Infinity when unset). */
  maxConnectionAgeMs: number;
  /** MESH_WORKLOAD_ENTRY_VALIDATE_IDENTITY */
  validateIdentity: boolean;
  now?: () => number;
}

/** An error carrying the gRPC code the stream is closed with (Istio's grpcstatus errors). */
class RegistrationError extends Error {
  constructor(
    message: string,
    readonly code: grpcStatus = grpcStatus.UNKNOWN,
  ) {
    super(message);
  }
}

interface WorkItem {
  entryName: string;
  autoCreated: boolean;
  proxy: RegisteringProxy;
  apiVersion: string | undefined;
  disconTime: number;
  origConTime: number;
}

/** What `connect` decided for a connection (Istio's proxy.SetWorkloadEntry). */
interface Tracked {
  entryName: string;
  autoCreate: boolean;
  proxy: RegisteringProxy;
  key: string;
  /** apiVersion of the entry, once known (the store may not have seen an entry just created). */
  apiVersion?: string;
}

/** The proxy as auto-registration reads it. */
export function registeringProxy(c: HookedConnection): RegisteringProxy {
  const md = c.proxy.metadata;
  const locality = nodeLocality(c.node);
  return {
    id: c.proxy.id,
    namespace: c.proxy.namespace,
    ipAddresses: c.proxy.ipAddresses,
    ...(md.autoRegisterGroup ? { autoRegisterGroup: md.autoRegisterGroup } : {}),
    ...(md.workloadEntry ? { workloadEntry: md.workloadEntry } : {}),
    ...(md.network ? { network: md.network } : {}),
    labels: md.labels,
    ...(locality ? { locality } : {}),
    hasReadinessProbe: md.readinessProbe === true,
  };
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class AutoRegistration implements ConnectionHooks {
  private readonly now: () => number;
  /** Istio's adsConnections: the streams of each workload (network, IP, group, namespace). */
  private readonly byWorkload = new Map<string, Map<string, HookedConnection>>();
  private readonly tracked = new Map<string, Tracked>();
  private readonly unregisterItems = new Map<string, WorkItem>();
  private readonly unregisterQueue: ReconcileQueue;
  private readonly healthStatus: WorkloadEntryHealth;
  private readonly lateQueue: ReconcileQueue;
  private readonly timers = new Set<NodeJS.Timeout>();
  private sweep: NodeJS.Timeout | undefined;
  private cleanupChain: Promise<void> = Promise.resolve();
  private lastCleanup = 0;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly o: AutoRegistrationOptions) {
    this.now = o.now ?? Date.now;
    this.unregisterQueue = new ReconcileQueue({
      name: 'unregister_workloadentry',
      reconcile: (k) => this.unregister(k),
      log,
      maxAttempts: MAX_ATTEMPTS,
      baseDelayMs: 5,
    });
    this.healthStatus = new WorkloadEntryHealth({ store: o.store, api: o.api, instanceId: o.instanceId, log });
    this.lateQueue = new ReconcileQueue({
      name: 'auto-register existing connections',
      reconcile: (k) => this.registerExisting(k),
      log,
      baseDelayMs: 5,
    });
  }

  start(): this {
    // Istio's setupAutoRecreate: a WorkloadGroup that appears registers the workloads already connected for it.
    if (this.o.autoRegistration) {
      this.unsubscribe = this.o.store.subscribe((events) => {
        for (const e of events) {
          if (e.type === 'add' && e.config.kind === 'WorkloadGroup') this.lateQueue.add(`${e.config.meta.namespace}/${e.config.meta.name}`);
        }
      });
    }
    const every = 10 * this.o.gracePeriodMs;
    if (every > 0) {
      this.sweep = setInterval(() => this.periodicCleanup(), every);
      this.sweep.unref();
    }
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.sweep) clearInterval(this.sweep);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all([this.unregisterQueue.stop(), this.healthStatus.stop(), this.lateQueue.stop(), this.cleanupChain]);
  }

  // ---- connections (Istio's OnConnect / OnDisconnect) -----------------------------------------------

  async connect(c: HookedConnection): Promise<void> {
    const p = registeringProxy(c);
    let entryName: string | undefined;
    let autoCreate = false;
    if (this.o.autoRegistration && p.autoRegisterGroup) {
      const n = autoRegisteredEntryName(p);
      if (n && 'error' in n) log.error(n.error);
      else if (n) {
        if (n.shortened)
          log.warn(
            `generated WorkloadEntry name is too long, consider making the WorkloadGroup name shorter. Shortening from beginning to: ${n.name}`,
          );
        entryName = n.name;
      }
      autoCreate = true;
    } else if (this.o.healthChecks && p.workloadEntry) {
      const wle = this.o.store.get('WorkloadEntry', p.namespace, p.workloadEntry);
      if (!wle) {
        throw new RegistrationError(
          `proxy metadata indicates that it must correspond to an existing WorkloadEntry, however WorkloadEntry ${p.namespace}/${p.workloadEntry} is not found`,
        );
      }
      if (healthChecksEnabled(wle.meta.annotations)) {
        this.ensureProxyCanControlEntry(c, wle.meta.namespace, wle.spec.serviceAccount);
        entryName = wle.meta.name;
      }
    }
    if (!entryName) return;
    const key = workloadKey(p);
    const t: Tracked = { entryName, autoCreate, proxy: p, key };
    this.tracked.set(c.conId, t);
    let conns = this.byWorkload.get(key);
    if (!conns) this.byWorkload.set(key, (conns = new Map()));
    conns.set(c.conId, c);
    try {
      t.apiVersion = autoCreate ? await this.registerWorkload(entryName, c, p) : await this.becomeControllerOf(entryName, p, c.connectedAt);
    } catch (e) {
      log.error(errorMessage(e));
      // the stream is closed without a disconnect: forget it here (Istio's closeConnection → OnDisconnect)
      this.tracked.delete(c.conId);
      conns.delete(c.conId);
      if (conns.size === 0) this.byWorkload.delete(key);
      throw e;
    }
  }

  disconnect(c: HookedConnection): void {
    if (!this.o.autoRegistration && !this.o.healthChecks) return;
    const t = this.tracked.get(c.conId);
    if (!t) return;
    this.tracked.delete(c.conId);
    const conns = this.byWorkload.get(t.key);
    conns?.delete(c.conId);
    // another stream of the same workload is still connected
    if (conns && conns.size > 0) return;
    this.byWorkload.delete(t.key);
    const item: WorkItem = {
      entryName: t.entryName,
      autoCreated: t.autoCreate,
      proxy: t.proxy,
      apiVersion: this.o.store.get('WorkloadEntry', t.proxy.namespace, t.entryName)?.apiVersion ?? t.apiVersion,
      disconTime: this.now(),
      origConTime: c.connectedAt,
    };
    const k = `${t.proxy.namespace}/${t.entryName}`;
    this.unregisterItems.set(k, item);
    this.unregisterQueue.add(k);
  }

  health(c: HookedConnection, report: { healthy: boolean; message: string }): void {
    if (!this.o.healthChecks) return;
    const t = this.tracked.get(c.conId);
    if (!t) {
      log.error(`unable to derive WorkloadEntry for health update for ${c.proxy.id}`);
      return;
    }
    const ev: HealthEvent = report.healthy ? { healthy: true } : { healthy: false, message: report.message };
    this.healthStatus.report(
      { proxyId: c.proxy.id, namespace: t.proxy.namespace, entryName: t.entryName, ...(t.apiVersion ? { apiVersion: t.apiVersion } : {}) },
      healthCondition(ev, this.now()),
    );
  }

  // ---- registration ---------------------------------------------------------------------------------

  /** Istio's ensureProxyCanControlEntry. */
  private ensureProxyCanControlEntry(c: HookedConnection, namespace: string, serviceAccount: string | undefined): void {
    if (!this.o.validateIdentity) return;
    const id = c.proxy.verifiedIdentity;
    if (!id) throw new RegistrationError('registration of WorkloadEntry requires a verified identity');
    if (id.namespace !== namespace)
      throw new RegistrationError(`registration of WorkloadEntry namespace mismatch: "${id.namespace}" vs "${namespace}"`);
    if (serviceAccount && id.serviceAccount !== serviceAccount) {
      throw new RegistrationError(`registration of WorkloadEntry service account mismatch: "${id.serviceAccount}" vs "${serviceAccount}"`);
    }
  }

  /** Istio's registerWorkload: update the entry made before, or create one from the group. */
  private async registerWorkload(entryName: string, c: HookedConnection, p: RegisteringProxy): Promise<string> {
    const existing = this.o.store.get('WorkloadEntry', p.namespace, entryName);
    if (existing) {
      this.ensureProxyCanControlEntry(c, existing.meta.namespace, existing.spec.serviceAccount);
      await this.markConnected(existing.apiVersion, entryName, p, c.connectedAt, 'auto-registered');
      return existing.apiVersion;
    }
    const group = this.o.store.get('WorkloadGroup', p.namespace, p.autoRegisterGroup ?? '');
    if (!group) {
      autoRegistrationErrors.inc();
      throw new RegistrationError(
        `auto-registration WorkloadEntry of ${p.id} failed: cannot find WorkloadGroup ${p.namespace}/${p.autoRegisterGroup ?? ''}`,
        grpcStatus.FAILED_PRECONDITION,
      );
    }
    const entry = workloadEntryFromGroup(entryName, p, groupSource(group));
    this.ensureProxyCanControlEntry(c, entry.metadata.namespace, entry.spec['serviceAccount'] as string | undefined);
    try {
      await this.o.api.create(connected(entry, this.o.instanceId, c.connectedAt));
    } catch (e) {
      // The entry exists but this daemon has not seen it yet: it is a reconnect.
      if (isAlreadyExists(e)) {
        await this.markConnected(entry.apiVersion, entryName, p, c.connectedAt, 'auto-registered');
        return entry.apiVersion;
      }
      autoRegistrationErrors.inc();
      throw new RegistrationError(`auto-registration WorkloadEntry of ${p.id} failed: error creating WorkloadEntry: ${errorMessage(e)}`);
    }
    autoRegistrationSuccess.inc();
    log.info(
      `auto-registered WorkloadEntry ${p.namespace}/${entryName}${healthChecksEnabled(entry.metadata.annotations) ? ' with health checking enabled' : ''}`,
    );
    return entry.apiVersion;
  }

  /** Istio's becomeControllerOf: a health-checked entry that is not auto-registered. */
  private async becomeControllerOf(entryName: string, p: RegisteringProxy, conTime: number): Promise<string | undefined> {
    const wle = this.o.store.get('WorkloadEntry', p.namespace, entryName);
    const changed = await this.changeToConnected(wle?.apiVersion, entryName, p, conTime);
    if (changed) log.info(`updated health-checked WorkloadEntry ${p.namespace}/${entryName}`);
    return wle?.apiVersion;
  }

  private async markConnected(apiVersion: string, entryName: string, p: RegisteringProxy, conTime: number, what: string): Promise<void> {
    let changed: boolean;
    try {
      changed = await this.changeToConnected(apiVersion, entryName, p, conTime);
    } catch (e) {
      autoRegistrationErrors.inc();
      throw e;
    }
    if (!changed) return;
    autoRegistrationUpdates.inc();
    log.info(`updated ${what} WorkloadEntry ${p.namespace}/${entryName} as connected`);
  }

  /** Istio's changeWorkloadEntryStateToConnected, on a fresh read (a conflict is retried from a new read). */
  private async changeToConnected(apiVersion: string | undefined, entryName: string, p: RegisteringProxy, conTime: number): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      const wle = apiVersion ? await this.o.api.get(apiVersion, p.namespace, entryName) : undefined;
      if (!wle) throw new RegistrationError(`failed updating WorkloadEntry ${p.namespace}/${entryName}: WorkloadEntry not found`);
      if (!shouldMarkConnected(wle.metadata.annotations, this.o.instanceId, conTime)) return false;
      try {
        await this.o.api.update(connected(wle, this.o.instanceId, conTime));
        return true;
      } catch (e) {
        if (!isConflict(e) || attempt >= MAX_ATTEMPTS) {
          throw new RegistrationError(`failed updating WorkloadEntry ${p.namespace}/${entryName} err: ${errorMessage(e)}`);
        }
      }
    }
  }

  /** Istio's lateRegistrationQueue: a WorkloadGroup was added; register its connected workloads. */
  private async registerExisting(key: string): Promise<void> {
    const [ns, name] = key.split('/') as [string, string];
    if (!this.o.store.get('WorkloadGroup', ns, name)) return;
    for (const conns of this.byWorkload.values()) {
      for (const c of conns.values()) {
        const t = this.tracked.get(c.conId);
        if (!t || !t.autoCreate || t.proxy.namespace !== ns || t.proxy.autoRegisterGroup !== name) continue;
        try {
          t.apiVersion = await this.registerWorkload(t.entryName, c, t.proxy);
        } catch (e) {
          log.error(errorMessage(e));
        }
      }
    }
  }

  // ---- disconnect and cleanup -----------------------------------------------------------------------

  /** Istio's unregisterWorkload: mark the entry disconnected, then check it again after the grace period. */
  private async unregister(key: string): Promise<void> {
    const item = this.unregisterItems.get(key);
    if (!item) return;
    let changed: boolean;
    try {
      changed = await this.changeToDisconnected(item);
    } catch (e) {
      autoRegistrationErrors.inc();
      throw e;
    }
    if (this.unregisterItems.get(key) === item) this.unregisterItems.delete(key);
    if (!changed) return;
    log.info(`updated auto-registered WorkloadEntry ${item.proxy.namespace}/${item.entryName} as disconnected`);
    if (item.autoCreated) autoRegistrationUnregistrations.inc();
    this.after(this.o.gracePeriodMs, () => {
      const wle = this.o.store.get('WorkloadEntry', item.proxy.namespace, item.entryName);
      if (wle && this.shouldCleanup(wle)) this.cleanupEntry(wle, false);
    });
  }

  private async changeToDisconnected(item: WorkItem): Promise<boolean> {
    const ns = item.proxy.namespace;
    const wle = item.apiVersion ? await this.o.api.get(item.apiVersion, ns, item.entryName) : undefined;
    if (!wle) {
      log.info(`workloadentry ${ns}/${item.entryName} is not found, maybe deleted or because of propagate latency`);
      // retried with backoff so that the entry does not leak
      item.apiVersion ??= this.o.store.get('WorkloadEntry', ns, item.entryName)?.apiVersion;
      throw new Error(`workloadentry ${ns}/${item.entryName} is not found`);
    }
    if (!shouldMarkDisconnected(wle.metadata.annotations, this.o.instanceId, item.disconTime, item.origConTime)) return false;
    try {
      await this.o.api.update(disconnected(wle, item.disconTime));
    } catch (e) {
      throw new Error(`disconnect: failed updating WorkloadEntry ${ns}/${item.entryName}: ${errorMessage(e)}`);
    }
    return true;
  }

  private shouldCleanup(wle: Config<'WorkloadEntry'>): boolean {
    return shouldCleanup(
      { annotations: wle.meta.annotations, hasHealthCondition: hasHealthCondition(wle) },
      this.now(),
      this.o.gracePeriodMs,
      this.o.maxConnectionAgeMs,
    );
  }

  /** Istio's periodicWorkloadEntryCleanup: entries whose daemon died before it could clean them up. */
  periodicCleanup(): void {
    if (this.stopped) return;
    for (const wle of this.o.store.list('WorkloadEntry')) {
      if (this.shouldCleanup(wle)) this.cleanupEntry(wle, true);
    }
  }

  /** Istio's cleanupEntry, rate limited as its cleanupLimit (20 a second). */
  private cleanupEntry(wle: Config<'WorkloadEntry'>, periodic: boolean): void {
    this.cleanupChain = this.cleanupChain.then(async () => {
      if (this.stopped) return;
      const wait = this.lastCleanup + CLEANUP_SPACING_MS - this.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      this.lastCleanup = this.now();
      if (isAutoRegistered(wle.meta.annotations)) await this.deleteEntry(wle, periodic);
      else if (isHealthChecked(wle.meta.annotations) && hasHealthCondition(wle)) await this.deleteHealthCondition(wle, periodic);
    });
  }

  private async deleteEntry(wle: Config<'WorkloadEntry'>, periodic: boolean): Promise<void> {
    try {
      // The served store stamps its own versions: the precondition is the API's, from a fresh read that
      // still calls for the cleanup (Istio deletes with the version its informer holds).
      const cur = await this.o.api.get(wle.apiVersion, wle.meta.namespace, wle.meta.name);
      if (!cur) return;
      const conditions = cur.status?.conditions ?? [];
      const fresh = { annotations: cur.metadata.annotations, hasHealthCondition: conditions.some((c) => c.type === CONDITION_HEALTHY) };
      if (!shouldCleanup(fresh, this.now(), this.o.gracePeriodMs, this.o.maxConnectionAgeMs)) return;
      await this.o.api.delete(wle.apiVersion, wle.meta.namespace, wle.meta.name, cur.metadata.resourceVersion);
    } catch (e) {
      log.warn(`failed cleaning up auto-registered WorkloadEntry ${wle.meta.namespace}/${wle.meta.name}: ${errorMessage(e)}`);
      autoRegistrationErrors.inc();
      return;
    }
    autoRegistrationDeletes.inc();
    log.info(`cleaned up auto-registered WorkloadEntry ${wle.meta.namespace}/${wle.meta.name} periodic:${periodic}`);
  }

  private async deleteHealthCondition(wle: Config<'WorkloadEntry'>, periodic: boolean): Promise<void> {
    try {
      await this.healthStatus.deleteCondition(wle);
    } catch (e) {
      if (!isNotFound(e)) {
        log.warn(`failed cleaning up health-checked WorkloadEntry ${wle.meta.namespace}/${wle.meta.name}: ${errorMessage(e)}`);
        return;
      }
    }
    log.info(`cleaned up health-checked WorkloadEntry ${wle.meta.namespace}/${wle.meta.name} periodic:${periodic}`);
  }

  private after(ms: number, fn: () => void): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(t);
  }
}

/** Istio's proxyKey: network, first IP, group and namespace. */
function workloadKey(p: RegisteringProxy): string {
  return JSON.stringify([p.network ?? '', p.ipAddresses[0] ?? '', p.autoRegisterGroup ?? '', p.namespace]);
}

function groupSource(g: Config<'WorkloadGroup'>) {
  return {
    apiVersion: g.apiVersion,
    name: g.meta.name,
    namespace: g.meta.namespace,
    uid: g.meta.uid ?? '',
    spec: g.spec as { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; template?: Record<string, unknown> },
  };
}

/** Istio's HasHealthCondition. */
function hasHealthCondition(wle: Config<'WorkloadEntry'>): boolean {
  return (wle.status?.conditions ?? []).some((c) => c.type === CONDITION_HEALTHY);
}

function isConflict(e: unknown): boolean {
  return (e as { statusCode?: number }).statusCode === 409;
}
