// The orchestrator registry (Istio serviceregistry/kube/controller): Services become
// `<name>.<ns>.svc.<domain>` with ports typed from appProtocol or the port-name prefix; EndpointSlices
// (label kubernetes.io/service-name) give endpoints whose labels and identity come from the Pod they
// reference; Services with selectors also select WorkloadEntries (PILOT_ENABLE_ORCH_SELECT_WORKLOAD_ENTRIES).
import type { ConfigStore } from '../../config/store';
import type { Config, Kind, OrchServicePort, WorkloadGroupSpec } from '../../config/types';
import { isIp } from '../host';
import { isEmptySelector, selectorMatches } from '../labels';
import type { Endpoint, HealthStatus, Service, ServicePort } from '../model';
import { orchPortProtocol } from './protocol';
import { creationTime } from './serviceentry';
import { Snapshot, StoreBackedRegistry, type ServiceEntryState } from './snapshot';
import { DEFAULT_CLUSTER_ID, DEFAULT_DOMAIN, type RegistryOptions } from './types';
import { groupOf, normalizeLocality, spiffeIdentity, workloadFromEntry } from './workload';

export const ORCHESTRATOR_REGISTRY = 'Orchestrator';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** Annotations that set a Service's exportTo, Istio's and ours. */
export const EXPORT_TO_ANNOTATIONS = ['networking.istio.io/exportTo', 'networking.mesh.io/exportTo'] as const;

const WATCHED: ReadonlySet<Kind> = new Set<Kind>(['Service', 'EndpointSlice', 'Pod', 'Namespace', 'WorkloadEntry', 'WorkloadGroup']);

