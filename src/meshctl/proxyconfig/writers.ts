// istioctl's proxy-config tables and dumps (istioctl/pkg/writer/envoy/configdump, …/clusters,
// …/compare/sds), as pure functions from a config dump to text: the same columns, order, sorting (Go's
// unstable sort included) and tab layout, so output reads, diffs and greps like istioctl's.
import { X509Certificate } from 'node:crypto';
import type { JsonValue } from '@bufbuild/protobuf';
import { anyUnpack, AnySchema, type Any } from '@bufbuild/protobuf/wkt';
import { SecretsConfigDumpSchema, BootstrapConfigDumpSchema } from '../../gen/envoy/admin/v3/config_dump_pb';
import { EcdsConfigDumpSchema } from '../../gen/envoy/admin/v3/config_dump_shared_pb';
import { ClustersSchema, ClusterStatusSchema, type ClusterStatus, type HostStatus } from '../../gen/envoy/admin/v3/clusters_pb';
import { ClusterSchema, Cluster_DiscoveryType, type Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import type { Address } from '../../gen/envoy/config/core/v3/address_pb';
import type { Locality, Metadata } from '../../gen/envoy/config/core/v3/base_pb';
import { TypedExtensionConfigSchema, type TypedExtensionConfig } from '../../gen/envoy/config/core/v3/extension_pb';
import { HealthStatus } from '../../gen/envoy/config/core/v3/health_check_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import type { LbEndpoint } from '../../gen/envoy/config/endpoint/v3/endpoint_components_pb';
import { ListenerSchema, type Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import type { Filter, FilterChain, FilterChainMatch } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import type { Route, RouteMatch, VirtualHost } from '../../gen/envoy/config/route/v3/route_components_pb';
import { HttpConnectionManagerSchema } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { TcpProxySchema } from '../../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { SecretSchema, type Secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { goSortSlice } from '../../lib/gosort';
import { jsonToGoYaml } from '../../lib/goyaml';
import { TabWriter } from '../../lib/tabwriter';
import { ConfigDump, ConfigDumpError, decodeMessage, indentJson, jsonpbIndent, messageJson, originalTypeUrl, unpackAs } from './dump';

export type OutputFormat = 'json' | 'yaml';

/** json.MarshalIndent then, for yaml, sigs.k8s.io/yaml.JSONToYAML; println adds the newline. */
export function formatDump(v: JsonValue, format: OutputFormat): string {
  const json = indentJson(v);
  return (format === 'yaml' ? jsonToGoYaml(JSON.parse(json)) : json) + '\n';
}

/** protomarshal.ToJSONWithIndent's text then, for yaml, JSONToYAML of it; println adds the newline. */
function jsonpbOutput(json: string, format: OutputFormat): string {
  return (format === 'yaml' ? jsonToGoYaml(JSON.parse(json)) : json) + '\n';
}

// ---- cluster names ----

interface SubsetKey {
  direction: string;
  subset: string;
  host: string;
  port: number;
}

/** Istio's model.ParseSubsetKey for `direction|port|subset|host` names; other names sort by themselves. */
export function parseSubsetKey(name: string): SubsetKey {
  const parts = name.split('|');
  if (parts.length <= 3) return { direction: '', subset: '', host: name, port: 0 };
  const port = /^[-+]?\d+$/.test(parts[1]!) ? Number(parts[1]) : 0;
  return { direction: parts[0]!, subset: parts[2]!, host: parts[3]!, port };
}

function subsetKeyLess(a: string, b: string): boolean {
  const i = parseSubsetKey(a);
  const j = parseSubsetKey(b);
  if (i.host === j.host) {
    if (i.subset === j.subset) {
      if (i.port === j.port) return i.direction < j.direction;
      return i.port < j.port;
    }
    return i.subset < j.subset;
  }
  return i.host < j.host;
}

/** `<name>.<namespace>` of the mesh config that produced a resource (filter_metadata.istio.config). */
export function describeManagement(metadata: Metadata | undefined): string {
  const istio = metadata?.filterMetadata?.['istio'];
  if (!istio) return '';
  const config = istio['config'];
  if (config === undefined) return '';
  const path = typeof config === 'string' ? config : '';
  if (path.startsWith('/apis/networking.istio.io/') || path.startsWith('/apis/networking.mesh.io/')) {
    const pieces = path.split('/');
    if (pieces.length !== 8) return '';
    return `${pieces[7]}.${pieces[5]}`;
  }
  return '<unknown>';
}

// ---- clusters ----

export interface ClusterFilter {
  fqdn: string;
  port: number;
  subset: string;
  direction: string;
}

function clusterMatches(f: ClusterFilter, name: string): boolean {
  if (!f.fqdn && !f.port && !f.subset && !f.direction) return true;
  if (f.fqdn && !name.includes(f.fqdn)) return false;
  if (f.direction && !name.includes(f.direction)) return false;
  if (f.subset && !name.includes(f.subset)) return false;
  if (f.port && !name.includes(`|${f.port}|`)) return false;
  return true;
}

function sortedClusters(dump: ConfigDump): Cluster[] {
  const clusters = dump.clusters();
  if (!clusters.length) throw new ConfigDumpError('no clusters found');
  return goSortSlice(clusters, (a, b) => subsetKeyLess(a.name, b.name));
}

function clusterType(c: Cluster): string {
  const t = c.clusterDiscoveryType.case === 'type' ? c.clusterDiscoveryType.value : Cluster_DiscoveryType.STATIC;
  return Cluster_DiscoveryType[t] ?? String(t);
}

export function clusterSummary(dump: ConfigDump, filter: ClusterFilter, withType = false): string {
  const clusters = sortedClusters(dump);
  const w = new TabWriter(0, 5);
  w.row(...(withType ? ['NAME'] : []), 'SERVICE FQDN', 'PORT', 'SUBSET', 'DIRECTION', 'TYPE', 'DESTINATION RULE');
  for (const c of clusters) {
    if (!clusterMatches(filter, c.name)) continue;
    const mgmt = describeManagement(c.metadata);
    if (c.name.split('|').length > 3) {
      const k = parseSubsetKey(c.name);
      const subset = k.subset || '-';
      w.row(...(withType ? [`cluster/${c.name}`] : []), k.host, k.port, subset, k.direction, clusterType(c), mgmt);
    } else if (withType && c.name.length > 0) {
      w.row(`cluster/${c.name}`, `cluster/${c.name}`, '-', '-', '-', clusterType(c), mgmt);
    } else {
      w.row(c.name, '-', '-', '-', clusterType(c), mgmt);
    }
  }
  return w.flush();
}

export function clusterDumpOutput(dump: ConfigDump, filter: ClusterFilter, format: OutputFormat): string {
  const clusters = sortedClusters(dump).filter((c) => clusterMatches(filter, c.name));
  return formatDump(
    clusters.map((c) => messageJson(ClusterSchema, c)),
    format,
  );
}

// ---- listeners ----

const HCM = 'envoy.filters.network.http_connection_manager';
const TCP_PROXY = 'envoy.filters.network.tcp_proxy';
const BLACKHOLE = 'BlackHoleCluster';
const PASSTHROUGH = 'PassthroughCluster';

export interface ListenerFilter {
  address: string;
  port: number;
  type: string;
  verbose: boolean;
}

function filterChains(l: Listener): FilterChain[] {
  return l.defaultFilterChain ? [...l.filterChains, l.defaultFilterChain] : [...l.filterChains];
}

function isBlackhole(f: Filter): boolean {
  const tc = f.configType.case === 'typedConfig' ? f.configType.value : undefined;
  return !!tc && Buffer.from(tc.value).includes(BLACKHOLE);
}

export function listenerType(l: Listener): string {
  let nHTTP = 0;
  let nTCP = 0;
  for (const fc of filterChains(l)) {
    for (const f of fc.filters) {
      if (f.name === HCM) nHTTP++;
      else if (f.name === TCP_PROXY && !isBlackhole(f)) nTCP++;
    }
  }
  if (nHTTP > 0) return nTCP === 0 ? 'HTTP' : 'HTTP+TCP';
  if (nTCP > 0) return 'TCP';
  return 'UNKNOWN';
}

function socketAddress(a: Address | undefined): { address: string; port: number } | undefined {
  if (a?.address.case !== 'socketAddress') return undefined;
  const s = a.address.value;
  return { address: s.address, port: s.portSpecifier.case === 'portValue' ? s.portSpecifier.value : 0 };
}

function listenerAddress(l: Listener): string {
  const sa = socketAddress(l.address);
  if (sa) return sa.address;
  if (l.address?.address.case === 'pipe') return l.address.address.value.path;
  return '';
}

function listenerAdditionalAddresses(l: Listener): string[] {
  return l.additionalAddresses.map((a) => socketAddress(a.address)?.address ?? '');
}

function listenerPort(l: Listener): number {
  return socketAddress(l.address)?.port ?? 0;
}

function listenerMatches(f: ListenerFilter, l: Listener): boolean {
  if (!f.address && !f.port && !f.type) return true;
  if (f.address) {
    const all = [...listenerAdditionalAddresses(l), listenerAddress(l)];
    if (!all.some((a) => a.toLowerCase() === f.address.toLowerCase())) return false;
  }
  if (f.port && listenerPort(l) !== f.port) return false;
  if (f.type && listenerType(l).toLowerCase() !== f.type.toLowerCase()) return false;
  return true;
}

const PROTOCOL_DESCRIPTIONS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['App: HTTP TLS', ['http/1.0', 'http/1.1', 'h2c', 'istio-http/1.0', 'istio-http/1.1', 'istio-h2']],
  ['App: Mesh HTTP Plain', ['istio', 'istio-http/1.0', 'istio-http/1.1', 'istio-h2']],
  ['App: TCP TLS', ['istio-peer-exchange', 'istio']],
  ['App: HTTP', ['http/1.0', 'http/1.1', 'h2c']],
];

export function describeFilterChainMatch(m: FilterChainMatch | undefined): string {
  const descrs: string[] = [];
  if (m?.serverNames.length) descrs.push(`SNI: ${m.serverNames.join(',')}`);
  if (m?.transportProtocol) descrs.push(`Trans: ${m.transportProtocol}`);
  if (m?.applicationProtocols.length) {
    const found = PROTOCOL_DESCRIPTIONS.find(
      ([, p]) => p.length === m.applicationProtocols.length && p.every((x, i) => x === m.applicationProtocols[i]),
    );
    descrs.push(found ? found[0] : `App: ${m.applicationProtocols.join(',')}`);
  }
  const port = m?.destinationPort !== undefined ? `:${m.destinationPort}` : '';
  if (m?.prefixRanges.length) {
    descrs.push(`Addr: ${m.prefixRanges.map((p) => `${p.addressPrefix}/${p.prefixLen ?? 0}`).join(',')}${port}`);
  } else if (port) descrs.push(`Addr: *${port}`);
  return descrs.length ? descrs.join('; ') : 'ALL';
}

export function describeMatch(m: RouteMatch | undefined): string {
  const conds: string[] = [];
  const p = m?.pathSpecifier;
  if (p?.case === 'prefix' && p.value) conds.push(`${p.value}*`);
  if (p?.case === 'pathSeparatedPrefix' && p.value) conds.push(`PathPrefix:${p.value}`);
  if (p?.case === 'path' && p.value) conds.push(p.value);
  if (p?.case === 'safeRegex' && p.value) conds.push(`regex ${p.value.regex}`);
  return conds.join(' ');
}

function clusterOfRoute(r: Route): string | undefined {
  if (r.action.case !== 'route') return undefined;
  const cs = r.action.value.clusterSpecifier;
  return cs.case === 'cluster' ? cs.value : undefined;
}

function matchAllCluster(rc: RouteConfiguration): string {
  if (rc.virtualHosts.length !== 1) return '';
  const vh = rc.virtualHosts[0]!;
  if (vh.domains.length !== 1 || vh.domains[0] !== '*') return '';
  if (vh.routes.length !== 1) return '';
  const r = vh.routes[0]!;
  if (!(r.match?.pathSpecifier.case === 'prefix' && r.match.pathSpecifier.value === '/')) return '';
  const c = clusterOfRoute(r);
  if (c === undefined) return '';
  return c.includes('Cluster') ? c : `Cluster: ${c}`;
}

function describeRouteConfig(rc: RouteConfiguration): string {
  const all = matchAllCluster(rc);
  if (all) return all;
  const vhosts = rc.virtualHosts.map((vh) => {
    const domains = vh.domains.length === 1 && vh.domains[0] === '*' ? '' : vh.domains.join('/');
    const routes = vh.routes.map((r) => describeMatch(r.match)).join(', ');
    return domains === '' ? routes : `${domains} ${routes}`;
  });
  return `Inline Route: ${vhosts.join('; ')}`;
}

function filterType(filters: readonly Filter[]): string {
  for (const f of filters) {
    const tc = f.configType.case === 'typedConfig' ? f.configType.value : undefined;
    if (f.name === HCM) {
      if (!tc) return 'HTTP';
      let hcm;
      try {
        hcm = unpackAs(tc, HttpConnectionManagerSchema) as ReturnType<typeof anyUnpack<typeof HttpConnectionManagerSchema>> & object;
      } catch (e) {
        return (e as Error).message;
      }
      if (hcm.routeSpecifier.case === 'routeConfig') return describeRouteConfig(hcm.routeSpecifier.value);
      if (hcm.routeSpecifier.case === 'rds' && hcm.routeSpecifier.value.routeConfigName) return `Route: ${hcm.routeSpecifier.value.routeConfigName}`;
      return 'HTTP';
    }
    if (f.name === TCP_PROXY && !isBlackhole(f)) {
      if (!tc) return 'Cluster: ';
      let tcp;
      try {
        tcp = unpackAs(tc, TcpProxySchema) as ReturnType<typeof anyUnpack<typeof TcpProxySchema>> & object;
      } catch (e) {
        return (e as Error).message;
      }
      const cluster = tcp.clusterSpecifier.case === 'cluster' ? tcp.clusterSpecifier.value : '';
      return cluster.includes('Cluster') ? cluster : `Cluster: ${cluster}`;
    }
  }
  return 'Non-HTTP/Non-TCP';
}

function listeners(dump: ConfigDump): Listener[] {
  let ls: Listener[];
  try {
    ls = dump.listeners();
  } catch (e) {
    if (e instanceof ConfigDumpError) throw new ConfigDumpError(`listener dump: ${e.message}`);
    throw e;
  }
  if (!ls.length) throw new ConfigDumpError('no listeners found');
  return ls;
}

export function listenerSummary(dump: ConfigDump, filter: ListenerFilter, withType = false): string {
  const verified = goSortSlice(
    listeners(dump).filter((l) => listenerMatches(filter, l)),
    (a, b) => {
      const ip = listenerPort(a);
      const jp = listenerPort(b);
      if (ip !== jp) return ip < jp;
      const ia = listenerAddress(a);
      const ja = listenerAddress(b);
      if (ia !== ja) return ia < ja;
      return listenerType(a) < listenerType(b);
    },
  );
  const w = new TabWriter(0, 1);
  const header = [...(withType ? ['NAME'] : []), 'ADDRESSES', 'PORT', ...(filter.verbose ? ['MATCH', 'DESTINATION'] : ['TYPE'])];
  w.row(...header);
  for (const l of verified) {
    const addresses = [listenerAddress(l), ...listenerAdditionalAddresses(l)].join(',');
    const port = listenerPort(l);
    const name = withType ? [`listener/${l.name}`] : [];
    if (filter.verbose) {
      const matches = goSortSlice(
        filterChains(l).map((fc) => ({ destination: filterType(fc.filters), match: describeFilterChainMatch(fc.filterChainMatch) })),
        (a, b) => a.destination > b.destination,
      );
      for (const m of matches) w.row(...name, addresses, port, m.match, m.destination);
    } else {
      w.row(...name, addresses, port, listenerType(l));
    }
  }
  return w.flush();
}

export function listenerDumpOutput(dump: ConfigDump, filter: ListenerFilter, format: OutputFormat): string {
  return formatDump(
    listeners(dump)
      .filter((l) => listenerMatches(filter, l))
      .map((l) => messageJson(ListenerSchema, l)),
    format,
  );
}

// ---- routes ----

export interface RouteFilter {
  name: string;
  verbose: boolean;
}

function sortedRoutes(dump: ConfigDump): RouteConfiguration[] {
  const routes = dump.routes();
  if (!routes.length) throw new ConfigDumpError('no routes found');
  const num = (s: string) => (/^[-+]?\d+$/.test(s) ? Number(s) : undefined);
  return goSortSlice(routes, (a, b) => {
    const i = num(a.name);
    const j = num(b.name);
    if (i === undefined || j === undefined) return false;
    return i < j;
  });
}

function unexpandDomains(domains: readonly string[]): string[] {
  const unique = new Set(domains);
  const drop = new Set<string>();
  for (const h of domains) {
    const full = h.endsWith('.svc.cluster.local') ? h.slice(0, -'.svc.cluster.local'.length) : h;
    if (unique.has(full) && full !== h) drop.add(h);
    const partial = h.endsWith('.svc') ? h.slice(0, -'.svc'.length) : h;
    if (unique.has(partial) && partial !== h) drop.add(h);
  }
  return domains.filter((h) => !drop.has(h));
}

export function describeRouteDomains(domains: readonly string[]): string {
  if (domains.length === 0) return '';
  if (domains.length === 1) return domains[0]!;
  const withoutPort = unexpandDomains(domains.filter((d) => !d.includes(':') || ((d.match(/:/g)?.length ?? 0) > 2 && d.endsWith(']'))));
  if (withoutPort.length > 2) return `${withoutPort.slice(0, 2).join(', ')} + ${withoutPort.length - 2} more...`;
  return withoutPort.join(', ');
}

function isPassthrough(r: Route): boolean {
  return clusterOfRoute(r) === PASSTHROUGH;
}

export function routeSummary(dump: ConfigDump, filter: RouteFilter, withType = false): string {
  const routes = sortedRoutes(dump);
  const w = new TabWriter(0, 5);
  if (filter.verbose) w.row('NAME', 'VHOST NAME', 'DOMAINS', 'MATCH', 'VIRTUAL SERVICE');
  else w.row('NAME', 'VIRTUAL HOSTS');
  for (const rc of routes) {
    if (filter.name && filter.name !== rc.name) continue;
    const name = withType ? `route/${rc.name}` : rc.name;
    if (!filter.verbose) {
      w.row(name, rc.virtualHosts.length);
      continue;
    }
    for (const vh of rc.virtualHosts as VirtualHost[]) {
      // A virtual host that came over VHDS is named `<route config>/<virtual host>` (Envoy removes them by
      // that name); the table shows the virtual host's own name, as for one that came with its route config.
      const vhName = vh.name.startsWith(`${rc.name}/`) ? vh.name.slice(rc.name.length + 1) : vh.name;
      for (const r of vh.routes) {
        if (!isPassthrough(r)) w.row(name, vhName, describeRouteDomains(vh.domains), describeMatch(r.match), describeManagement(r.metadata));
      }
      if (vh.routes.length === 0) w.row(name, vhName, describeRouteDomains(vh.domains), '/*', '404');
    }
  }
  return w.flush();
}

export function routeDumpOutput(dump: ConfigDump, filter: RouteFilter, format: OutputFormat): string {
  return formatDump(
    sortedRoutes(dump)
      .filter((rc) => !filter.name || rc.name === filter.name)
      .map((rc) => messageJson(RouteConfigurationSchema, rc)),
    format,
  );
}

// ---- endpoints (from the config dump's EDS section) ----

export interface EndpointFilter {
  address: string;
  port: number;
  cluster: string;
  status: string;
}

function endpointAddresses(ep: LbEndpoint): string[] {
  const e = ep.hostIdentifier.case === 'endpoint' ? ep.hostIdentifier.value : undefined;
  const addrs: Array<Address | undefined> = [e?.address, ...(e?.additionalAddresses ?? []).map((a) => a.address)];
  return addrs.map((a) => {
    const sa = socketAddress(a);
    if (sa) return `${sa.address}:${sa.port}`;
    if (a?.address.case === 'pipe') return a.address.value.path;
    if (a?.address.case === 'envoyInternalAddress') {
      const ia = a.address.value;
      if (ia.addressNameSpecifier.case === 'serverListenerName') return `envoy://${ia.addressNameSpecifier.value}/${ia.endpointId}`;
    }
    return 'unknown';
  });
}

function endpointPort(ep: LbEndpoint): number {
  const e = ep.hostIdentifier.case === 'endpoint' ? ep.hostIdentifier.value : undefined;
  return socketAddress(e?.address)?.port ?? 0;
}

function healthName(s: number): string {
  return HealthStatus[s] ?? String(s);
}

function lbEndpointMatches(f: EndpointFilter, ep: LbEndpoint, cluster: string): boolean {
  if (!f.address && !f.port && !f.cluster && !f.status) return true;
  if (f.address && !endpointAddresses(ep).some((a) => a.toLowerCase() === f.address.toLowerCase())) return false;
  if (f.port && endpointPort(ep) !== f.port) return false;
  if (f.cluster && cluster.toLowerCase() !== f.cluster.toLowerCase()) return false;
  if (f.status && healthName(ep.healthStatus).toLowerCase() !== f.status.toLowerCase()) return false;
  return true;
}

/** Istio's util.LocalityToString. */
export function localityToString(l: Locality | undefined): string {
  if (!l) return '';
  let s = l.region;
  if (!l.zone) return s;
  s += '/' + l.zone;
  if (!l.subZone) return s;
  return s + '/' + l.subZone;
}

function sortedEndpointConfigs(dump: ConfigDump, filter: EndpointFilter): ClusterLoadAssignment[] {
  const out: ClusterLoadAssignment[] = [];
  for (const cla of dump.endpointConfigs()) {
    let count = 0;
    for (const llb of cla.endpoints) {
      llb.lbEndpoints = llb.lbEndpoints.filter((ep) => lbEndpointMatches(filter, ep, cla.clusterName));
      count += llb.lbEndpoints.length;
    }
    if (count) out.push(cla);
  }
  return goSortSlice(out, (a, b) => subsetKeyLess(a.clusterName, b.clusterName));
}

export function edsSummary(dump: ConfigDump, filter: EndpointFilter, withType = false): string {
  const w = new TabWriter(0, 5);
  w.row('NAME', 'STATUS', 'LOCALITY', 'CLUSTER');
  for (const cla of sortedEndpointConfigs(dump, filter)) {
    for (const llb of cla.endpoints) {
      for (const ep of llb.lbEndpoints) {
        const addr = endpointAddresses(ep).join(',');
        w.row(withType ? `endpoint/${addr}` : addr, healthName(ep.healthStatus), localityToString(llb.locality), cla.clusterName);
      }
    }
  }
  return w.flush();
}

export function edsDumpOutput(dump: ConfigDump, filter: EndpointFilter, format: OutputFormat): string {
  return formatDump(
    sortedEndpointConfigs(dump, filter).map((c) => messageJson(ClusterLoadAssignmentSchema, c)),
    format,
  );
}

// ---- endpoints (from /clusters?format=json) ----

export function parseClusters(text: string): ClusterStatus[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigDumpError(`error unmarshalling config dump response from Envoy: ${(e as Error).message}`);
  }
  try {
    return decodeMessage(ClustersSchema, json).clusterStatuses;
  } catch (e) {
    throw new ConfigDumpError(`error unmarshalling config dump response from Envoy: ${(e as Error).message}`);
  }
}

