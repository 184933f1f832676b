// Istio's in-cluster analysis controller (pkg/config/analysis/incluster), on with PILOT_ENABLE_ANALYSIS
// and run by the replica holding the `mesh-analyze-leader` Lease:
//
// - inputs: the mesh configuration the daemon serves (its orchestrator config store) and, watched while
//   leading, the orchestrator kinds the analyzers read besides (Namespaces, Services, Pods, Secrets,
//   ConfigMaps, Deployments, EndpointSlices, webhook configurations), as Istio's analysis controller
//   opens its own client for the kinds its config store lacks;
// - every change names its kind; kinds are debounced (1 s of quiet, at most PILOT_ANALYSIS_INTERVAL,
//   default 10 s) and the analyzers reading any of them run over the whole state (Istio's
//   ReAnalyzeSubset); the first run covers every analyzer;
// - messages about mesh resources (our groups and Istio's) go to each resource's
//   `status.validationMessages` through the status manager; a resource an executed analyzer reported
//   on before and no longer does gets its messages cleared. As in Istio, messages left by a replica
//   that died before clearing them stay until the next change of that resource's findings;
// - new messages are logged once (errors at error level, warnings at warn), resolved ones at info.
import { readFileSync } from 'node:fs';
import { ALL_ANALYZERS } from '../analysis/analyzers';
import type { AnalysisMeshConfig, Analyzer, Message, Resource } from '../analysis/model';
import { analyzedNamespace, ORCH_INPUTS, toResource } from '../analysis/resource';
import { analysisSteps, defaultMeshConfig, messageString, parseMeshConfig } from '../analysis/run';
import { analysisMessageBase, statusWithMessages } from '../analysis/status';
import type { OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { collectionPath, SECRETS_FIELD_SELECTOR } from '../config/orch/resources';
import { isClusterScoped, MESH_KINDS, pluralOf } from '../config/schemas';
import type { ConfigStore } from '../config/store';
import type { Config, Kind } from '../config/types';
import { formatDurationMs } from '../lib/duration';
import { registerScope } from '../lib/log';
import { StatusManager } from './status-manager';

const log = registerScope('analysis', 'in-cluster analysis controller');

/** Istio's debounce: a push after 1 s without changes, or PILOT_ANALYSIS_INTERVAL after the first. */
export const DEBOUNCE_QUIET_MS = 1_000;
const MIN_INTERVAL_MS = 1_000;
const DEFAULT_INTERVAL_MS = 10_000;

/** PILOT_ANALYSIS_INTERVAL below 1 s is replaced by the 10 s default, with a warning (Istio). */
export function analysisInterval(ms: number, warn: (m: string) => void = (m) => log.warn(m)): number {
  if (ms < MIN_INTERVAL_MS) {
    warn(`PILOT_ANALYSIS_INTERVAL ${formatDurationMs(ms)} is too small, it will be set to default 10 seconds`);
    return DEFAULT_INTERVAL_MS;
  }
  return ms;
}

/** Reads the analysis subset of the mesh config file; defaults when it is missing. */
export function analysisMeshConfig(file: string | undefined): AnalysisMeshConfig {
  if (!file) return defaultMeshConfig();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return defaultMeshConfig();
  }
  try {
    return parseMeshConfig(text);
  } catch (e) {
    log.warn(`mesh config ${file}: ${(e as Error).message}; analysis uses the defaults`);
    return defaultMeshConfig();
  }
}

/** Istio's analysis.CombinedAnalyzer.RelevantSubset: the analyzers reading any of `kinds`. */
export function relevantSubset(analyzers: readonly Analyzer[], kinds: ReadonlySet<string>): Analyzer[] {
  return analyzers.filter((a) => a.inputs.some((k) => kinds.has(k)));
}

/** Where a mesh resource's status is written: the group/version the daemon serves it from. */
function statusPath(c: Config): string {
  const kind = c.kind;
  const slash = c.apiVersion.indexOf('/');
  const ns = isClusterScoped(kind) ? undefined : c.meta.namespace;
  return `${collectionPath(c.apiVersion.slice(0, slash), c.apiVersion.slice(slash + 1), pluralOf(kind), ns)}/${encodeURIComponent(c.meta.name)}`;
}

function resourceKey(r: Pick<Resource, 'kind' | 'name' | 'namespace'>): string {
  return `${r.kind}/${r.namespace}/${r.name}`;
}

const MESH_KIND_SET: ReadonlySet<string> = new Set(MESH_KINDS);

