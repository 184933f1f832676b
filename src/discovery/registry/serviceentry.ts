// The ServiceEntry registry (Istio pilot/pkg/serviceregistry/serviceentry): services from
// ServiceEntry hosts × ports, endpoints from inline `endpoints`, from WorkloadEntries (and Pods)
// selected by `workloadSelector`, and DNS hosts themselves for DNS resolution without endpoints.
import type { ConfigStore } from '../../config/store';
import type { Config, Kind, ServiceEntrySpec, WorkloadGroupSpec } from '../../config/types';
import { isWildcard } from '../host';
import { isEmptySelector, selectorMatches } from '../labels';
import type { Endpoint, Resolution, Service, ServicePort } from '../model';
import { parseProtocol } from './protocol';
import { Snapshot, StoreBackedRegistry, type ServiceEntryState } from './snapshot';
import { DEFAULT_CLUSTER_ID, type RegistryOptions } from './types';
import { entryHealthy, groupOf, spiffeIdentity, workloadFromEntry, workloadFromPod, type Workload } from './workload';

export const SERVICE_ENTRY_REGISTRY = 'External';

const WATCHED: ReadonlySet<Kind> = new Set<Kind>(['ServiceEntry', 'WorkloadEntry', 'WorkloadGroup', 'Pod']);

export function seResolution(r: ServiceEntrySpec['resolution']): Resolution {
  switch (r) {
    case 'STATIC':
      return 'ClientSide';
    case 'DNS':
      return 'DNS';
    case 'DNS_ROUND_ROBIN':
      return 'DNSRoundRobin';
    default:
      return 'Passthrough';
  }
}

/** A CIDR written for a single address is that address (Istio strips /32 and /128). */
function normalizeAddress(a: string): string {
  if (a.endsWith('/32') || a.endsWith('/128')) return a.slice(0, a.lastIndexOf('/'));
  return a;
}

export function creationTime(c: Config): number {
  const t = c.meta.creationTimestamp ? Date.parse(c.meta.creationTimestamp) : NaN;
  return Number.isNaN(t) ? 0 : t;
}

export interface ServiceEntryInputs {
  serviceEntries: readonly Config<'ServiceEntry'>[];
  workloadEntries: readonly Config<'WorkloadEntry'>[];
  workloadGroups: readonly Config<'WorkloadGroup'>[];
  pods: readonly Config<'Pod'>[];
}