function hostAddress(h: HostStatus): string {
  const a = h.address;
  const sa = socketAddress(a);
  if (sa) return sa.address;
  if (a?.address.case === 'pipe') return `unix://${a.address.value.path}`;
  if (a?.address.case === 'envoyInternalAddress') {
    const ia = a.address.value;
    if (ia.addressNameSpecifier.case === 'serverListenerName') return `envoy://${ia.addressNameSpecifier.value}/${ia.endpointId}`;
  }
  return 'unknown';
}

function hostMatches(f: EndpointFilter, h: HostStatus, cluster: string): boolean {
  if (!f.address && !f.port && !f.cluster && !f.status) return true;
  if (f.address && hostAddress(h).toLowerCase() !== f.address.toLowerCase()) return false;
  if (f.port && (socketAddress(h.address)?.port ?? 0) !== f.port) return false;
  if (f.cluster && cluster.toLowerCase() !== f.cluster.toLowerCase()) return false;
  if (f.status && healthName(h.healthStatus?.edsHealthStatus ?? 0).toLowerCase() !== f.status.toLowerCase()) return false;
  return true;
}

export function endpointSummary(statuses: readonly ClusterStatus[], filter: EndpointFilter): string {
  const rows: Array<{ address: string; port: number; cluster: string; status: number; failed: boolean }> = [];
  for (const c of statuses) {
    for (const h of c.hostStatuses) {
      if (!hostMatches(filter, h, c.name)) continue;
      rows.push({
        address: hostAddress(h),
        port: socketAddress(h.address)?.port ?? 0,
        cluster: c.name,
        status: h.healthStatus?.edsHealthStatus ?? 0,
        failed: h.healthStatus?.failedOutlierCheck ?? false,
      });
    }
  }
  goSortSlice(rows, (a, b) => {
    if (a.address === b.address) {
      if (a.port === b.port) return a.cluster < b.cluster;
      return a.port < b.port;
    }
    return a.address < b.address;
  });
  const w = new TabWriter(0, 5);
  w.row('ENDPOINT', 'STATUS', 'OUTLIER CHECK', 'CLUSTER');
  for (const r of rows) w.row(r.port !== 0 ? `${r.address}:${r.port}` : r.address, healthName(r.status), r.failed ? 'FAILED' : 'OK', r.cluster);
  return w.flush();
}