export interface OrchestratorOptions extends RegistryOptions {
  /** Locality (`region/zone/subzone`) of a node, from its topology labels, when the caller watches Nodes. */
  nodeLocality?: (nodeName: string) => string | undefined;
  /** Whether Services with selectors also select WorkloadEntries (default true, as Istio). */
  selectWorkloadEntries?: boolean;
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

/** Locality from Node topology labels (Istio model.GetLocalityLabel / node labels). */
export function localityFromNodeLabels(labels: Readonly<Record<string, string>>): string | undefined {
  const region = labels['topology.kubernetes.io/region'] ?? labels['failure-domain.beta.kubernetes.io/region'] ?? '';
  const zone = labels['topology.kubernetes.io/zone'] ?? labels['failure-domain.beta.kubernetes.io/zone'] ?? '';
  const subzone = labels['topology.istio.io/subzone'] ?? '';
  if (!region && !zone && !subzone) return undefined;
  return `${region}/${zone}/${subzone}`;
}

function exportToOf(svc: Config<'Service'>): string[] {
  for (const a of EXPORT_TO_ANNOTATIONS) {
    const v = svc.meta.annotations[a];
    if (v) return v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  }
  return ['*'];
}

function servicePorts(ports: readonly OrchServicePort[]): ServicePort[] {
  return ports.map((p) => ({ name: p.name ?? '', port: p.port, protocol: orchPortProtocol(p.port, p.name, p.protocol, p.appProtocol) }));
}

/** EndpointSlice conditions → health, as Istio's endpointHealthStatus. */
export function sliceHealth(c: { ready?: boolean; serving?: boolean; terminating?: boolean } | undefined): HealthStatus {
  if (c === undefined || c.ready === undefined || c.ready) return 'Healthy';
  if (c.terminating) return 'Terminating';
  return 'UnHealthy';
}

/** Pure conversion: orchestrator objects → services with endpoints. */
export function convertOrchestrator(inputs: OrchestratorInputs, opts: OrchestratorOptions = {}): ServiceEntryState[] {
  const domain = opts.domain ?? DEFAULT_DOMAIN;
  const td = opts.trustDomain ?? 'cluster.local';
  const clusterId = opts.clusterId ?? DEFAULT_CLUSTER_ID;
  const pods = new Map<string, Config<'Pod'>>();
  const podsByIp = new Map<string, Config<'Pod'>>();
  for (const p of inputs.pods) {
    pods.set(`${p.meta.namespace}/${p.meta.name}`, p);
    const ip = p.status?.podIP;
    if (ip && !p.spec.hostNetwork) podsByIp.set(ip, p);
  }
  const slicesBySvc = new Map<string, Config<'EndpointSlice'>[]>();
  for (const s of inputs.endpointSlices) {
    const svcName = s.meta.labels[SERVICE_NAME_LABEL];
    if (!svcName) continue;
    const k = `${s.meta.namespace}/${svcName}`;
    const list = slicesBySvc.get(k) ?? [];
    list.push(s);
    slicesBySvc.set(k, list);
  }
  const groups = new Map<string, WorkloadGroupSpec>();
  for (const g of inputs.workloadGroups ?? []) groups.set(`${g.meta.namespace}/${g.meta.name}`, g.spec);

  const out: ServiceEntryState[] = [];
  for (const svc of inputs.services) {
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
    for (const slice of slicesBySvc.get(`${ns}/${svc.meta.name}`) ?? []) {
      if (slice.spec.addressType === 'FQDN') continue;
      const slicePorts = slice.spec.ports && slice.spec.ports.length > 0 ? slice.spec.ports : [];
      for (const ep of slice.spec.endpoints ?? []) {
        const ref = ep.targetRef;
        const pod =
          ref && (ref.kind ?? 'Pod') === 'Pod' && ref.name ? pods.get(`${ref.namespace ?? ns}/${ref.name}`) : ep.addresses[0] ? podsByIp.get(ep.addresses[0]) : undefined;
        const sa = pod ? spiffeIdentity(td, pod.meta.namespace, pod.spec.serviceAccountName || 'default') : undefined;
        if (sa) sas.add(sa);
        const nodeName = ep.nodeName ?? pod?.spec.nodeName;
        const locality =
          normalizeLocality(pod?.meta.labels['istio-locality']) ?? (nodeName ? opts.nodeLocality?.(nodeName) : undefined);
        for (const addr of ep.addresses) {
          if (!isIp(addr)) continue;
          for (const sp of slicePorts) {
            if (sp.port === undefined) continue;
            endpoints.push({
              address: addr,
              port: sp.port,
              servicePortName: sp.name ?? '',
              hostname,
              namespace: ns,
              labels: pod?.meta.labels ?? {},
              ...(sa ? { serviceAccount: sa } : {}),
              ...(locality ? { locality } : {}),
              healthStatus: sliceHealth(ep.conditions),
              ...(pod ? { workloadName: pod.meta.name } : ref?.name ? { workloadName: ref.name } : {}),
            });
          }
        }
      }
    }
    if (selector && (opts.selectWorkloadEntries ?? true)) {
      for (const we of inputs.workloadEntries ?? []) {
        if (we.meta.namespace !== ns) continue;
        const w = workloadFromEntry(we.spec, we.meta.name, ns, td, groupOf(we, groups));
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
    };
    out.push({ service, endpoints });
  }
  return out;
}

/** The live orchestrator registry over a ConfigStore holding Services, EndpointSlices, Pods and Namespaces. */
export class OrchestratorRegistry extends StoreBackedRegistry {
  readonly id = ORCHESTRATOR_REGISTRY;
  private namespaceLabelIndex = new Map<string, Readonly<Record<string, string>>>();

  constructor(
    store: ConfigStore,
    private readonly opts: OrchestratorOptions = {},
  ) {
    super(store, WATCHED);
    this.start();
  }

  protected build(): Snapshot {
    this.namespaceLabelIndex = new Map(this.store.list('Namespace').map((n) => [n.meta.name, n.meta.labels]));
    return new Snapshot(
      convertOrchestrator(
        {
          services: this.store.list('Service'),
          endpointSlices: this.store.list('EndpointSlice'),
          pods: this.store.list('Pod'),
          workloadEntries: this.store.list('WorkloadEntry'),
          workloadGroups: this.store.list('WorkloadGroup'),
        },
        this.opts,
      ),
    );
  }

  /** Labels of a Namespace object, when the store has it. */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.namespaceLabelIndex.get(name);
  }
}
