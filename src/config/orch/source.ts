// The orchestrator-backed ConfigStore (`--registries Orchestrator`): informers over Services,
// EndpointSlices, Pods, Namespaces and Nodes, and over every mesh CRD of our groups and Istio's.
// Objects become Configs exactly as the file source makes them (parse.convertObject); mesh kinds are
// validated, and a rejected object leaves the last good version in place. The served state lives in
// a MemoryConfigStore (as the file source's does); what changed during one turn of the event loop
// (a watch event, or a whole relist) reaches it, and so subscribers, as one net change.
import { defineCounter } from '../../lib/metrics';
import { registerScope } from '../../lib/log';
import { formatConfigError, type ConfigError } from '../errors';
import { type ConfigRef, MemoryConfigStore } from '../memory';
import { recordRejectedConfig } from '../metrics';
import { convertObject } from '../parse';
import { isClusterScoped, MESH_KINDS } from '../schemas';
import type { ConfigEvent, ConfigStore } from '../store';
import { type Config, configKey, type Kind } from '../types';
import { validateConfig } from '../validate';
import { createOrchClient, OrchApiError, type OrchClient, type OrchClientOptions } from './client';
import { type BackoffOptions, DEFAULT_BACKOFF, ResourceInformer, type RawObject } from './informer';
import {
  collectionPath,
  type CrdGroup,
  crdGroups,
  groupRank,
  type NodeLocality,
  nodeLocalityOf,
  REGISTRY_RESOURCES,
  type RegistryResource,
} from './resources';

const log = registerScope('orch', 'orchestrator client and informers');
const validationLog = registerScope('validation', 'CRD validation debugging');
const cfgEvents = defineCounter({
  name: 'pilot_orch_cfg_events',
  help: 'Events from orchestrator config.',
  labelNames: ['type', 'event'] as const,
});
const regEvents = defineCounter({
  name: 'pilot_k8s_reg_events',
  help: 'Events from k8s registry.',
  labelNames: ['type', 'event'] as const,
});

const MESH_KIND_SET: ReadonlySet<Kind> = new Set(MESH_KINDS);

export interface OrchConfigStoreOptions {
  client: OrchClient;
  /** MESH_WATCH_NAMESPACE: watch namespaced collections in this namespace only. */
  watchNamespace?: string;
  /** --clusterID, for messages. */
  clusterID?: string;
  /** How often CRD groups or kinds found missing are looked for again (default 60 s; 0 = never). */
  crdRecheckMs?: number;
  /** Retry schedule of failed lists, watches and discovery (default 800 ms doubling to 30 s). */
  backoff?: Partial<BackoffOptions>;
  /** close() also closes the client (default true). */
  closeClient?: boolean;
}

type EventName = 'add' | 'update' | 'delete';

/** Everything stored for one Kind/namespace/name: the good version per API group serving it. */
type Slot = Map<string, Config>;

export class OrchConfigStore implements ConfigStore {
  private readonly client: OrchClient;
  private readonly ns: string | undefined;
  private readonly clusterID: string;
  private readonly recheckMs: number;
  private readonly backoff: BackoffOptions;

  private readonly slots = new Map<string, Slot>();
  /** What is served; changed only by flush(). */
  private readonly served = new MemoryConfigStore();
  /** Keys (`Kind/namespace/name`) whose slot changed since the last flush. */
  private readonly dirty = new Map<string, Kind>();
  private flushScheduled = false;
  private readonly nodes = new Map<string, NodeLocality>();

  private readonly informers: ResourceInformer[] = [];
  /** Informers and group discoveries the initial sync waits for. */
  private readonly syncGate = new Set<object>();
  private syncedFlag = false;
  private readonly syncWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private readonly startedAt = performance.now();

  private readonly groups: CrdGroup[] = crdGroups();
  /** Per CRD group: kinds being watched (kind → version). */
  private readonly watchedKinds = new Map<string, Map<Kind, string>>();
  /** Per CRD group: what was last reported missing, so it is logged once. */
  private readonly reportedMissing = new Map<string, string>();
  private recheckTimer: NodeJS.Timeout | undefined;
  /** CRD groups whose discovery is in flight (a slow one must not overlap its recheck). */
  private readonly discovering = new Set<string>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();

