// Envoy's cluster manager: static clusters from the bootstrap, dynamic ones from CDS (state of the
// world: a cluster missing from a response is removed), EDS for EDS clusters, and warming: a new or
// changed cluster serves only once its endpoints (or DNS answer, or SDS secrets) are there; until then
// the previous version keeps serving. An invalid cluster rejects the CDS response (NACK) with Envoy's
// `Error adding/updating cluster(s) <name>: <why>` while the valid ones are applied.
// Deferred clusters (an engine worker thread's manager, `deferEds`): an EDS cluster stays its encoded bytes
// until a request first needs it (a sidecar with 1000 services in scope sends traffic to few), then it is
// built from those bytes and the held assignment. Envoy's workers share the main thread's cluster objects;
// a worker isolate cannot, so it builds only what its traffic uses. The main thread ACKs and serves the
// admin API with every cluster built, so validation, warming and config_dump are unchanged.
import { createHash } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { Cluster_DiscoveryType, ClusterSchema, type Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { Logger } from '../log';
import { ConfigError } from '../common/config-error';
import type { Counter, Gauge, StatsStore } from '../stats/store';
import type { SecretManager } from '../tls/secrets';
import type { GrpcMux } from '../xds/grpc-mux';
import type { DecodedResource, SubscriptionHandle } from '../xds/subscription';
import { UpstreamCluster } from './cluster';

interface Slot {
  cluster: UpstreamCluster;
  hash: string;
  lastUpdated: number;
}

/** An EDS cluster of a worker's manager not built yet: its bytes as received, and what CDS knew of it. */
interface Deferred {
  encoded: Uint8Array;
  hash: string;
  version: string;
  edsServiceName: string;
  lastUpdated: number;
}

/** The EDS service name of an EDS cluster (as UpstreamCluster names it), or undefined for another type. */
function edsServiceOf(c: Cluster): string | undefined {
  const dt = c.clusterDiscoveryType;
  if (dt.case !== 'type' || dt.value !== Cluster_DiscoveryType.EDS) return undefined;
  const service = c.edsClusterConfig?.serviceName;
  return !service || service === c.name ? c.name : service;
}

export interface ClusterDumpEntry {
  cluster: Cluster;
  versionInfo: string;
  lastUpdated: number;
}

export class ClusterManager {
  private readonly statics = new Map<string, Slot>();
  private readonly active = new Map<string, Slot>();
  private readonly warming = new Map<string, Slot>();
  /** EDS clusters not built yet (deferEds only). */
  private readonly deferred = new Map<string, Deferred>();
  /** The last assignment per EDS service name, encoded (clusters made later start from it; config_dump). */
  private readonly cla = new Map<string, { encoded: Uint8Array; lastUpdated: number }>();
  private eds: SubscriptionHandle | undefined;
  private adsMux: GrpcMux | undefined;
  private readonly gActive: Gauge;
  private readonly gWarming: Gauge;
  private readonly cAdded: Counter;
  private readonly cModified: Counter;
  private readonly cRemoved: Counter;
  private cdsVersion = '';
  private readonly warmWaiters = new Set<() => void>();

  constructor(
    private readonly store: StatsStore,
    private readonly log: Logger,
    private readonly secrets: SecretManager,
    /** Build EDS clusters on first use (engine worker threads). */
    private readonly deferEds = false,
  ) {
    const s = store.scope('cluster_manager.');
    this.gActive = s.gauge('active_clusters');
    this.gWarming = s.gauge('warming_clusters');
    this.cAdded = s.counter('cluster_added');
    this.cModified = s.counter('cluster_modified');
    this.cRemoved = s.counter('cluster_removed');
    this.gActive.set(0);
    this.gWarming.set(0);
  }

  private deps() {
    return { stats: this.store, log: this.log, secrets: this.secrets };
  }

  /** Bootstrap clusters; throws ConfigError (the engine refuses to start). */
  addStatic(c: Cluster): void {
    if (this.statics.has(c.name)) throw new ConfigError(`cluster manager: duplicate cluster '${c.name}'`);
    const cluster = new UpstreamCluster(c, false, '', this.deps());
    this.statics.set(c.name, { cluster, hash: '', lastUpdated: Date.now() });
    this.cAdded.inc();
    this.updateGauges();
  }

  /** Waits for static clusters to initialise (DNS answers, static assignment). */
  async initializeStatics(): Promise<void> {
    await Promise.all([...this.statics.values()].map((s) => s.cluster.ready));
  }

  get(name: string): UpstreamCluster | undefined {
    return this.active.get(name)?.cluster ?? this.statics.get(name)?.cluster ?? this.build(name);
  }

  /** Without building a deferred cluster (route validation asks for every cluster a route config names). */
  has(name: string): boolean {
    if (this.active.has(name) || this.statics.has(name)) return true;
    const d = this.deferred.get(name);
    return d !== undefined && this.cla.has(d.edsServiceName);
  }

  /**
   * A deferred cluster, built now from its bytes and the held assignment. One whose assignment has not come
   * is not served yet, as a warming cluster is not.
   */
  private build(name: string): UpstreamCluster | undefined {
    const d = this.deferred.get(name);
    if (!d) return undefined;
    const cached = this.cla.get(d.edsServiceName);
    if (!cached) return undefined;
    this.deferred.delete(name);
    let cluster: UpstreamCluster;
    try {
      cluster = new UpstreamCluster(fromBinary(ClusterSchema, d.encoded), true, d.version, this.deps(), d.encoded);
      cluster.setAssignment(fromBinary(ClusterLoadAssignmentSchema, cached.encoded));
    } catch (e) {
      // the main thread accepted it: a worker that cannot build it says why and serves without it
      this.log.error(`cds: cluster '${name}' cannot be built: ${(e as Error).message}`);
      return undefined;
    }
    this.active.set(name, { cluster, hash: d.hash, lastUpdated: d.lastUpdated });
    return cluster;
  }

  /** Static non-EDS cluster for config sources (Envoy requires one). */
  staticCluster(name: string): UpstreamCluster | undefined {
    return this.statics.get(name)?.cluster;
  }

  /** Subscribes CDS (wildcard) on the ADS stream; EDS follows on the same stream. */
  subscribeCds(mux: GrpcMux): void {
    this.adsMux = mux;
    mux.subscribe<Cluster>(
      TYPE_URL.cluster,
      ClusterSchema,
      undefined,
      // delta: only the changed clusters are decoded and handed over (the mux keeps the rest encoded)
      { onUpdate: (r, v) => this.onCds(r, v, undefined), onDelta: (added, removed, v) => this.onCds(added, v, removed) },
      this.store.scope('cluster_manager.cds.'),
    );
  }

  /** Resolves once no cluster is warming (used for the init sequence). */
  whenWarm(): Promise<void> {
    if (this.warming.size === 0) return Promise.resolve();
    return new Promise((r) => this.warmWaiters.add(r));
  }

  /** Called once after the first CDS response was handled (accepted or not): the init sequence goes on. */
  onFirstCds: (() => void) | undefined;

  /** `removed`: the names a delta response removes; undefined for the whole set (state of the world). */
  private onCds(resources: Array<DecodedResource<Cluster>>, version: string, removed: readonly string[] | undefined): void {
    try {
      this.applyCds(resources, version, removed);
    } finally {
      const f = this.onFirstCds;
      this.onFirstCds = undefined;
      f?.();
    }
  }

  private applyCds(resources: Array<DecodedResource<Cluster>>, version: string, removed: readonly string[] | undefined): void {
    const errors: string[] = [];
    const seen = new Set<string>();
    const delta = removed !== undefined;
    for (const r of resources) {
      const c = r.message;
      if (seen.has(c.name)) {
        errors.push(`${c.name}: duplicate cluster ${c.name} found`);
        continue;
      }
      seen.add(c.name);
      if (this.statics.has(c.name)) {
        this.log.debug(`cds: add/update cluster '${c.name}' skipped: it is a static cluster`);
        continue;
      }
      // The bytes as received: the ADS client holds them anyway (delta), so the cluster's copy costs nothing
      // more; a state-of-the-world response's view is copied, or each cluster would keep its whole response.
      // The digest (Envoy's MessageUtil::hash) tells an unchanged cluster; the same server sends the same
      // bytes for it.
      const encoded = delta ? r.any.value : r.any.value.slice();
      const hash = createHash('sha256').update(encoded).digest('base64');
      const current = this.warming.get(c.name) ?? this.active.get(c.name) ?? this.deferred.get(c.name);
      if (current && current.hash === hash) continue;
      const eds = this.deferEds && !this.active.has(c.name) && !this.warming.has(c.name) ? edsServiceOf(c) : undefined;
      if (eds !== undefined) {
        if (current) this.cModified.inc();
        else this.cAdded.inc();
        this.deferred.set(c.name, { encoded, hash, version, edsServiceName: eds, lastUpdated: Date.now() });
        continue;
      }
      this.deferred.delete(c.name);
      let cluster: UpstreamCluster;
      try {
        cluster = new UpstreamCluster(c, true, version, this.deps(), encoded);
      } catch (e) {
        errors.push(`${c.name}: ${(e as Error).message}`);
        continue;
      }
      const prevWarming = this.warming.get(c.name);
      if (prevWarming) prevWarming.cluster.close();
      const slot: Slot = { cluster, hash, lastUpdated: Date.now() };
      this.warming.set(c.name, slot);
      if (cluster.type === 'EDS') {
        const cached = this.cla.get(cluster.edsServiceName);
        if (cached) cluster.setAssignment(fromBinary(ClusterLoadAssignmentSchema, cached.encoded));
      }
      this.log.info(`cds: add/update cluster '${c.name}'`);
      void cluster.ready.then(() => this.promote(c.name, slot));
    }
    const gone = removed
      ? removed.filter((n) => !seen.has(n) && (this.active.has(n) || this.warming.has(n) || this.deferred.has(n)))
      : [...new Set([...this.active.keys(), ...this.warming.keys(), ...this.deferred.keys()])].filter((n) => !seen.has(n));
    for (const name of gone) this.remove(name);
    this.cdsVersion = version;
    this.updateEds();
    this.updateGauges();
    if (errors.length > 0) throw new Error(`Error adding/updating cluster(s) ${errors.join(', ')}`);
  }

  private promote(name: string, slot: Slot): void {
    if (this.warming.get(name) !== slot) return;
    this.warming.delete(name);
    const prev = this.active.get(name);
    this.active.set(name, slot);
    if (prev) {
      prev.cluster.close();
      this.cModified.inc();
    } else this.cAdded.inc();
    this.log.debug(`warming cluster ${name} complete`);
    this.updateGauges();
    if (this.warming.size === 0) {
      for (const w of this.warmWaiters) w();
      this.warmWaiters.clear();
    }
  }

  private remove(name: string): void {
    const a = this.active.get(name);
    const w = this.warming.get(name);
    a?.cluster.close();
    w?.cluster.close();
    this.deferred.delete(name);
    this.active.delete(name);
    this.warming.delete(name);
    this.store.removePrefix(`cluster.${name}.`);
    this.cRemoved.inc();
    this.log.info(`cds: remove cluster '${name}'`);
    if (this.warming.size === 0) {
      for (const waiter of this.warmWaiters) waiter();
      this.warmWaiters.clear();
    }
  }

  private edsClusters(): UpstreamCluster[] {
    const out: UpstreamCluster[] = [];
    for (const m of [this.active, this.warming]) for (const s of m.values()) if (s.cluster.type === 'EDS') out.push(s.cluster);
    return out;
  }

  private updateEds(): void {
    const names = new Set(this.edsClusters().map((c) => c.edsServiceName));
    for (const d of this.deferred.values()) names.add(d.edsServiceName);
    if (!this.adsMux) return;
    if (!this.eds) {
      if (names.size === 0) return;
      this.eds = this.adsMux.subscribe<ClusterLoadAssignment>(TYPE_URL.endpoint, ClusterLoadAssignmentSchema, names, {
        onUpdate: (r) => this.onEds(r),
      });
    } else this.eds.setNames(names);
  }

  private onEds(resources: Array<DecodedResource<ClusterLoadAssignment>>): void {
    const byName = new Map<string, UpstreamCluster[]>();
    for (const c of this.edsClusters()) {
      const l = byName.get(c.edsServiceName) ?? [];
      l.push(c);
      byName.set(c.edsServiceName, l);
    }
    const deferredNames = new Set([...this.deferred.values()].map((d) => d.edsServiceName));
    const errors: string[] = [];
    for (const r of resources) {
      const name = r.message.clusterName;
      const targets = byName.get(name) ?? [];
      if (targets.length === 0 && !deferredNames.has(name)) continue;
      // the bytes as received, not encoded again nor copied: a view of the response, which the xDS client holds
      // anyway over ADS (delta, or any engine with workers); a copy was a second ~1.2 MB per thread with 1000 services
      this.cla.set(name, { encoded: r.any.value, lastUpdated: Date.now() });
      for (const c of targets) {
        try {
          c.setAssignment(r.message);
        } catch (e) {
          errors.push(`${name}: ${(e as Error).message}`);
        }
      }
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
  }

  private updateGauges(): void {
    this.gActive.set(this.active.size + this.statics.size + this.deferred.size);
    this.gWarming.set(this.warming.size);
  }

  all(): UpstreamCluster[] {
    return [...this.statics.values(), ...this.active.values()].map((s) => s.cluster);
  }

  dump(): { statics: ClusterDumpEntry[]; active: ClusterDumpEntry[]; warming: ClusterDumpEntry[]; version: string } {
    const m = (s: Slot): ClusterDumpEntry => ({ cluster: s.cluster.proto, versionInfo: s.cluster.versionInfo, lastUpdated: s.lastUpdated });
    return {
      statics: [...this.statics.values()].map(m),
      active: [
        ...[...this.active.values()].map(m),
        ...[...this.deferred.values()].map((d) => ({
          cluster: fromBinary(ClusterSchema, d.encoded),
          versionInfo: d.version,
          lastUpdated: d.lastUpdated,
        })),
      ],
      warming: [...this.warming.values()].map(m),
      version: this.cdsVersion,
    };
  }

  endpointsDump(): Array<{ cla: ClusterLoadAssignment; lastUpdated: number; isStatic: boolean }> {
    const out: Array<{ cla: ClusterLoadAssignment; lastUpdated: number; isStatic: boolean }> = [];
    for (const s of this.statics.values())
      if (s.cluster.proto.loadAssignment) out.push({ cla: s.cluster.proto.loadAssignment, lastUpdated: s.lastUpdated, isStatic: true });
    for (const [, v] of this.cla) out.push({ cla: fromBinary(ClusterLoadAssignmentSchema, v.encoded), lastUpdated: v.lastUpdated, isStatic: false });
    return out;
  }

  close(): void {
    for (const m of [this.statics, this.active, this.warming]) for (const s of m.values()) s.cluster.close();
  }
}