export function endpointDumpOutput(statuses: readonly ClusterStatus[], filter: EndpointFilter, format: OutputFormat): string {
  return formatDump(
    statuses.filter((c) => c.hostStatuses.some((h) => hostMatches(filter, h, c.name))).map((c) => messageJson(ClusterStatusSchema, c)),
    format,
  );
}

// ---- secrets ----

export interface SecretItem {
  name: string;
  state: string;
  trustDomain: string;
  valid: boolean;
  serialNumber: string;
  notAfter: string;
  notBefore: string;
  type: string;
}

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function secretItem(name: string, state: string, data: string, trustDomain = ''): SecretItem {
  const item: SecretItem = { name, state, trustDomain, valid: false, serialNumber: '', notAfter: '', notBefore: '', type: '' };
  if (!data) return item;
  const m = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/.exec(data);
  if (!m) return item;
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(m[0]);
  } catch {
    return item;
  }
  const notBefore = new Date(cert.validFrom);
  const notAfter = new Date(cert.validTo);
  const now = Date.now();
  let td = trustDomain;
  if (!td) {
    for (const san of (cert.subjectAltName ?? '').split(/,\s*/)) {
      const u = /^URI:spiffe:\/\/([^/]+)/.exec(san);
      if (u) td = u[1]!;
    }
  }
  return {
    ...item,
    trustDomain: td,
    serialNumber: BigInt('0x' + cert.serialNumber).toString(16),
    notAfter: rfc3339(notAfter),
    notBefore: rfc3339(notBefore),
    type: cert.ca ? 'CA' : 'Cert Chain',
    valid: now > notBefore.getTime() && now < notAfter.getTime(),
  };
}