  private readonly nodeSubscribers = new Set<(nodeName: string) => void>();
  private readonly conflictsLogged = new Set<string>();
  private startedFlag = false;
  private closed = false;

  constructor(private readonly opts: OrchConfigStoreOptions) {
    this.client = opts.client;
    this.ns = opts.watchNamespace || undefined;
    this.clusterID = opts.clusterID ?? 'Orchestrator';
    this.recheckMs = opts.crdRecheckMs ?? 60_000;
    this.backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
  }

  /** Starts every informer and the CRD discovery; returns at once (see whenSynced). */
  start(): this {
    if (this.startedFlag || this.closed) return this;
    this.startedFlag = true;
    const scope = this.ns ? `namespace ${this.ns}` : 'all namespaces';
    log.info(`watching the orchestrator (${this.client.origin}, ${this.client.server}, cluster ${this.clusterID}) in ${scope}`);
    for (const r of REGISTRY_RESOURCES) this.startRegistryInformer(r);
    for (const g of this.groups) {
      const gate = { discovery: g.group };
      this.syncGate.add(gate);
      void this.discoverGroup(g, gate, 0);
    }
    return this;
  }

  // -------------------------------------------------------------------------------------------
  // ConfigStore

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    return this.served.list(kind, namespace);
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    return this.served.get(kind, namespace, name);
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    return this.served.subscribe(handler);
  }

  hasSynced(): boolean {
    return this.syncedFlag;
  }

  whenSynced(): Promise<void> {
    if (this.syncedFlag) return Promise.resolve();
    if (this.closed) return Promise.reject(new Error('orchestrator config store closed before it synced'));
    return new Promise((resolve, reject) => this.syncWaiters.push({ resolve, reject }));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    await Promise.all(this.informers.map((i) => i.stop()));
    for (const w of this.syncWaiters.splice(0)) w.reject(new Error('orchestrator config store closed before it synced'));
    this.dirty.clear();
    await this.served.close();
    if (this.opts.closeClient ?? true) this.client.close();
  }

  // -------------------------------------------------------------------------------------------
  // Nodes (not a Kind: kept for pod locality)

  /** Topology of a node from its labels, or undefined for an unknown node. */
  nodeLocality(nodeName: string): NodeLocality | undefined {
    return this.nodes.get(nodeName);
  }

  /** Called with the node's name when a node's locality appears, changes or goes away. */
  subscribeNodes(handler: (nodeName: string) => void): () => void {
    this.nodeSubscribers.add(handler);
    return () => this.nodeSubscribers.delete(handler);
  }

  /** CRD API groups (and kinds within installed groups) not served by the API server at last look. */
  missingCrds(): string[] {
    return [...this.reportedMissing.values()].filter(Boolean);
  }

  // -------------------------------------------------------------------------------------------
  // Informers

  private startRegistryInformer(r: RegistryResource): void {
    const namespaced = !r.clusterScoped && this.ns !== undefined;
    const path = collectionPath(r.group, r.version, r.plural, namespaced ? this.ns : undefined);
    // With MESH_WATCH_NAMESPACE, the Namespace collection is narrowed to that one namespace.
    const fieldSelector = r.kind === 'Namespace' && this.ns !== undefined ? `metadata.name=${this.ns}` : undefined;
    const apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
    const count = (event: EventName) => regEvents.inc({ type: r.metricType, event });
    const handlers =
      r.kind === 'Node'
        ? {
            add: (o: RawObject) => (count('add'), this.onNode(o, false)),
            update: (o: RawObject) => (count('update'), this.onNode(o, false)),
            delete: (o: RawObject) => (count('delete'), this.onNode(o, true)),
          }
        : {
            add: (o: RawObject) => (count('add'), this.onObject(r.kind as Kind, r.group, apiVersion, o)),
            update: (o: RawObject) => (count('update'), this.onObject(r.kind as Kind, r.group, apiVersion, o)),
            delete: (o: RawObject) => (count('delete'), this.onDelete(r.kind as Kind, r.group, o)),
          };
    const inf = new ResourceInformer(this.client, { path, ...(fieldSelector ? { fieldSelector } : {}), backoff: this.backoff, log }, handlers);
    this.track(inf, true);
  }

  private startCrdInformer(kind: Kind, group: string, version: string, plural: string, initial: boolean): void {
    const path = collectionPath(group, version, plural, this.ns);
    const apiVersion = `${group}/${version}`;
    const count = (event: EventName) => cfgEvents.inc({ type: kind, event });
    const inf = new ResourceInformer(
      this.client,
      { path, backoff: this.backoff, log },
      {
        add: (o) => (count('add'), this.onObject(kind, group, apiVersion, o)),
        update: (o) => (count('update'), this.onObject(kind, group, apiVersion, o)),
        delete: (o) => (count('delete'), this.onDelete(kind, group, o)),
        notFound: () => this.crdGone(inf, kind, group),
      },
    );
    this.watchedKinds.get(group)!.set(kind, version);
    this.track(inf, initial);
  }

  private track(inf: ResourceInformer, gate: boolean): void {
    this.informers.push(inf);
    if (gate) {
      this.syncGate.add(inf);
      void inf.whenSynced().then(() => this.ungate(inf));
    }
    inf.start();
  }

  private ungate(item: object): void {
    if (!this.syncGate.delete(item) || this.syncGate.size > 0 || this.syncedFlag || this.closed) return;
    this.flush(); // what was listed is served before anyone hears "synced"
    this.syncedFlag = true;
    const counts = (['Service', 'EndpointSlice', 'Pod', 'Namespace'] as const).map((k) => `${this.list(k).length} ${k}s`);
    const mesh = MESH_KINDS.reduce((n, k) => n + this.list(k).length, 0);
    log.info(
      `orchestrator config synced in ${Math.round(performance.now() - this.startedAt)}ms: ${counts.join(', ')}, ` +
        `${this.nodes.size} Nodes, ${mesh} mesh configs`,
    );
    for (const w of this.syncWaiters.splice(0)) w.resolve();
  }

  // -------------------------------------------------------------------------------------------
  // CRD discovery: which of our groups and Istio's are installed, at which version

  private async discoverGroup(g: CrdGroup, gate: object | undefined, attempt: number): Promise<void> {
    if (this.closed || this.discovering.has(g.group)) return;
    this.discovering.add(g.group);
    try {
      await this.discoverGroupOnce(g, gate, attempt);
    } finally {
      this.discovering.delete(g.group);
    }
  }

  private async discoverGroupOnce(g: CrdGroup, gate: object | undefined, attempt: number): Promise<void> {
    if (!this.watchedKinds.has(g.group)) this.watchedKinds.set(g.group, new Map());
    const watched = this.watchedKinds.get(g.group)!;
    let missingWhy: string;
    try {
      const served = await this.servedVersions(g.group);
      if (!served) {
        missingWhy = `CRD group ${g.group} is not installed (GET /apis/${g.group}: 404): its kinds are skipped`;
      } else {
        const docs = new Map<string, Array<{ name: string; kind: string }>>();
        const missing: Kind[] = [];
        for (const kind of g.kinds) {
          if (watched.has(kind)) continue;
          const found = await this.findResource(g, kind, served, docs);
          if (this.closed) return;
          if (found) {
            if (this.reportedMissing.has(g.group) && gate === undefined) {
              log.info(`${kind} is now served as ${g.group}/${found.version} ${found.plural}: watching it`);
            }
            this.startCrdInformer(kind, g.group, found.version, found.plural, gate !== undefined);
          } else {
            missing.push(kind);
          }
        }
        missingWhy = missing.length > 0 ? `CRD group ${g.group} does not serve ${missing.join(', ')}: skipped` : '';
      }
    } catch (e) {
      if (this.closed) return;
      const delay = Math.round(Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** attempt) * (1 + Math.random() * this.backoff.jitter));
      if (gate) {
        log.warn(`discovery of CRD group ${g.group} failed: ${(e as Error).message}; retrying in ${delay}ms`);
        const t = setTimeout(() => {
          this.retryTimers.delete(t);
          void this.discoverGroup(g, gate, attempt + 1);
        }, delay);
        this.retryTimers.add(t);
      } else {
        log.debug(`rediscovery of CRD group ${g.group} failed: ${(e as Error).message}`);
      }
      return;
    }
    if (this.closed) return;
    const before = this.reportedMissing.get(g.group);
    if (missingWhy && missingWhy !== before) log.info(missingWhy);
    if (missingWhy) this.reportedMissing.set(g.group, missingWhy);
    else this.reportedMissing.delete(g.group);
    if (gate) this.ungate(gate);
    this.scheduleRecheck();
  }

  /** Versions of `group` the server serves, or undefined when the group is not installed. */
  private async servedVersions(group: string): Promise<string[] | undefined> {
    try {
      const doc = (await this.client.getJson(`/apis/${group}`)) as { versions?: Array<{ version?: string }> };
      return (doc.versions ?? []).map((v) => v.version ?? '').filter(Boolean);
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 404) return undefined;
      throw e;
    }
  }

  private async findResource(
    g: CrdGroup,
    kind: Kind,
    served: readonly string[],
    docs: Map<string, Array<{ name: string; kind: string }>>,
  ): Promise<{ version: string; plural: string } | undefined> {
    for (const version of g.versions) {
      if (!served.includes(version)) continue;
      let resources = docs.get(version);
      if (!resources) {
        try {
          const doc = (await this.client.getJson(`/apis/${g.group}/${version}`)) as { resources?: Array<{ name: string; kind: string }> };
          resources = doc.resources ?? [];
        } catch (e) {
          if (!(e instanceof OrchApiError && e.statusCode === 404)) throw e;
          resources = [];
        }
        docs.set(version, resources);
      }
      // Subresources (`virtualservices/status`) share the kind; the collection has no slash.
      const r = resources.find((x) => x.kind === kind && !x.name.includes('/'));
      if (r && (this.acceptsVersion(kind, g.group, version))) return { version, plural: r.name };
    }
    return undefined;
  }

  private acceptsVersion(kind: Kind, group: string, version: string): boolean {
    return this.groups.some((x) => x.group === group && x.kinds.includes(kind) && x.versions.includes(version));
  }

  private scheduleRecheck(): void {
    if (this.recheckTimer || this.recheckMs <= 0 || this.closed || this.reportedMissing.size === 0) return;
    this.recheckTimer = setInterval(() => {
      if (this.reportedMissing.size === 0) {
        clearInterval(this.recheckTimer);
        this.recheckTimer = undefined;
        return;
      }
      for (const g of this.groups) if (this.reportedMissing.has(g.group)) void this.discoverGroup(g, undefined, 0);
    }, this.recheckMs);
    this.recheckTimer.unref();
  }

  /** A watched CRD answered 404: it was uninstalled. Its objects were deleted with it. */
  private crdGone(inf: ResourceInformer, kind: Kind, group: string): void {
    this.watchedKinds.get(group)?.delete(kind);
    const i = this.informers.indexOf(inf);
    if (i >= 0) this.informers.splice(i, 1);
    this.ungate(inf);
    for (const [key, slot] of this.slots) {
      const c = slot.get(group);
      if (c && c.kind === kind) this.removeFrom(kind, group, key);
    }
    const why = `${kind} is no longer served by CRD group ${group} (${inf.path}: 404): skipped`;
    log.info(why);
    this.reportedMissing.set(group, why);
    this.scheduleRecheck();
  }

  // -------------------------------------------------------------------------------------------
  // Objects → store

  private onObject(kind: Kind, group: string, apiVersion: string, raw: RawObject): void {
    if (this.closed) return;
    delete raw.metadata.managedFields; // never read, often the bulk of metadata
    const conv = convertObject({ ...raw, apiVersion, kind }, { source: `orchestrator:${apiVersion}` }, kind);
    if (!conv.config) {
      this.reject(kind, group, conv.errors, raw);
      return;
    }
    const config = conv.config;
    if (MESH_KIND_SET.has(kind)) {
      const v = validateConfig(config);
      const at = (field: string, message: string): string =>
        formatConfigError({ source: config.source ?? `orchestrator:${apiVersion}`, resource: configKey(config), field, message });
      for (const w of v.warnings) log.warn(at(w.field, w.message));
      if (v.errors.length > 0) {
        this.reject(
          kind,
          group,
          v.errors.map((e) => ({ source: config.source ?? '', resource: configKey(config), field: e.field, message: e.message })),
          raw,
        );
        return;
      }
    }
    if (kind === 'Pod') {
      // The informer's cache keeps the object it handed us: keep only what we read of it.
      raw.spec = config.spec;
      raw.status = config.status;
    }
    this.put(kind, group, config);
  }

  private reject(kind: Kind, group: string, errors: readonly ConfigError[], raw: RawObject): void {
    const ns = isClusterScoped(kind) ? '' : (raw.metadata.namespace || 'default');
    const name = raw.metadata.name ?? '';
    recordRejectedConfig(kind.toLowerCase() as Lowercase<Kind>, `${ns}/${name}`);
    const kept = this.slots.get(`${kind}/${ns}/${name}`)?.has(group) ? ' (the previous version stays)' : '';
    for (const e of errors) validationLog.warn(`rejected ${formatConfigError(e)}${kept}`);
  }

  private onDelete(kind: Kind, group: string, raw: RawObject): void {
    if (this.closed) return;
    const ns = isClusterScoped(kind) ? '' : (raw.metadata.namespace || 'default');
    this.removeFrom(kind, group, `${kind}/${ns}/${raw.metadata.name ?? ''}`);
  }

  private onNode(raw: RawObject, deleted: boolean): void {
    if (this.closed) return;
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
    for (const h of this.nodeSubscribers) {
      try {
        h(name);
      } catch (e) {
        log.error(`node subscriber failed for ${name}: ${(e as Error).message}`);
      }
    }
  }

  private put(kind: Kind, group: string, config: Config): void {
    const key = configKey(config);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = new Map();
      this.slots.set(key, slot);
    }
    const before = pick(kind, slot);
    slot.set(group, config);
    if (slot.size > 1 && !this.conflictsLogged.has(key)) {
      this.conflictsLogged.add(key);
      const groups = [...slot.keys()].sort((a, b) => groupRank(kind, a) - groupRank(kind, b));
      log.warn(`${key} exists in API groups ${groups.join(' and ')}: serving the one of ${groups[0]}`);
    }
    this.changed(kind, key, before, pick(kind, slot));
  }

  private removeFrom(kind: Kind, group: string, key: string): void {
    const slot = this.slots.get(key);
    if (!slot || !slot.has(group)) return;
    const before = pick(kind, slot);
    slot.delete(group);
    if (slot.size === 0) {
      this.slots.delete(key);
      this.conflictsLogged.delete(key);
    }
    this.changed(kind, key, before, pick(kind, slot));
  }

  private changed(kind: Kind, key: string, before: Config | undefined, after: Config | undefined): void {
    if (before === after) return; // a change to a version that is not the one served
    this.dirty.set(key, kind);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /**
   * Hands the served version of every changed key to the served store: one apply and one delete,
   * of net changes only (an add undone in the same turn, or a new resourceVersion with the same
   * content, makes no event).
   */
  private flush(): void {
    if (this.closed || this.dirty.size === 0) return;
    const put: Config[] = [];
    const gone: ConfigRef[] = [];
    for (const [key, kind] of this.dirty) {
      const c = pick(kind, this.slots.get(key));
      if (c) put.push(c);
      else {
        const rest = key.slice(kind.length + 1);
        const slash = rest.indexOf('/');
        gone.push({ kind, namespace: rest.slice(0, slash), name: rest.slice(slash + 1) });
      }
    }
    this.dirty.clear();
    if (put.length > 0) this.served.apply(put, 'orchestrator');
    if (gone.length > 0) this.served.delete(gone);
  }
}

/** The version served for a slot: the one of the highest-ranked API group. */
function pick(kind: Kind, slot: Slot | undefined): Config | undefined {
  if (!slot || slot.size === 0) return undefined;
  let best: Config | undefined;
  let bestRank = Number.MAX_SAFE_INTEGER;
  for (const [group, c] of slot) {
    const r = groupRank(kind, group);
    if (!best || r < bestRank) [best, bestRank] = [c, r];
  }
  return best;
}

/**
 * Builds the client from the daemon's flags and starts the store; close() releases both. Returns
 * before the initial sync: await whenSynced() for it.
 */
export async function startOrchConfigStore(
  opts: OrchClientOptions & Omit<OrchConfigStoreOptions, 'client' | 'closeClient'>,
): Promise<OrchConfigStore> {
  const client = await createOrchClient(opts);
  return new OrchConfigStore({ ...opts, client, closeClient: true }).start();
}
