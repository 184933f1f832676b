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
import { isClusterScoped, MESH_KINDS, objectKindOf } from '../schemas';
import type { ConfigEvent, ConfigStore } from '../store';
import { type Config, configKey, type Kind } from '../types';
import type { LabelSelector } from '../meshconfig';
import { validateConfig } from '../validate';
import { createOrchClient, type OrchClient, type OrchClientOptions } from './client';
import { type BackoffOptions, DEFAULT_BACKOFF, type InformerHandlers, ResourceInformer, type RawObject } from './informer';
import { NamespaceFilter } from './namespace-filter';
import { NodeLocalities } from './nodes';
import {
  collectionPath,
  type CrdGroup,
  crdGroups,
  groupRank,
  type NodeLocality,
  REGISTRY_RESOURCES,
  type RegistryResource,
  SECRETS_FIELD_SELECTOR,
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

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** What is read of a CustomResourceDefinition. */
interface CrdInfo {
  group: string;
  kind: string;
  plural: string;
  servedVersions: string[];
  established: boolean;
}

function crdName(group: string, plural: string): string {
  return `${plural}.${group}`;
}

function crdOf(raw: RawObject): CrdInfo {
  const spec = (raw.spec ?? {}) as {
    group?: string;
    names?: { kind?: string; plural?: string };
    versions?: Array<{ name?: string; served?: boolean }>;
  };
  const status = (raw.status ?? {}) as { conditions?: Array<{ type?: string; status?: string }> };
  return {
    group: spec.group ?? '',
    kind: spec.names?.kind ?? '',
    plural: spec.names?.plural ?? '',
    servedVersions: (spec.versions ?? []).filter((v) => v.served && v.name).map((v) => v.name!),
    established: (status.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True'),
  };
}

export interface OrchConfigStoreOptions {
  client: OrchClient;
  /** MESH_WATCH_NAMESPACE: watch namespaced collections in this namespace only. */
  watchNamespace?: string;
  /** --clusterID, for messages. */
  clusterID?: string;
  /** Retry schedule of failed lists, watches and discovery (default 800 ms doubling to 30 s). */
  backoff?: Partial<BackoffOptions>;
  /** close() also closes the client (default true). */
  closeClient?: boolean;
  /** Items per list page (default 500, client-go's). */
  listPageSize?: number;
  /**
   * Whether mesh configuration (the CRDs of our groups and Istio's) is read from this cluster (default
   * true). A remote cluster of a multicluster mesh contributes services and endpoints only: Istio reads
   * configuration from the config cluster alone.
   */
  meshConfigs?: boolean;
  /**
   * meshConfig discoverySelectors: only objects in namespaces whose labels match one of them are
   * served (cluster-scoped objects always are); none = every namespace. setDiscoverySelectors changes them.
   */
  discoverySelectors?: readonly LabelSelector[];
}

type EventName = 'add' | 'update' | 'delete';

/** Everything stored for one Kind/namespace/name: the good version per API group serving it. */
type Slot = Map<string, Config>;

export class OrchConfigStore implements ConfigStore {
  private readonly client: OrchClient;
  private readonly ns: string | undefined;
  private readonly clusterID: string;
  private readonly backoff: BackoffOptions;

  private readonly slots = new Map<string, Slot>();
  /** What is served; changed only by flush(). */
  private readonly served = new MemoryConfigStore();
  /** Keys (`Kind/namespace/name`) whose slot changed since the last flush. */
  private readonly dirty = new Map<string, Kind>();
  private flushScheduled = false;
  private readonly nodes = new NodeLocalities(log);

  private readonly informers: ResourceInformer[] = [];
  /** Informers and group discoveries the initial sync waits for. */
  private readonly syncGate = new Set<object>();
  private syncedFlag = false;
  private readonly syncWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private readonly startedAt = performance.now();

  private readonly groups: CrdGroup[] = crdGroups();
  private crdWatcher: ResourceInformer | undefined;
  /** CRDs of our groups and Istio's, by name (`<plural>.<group>`), as last seen. */
  private readonly crds = new Map<string, CrdInfo>();
  /** Kinds being watched, by CRD name. */
  private readonly crdInformers = new Map<string, { kind: Kind; version: string; informer: ResourceInformer }>();
  /** Per CRD group: what was last reported missing, so it is logged once. */
  private readonly reportedMissing = new Map<string, string>();

  private readonly namespaces: NamespaceFilter;
  private readonly conflictsLogged = new Set<string>();
  private startedFlag = false;
  private closed = false;

  constructor(private readonly opts: OrchConfigStoreOptions) {
    this.client = opts.client;
    this.ns = opts.watchNamespace || undefined;
    this.clusterID = opts.clusterID ?? 'Orchestrator';
    this.backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
    this.namespaces = new NamespaceFilter(opts.discoverySelectors ?? [], (ns, selected) => this.membershipChanged(ns, selected));
  }

  /** Starts every informer and the CRD watcher; returns at once (see whenSynced). */
  start(): this {
    if (this.startedFlag || this.closed) return this;
    this.startedFlag = true;
    const scope = this.ns ? `namespace ${this.ns}` : 'all namespaces';
    log.info(`watching the orchestrator (${this.client.origin}, ${this.client.server}, cluster ${this.clusterID}) in ${scope}`);
    for (const r of REGISTRY_RESOURCES) this.startRegistryInformer(r);
    if (this.opts.meshConfigs ?? true) this.startCrdWatcher();
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
    await Promise.all(this.informers.map((i) => i.stop()));
    for (const w of this.syncWaiters.splice(0)) w.reject(new Error('orchestrator config store closed before it synced'));
    this.dirty.clear();
    await this.served.close();
    if (this.opts.closeClient ?? true) this.client.close();
  }

  // -------------------------------------------------------------------------------------------
  // discoverySelectors

  /** New discoverySelectors (a mesh config change): objects of namespaces that join or leave follow. */
  setDiscoverySelectors(selectors: readonly LabelSelector[]): void {
    this.namespaces.setSelectors(selectors);
  }

  /** Whether objects of `namespace` are served. */
  namespaceInScope(namespace: string): boolean {
    return this.namespaces.inScope(namespace);
  }

  /** `ns` joined or left the selection: every object in it is looked at again. */
  private membershipChanged(ns: string, now: boolean): void {
    if (this.namespaces.filtering && this.syncedFlag)
      log.info(`namespace ${ns} ${now ? 'is now selected' : 'is no longer selected'} by discoverySelectors`);
    const prefix = `/${ns}/`;
    for (const key of this.slots.keys()) {
      const slash = key.indexOf('/');
      const kind = key.slice(0, slash) as Kind;
      if (key.startsWith(prefix, slash) || (kind === 'Namespace' && key === `Namespace//${ns}`)) this.markDirty(kind, key);
    }
  }

  /** Topology of a node from its labels, or undefined for an unknown node. */
  nodeLocality(nodeName: string): NodeLocality | undefined {
    return this.nodes.get(nodeName);
  }

  /** Called with the node's name when a node's locality appears, changes or goes away. */
  subscribeNodes(handler: (nodeName: string) => void): () => void {
    return this.nodes.subscribe(handler);
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
    const fieldSelector =
      r.kind === 'Namespace' && this.ns !== undefined ? `metadata.name=${this.ns}` : r.kind === 'Secret' ? SECRETS_FIELD_SELECTOR : undefined;
    const apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
    const count = (event: EventName) => regEvents.inc({ type: r.metricType, event });
    // Nodes are not a Kind: only their locality is kept, for the pods on them.
    const onNode = (o: RawObject, deleted: boolean) => void (this.closed || this.nodes.onNode(o, deleted));
    const handlers =
      r.kind === 'Node'
        ? {
            add: (o: RawObject) => (count('add'), onNode(o, false)),
            update: (o: RawObject) => (count('update'), onNode(o, false)),
            delete: (o: RawObject) => (count('delete'), onNode(o, true)),
          }
        : {
            add: (o: RawObject) => (count('add'), this.onObject(r.kind as Kind, r.group, apiVersion, o)),
            update: (o: RawObject) => (count('update'), this.onObject(r.kind as Kind, r.group, apiVersion, o)),
            delete: (o: RawObject) => (count('delete'), this.onDelete(r.kind as Kind, r.group, o)),
          };
    this.track(this.informer(path, handlers, fieldSelector), true);
  }

  private startCrdInformer(kind: Kind, group: string, version: string, plural: string, initial: boolean): void {
    const path = collectionPath(group, version, plural, this.ns);
    const apiVersion = `${group}/${version}`;
    const count = (event: EventName) => cfgEvents.inc({ type: kind, event });
    const inf = this.informer(path, {
      add: (o) => (count('add'), this.onObject(kind, group, apiVersion, o)),
      update: (o) => (count('update'), this.onObject(kind, group, apiVersion, o)),
      delete: (o) => (count('delete'), this.onDelete(kind, group, o)),
      // 404 while the CRD is still there (just created, not yet served at this path): try again.
      notFound: () => (this.crds.get(crdName(group, plural))?.established ? 'retry' : (this.crdGone(group, plural, `${path}: 404`), 'stop')),
    });
    this.crdInformers.set(crdName(group, plural), { kind, version, informer: inf });
    this.track(inf, initial);
  }

  private informer(path: string, handlers: InformerHandlers, fieldSelector?: string): ResourceInformer {
    const page = this.opts.listPageSize ? { pageSize: this.opts.listPageSize } : {};
    return new ResourceInformer(this.client, { path, ...(fieldSelector ? { fieldSelector } : {}), backoff: this.backoff, log, ...page }, handlers);
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
  // CRDs: which kinds of our groups and Istio's are installed, at which version. Istio's CRD watcher:
  // the CustomResourceDefinitions themselves are watched, so a kind whose CRD appears, goes or comes
  // back after start is watched (or dropped) as soon as the API server says so.

  private startCrdWatcher(): void {
    const handlers = {
      add: (o: RawObject) => this.onCrd(o, false),
      update: (o: RawObject) => this.onCrd(o, false),
      delete: (o: RawObject) => this.onCrd(o, true),
    };
    const watcher = (this.crdWatcher = this.informer(CRD_PATH, handlers));
    this.informers.push(watcher);
    this.syncGate.add(watcher);
    void watcher.whenSynced().then(() => {
      this.reportMissing();
      this.ungate(watcher);
    });
    watcher.start();
  }

  private onCrd(raw: RawObject, deleted: boolean): void {
    if (this.closed) return;
    const crd = crdOf(raw);
    // Only the fields read above are kept: a CRD's schema is often the bulk of a cluster's metadata.
    for (const k of Object.keys(raw)) if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') delete raw[k];
    raw.metadata = { name: raw.metadata.name, resourceVersion: raw.metadata.resourceVersion };
    const g = this.groups.find((x) => x.group === crd.group);
    if (!g) return;
    const name = crdName(crd.group, crd.plural);
    const kind = g.kinds.find((k) => objectKindOf(k) === crd.kind);
    if (deleted || !kind) {
      this.crds.delete(name);
      if (deleted) this.crdGone(crd.group, crd.plural, 'its CustomResourceDefinition was deleted');
      return;
    }
    this.crds.set(name, crd);
    const watching = this.crdInformers.get(name);
    const version = g.versions.find((v) => crd.servedVersions.includes(v) && this.acceptsVersion(kind, g.group, v));
    if (watching && watching.version === version) return;
    if (watching) this.crdGone(crd.group, crd.plural, `served versions changed to ${crd.servedVersions.join(', ')}`);
    if (!crd.established || !version) return;
    // During the watcher's first list, what is found is part of the initial sync.
    const initial = !this.crdWatcher!.hasSynced();
    if (!initial) log.info(`${kind} is now served as ${g.group}/${version} ${crd.plural}: watching it`);
    this.startCrdInformer(kind, g.group, version, crd.plural, initial);
    if (!initial) this.reportMissing();
  }

  /** Logs, once per change, the groups and kinds that no CRD serves. */
  private reportMissing(): void {
    for (const g of this.groups) {
      const watched = g.kinds.filter((k) => [...this.crdInformers.values()].some((c) => c.kind === k && c.informer.path.includes(`/${g.group}/`)));
      const why = missingReport(g, watched);
      if (why && why !== this.reportedMissing.get(g.group)) log.info(why);
      if (why) this.reportedMissing.set(g.group, why);
      else this.reportedMissing.delete(g.group);
    }
  }

  private acceptsVersion(kind: Kind, group: string, version: string): boolean {
    return this.groups.some((x) => x.group === group && x.kinds.includes(kind) && x.versions.includes(version));
  }

  /** A watched CRD went away (deleted, or its collection answers 404): its objects went with it. */
  private crdGone(group: string, plural: string, why: string): void {
    const name = crdName(group, plural);
    const watching = this.crdInformers.get(name);
    if (!watching) return;
    this.crdInformers.delete(name);
    const inf = watching.informer;
    const i = this.informers.indexOf(inf);
    if (i >= 0) this.informers.splice(i, 1);
    void inf.stop();
    this.ungate(inf);
    for (const [key, slot] of this.slots) {
      const c = slot.get(group);
      if (c && c.kind === watching.kind) this.removeFrom(watching.kind, group, key);
    }
    log.info(`${watching.kind} is no longer served by CRD group ${group} (${why}): skipped`);
    if (this.crdWatcher?.hasSynced()) this.reportMissing();
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
    const ns = isClusterScoped(kind) ? '' : raw.metadata.namespace || 'default';
    const name = raw.metadata.name ?? '';
    recordRejectedConfig(kind.toLowerCase() as Lowercase<Kind>, `${ns}/${name}`);
    const kept = this.slots.get(`${kind}/${ns}/${name}`)?.has(group) ? ' (the previous version stays)' : '';
    for (const e of errors) validationLog.warn(`rejected ${formatConfigError(e)}${kept}`);
  }

  private onDelete(kind: Kind, group: string, raw: RawObject): void {
    if (this.closed) return;
    const ns = isClusterScoped(kind) ? '' : raw.metadata.namespace || 'default';
    this.removeFrom(kind, group, `${kind}/${ns}/${raw.metadata.name ?? ''}`);
  }

  private put(kind: Kind, group: string, config: Config): void {
    const key = configKey(config);
    if (kind === 'Namespace') this.namespaces.setLabels(config.meta.name, config.meta.labels);
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
    if (kind === 'Namespace') this.namespaces.remove(key.slice('Namespace//'.length));
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
    this.markDirty(kind, key);
  }

  private markDirty(kind: Kind, key: string): void {
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
      const c = this.namespaces.keyInScope(kind, key) ? pick(kind, this.slots.get(key)) : undefined;
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

/** What is logged of a CRD group of which only `watched` kinds are served; '' when it serves them all. */
function missingReport(g: CrdGroup, watched: readonly Kind[]): string {
  if (watched.length === 0) return `CRD group ${g.group} is not installed (no CustomResourceDefinition of it is established): its kinds are skipped`;
  if (watched.length === g.kinds.length) return '';
  return `CRD group ${g.group} does not serve ${g.kinds.filter((k) => !watched.includes(k)).join(', ')}: skipped`;
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