export interface AnalysisControllerOptions {
  client: OrchClient;
  /** The daemon's config store: the mesh kinds analysed are what it serves. */
  store: ConfigStore;
  /** The daemon's namespace (Istio's istio-system): the analyzers' system namespace. */
  meshNamespace: string;
  mesh: AnalysisMeshConfig;
  /** MESH_WATCH_NAMESPACE: namespaced inputs watched in that namespace only. */
  watchNamespace?: string;
  /** PILOT_ANALYSIS_INTERVAL (ms). */
  intervalMs: number;
  /** PILOT_STATUS_MAX_WORKERS. */
  maxWorkers: number;
  analyzers?: readonly Analyzer[];
}

export class AnalysisController {
  private readonly informers: ResourceInformer[] = [];
  /** The orchestrator inputs, converted when they change, per kind and `namespace/name`. */
  private readonly objects = new Map<string, Map<string, Resource>>();
  private readonly status: StatusManager;
  private readonly analyzers: readonly Analyzer[];
  private offStore: (() => void) | undefined;
  private synced = false;
  private stopped = false;
  private endWait: () => void = () => undefined;
  private readonly stopping = new Promise<void>((resolve) => (this.endWait = resolve));

  // debouncer state
  private readonly changed = new Set<string>();
  private firstChangeAt = 0;
  private lastChangeAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  /** Messages per executed analyzer, keyed by resource, from the last run (Istio's oldmsgs). */
  private readonly previous = new Map<string, Set<string>>();
  /** Messages logged, with the analyzer that reported each. */
  private readonly logged = new Map<string, string>();
  /** Analysis runs completed (for tests and debugging). */
  runs = 0;

  constructor(private readonly o: AnalysisControllerOptions) {
    this.status = new StatusManager(o.client, o.maxWorkers);
    this.analyzers = o.analyzers ?? ALL_ANALYZERS;
  }