function secretData(s: Secret): string {
  const bytes = (spec: { specifier: { case?: string; value?: unknown } } | undefined): string => {
    if (!spec) return '';
    const sp = spec.specifier;
    if (sp.case === 'inlineBytes') return Buffer.from(sp.value as Uint8Array).toString();
    return '';
  };
  if (s.type.case === 'tlsCertificate') return bytes(s.type.value.certificateChain);
  if (s.type.case === 'validationContext') return bytes(s.type.value.trustedCa);
  return '';
}

/** SPIFFE trust bundles of a validation context (SPIRE's secrets): one item per trust domain. */
function spiffeBundles(s: Secret, name: string, state: string): SecretItem[] | undefined {
  if (s.type.case !== 'validationContext') return undefined;
  const cv = s.type.value.customValidatorConfig;
  const url = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.SPIFFECertValidatorConfig';
  if (!cv?.typedConfig || originalTypeUrl(cv.typedConfig) !== url) return undefined;
  // The SPIFFE validator is not a type mesh configures; the dump reader keeps it as a JSON struct.
  const json = messageJson(AnySchema, cv.typedConfig) as Record<string, JsonValue>;
  if (json['@type'] !== url) return undefined;
  const domains = (json.trustDomains ?? json.trust_domains ?? []) as Array<Record<string, JsonValue>>;
  return domains.map((td) => {
    const bundle = (td.trustBundle ?? td.trust_bundle ?? {}) as Record<string, JsonValue>;
    const b64 = String(bundle.inlineBytes ?? bundle.inline_bytes ?? '');
    return secretItem(name, state, Buffer.from(b64, 'base64').toString(), String(td.name ?? ''));
  });
}

