// The orchestrator registry (Istio serviceregistry/kube/controller): Services become
// `<name>.<ns>.svc.<domain>` with ports typed from appProtocol or the port-name prefix; EndpointSlices
// (label kubernetes.io/service-name) give endpoints joined with the Pod they reference and that Pod's
// Node; Services with selectors also select WorkloadEntries (PILOT_ENABLE_ORCH_SELECT_WORKLOAD_ENTRIES).
//
// The join follows Istio's endpointslice controller and PodCache:
// - an endpoint whose targetRef names a Pod that is not known (yet) is left out until the Pod arrives
//   (eventual consistency between watches; sending it without the Pod's identity would be wrong);
// - an endpoint without a targetRef borrows the metadata of a ready, running Pod with that IP in the
//   same namespace (the IP index holds only such Pods, so an IP reused by a new Pod finds the new one);
// - locality comes from the Pod's `istio-locality` label, else from its Node's topology labels;
// - health from the endpoint conditions (endpointHealthStatus): ready → Healthy; not ready but still
//   serving while terminating → Draining for persistent-session services; terminating → Terminating;
//   otherwise UnHealthy;
// - the same address and port name in two slices (an endpoint moving between slices) is one endpoint.
//
// Conversion is per Service, and the live registry recomputes only the Services a change can reach
// (through the Pods, IPs and Nodes each Service's endpoints were joined with), so one endpoint change
// in a large cluster costs one Service, not all of them.
import type { ConfigEvent, ConfigStore } from '../../config/store';
import type { Config, Kind, OrchServicePort, WorkloadGroupSpec } from '../../config/types';
import { defineCounter, defineGauge } from '../../lib/metrics';
import { isIp } from '../host';
import { isEmptySelector, selectorMatches } from '../labels';
import type { Endpoint, HealthStatus, Service, ServicePort } from '../model';
import { orchPortProtocol } from './protocol';
import { creationTime } from './serviceentry';
import { diffSnapshots, Notifier, serviceKey, Snapshot, type ServiceEntryState } from './snapshot';
import { DEFAULT_CLUSTER_ID, DEFAULT_DOMAIN, type RegistryHandler, type RegistryOptions, type ServiceRegistry } from './types';
import { entryHealthy, groupOf, normalizeLocality, spiffeIdentity, workloadFromEntry } from './workload';

export const ORCHESTRATOR_REGISTRY = 'Orchestrator';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** Annotations that set a Service's exportTo, Istio's and ours. */
export const EXPORT_TO_ANNOTATIONS = ['networking.istio.io/exportTo', 'networking.mesh.io/exportTo'] as const;
/** Pod label that overrides the locality of its endpoints (Istio's model.LocalityLabel). */
export const LOCALITY_LABEL = 'istio-locality';

const endpointsWithNoPods = defineCounter({ name: 'pilot_k8s_endpoints_with_no_pods', help: 'Endpoints that does not have any corresponding pods.' });
const endpointsPendingPod = defineGauge({
  name: 'pilot_k8s_endpoints_pending_pod',
  help: 'Number of endpoints that do not currently have any corresponding pods.',
});
const endpointNoPod = defineGauge({ name: 'endpoint_no_pod', help: 'Endpoints without an associated pod.' });

export interface OrchestratorOptions extends RegistryOptions {
  /** Locality (`region/zone/subzone`) of a node, from its topology labels, when the caller watches Nodes. */
  nodeLocality?: (nodeName: string) => string | undefined;
  /** Whether Services with selectors also select WorkloadEntries (default true, as Istio). */
  selectWorkloadEntries?: boolean;
  /**
   * PILOT_PERSISTENT_SESSION_LABEL and PILOT_PERSISTENT_SESSION_HEADER_LABEL: Services labelled with
   * either keep endpoints that are terminating but still serving, as Draining.
   */
  persistentSessionLabels?: readonly string[];
  /** Registry id (default `Orchestrator`); remote clusters get their own. */
  id?: string;
  /** When the registry counts as synced (default: when its store is); a remote cluster may time out instead. */
  synced?: () => boolean;
}

