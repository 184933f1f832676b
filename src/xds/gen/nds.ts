// The name table (NDS) a DNS-capturing agent answers from: Istio 1.26's BuildNameTable (pkg/dns/server).
// Every service the proxy sees with its addresses; headless services with their ready endpoints and their
// pods' `<hostname>.<subdomain>` names; orchestrator services carry their short name and namespace so the
// agent can answer `name`, `name.ns` and `name.ns.svc` itself.
import { create } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import type { Endpoint, Proxy, Service } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import { isIPv4, isIPv6, isIp } from '../../discovery/host';
import { NameTable_NameInfoSchema, NameTableSchema, type NameTable } from '../../gen/istio/networking/nds/v1/nds_pb';
import type { Generator } from '../types';
import { optionsKey } from './reuse';
import { ORCHESTRATOR_REGISTRY } from '../../discovery/registry/orchestrator';
import { autoAddressesFor } from '../../discovery/auto-allocate';

/** Registry names on the wire: Istio's `Kubernetes` is mesh's `Orchestrator` (the cluster id rename); `External` as Istio's. */
export const EXTERNAL_REGISTRY = 'External';
/** Multi-cluster services hosts (`*.svc.clusterset.local`) get no short names: they would clash with cluster.local's. */
const CLUSTERSET_SUFFIX = '.clusterset.local';

export interface NameTableOptions {
  /** ENABLE_MULTICLUSTER_HEADLESS: headless names resolve to same-network endpoints of every cluster. */
  multiclusterHeadless: boolean;
  /** MESH_DUAL_STACK: a dual-stack proxy gets every address of a service, not only its first family's. */
  dualStack: boolean;
}

export const DEFAULT_NAME_TABLE_OPTIONS: NameTableOptions = { multiclusterHeadless: true, dualStack: false };

export interface NameInfo {
  ips: string[];
  registry: string;
  shortname?: string;
  namespace?: string;
}

/** Istio's IsSameOrEmpty: a proxy or endpoint that names no network (cluster) matches any. */
function sameOrEmpty(a: string | undefined, b: string | undefined): boolean {
  return !a || !b || a === b;
}

function registryName(s: Service): string {
  return s.registry === 'Orchestrator' ? ORCHESTRATOR_REGISTRY : EXTERNAL_REGISTRY;
}

/**
 * The service's addresses for this proxy (Istio's getAllAddressesForProxy without per-cluster VIPs): filtered to the proxy's IP family unless dual stack is on and
 * the proxy is dual stack; a dual-stack proxy without the feature gets the first address's family; with
 * nothing of the proxy's family, the first address.
 */
export function addressesForProxy(s: Service, proxy: Proxy, dualStack: boolean, allocateForAll = false): string[] {
  const v4 = proxy.ipAddresses.some(isIPv4);
  const v6 = proxy.ipAddresses.some(isIPv6);
  // a ServiceEntry without addresses: its auto-allocated ones, for proxies that use them (Istio getAllAddressesForProxy)
  const auto = s.addresses.length === 0 ? autoAddressesFor(s, proxy, allocateForAll) : [];
  const addrs = auto.length > 0 ? auto : s.addresses;
  if (addrs.length === 0 || (dualStack && v4 && v6)) return [...addrs];
  const family = (a: string) => (isIPv4(a.split('/')[0]!) ? 4 : isIPv6(a.split('/')[0]!) ? 6 : 0);
  const four = addrs.filter((a) => v4 && family(a) === 4);
  const six = addrs.filter((a) => v6 && family(a) === 6);
  let picked: string[];
  if (v4 && v6) picked = family(addrs[0]!) === 4 ? four : family(addrs[0]!) === 6 ? six : [];
  else picked = four.length > 0 ? four : six;
  // nothing of the proxy's family: the service's default (first) address, as Istio falls back to it
  return picked.length > 0 ? picked : [addrs[0]!];
}