export function secretItems(dump: ConfigDump): SecretItem[] {
  const d = dump.secretDump();
  const items: SecretItem[] = [];
  const parse = (ds: { name: string; secret?: Any }, state: string): SecretItem[] => {
    if (!ds.secret) return [secretItem(ds.name, state, '')];
    const s = unpackAs(ds.secret, SecretSchema) as Secret;
    const data = secretData(s);
    if (data) return [secretItem(ds.name, state, data)];
    return spiffeBundles(s, ds.name, state) ?? [secretItem(ds.name, state, '')];
  };
  for (const w of d.dynamicWarmingSecrets) items.push(...parse(w, 'WARMING'));
  for (const a of d.dynamicActiveSecrets) {
    const parsed = parse(a, 'ACTIVE');
    if (a.versionInfo === 'uninitialized') for (const p of parsed) p.state = 'UNINITIALIZED';
    items.push(...parsed);
  }
  return items;
}

export function secretSummary(dump: ConfigDump, withType = false): string {
  const d = dump.secretDump();
  if (d.dynamicActiveSecrets.length === 0 && d.dynamicWarmingSecrets.length === 0) return 'No active or warming secrets found.\n';
  const items = secretItems(dump);
  if (!items.length) return 'No secret items to show.\n';
  const withTrustDomain = !items.some((s) => s.trustDomain === '');
  const w = new TabWriter(0, 5);
  w.row('RESOURCE NAME', 'TYPE', 'STATUS', 'VALID CERT', 'SERIAL NUMBER', 'NOT AFTER', 'NOT BEFORE', ...(withTrustDomain ? ['TRUST DOMAIN'] : []));
  for (const s of items) {
    const name = withType ? `secret/${s.name}` : s.name;
    w.row(name, s.type, s.state, s.valid, s.serialNumber, s.notAfter, s.notBefore, ...(withTrustDomain ? [s.trustDomain] : []));
  }
  return w.flush();
}