export interface OrchestratorInputs {
  services: readonly Config<'Service'>[];
  endpointSlices: readonly Config<'EndpointSlice'>[];
  pods: readonly Config<'Pod'>[];
  workloadEntries?: readonly Config<'WorkloadEntry'>[];
  workloadGroups?: readonly Config<'WorkloadGroup'>[];
}

export function orchServiceHostname(name: string, namespace: string, domain: string): string {
  return `${name}.${namespace}.svc.${domain}`;
}

function exportToOf(svc: Config<'Service'>): string[] {
  for (const a of EXPORT_TO_ANNOTATIONS) {
    const v = svc.meta.annotations[a];
    if (v)
      return v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
  }
  return ['*'];
}

function servicePorts(ports: readonly OrchServicePort[]): ServicePort[] {
  return ports.map((p) => ({ name: p.name ?? '', port: p.port, protocol: orchPortProtocol(p.port, p.name, p.protocol, p.appProtocol) }));
}

type Conditions = { ready?: boolean; serving?: boolean; terminating?: boolean } | undefined;

/** EndpointSlice conditions → health, as Istio's endpointHealthStatus (an unset condition counts as true). */
export function sliceHealth(c: Conditions, supportsDraining = false): HealthStatus {
  if (c === undefined || c.ready === undefined || c.ready) return 'Healthy';
  const terminating = c.terminating === undefined || c.terminating;
  if (supportsDraining && (c.serving === undefined || c.serving) && terminating) return 'Draining';
  if (terminating) return 'Terminating';
  return 'UnHealthy';
}