/** BuildNameTable: hostname → NameInfo for one proxy. */
export function buildNameTable(proxy: Proxy, push: PushContext, opts: NameTableOptions = DEFAULT_NAME_TABLE_OPTIONS): Map<string, NameInfo> {
  const out = new Map<string, NameInfo>();
  const inNetwork = (e: Endpoint) => sameOrEmpty(proxy.metadata.network, e.network);
  const inCluster = (e: Endpoint) => sameOrEmpty(proxy.metadata.clusterId, e.clusterId);
  for (const svc of push.servicesForProxy(proxy)) {
    const host = svc.hostname;
    const registry = registryName(svc);
    let ips: string[] = [];
    const addresses = addressesForProxy(svc, proxy, opts.dualStack, push.options.ipAutoallocate);
    if (addresses.length > 0) {
      // CIDR ranges are no answer to a DNS question
      ips = addresses.filter(isIp);
    } else if (svc.resolution === 'Passthrough' && svc.ports.length > 0) {
      for (const e of push.endpoints(svc, svc.ports[0]!)) {
        if (!isIp(e.address)) continue;
        if (!svc.publishNotReadyAddresses && e.healthStatus !== 'Healthy') continue;
        const sameNetwork = inNetwork(e);
        const sameCluster = inCluster(e);
        if (e.podSubdomain && sameNetwork) {
          const dot = host.indexOf('.');
          if (dot > 0) {
            const shortname = `${e.podHostname}.${e.podSubdomain}`;
            const podHost = `${shortname}.${host.slice(dot + 1)}`;
            // one pod name in two clusters: the proxy's own cluster wins
            if (!out.has(podHost) || sameCluster) out.set(podHost, { ips: [e.address], registry, shortname, namespace: svc.namespace });
          }
        }
        // Headless answers are the cluster-local (or, with multicluster headless, network-local) endpoints, as
        // orchestrator DNS gives: passthrough traffic cannot cross networks through a gateway.
        if ((!opts.multiclusterHeadless && !sameCluster) || !sameNetwork) continue;
        ips.push(e.address);
      }
    }
    if (ips.length === 0) continue;

    const prev = out.get(host);
    const shortNames = svc.registry === 'Orchestrator' && !host.endsWith(CLUSTERSET_SUFFIX);
    if (!prev) {
      out.set(host, { ips, registry, ...(shortNames ? { shortname: svc.name ?? '', namespace: svc.namespace } : {}) });
    } else if (prev.registry !== ORCHESTRATOR_REGISTRY) {
      if (svc.registry === 'Orchestrator') {
        // a ServiceEntry decorating an orchestrator service: the service's addresses win
        prev.ips = ips;
        prev.registry = ORCHESTRATOR_REGISTRY;
        if (!host.endsWith(CLUSTERSET_SUFFIX)) {
          prev.shortname = svc.name ?? '';
          prev.namespace = svc.namespace;
        }
      } else {
        // several ServiceEntries for one host: every address
        prev.ips = [...prev.ips, ...ips];
      }
    }
  }
  return out;
}

export function nameTableMessage(table: ReadonlyMap<string, NameInfo>): NameTable {
  const t = create(NameTableSchema);
  for (const [host, ni] of table)
    t.table[host] = create(NameTable_NameInfoSchema, {
      ips: ni.ips,
      registry: ni.registry,
      shortname: ni.shortname ?? '',
      namespace: ni.namespace ?? '',
    });
  return t;
}

/** NDS: one unnamed NameTable resource, as Istio's NdsGenerator sends it. */
export function ndsGenerator(opts: NameTableOptions = DEFAULT_NAME_TABLE_OPTIONS): Generator<PushContext> {
  return {
    generate(proxy, _watched, req) {
      const push = req.push;
      // Besides the shared key, the table depends on the proxy's network, cluster and IP families (headless answers, addresses).
      const families = proxy.ipAddresses.map((ip) => (ip.includes(':') ? 6 : 4)).join('');
      const key = `${push.sharedKey(proxy)}|${proxy.metadata.network ?? ''}|${proxy.metadata.clusterId ?? ''}|${families}|${optionsKey(opts)}`;
      return {
        resources: push.shared('nds', key, () => [
          { name: '', resource: anyPack(NameTableSchema, nameTableMessage(buildNameTable(proxy, push, opts))) },
        ]),
      };
    },
  };
}