export function secretDumpOutput(dump: ConfigDump, format: OutputFormat): string {
  let d;
  try {
    d = dump.secretDump();
  } catch (e) {
    throw new ConfigDumpError(`sidecar doesn't support secrets: ${(e as Error).message}`);
  }
  return jsonpbOutput(jsonpbIndent(SecretsConfigDumpSchema, d), format);
}

/** The ROOTCA trust bundle of a dump's dynamic active secrets (proxy-config rootca-compare). */
export function rootCA(dump: ConfigDump): string {
  let d;
  try {
    d = dump.secretDump();
  } catch (e) {
    throw new ConfigDumpError(`sidecar doesn't support secrets: ${(e as Error).message}`);
  }
  for (const s of d.dynamicActiveSecrets) {
    if (s.name !== 'ROOTCA' || !s.secret) continue;
    const secret = unpackAs(s.secret, SecretSchema) as Secret;
    const data = secret.type.case === 'validationContext' ? secretData(secret) : '';
    if (!data) throw new ConfigDumpError('can not dump ROOTCA from secret: no trusted CA');
    return data;
  }
  throw new ConfigDumpError('cannot find ROOTCA from secret');
}

// ---- bootstrap ----

function metadataString(md: Record<string, JsonValue> | undefined, ...keys: string[]): string {
  for (const k of keys) {
    const v = md?.[k];
    if (typeof v === 'string') return v;
  }
  return '';
}

