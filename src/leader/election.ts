// Leader election on coordination.k8s.io Leases, with client-go's LeaderElector semantics and Istio's
// additions (pilot/pkg/leaderelection):
//
// - one Lease per election, named as Istio names them with `istio` → `mesh` (ELECTIONS below), in the
//   daemon's namespace; the holder identity is the pod name (POD_NAME);
// - the lease lasts 30 s; the leader renews every 7.5 s (retry period, ttl/4) and gives up leading when
//   it could not renew for 15 s (renew deadline, ttl/2); a candidate retries every 7.5 s (jittered) and
//   takes a lease whose holder has not renewed it for the lease duration, as observed on its own clock.
//   Unlike client-go, a candidate also watches the Lease: it sees each renewal when it happens rather
//   than at its next poll, and tries again the moment the lease would expire, so a leader that dies is
//   replaced one lease duration after its last renewal instead of up to a poll interval later;
// - the holder's revision is kept on the Lease (annotation `leader.mesh.io/holder-key`, `^`-prefixed
//   for a daemon that manages the cluster remotely): the default revision takes the lease from another
//   revision, and a local daemon from a remote one of the same revision (Istio's prioritized election);
//   per-revision elections append `-<revision>` to the name and do not steal;
// - a leader that stops cleanly releases the lease (holder cleared, duration 1 s) so the next one takes
//   over at once; one that dies is replaced within the lease duration and one retry period;
// - ENABLE_LEADER_ELECTION=false skips all of it: this daemon runs the controllers as if leading.
//
// When a cycle is lost (the lease could not be renewed), the run functions are told to stop and the
// election starts over.
import { registerScope } from '../lib/log';
import { OrchApiError, type OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';

const log = registerScope('default');

/** Istio's election names, renamed (istio-… → mesh-…). */
export const ELECTIONS = {
  NamespaceController: 'mesh-namespace-controller-election',
  ClusterTrustBundleController: 'mesh-clustertrustbundle-controller-election',
  ServiceExportController: 'mesh-serviceexport-controller-election',
  /** The legacy name of the ingress status election. */
  IngressController: 'mesh-leader',
  GatewayStatusController: 'mesh-gateway-status-leader',
  StatusController: 'mesh-status-leader',
  AnalyzeController: 'mesh-analyze-leader',
  /** Per revision. */
  GatewayDeploymentController: 'mesh-gateway-deployment',
  NodeUntaintController: 'mesh-node-untaint',
  IPAutoallocateController: 'mesh-ip-autoallocate',
} as const;

/** Annotation of the Lease naming the holder's revision (Istio: leader.istio.io/holder-key). */
export const HOLDER_KEY_ANNOTATION = 'leader.mesh.io/holder-key';
const REMOTE_PREFIX = '^';

export interface LeaseTiming {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** Istio's: a 30 s ttl, renew deadline ttl/2, retry period ttl/4. */
export function timingFor(ttlMs: number): LeaseTiming {
  return { leaseDurationMs: ttlMs, renewDeadlineMs: ttlMs / 2, retryPeriodMs: ttlMs / 4 };
}
export const DEFAULT_TTL_MS = 30_000;

/** Where the default revision is read from (the revision tag webhook); '' when none is set. */
export interface DefaultRevision {
  get(): string;
}

export interface LeaderElectionOptions {
  client: OrchClient;
  /** Namespace of the Lease (the daemon's, --namespace). */
  namespace: string;
  /** Election name (ELECTIONS); per-revision elections get `-<revision>` appended. */
  electionId: string;
  /** Holder identity: the pod name; empty = `unknown-<hostname>`, as Istio. */
  identity: string;
  /** REVISION; empty = `default`. */
  revision?: string;
  perRevision?: boolean;
  /** This daemon manages the cluster from outside it (multicluster remote). */
  remote?: boolean;
  /** ENABLE_LEADER_ELECTION (default true). */
  enabled?: boolean;
  defaultRevision?: DefaultRevision;
  timing?: LeaseTiming;
}

/** A function run while leading; it must stop when `signal` aborts. */
export type RunFunction = (signal: AbortSignal) => void | Promise<void>;

interface LeaseRecord {
  holderIdentity: string;
  holderKey: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

interface LeaseObject {
  metadata: { name: string; namespace: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** Kubernetes MicroTime: RFC 3339 with microseconds. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElection {
  readonly name: string;
  private readonly runFns: Array<{ what: string; fn: RunFunction }> = [];
  private readonly timing: LeaseTiming;
  private readonly identity: string;
  private readonly key: string;
  private readonly leasePath: string;
  private lease: LeaseObject | undefined;
  /** The record as last seen, and when (performance.now()) it was seen to change. */
  private observed: { raw: string; record: LeaseRecord } | undefined;
  private observedAt = 0;
  private leading = false;
  private leaderAbort: AbortController | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private cycles = 0;
  private readonly done: Promise<void>;
  private resolveDone!: () => void;
  private watcher: ResourceInformer | undefined;

  constructor(private readonly o: LeaderElectionOptions) {
    const revision = o.revision || 'default';
    this.name = o.perRevision ? `${o.electionId}-${revision}` : o.electionId;
    this.identity = o.identity;
    this.key = o.perRevision ? '' : (o.remote ? REMOTE_PREFIX : '') + revision;
    this.timing = o.timing ?? timingFor(DEFAULT_TTL_MS);
    this.leasePath = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(o.namespace)}/leases`;
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  /** Registers a function to run whenever this daemon leads (before or after start). */
  addRunFunction(what: string, fn: RunFunction): this {
    this.runFns.push({ what, fn });
    if (this.leading && this.leaderAbort) this.runOne({ what, fn }, this.leaderAbort.signal);
    return this;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The Lease holder as last observed ('' when none). */
  holder(): string {
    return this.observed?.record.holderIdentity ?? '';
  }

  /** Starts the election loop (returns at once). */
  start(): this {
    if (this.o.enabled === false) {
      log.info(`bypassing leader election: ${this.name}`);
      this.becomeLeader();
      return this;
    }
    const onLease = (o: RawObject) => this.seen(o as unknown as LeaseObject);
    this.watcher = new ResourceInformer(
      this.o.client,
      { path: this.leasePath, fieldSelector: `metadata.name=${this.name}`, log },
      { add: onLease, update: onLease, delete: () => undefined },
    );
    this.watcher.start();
    void this.loop()
      .catch((e: unknown) => {
        // A bug must not take the process down with it; the daemon keeps serving without leading.
        this.stopLeading();
        log.error(`leader election ${this.name} stopped: ${(e as Error).stack ?? String(e)}`);
      })
      .finally(() => this.resolveDone());
    return this;
  }

  /** A Lease version from the watch: observed now; a released lease wakes a waiting candidate. */
  private seen(l: LeaseObject): void {
    const record = recordOf(l);
    const raw = JSON.stringify(record);
    if (this.observed?.raw === raw) return;
    this.observed = { raw, record };
    this.observedAt = performance.now();
    if (!this.leading && record.holderIdentity === '') this.wake?.();
  }

  /** Stops leading (releasing the lease) and ends the loop. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    if (this.o.enabled === false) {
      this.stopLeading();
      return;
    }
    await this.done;
    await this.watcher?.stop();
  }

  // ---------------------------------------------------------------------------------------------

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.cycles++;
      if (!(await this.acquire())) break;
      this.becomeLeader();
      await this.renewUntilLost();
      const lost = !this.stopped;
      this.stopLeading();
      if (!lost) {
        await this.release();
        break;
      }
      log.info(`Leader election cycle ${this.cycles} lost. Trying again`);
    }
  }

  /** Retries until the lease is ours; false when stopped first. */
  private async acquire(): Promise<boolean> {
    log.info(`attempting to acquire leader lease ${this.o.namespace}/${this.name}...`);
    for (;;) {
      if (this.stopped) return false;
      if (await this.tryAcquireOrRenew()) {
        log.info(`successfully acquired lease ${this.o.namespace}/${this.name}`);
        return true;
      }
      // wait.JitterUntil(retryPeriod, jitter 1.2), or until the lease as observed expires, if sooner.
      const jittered = this.timing.retryPeriodMs * (1 + Math.random() * 1.2);
      const record = this.observed?.record;
      const expiresIn =
        record && record.holderIdentity !== '' ? this.observedAt + record.leaseDurationSeconds * 1000 - performance.now() + 20 : jittered;
      await this.sleep(Math.max(20, Math.min(jittered, expiresIn)));
    }
  }

  /** Renews every retry period; returns when a renewal did not succeed within the renew deadline, or on stop. */
  private async renewUntilLost(): Promise<void> {
    for (;;) {
      await this.sleep(this.timing.retryPeriodMs);
      if (this.stopped) return;
      const deadline = performance.now() + this.timing.renewDeadlineMs;
      let renewed = false;
      while (!this.stopped && performance.now() < deadline) {
        if (await this.tryAcquireOrRenew(deadline)) {
          renewed = true;
          break;
        }
        if (!this.isHolder()) break; // someone else holds it now: no point retrying
        await this.sleep(Math.min(this.timing.retryPeriodMs, Math.max(0, deadline - performance.now())));
      }
      if (this.stopped) return;
      if (!renewed) {
        log.info(`failed to renew lease ${this.o.namespace}/${this.name}`);
        return;
      }
    }
  }

  private isHolder(): boolean {
    return this.observed?.record.holderIdentity === this.identity;
  }

  /** client-go's tryAcquireOrRenew. */
  private async tryAcquireOrRenew(deadline?: number): Promise<boolean> {
    const now = Date.now();
    const record: LeaseRecord = {
      holderIdentity: this.identity,
      holderKey: this.key,
      leaseDurationSeconds: Math.round(this.timing.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    const signal = deadline !== undefined ? AbortSignal.timeout(Math.max(1, Math.ceil(deadline - performance.now()))) : undefined;
    let old: LeaseObject | undefined;
    try {
      old = (await this.o.client.request('GET', `${this.leasePath}/${encodeURIComponent(this.name)}`, signal ? { signal } : {})) as LeaseObject;
    } catch (e) {
      if (!(e instanceof OrchApiError && e.statusCode === 404)) {
        log.warn(`error retrieving resource lock ${this.o.namespace}/${this.name}: ${(e as Error).message}`);
        return false;
      }
    }
    if (!old) {
      try {
        this.lease = (await this.o.client.request('POST', this.leasePath, {
          ...(signal ? { signal } : {}),
          body: this.leaseObject(record),
        })) as LeaseObject;
      } catch (e) {
        log.warn(`error initially creating leader election record ${this.o.namespace}/${this.name}: ${(e as Error).message}`);
        return false;
      }
      this.observe(record);
      return true;
    }
    this.lease = old;
    const oldRecord = recordOf(old);
    const raw = JSON.stringify(oldRecord);
    if (this.observed?.raw !== raw) {
      this.observed = { raw, record: oldRecord };
      this.observedAt = performance.now();
    }
    const held = oldRecord.holderIdentity !== '' && this.observedAt + oldRecord.leaseDurationSeconds * 1000 > performance.now();
    if (held && !this.isHolder()) {
      if (!this.o.perRevision && this.shouldSteal(oldRecord.holderKey)) {
        log.info(
          `lock ${this.o.namespace}/${this.name} is held by ${oldRecord.holderIdentity} (${oldRecord.holderKey || 'no revision'}) and has not yet expired, but this daemon (${this.key}) takes it over`,
        );
      } else {
        return false;
      }
    }
    if (this.isHolder()) {
      record.acquireTime = oldRecord.acquireTime || record.acquireTime;
      record.leaseTransitions = oldRecord.leaseTransitions;
    } else {
      record.leaseTransitions = oldRecord.leaseTransitions + 1;
    }
    try {
      this.lease = (await this.o.client.request('PUT', `${this.leasePath}/${encodeURIComponent(this.name)}`, {
        ...(signal ? { signal } : {}),
        body: this.leaseObject(record, old),
      })) as LeaseObject;
    } catch (e) {
      log.warn(`failed to update lock ${this.o.namespace}/${this.name}: ${(e as Error).message}`);
      return false;
    }
    this.observe(record);
    return true;
  }

  /** Istio's LocationPrioritizedComparison. */
  private shouldSteal(holderKey: string): boolean {
    const remote = holderKey.startsWith(REMOTE_PREFIX);
    const leaderRevision = remote ? holderKey.slice(1) : holderKey;
    const mine = this.o.revision || 'default';
    const def = this.o.defaultRevision?.get() ?? '';
    if (mine !== leaderRevision && def !== '' && def === mine) return true;
    return mine === leaderRevision && !this.o.remote && remote;
  }

  private observe(record: LeaseRecord): void {
    this.observed = { raw: JSON.stringify(record), record };
    this.observedAt = performance.now();
  }

  private leaseObject(r: LeaseRecord, old?: LeaseObject): LeaseObject & { apiVersion: string; kind: string } {
    const annotations = { ...(old?.metadata.annotations ?? {}) };
    if (r.holderKey) annotations[HOLDER_KEY_ANNOTATION] = r.holderKey;
    else delete annotations[HOLDER_KEY_ANNOTATION];
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        namespace: this.o.namespace,
        ...(old?.metadata.resourceVersion ? { resourceVersion: old.metadata.resourceVersion } : {}),
        annotations,
      },
      spec: {
        holderIdentity: r.holderIdentity,
        leaseDurationSeconds: r.leaseDurationSeconds,
        acquireTime: r.acquireTime,
        renewTime: r.renewTime,
        leaseTransitions: r.leaseTransitions,
      },
    };
  }

  /** ReleaseOnCancel: clear the holder so the next candidate need not wait for the lease to expire. */
  private async release(): Promise<void> {
    if (!this.isHolder() || !this.lease || !this.observed) return;
    const now = Date.now();
    const r: LeaseRecord = {
      holderIdentity: '',
      holderKey: '',
      leaseDurationSeconds: 1,
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: this.observed.record.leaseTransitions,
    };
    try {
      await this.o.client.request('PUT', `${this.leasePath}/${encodeURIComponent(this.name)}`, {
        ...{ signal: AbortSignal.timeout(2000) },
        body: this.leaseObject(r, this.lease),
      });
      log.info(`released leader lease ${this.o.namespace}/${this.name}`);
    } catch (e) {
      log.warn(`failed to release lock ${this.o.namespace}/${this.name}: ${(e as Error).message}`);
    }
  }

  private becomeLeader(): void {
    this.leading = true;
    this.leaderAbort = new AbortController();
    log.info(`leader election lock obtained: ${this.name}`);
    for (const r of this.runFns) this.runOne(r, this.leaderAbort.signal);
  }

  private runOne(r: { what: string; fn: RunFunction }, signal: AbortSignal): void {
    log.info(`starting ${r.what} (leading ${this.name})`);
    Promise.resolve()
      .then(() => r.fn(signal))
      .catch((e: unknown) => log.error(`${r.what} failed: ${(e as Error).message}`));
  }

  private stopLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    this.leaderAbort?.abort();
    this.leaderAbort = undefined;
    log.info(`leader election lock lost: ${this.name}`);
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        this.wake = undefined;
        resolve();
      };
    });
  }
}

function recordOf(l: LeaseObject): LeaseRecord {
  const s = l.spec ?? {};
  return {
    holderIdentity: s.holderIdentity ?? '',
    holderKey: l.metadata.annotations?.[HOLDER_KEY_ANNOTATION] ?? '',
    leaseDurationSeconds: s.leaseDurationSeconds ?? 0,
    acquireTime: s.acquireTime ?? '',
    renewTime: s.renewTime ?? '',
    leaseTransitions: s.leaseTransitions ?? 0,
  };
}