  async start(): Promise<void> {
    log.info('Starting analysis controller');
    for (const input of ORCH_INPUTS) {
      const cache = new Map<string, Resource>();
      this.objects.set(input.kind, cache);
      const [group, version] = input.apiVersion.includes('/') ? input.apiVersion.split('/') : ['', input.apiVersion];
      const ns = input.clusterScoped ? undefined : this.o.watchNamespace;
      const set = (o: RawObject, gone: boolean) => {
        const key = `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
        if (gone) cache.delete(key);
        else {
          // The informer's cache holds the object too: keep only what the analyzers read.
          delete o.metadata.managedFields;
          if (input.kind === 'Pod') delete o.status;
          const conv = toResource({ ...o, apiVersion: input.apiVersion, kind: input.kind }, 'default', { source: `orchestrator:${input.kind}` });
          if ('resource' in conv && analyzedNamespace(conv.resource)) cache.set(key, conv.resource);
          else cache.delete(key);
        }
        this.enqueue(input.kind);
      };
      const inf = new ResourceInformer(
        this.o.client,
        // Secrets: not Helm release records or service-account tokens, which are never credentials.
        {
          path: collectionPath(group!, version!, input.plural, ns),
          ...(input.kind === 'Secret' ? { fieldSelector: SECRETS_FIELD_SELECTOR } : {}),
          log,
        },
        { add: (o) => set(o, false), update: (o) => set(o, false), delete: (o) => set(o, true) },
      );
      this.informers.push(inf);
      inf.start();
    }
    this.offStore = this.o.store.subscribe((events) => {
      for (const e of events) if (MESH_KIND_SET.has(e.config.kind)) this.enqueue(e.config.kind);
    });
    // Stopping before the inputs synced ends the wait too.
    await Promise.race([Promise.all([this.o.store.whenSynced(), ...this.informers.map((i) => i.whenSynced())]), this.stopping]);
    if (this.stopped) return;
    // Nothing runs on a partial view (a Service not listed yet would make its references "not found");
    // the first run covers every analyzer (all their inputs changed from nothing).
    this.synced = true;
    for (const a of this.analyzers) for (const k of a.inputs) this.changed.add(k);
    this.push();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.endWait();
    this.offStore?.();
    if (this.timer) clearTimeout(this.timer);
    await Promise.all(this.informers.map((i) => i.stop()));
    await this.running;
    await this.status.stop();
  }

  private enqueue(kind: string): void {
    if (this.stopped) return;
    const now = performance.now();
    if (this.changed.size === 0) this.firstChangeAt = now;
    this.lastChangeAt = now;
    this.changed.add(kind);
    this.schedule();
  }

  private schedule(): void {
    if (!this.synced || this.timer || this.running || this.changed.size === 0) return;
    const now = performance.now();
    const wait = Math.max(0, Math.min(this.lastChangeAt + DEBOUNCE_QUIET_MS, this.firstChangeAt + this.o.intervalMs) - now);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const t = performance.now();
      if (t - this.lastChangeAt >= DEBOUNCE_QUIET_MS || t - this.firstChangeAt >= this.o.intervalMs) this.push();
      else this.schedule();
    }, wait);
    this.timer.unref();
  }

  private push(): void {
    if (this.stopped || this.running) return;
    const kinds = new Set(this.changed);
    this.changed.clear();
    this.running = this.runAnalysis(kinds)
      .catch((e: unknown) => log.error(`In-cluster analysis has failed: ${(e as Error).message}`))
      .finally(() => {
        this.running = undefined;
        this.schedule();
      });
  }

  /** The state the analyzers read: mesh kinds as served, orchestrator kinds as watched. */
  private resources(): { resources: Resource[]; configs: Map<string, Config> } {
    const resources: Resource[] = [];
    const configs = new Map<string, Config>();
    for (const kind of MESH_KINDS) {
      for (const c of this.o.store.list(kind as Kind)) {
        const object = {
          apiVersion: c.apiVersion,
          kind: c.kind,
          metadata: { name: c.meta.name, namespace: c.meta.namespace, labels: c.meta.labels, annotations: c.meta.annotations },
          spec: c.spec,
        };
        const r: Resource = {
          kind: c.kind,
          name: c.meta.name,
          namespace: c.meta.namespace,
          labels: c.meta.labels,
          annotations: c.meta.annotations,
          object,
          config: c,
        };
        if (!analyzedNamespace(r)) continue;
        resources.push(r);
        configs.set(resourceKey(r), c);
      }
    }
    for (const cache of this.objects.values()) for (const r of cache.values()) resources.push(r);
    return { resources, configs };
  }

  private async runAnalysis(kinds: ReadonlySet<string>): Promise<void> {
    const subset = relevantSubset(this.analyzers, kinds);
    if (subset.length === 0) return;
    const { resources, configs } = this.resources();
    // One analyzer per turn of the event loop: xDS and the API watches are served between them.
    const steps = analysisSteps(resources, { analyzers: subset, suppressions: [], mesh: this.o.mesh, meshNamespace: this.o.meshNamespace });
    let step = steps.next();
    while (!step.done) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.stopped) return;
      step = steps.next();
    }
    const result = step.value;
    this.runs += 1;
    log.debug(`analysis run ${this.runs}: ${subset.length} analyzers over ${resources.length} resources, ${result.messages.length} messages`);
    this.logMessages(result.messages, result.executed);

    // Messages per resource, and per analyzer (which resources each one reported on).
    const byResource = new Map<string, Message[]>();
    const byAnalyzer = new Map<string, Set<string>>();
    for (const m of result.messages) {
      if (!m.resource) continue;
      const key = resourceKey(m.resource);
      byResource.set(key, [...(byResource.get(key) ?? []), m]);
      const set = byAnalyzer.get(m.analyzer) ?? new Set<string>();
      set.add(resourceKey(m.resource));
      byAnalyzer.set(m.analyzer, set);
    }
    // Resources an executed analyzer reported on last time and not now: their messages are cleared.
    const targets = new Set(byResource.keys());
    for (const a of result.executed) {
      for (const key of this.previous.get(a) ?? []) targets.add(key);
      this.previous.set(a, byAnalyzer.get(a) ?? new Set());
    }
    for (const key of targets) {
      const c = configs.get(key);
      // Only mesh resources carry validationMessages (Istio: groups ending in istio.io).
      if (!c || c.meta.generation === undefined) continue;
      const messages = (byResource.get(key) ?? []).map(analysisMessageBase);
      this.status.push({ path: statusPath(c), generation: c.meta.generation }, (live, gen) => statusWithMessages(live, gen, messages));
    }
  }

  /**
   * Logs messages not seen before (Istio's logNewAnalysisMessages); a logged message of an analyzer
   * that ran again and no longer reports it is logged as resolved.
   */
  private logMessages(messages: ReadonlyArray<Message & { analyzer: string }>, executed: readonly string[]): void {
    const current = new Map<string, string>();
    for (const m of messages) {
      const s = messageString(m);
      current.set(s, m.analyzer);
      if (this.logged.has(s)) continue;
      if (m.type.level === 'Error') log.error(`Configuration analysis: ${s}`);
      else if (m.type.level === 'Warning') log.warn(`Configuration analysis: ${s}`);
      else log.debug(`Configuration analysis: ${s}`);
    }
    const ran = new Set(executed);
    for (const [s, analyzer] of this.logged) {
      if (current.has(s) || !ran.has(analyzer)) continue;
      log.info(`Configuration analysis resolved: ${s}`);
      this.logged.delete(s);
    }
    for (const [s, analyzer] of current) this.logged.set(s, analyzer);
  }
}