export function bootstrapSummary(dump: ConfigDump): string {
  const b = dump.bootstrap();
  const node = b.bootstrap?.node;
  const md = node?.metadata as Record<string, JsonValue> | undefined;
  const version = metadataString(md, 'MESH_VERSION', 'ISTIO_VERSION');
  let sha = metadataString(md, 'MESH_PROXY_SHA', 'ISTIO_PROXY_SHA');
  if (sha.split(':').length > 1) sha = sha.split(':')[1]!;
  const uab = node?.userAgentVersionType.case === 'userAgentBuildVersion' ? node.userAgentVersionType.value : undefined;
  const v = uab?.version;
  const bmd = uab?.metadata as Record<string, JsonValue> | undefined;
  let envoy = `${v?.majorNumber ?? 0}.${v?.minorNumber ?? 0}.${v?.patch ?? 0}`;
  if (bmd?.['build.label'] !== undefined) envoy += `-${String(bmd['build.label'])}`;
  if (bmd?.['revision.status'] !== undefined) envoy += `/${String(bmd['revision.status'])}`;
  if (bmd?.['build.type'] !== undefined) envoy += `/${String(bmd['build.type'])}`;
  if (bmd?.['ssl.version'] !== undefined) envoy += `/${String(bmd['ssl.version'])}`;
  const w = new TabWriter(0, 1);
  if (version) w.row('Mesh Version:', version);
  if (sha) w.row('Mesh Proxy Version:', sha);
  if (envoy) w.row('Envoy Version:', envoy);
  return w.flush();
}