/** Istio's shouldPodBeInEndpoints && IsPodReady: what the IP index may hold. */
export function podServesIp(p: Config<'Pod'>): boolean {
  const phase = p.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return false;
  if (!p.status?.podIP && !(p.status?.podIPs && p.status.podIPs.length > 0)) return false;
  if (p.meta.deletionTimestamp) return false;
  return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** An endpoint left out because the Pod its targetRef names is not known. */
export interface EndpointWithoutPod {
  /** `namespace/name` of the EndpointSlice. */
  slice: string;
  ip: string;
  hostname: string;
}

/** What converting one Service looked at, so the live registry knows which changes reach it. */
interface Deps {
  pods: Set<string>;
  ips: Set<string>;
  nodes: Set<string>;
  workloadEntries: boolean;
}

/** Lookups over the objects a Service's conversion reads. */
interface Sources {
  slicesFor(namespace: string, service: string): Iterable<Config<'EndpointSlice'>>;
  pod(key: string): Config<'Pod'> | undefined;
  readyPodsByIp(ip: string): readonly Config<'Pod'>[] | undefined;
  workloadEntries(namespace: string): readonly Config<'WorkloadEntry'>[];
  workloadGroups: ReadonlyMap<string, WorkloadGroupSpec>;
}

function convertService(
  svc: Config<'Service'>,
  src: Sources,
  opts: OrchestratorOptions,
  deps: Deps,
  missing: EndpointWithoutPod[],
): ServiceEntryState {
  const domain = opts.domain ?? DEFAULT_DOMAIN;
  const td = opts.trustDomain ?? 'cluster.local';
  const clusterId = opts.clusterId ?? DEFAULT_CLUSTER_ID;
  const ns = svc.meta.namespace;
  const hostname = orchServiceHostname(svc.meta.name, ns, domain);
  const spec = svc.spec;
  const ports = servicePorts(spec.ports ?? []);
  const ips = (spec.clusterIPs && spec.clusterIPs.length > 0 ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : []).filter(
    (ip) => ip !== 'None' && ip !== '',
  );
  const external = spec.type === 'ExternalName' && !!spec.externalName;
  const headless = spec.clusterIP === 'None';
  const selector = spec.selector && Object.keys(spec.selector).length > 0 ? spec.selector : undefined;
  const draining = (opts.persistentSessionLabels ?? []).some((l) => l !== '' && !!svc.meta.labels[l]);
  const endpoints: Endpoint[] = [];
  const sas = new Set<string>();

  if (external) {
    for (const p of spec.ports ?? []) {
      endpoints.push({
        address: spec.externalName!,
        port: p.port,
        servicePortName: p.name ?? '',
        hostname,
        namespace: ns,
        labels: {},
        healthStatus: 'Healthy',
      });
    }
  }
  const seen = new Set<string>();
  for (const slice of src.slicesFor(ns, svc.meta.name)) {
    if (slice.spec.addressType === 'FQDN') continue;
    const slicePorts = slice.spec.ports ?? [];
    for (const ep of slice.spec.endpoints ?? []) {
      const health = sliceHealth(ep.conditions, draining);
      const ref = ep.targetRef;
      const expectPod = ref?.kind === 'Pod' && !!ref.name;
      for (const addr of ep.addresses) {
        if (!isIp(addr)) continue;
        let pod: Config<'Pod'> | undefined;
        if (expectPod) {
          const k = podKey(ref!.namespace || ns, ref!.name!);
          deps.pods.add(k);
          pod = src.pod(k);
          if (!pod) {
            missing.push({ slice: `${slice.meta.namespace}/${slice.meta.name}`, ip: addr, hostname });
            continue;
          }
        } else {
          // A manually managed endpoint: the best guess at its workload is a ready Pod with its IP here.
          deps.ips.add(addr);
          pod = src.readyPodsByIp(addr)?.find((p) => p.meta.namespace === ns);
        }
        const sa = pod ? spiffeIdentity(td, pod.meta.namespace, pod.spec.serviceAccountName || 'default') : undefined;
        if (sa) sas.add(sa);
        let locality: string | undefined;
        if (pod) {
          locality = normalizeLocality(pod.meta.labels[LOCALITY_LABEL]);
          if (!locality && pod.spec.nodeName) {
            deps.nodes.add(pod.spec.nodeName);
            locality = opts.nodeLocality?.(pod.spec.nodeName);
          }
        }
        for (const sp of slicePorts) {
          if (sp.port === undefined) continue;
          const portName = sp.name ?? '';
          const key = `${addr}|${portName}`;
          if (seen.has(key)) continue;
          seen.add(key);
          endpoints.push({
            address: addr,
            port: sp.port,
            servicePortName: portName,
            hostname,
            namespace: ns,
            labels: pod?.meta.labels ?? {},
            ...(sa ? { serviceAccount: sa } : {}),
            ...(locality ? { locality } : {}),
            healthStatus: health,
            ...(pod ? { workloadName: pod.meta.name } : ref?.name ? { workloadName: ref.name } : {}),
            clusterId,
            ...(pod?.spec.subdomain ? { podHostname: pod.spec.hostname || pod.meta.name, podSubdomain: pod.spec.subdomain } : {}),
          });
        }
      }
    }
  }
  if (selector && (opts.selectWorkloadEntries ?? true)) {
    deps.workloadEntries = true;
    for (const we of src.workloadEntries(ns)) {
      const w = workloadFromEntry(we.spec, we.meta.name, ns, td, groupOf(we, src.workloadGroups), entryHealthy(we));
      if (!w || !selectorMatches(selector, w.labels)) continue;
      if (w.serviceAccount) sas.add(w.serviceAccount);
      for (const p of spec.ports ?? []) {
        const target = w.ports[p.name ?? ''] ?? (typeof p.targetPort === 'number' ? p.targetPort : p.port);
        endpoints.push({
          address: w.address,
          port: target,
          servicePortName: p.name ?? '',
          hostname,
          namespace: ns,
          labels: w.labels,
          ...(w.serviceAccount ? { serviceAccount: w.serviceAccount } : {}),
          ...(w.network ? { network: w.network } : {}),
          ...(w.locality ? { locality: w.locality } : {}),
          ...(w.weight ? { weight: w.weight } : {}),
          healthStatus: w.health,
          workloadName: w.name,
          clusterId,
        });
      }
    }
  }

  const service: Service = {
    hostname,
    namespace: ns,
    name: svc.meta.name,
    addresses: external ? [] : ips,
    ports,
    resolution: external ? 'DNS' : headless ? 'Passthrough' : 'ClientSide',
    meshExternal: false,
    exportTo: exportToOf(svc),
    labels: svc.meta.labels,
    registry: 'Orchestrator',
    clusterId,
    creationTime: creationTime(svc),
    serviceAccounts: [...sas].sort(),
    ...(selector && !isEmptySelector(selector) ? { selector } : {}),
    ...(spec.publishNotReadyAddresses ? { publishNotReadyAddresses: true } : {}),
  };
  return { service, endpoints };
}

function newDeps(): Deps {
  return { pods: new Set(), ips: new Set(), nodes: new Set(), workloadEntries: false };
}

function addTo<V>(m: Map<string, V[]>, k: string, v: V): void {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}

/**
 * Pure conversion: orchestrator objects → services with endpoints. Endpoints whose Pod is missing are
 * left out and reported through `missing` when given.
 */
export function convertOrchestrator(
  inputs: OrchestratorInputs,
  opts: OrchestratorOptions = {},
  missing: EndpointWithoutPod[] = [],
): ServiceEntryState[] {
  const pods = new Map<string, Config<'Pod'>>();
  const byIp = new Map<string, Config<'Pod'>[]>();
  for (const p of inputs.pods) {
    pods.set(podKey(p.meta.namespace, p.meta.name), p);
    if (podServesIp(p)) addTo(byIp, p.status?.podIP ?? p.status!.podIPs![0]!.ip, p);
  }
  const slices = new Map<string, Config<'EndpointSlice'>[]>();
  for (const s of inputs.endpointSlices) {
    const svcName = s.meta.labels[SERVICE_NAME_LABEL];
    if (svcName) addTo(slices, `${s.meta.namespace}/${svcName}`, s);
  }
  const entries = new Map<string, Config<'WorkloadEntry'>[]>();
  for (const we of inputs.workloadEntries ?? []) addTo(entries, we.meta.namespace, we);
  const groups = new Map<string, WorkloadGroupSpec>();
  for (const g of inputs.workloadGroups ?? []) groups.set(`${g.meta.namespace}/${g.meta.name}`, g.spec);
  const src: Sources = {
    slicesFor: (ns, name) => slices.get(`${ns}/${name}`) ?? [],
    pod: (k) => pods.get(k),
    readyPodsByIp: (ip) => byIp.get(ip),
    workloadEntries: (ns) => entries.get(ns) ?? [],
    workloadGroups: groups,
  };
  return inputs.services.map((svc) => convertService(svc, src, opts, newDeps(), missing));
}

const WATCHED: ReadonlySet<Kind> = new Set<Kind>(['Service', 'EndpointSlice', 'Pod', 'Namespace', 'WorkloadEntry', 'WorkloadGroup']);

/**
 * The live orchestrator registry over a ConfigStore holding Services, EndpointSlices, Pods and
 * Namespaces (and WorkloadEntries/Groups). It keeps its own indexes of those objects and, per change,
 * recomputes the Services the change can reach.
 */
export class OrchestratorRegistry implements ServiceRegistry {
  readonly id: string;
  readonly provider = 'Orchestrator' as const;
  private readonly notifier = new Notifier();
  private snapshot = new Snapshot([]);
  private unsubscribe: () => void = () => {};

  // Indexes of the store's objects.
  private readonly svcObjects = new Map<string, Config<'Service'>>();
  /** `ns/service` → slice key (`ns/name`) → slice. */
  private readonly slices = new Map<string, Map<string, Config<'EndpointSlice'>>>();
  private readonly sliceService = new Map<string, string>();
  private readonly pods = new Map<string, Config<'Pod'>>();
  private readonly podIp = new Map<string, string>();
  private readonly ipPods = new Map<string, Map<string, Config<'Pod'>>>();
  private readonly entries = new Map<string, Map<string, Config<'WorkloadEntry'>>>();
  private readonly groups = new Map<string, WorkloadGroupSpec>();
  private namespaceLabelIndex = new Map<string, Readonly<Record<string, string>>>();

  // What each Service's conversion read, and the reverse: who to recompute when something changes.
  private readonly deps = new Map<string, Deps>();
  private readonly byPod = new Map<string, Set<string>>();
  private readonly byIp = new Map<string, Set<string>>();
  private readonly byNode = new Map<string, Set<string>>();
  private readonly withSelector = new Map<string, Set<string>>();
  /** Endpoints without their Pod, per Service key. */
  private readonly missing = new Map<string, EndpointWithoutPod[]>();
  private readonly pendingSeen = new Set<string>();

  constructor(
    private readonly store: ConfigStore,
    private readonly opts: OrchestratorOptions = {},
  ) {
    this.id = opts.id ?? ORCHESTRATOR_REGISTRY;
    for (const k of ['Pod', 'EndpointSlice', 'WorkloadEntry', 'WorkloadGroup', 'Service', 'Namespace'] as const) {
      for (const c of store.list(k)) this.index({ type: 'add', config: c });
    }
    const all = new Map<string, ServiceEntryState | undefined>();
    for (const k of this.svcObjects.keys()) all.set(this.snapshotKey(k), this.convert(k));
    this.snapshot = this.snapshot.withChanges(all);
    this.recordPending();
    this.unsubscribe = store.subscribe((events) => this.onEvents(events));
  }

  /** Labels of a Namespace object, when the store has it. */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.namespaceLabelIndex.get(name);
  }

  /** Recomputes the Services with endpoints on this Node (its topology labels changed). */
  nodeChanged(nodeName: string): void {
    const keys = this.byNode.get(nodeName);
    if (keys && keys.size > 0) this.recompute(new Set(keys));
  }

  /** Endpoints currently left out for want of their Pod. */
  endpointsWithoutPod(): EndpointWithoutPod[] {
    return [...this.missing.values()].flat();
  }

  private onEvents(events: readonly ConfigEvent[]): void {
    const dirty = new Set<string>();
    for (const e of events) if (WATCHED.has(e.config.kind)) this.index(e, dirty);
    if (dirty.size > 0) this.recompute(dirty);
  }

  /** Updates the indexes with one event and collects the Services it reaches. */
  private index(e: ConfigEvent, dirty?: Set<string>): void {
    const c = e.config;
    const gone = e.type === 'delete';
    const ns = c.meta.namespace;
    const key = podKey(ns, c.meta.name);
    switch (c.kind) {
      case 'Service': {
        if (gone) this.svcObjects.delete(key);
        else this.svcObjects.set(key, c as Config<'Service'>);
        dirty?.add(key);
        break;
      }
      case 'EndpointSlice': {
        const before = this.sliceService.get(key);
        if (before) {
          this.slices.get(before)?.delete(key);
          dirty?.add(before);
        }
        const svcName = c.meta.labels[SERVICE_NAME_LABEL];
        if (gone || !svcName) {
          this.sliceService.delete(key);
          break;
        }
        const svcKey = `${ns}/${svcName}`;
        this.sliceService.set(key, svcKey);
        let m = this.slices.get(svcKey);
        if (!m) this.slices.set(svcKey, (m = new Map()));
        m.set(key, c as Config<'EndpointSlice'>);
        dirty?.add(svcKey);
        break;
      }
      case 'Pod': {
        const pod = c as Config<'Pod'>;
        const oldIp = this.podIp.get(key);
        if (oldIp !== undefined) {
          this.ipPods.get(oldIp)?.delete(key);
          if (this.ipPods.get(oldIp)?.size === 0) this.ipPods.delete(oldIp);
          this.podIp.delete(key);
          for (const s of this.byIp.get(oldIp) ?? []) dirty?.add(s);
        }
        if (gone) this.pods.delete(key);
        else {
          this.pods.set(key, pod);
          if (podServesIp(pod)) {
            const ip = pod.status?.podIP ?? pod.status!.podIPs![0]!.ip;
            this.podIp.set(key, ip);
            let m = this.ipPods.get(ip);
            if (!m) this.ipPods.set(ip, (m = new Map()));
            m.set(key, pod);
            for (const s of this.byIp.get(ip) ?? []) dirty?.add(s);
          }
        }
        for (const s of this.byPod.get(key) ?? []) dirty?.add(s);
        break;
      }
      case 'WorkloadEntry': {
        let m = this.entries.get(ns);
        if (!m) this.entries.set(ns, (m = new Map()));
        if (gone) m.delete(key);
        else m.set(key, c as Config<'WorkloadEntry'>);
        for (const s of this.withSelector.get(ns) ?? []) dirty?.add(s);
        break;
      }
      case 'WorkloadGroup': {
        if (gone) this.groups.delete(key);
        else this.groups.set(key, (c as Config<'WorkloadGroup'>).spec);
        for (const s of this.withSelector.get(ns) ?? []) dirty?.add(s);
        break;
      }
      case 'Namespace': {
        if (gone) this.namespaceLabelIndex.delete(c.meta.name);
        else this.namespaceLabelIndex.set(c.meta.name, c.meta.labels);
        break;
      }
      default:
        break;
    }
  }

  private readonly sources: Sources = {
    slicesFor: (ns, name) => [...(this.slices.get(`${ns}/${name}`)?.values() ?? [])].sort((a, b) => (a.meta.name < b.meta.name ? -1 : 1)),
    pod: (k) => this.pods.get(k),
    readyPodsByIp: (ip) => {
      const m = this.ipPods.get(ip);
      return m ? [...m.values()] : undefined;
    },
    workloadEntries: (ns) => [...(this.entries.get(ns)?.values() ?? [])],
    workloadGroups: this.groups,
  };

  /** Converts one Service (undefined when it is gone), refreshing what it depends on. */
  private convert(key: string): ServiceEntryState | undefined {
    this.dropDeps(key);
    const svc = this.svcObjects.get(key);
    if (!svc) return undefined;
    const deps = newDeps();
    const missing: EndpointWithoutPod[] = [];
    const state = convertService(svc, this.sources, this.opts, deps, missing);
    this.deps.set(key, deps);
    const link = (m: Map<string, Set<string>>, k: string) => {
      let s = m.get(k);
      if (!s) m.set(k, (s = new Set()));
      s.add(key);
    };
    for (const p of deps.pods) link(this.byPod, p);
    for (const ip of deps.ips) link(this.byIp, ip);
    for (const n of deps.nodes) link(this.byNode, n);
    if (deps.workloadEntries) link(this.withSelector, svc.meta.namespace);
    if (missing.length > 0) this.missing.set(key, missing);
    return state;
  }

  private dropDeps(key: string): void {
    this.missing.delete(key);
    const d = this.deps.get(key);
    if (!d) return;
    this.deps.delete(key);
    const unlink = (m: Map<string, Set<string>>, k: string) => {
      const s = m.get(k);
      s?.delete(key);
      if (s?.size === 0) m.delete(k);
    };
    for (const p of d.pods) unlink(this.byPod, p);
    for (const ip of d.ips) unlink(this.byIp, ip);
    for (const n of d.nodes) unlink(this.byNode, n);
    if (d.workloadEntries) unlink(this.withSelector, key.slice(0, key.indexOf('/')));
  }

  /** The snapshot key (`namespace/hostname`) of a Service key (`namespace/name`). */
  private snapshotKey(key: string): string {
    const slash = key.indexOf('/');
    const ns = key.slice(0, slash);
    return serviceKey(orchServiceHostname(key.slice(slash + 1), ns, this.opts.domain ?? DEFAULT_DOMAIN), ns);
  }

  private recompute(keys: ReadonlySet<string>): void {
    const changes = new Map<string, ServiceEntryState | undefined>();
    for (const k of keys) changes.set(this.snapshotKey(k), this.convert(k));
    const next = this.snapshot.withChanges(changes);
    const ev = diffSnapshots(this.id, this.snapshot, next, changes.keys());
    this.snapshot = next;
    this.recordPending();
    if (ev) this.notifier.emit(ev);
  }

  /** pilot_k8s_endpoints_pending_pod / endpoint_no_pod now; pilot_k8s_endpoints_with_no_pods counts each new one. */
  private recordPending(): void {
    const now = new Set<string>();
    const ips = new Set<string>();
    for (const list of this.missing.values()) {
      for (const m of list) {
        const k = `${m.slice}|${m.ip}`;
        now.add(k);
        ips.add(m.ip);
        if (!this.pendingSeen.has(k)) endpointsWithNoPods.inc();
      }
    }
    this.pendingSeen.clear();
    for (const k of now) this.pendingSeen.add(k);
    endpointsPendingPod.set(ips.size);
    endpointNoPod.set(now.size);
  }

  services(): readonly Service[] {
    return this.snapshot.services;
  }

  endpoints(hostname: string, namespace?: string): readonly Endpoint[] {
    return this.snapshot.endpoints(hostname, namespace);
  }

  subscribe(handler: RegistryHandler): () => void {
    return this.notifier.subscribe(handler);
  }

  hasSynced(): boolean {
    return this.opts.synced ? this.opts.synced() : this.store.hasSynced();
  }

  close(): void {
    this.unsubscribe();
  }
}