/** Pure conversion: ServiceEntries and the workloads they select → services with endpoints. */
export function convertServiceEntries(inputs: ServiceEntryInputs, opts: RegistryOptions = {}): ServiceEntryState[] {
  const td = opts.trustDomain ?? 'cluster.local';
  const clusterId = opts.clusterId ?? DEFAULT_CLUSTER_ID;
  const groups = new Map<string, WorkloadGroupSpec>();
  for (const g of inputs.workloadGroups) groups.set(`${g.meta.namespace}/${g.meta.name}`, g.spec);

  const entryWorkloadsByNs = new Map<string, Workload[]>();
  for (const we of inputs.workloadEntries) {
    const w = workloadFromEntry(we.spec, we.meta.name, we.meta.namespace, td, groupOf(we, groups), entryHealthy(we));
    if (!w) continue;
    const list = entryWorkloadsByNs.get(w.namespace) ?? [];
    list.push(w);
    entryWorkloadsByNs.set(w.namespace, list);
  }
  const podWorkloadsByNs = new Map<string, Workload[]>();
  for (const pod of inputs.pods) {
    const w = workloadFromPod(pod, td);
    if (!w) continue;
    const list = podWorkloadsByNs.get(w.namespace) ?? [];
    list.push(w);
    podWorkloadsByNs.set(w.namespace, list);
  }

  const out: ServiceEntryState[] = [];
  for (const se of inputs.serviceEntries) {
    const spec = se.spec;
    const ns = se.meta.namespace;
    const resolution = seResolution(spec.resolution);
    const ports: ServicePort[] = (spec.ports ?? []).map((p) => ({ name: p.name, port: p.number, protocol: parseProtocol(p.protocol) }));
    // Istio's ServiceEntry selector field is `labels`; `matchLabels` is accepted for YAML written the other way.
    const selector = spec.workloadSelector?.labels ?? spec.workloadSelector?.matchLabels;

    let workloads: Workload[];
    if (!isEmptySelector(selector)) {
      workloads = [...(entryWorkloadsByNs.get(ns) ?? []), ...(podWorkloadsByNs.get(ns) ?? [])].filter((w) => selectorMatches(selector, w.labels));
    } else {
      workloads = (spec.endpoints ?? []).flatMap((ep, i) => {
        const w = workloadFromEntry(ep, `${se.meta.name}-${i}`, ns, td);
        return w ? [w] : [];
      });
    }

    const sans = new Set(spec.subjectAltNames ?? []);
    for (const w of workloads) if (w.serviceAccount) sans.add(w.serviceAccount);

    for (const host of spec.hosts) {
      const service: Service = {
        hostname: host,
        namespace: ns,
        addresses: (spec.addresses ?? []).map(normalizeAddress),
        ports,
        resolution,
        meshExternal: spec.location !== 'MESH_INTERNAL',
        exportTo: spec.exportTo && spec.exportTo.length > 0 ? [...spec.exportTo] : ['*'],
        labels: se.meta.labels,
        registry: 'External',
        clusterId,
        creationTime: creationTime(se),
        serviceAccounts: [...sans].sort(),
        ...(isEmptySelector(selector) ? {} : { selector }),
      };
      const endpoints: Endpoint[] = [];
      const dnsWithoutEndpoints = workloads.length === 0 && isEmptySelector(selector) && (resolution === 'DNS' || resolution === 'DNSRoundRobin');
      if (dnsWithoutEndpoints) {
        // Istio resolves the host itself when a DNS ServiceEntry lists no endpoints.
        if (!isWildcard(host)) {
          for (const p of spec.ports ?? []) {
            endpoints.push({
              address: host,
              port: p.targetPort ?? p.number,
              servicePortName: p.name,
              hostname: host,
              namespace: ns,
              labels: {},
              healthStatus: 'Healthy',
            });
          }
        }
      } else {
        for (const p of spec.ports ?? []) {
          for (const w of workloads) endpoints.push(toEndpoint(w, host, p.name, w.ports[p.name] ?? p.targetPort ?? p.number));
        }
      }
      out.push({ service, endpoints });
    }
  }
  return out;
}

function toEndpoint(w: Workload, hostname: string, portName: string, port: number): Endpoint {
  return {
    address: w.address,
    port,
    servicePortName: portName,
    hostname,
    namespace: w.namespace,
    labels: w.labels,
    ...(w.serviceAccount ? { serviceAccount: w.serviceAccount } : {}),
    ...(w.network ? { network: w.network } : {}),
    ...(w.locality ? { locality: w.locality } : {}),
    ...(w.weight ? { weight: w.weight } : {}),
    healthStatus: w.health,
    workloadName: w.name,
  };
}

export { spiffeIdentity };

/** The live ServiceEntry registry over a ConfigStore: rebuilt and diffed after each batch of changes. */
export class ServiceEntryRegistry extends StoreBackedRegistry {
  readonly id = SERVICE_ENTRY_REGISTRY;

  constructor(
    store: ConfigStore,
    private readonly opts: RegistryOptions = {},
  ) {
    super(store, WATCHED);
    this.start();
  }

  protected build(): Snapshot {
    return new Snapshot(
      convertServiceEntries(
        {
          serviceEntries: this.store.list('ServiceEntry'),
          workloadEntries: this.store.list('WorkloadEntry'),
          workloadGroups: this.store.list('WorkloadGroup'),
          pods: this.store.list('Pod'),
        },
        this.opts,
      ),
    );
  }
}