export function bootstrapDumpOutput(dump: ConfigDump, format: OutputFormat): string {
  return jsonpbOutput(jsonpbIndent(BootstrapConfigDumpSchema, dump.bootstrap()), format);
}

// ---- ecds ----

function sortedEcds(dump: ConfigDump): TypedExtensionConfig[] {
  const out = dump.ecdsDump().ecdsFilters.flatMap((f) => {
    if (!f.ecdsFilter) return [];
    try {
      return [unpackAs(f.ecdsFilter, TypedExtensionConfigSchema) as TypedExtensionConfig];
    } catch (e) {
      throw new ConfigDumpError(`failed to retrieve TypedExtensionConfig: ${(e as Error).message}`);
    }
  });
  return goSortSlice(out, (a, b) => {
    const ta = originalTypeUrl(a.typedConfig);
    const tb = originalTypeUrl(b.typedConfig);
    return ta === tb ? a.name < b.name : ta < tb;
  });
}

export function ecdsSummary(dump: ConfigDump): string {
  const w = new TabWriter(0, 5);
  w.row('ECDS NAME', 'TYPE');
  for (const e of sortedEcds(dump)) w.row(e.name, originalTypeUrl(e.typedConfig).replace(/^type\.googleapis\.com\//, ''));
  return w.flush();
}

export function ecdsDumpOutput(dump: ConfigDump, format: OutputFormat): string {
  return formatDump(messageJson(EcdsConfigDumpSchema, dump.ecdsDump()), format);
}

// ---- all ----

export function fullSummary(dump: ConfigDump, cf: ClusterFilter, lf: ListenerFilter, rf: RouteFilter, ef: EndpointFilter): string {
  return [
    bootstrapSummary(dump),
    clusterSummary(dump, cf, true),
    listenerSummary(dump, lf, true),
    routeSummary(dump, rf, true),
    secretSummary(dump, true),
    edsSummary(dump, ef, true),
  ].join('\n');
}

export { ConfigDump, ConfigDumpError };
