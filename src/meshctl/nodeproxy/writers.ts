// The node proxy's config dump as istioctl 1.26's ztunnel-config reads and prints it
// (istioctl/pkg/writer/ztunnel/configdump): its Go types, Prime (sections may be lists or maps keyed by ID),
// and the workload, service, policy, certificate, connection and full summaries and dumps.
import { TabWriter } from '../../lib/tabwriter';
import { goSortSlice } from '../../lib/gosort';
import { jsonToGoYaml } from '../../lib/goyaml';
import { field, goDecode, GoJsonError, goMarshalIndent, T, type GoType, type GoValue, type GoStructValue } from '../../lib/gojson';
import { joinHostPort, splitHostPort } from '../../lib/hostport';

const Locality = T.struct('Locality', [
  { json: 'region', type: T.string, omitempty: true },
  { json: 'zone', type: T.string, omitempty: true },
  { json: 'subzone', type: T.string, omitempty: true },
]);
const GatewayAddress = T.struct('GatewayAddress', [{ json: 'destination', type: T.string }]);
const ApplicationTunnel = T.struct('ApplicationTunnel', [
  { json: 'protocol', type: T.string },
  { json: 'port', type: T.ptr(T.uint16), omitempty: true },
]);
export const Workload = T.struct('ZtunnelWorkload', [
  { json: 'uid', type: T.string },
  { json: 'workloadIps', type: T.slice(T.string) },
  { json: 'waypoint', type: T.ptr(GatewayAddress), omitempty: true },
  { json: 'networkGateway', type: T.ptr(GatewayAddress), omitempty: true },
  { json: 'protocol', type: T.string },
  { json: 'name', type: T.string },
  { json: 'namespace', type: T.string },
  { json: 'serviceAccount', type: T.string },
  { json: 'workloadName', type: T.string },
  { json: 'workloadType', type: T.string },
  { json: 'canonicalName', type: T.string },
  { json: 'canonicalRevision', type: T.string },
  { json: 'clusterId', type: T.string },
  { json: 'trustDomain', type: T.string, omitempty: true },
  { json: 'locality', type: Locality, omitempty: true },
  { json: 'node', type: T.string },
  { json: 'network', type: T.string, omitempty: true },
  { json: 'status', type: T.string },
  { json: 'hostname', type: T.string },
  { json: 'capacity', type: T.uint32 },
  { json: 'applicationTunnel', type: ApplicationTunnel, omitempty: true },
  { json: 'authorizationPolicies', type: T.slice(T.string), omitempty: true },
]);
const LoadBalancer = T.struct('LoadBalancer', [
  { json: 'mode', type: T.string },
  { json: 'routingPreferences', type: T.slice(T.string) },
  { json: 'healthPolicy', type: T.string },
]);
const Endpoint = T.struct('ZtunnelEndpoint', [
  { json: 'workloadUid', type: T.string },
  { json: 'service', type: T.string },
  { json: 'address', type: T.string, omitempty: true },
  { json: 'port', type: T.map('uint16', T.uint16) },
]);
export const Service = T.struct('ZtunnelService', [
  { json: 'name', type: T.string },
  { json: 'namespace', type: T.string },
  { json: 'hostname', type: T.string },
  { json: 'vips', type: T.slice(T.string) },
  { json: 'ports', type: T.map('string', T.int) },
  { json: 'loadBalancer', type: T.ptr(LoadBalancer), omitempty: true },
  { json: 'waypoint', type: T.ptr(GatewayAddress), omitempty: true },
  { json: 'endpoints', type: T.map('string', T.ptr(Endpoint)) },
  { json: 'subjectAltNames', type: T.slice(T.string), omitempty: true },
  { json: 'ipFamilies', type: T.string },
]);
const StringMatch = T.struct('StringMatch', [
  { json: 'Exact', type: T.string, omitempty: true },
  { json: 'Suffix', type: T.string, omitempty: true },
  { json: 'Prefix', type: T.string, omitempty: true },
  { json: 'Presence', type: T.any, omitempty: true },
]);
const ServiceAccountMatch = T.struct('ServiceAccountMatch', [
  { json: 'namespace', type: T.string },
  { json: 'serviceAccount', type: T.string },
]);
const PolicyMatch = T.struct('PolicyMatch', [
  { json: 'namespaces', type: T.slice(StringMatch), omitempty: true },
  { json: 'notNamespaces', type: T.slice(StringMatch), omitempty: true },
  { json: 'principals', type: T.slice(StringMatch), omitempty: true },
  { json: 'notPrincipals', type: T.slice(StringMatch), omitempty: true },
  { json: 'sourceIps', type: T.slice(T.string), omitempty: true },
  { json: 'notSourceIps', type: T.slice(T.string), omitempty: true },
  { json: 'destinationIps', type: T.slice(T.string), omitempty: true },
  { json: 'notDestinationIps', type: T.slice(T.string), omitempty: true },
  { json: 'destinationPorts', type: T.slice(T.uint16), omitempty: true },
  { json: 'notDestinationPorts', type: T.slice(T.uint16), omitempty: true },
  { json: 'serviceAccounts', type: T.slice(ServiceAccountMatch), omitempty: true },
  { json: 'notServiceAccounts', type: T.slice(ServiceAccountMatch), omitempty: true },
]);
export const Policy = T.struct('ZtunnelPolicy', [
  { json: 'name', type: T.string },
  { json: 'namespace', type: T.string },
  { json: 'scope', type: T.string },
  { json: 'action', type: T.string },
  { json: 'rules', type: T.slice(T.slice(T.slice(T.ptr(PolicyMatch)))) },
]);
const Cert = T.struct('Cert', [
  { json: 'pem', type: T.string },
  { json: 'serialNumber', type: T.string },
  { json: 'validFrom', type: T.string },
  { json: 'expirationTime', type: T.string },
]);
export const CertsDump = T.struct('CertsDump', [
  { json: 'identity', type: T.string },
  { json: 'state', type: T.string },
  { json: 'certChain', type: T.slice(T.ptr(Cert)) },
  { json: 'rootCerts', type: T.slice(T.ptr(Cert)) },
]);
const Connection = (name: string) =>
  T.struct(name, [
    { json: 'src', type: T.string },
    { json: 'originalDst', type: T.string },
    { json: 'actualDst', type: T.string },
    { json: 'protocol', type: T.string },
  ]);
export const WorkloadState = T.struct('WorkloadState', [
  { json: 'state', type: T.string, omitempty: true },
  {
    json: 'connections',
    type: T.struct('WorkloadConnections', [
      { json: 'inbound', type: T.slice(Connection('InboundConnection')) },
      { json: 'outbound', type: T.slice(Connection('OutboundConnection')) },
    ]),
    omitempty: true,
  },
  {
    json: 'info',
    type: T.struct('WorkloadInfo', [
      { json: 'name', type: T.string },
      { json: 'namespace', type: T.string },
      { json: 'trustDomain', type: T.string },
      { json: 'serviceAccount', type: T.string },
    ]),
  },
]);

export class NodeProxyDumpError extends Error {}

type V = GoValue;
const s = (v: V, name: string): string => field<string>(v, name) ?? '';
const list = (v: V, name: string): V[] => field<V[]>(v, name) ?? [];

/** istioctl's unmarshalListOrMap: a JSON list, or a map whose values are taken (in the map's order). */
function listOrMap(raw: unknown, t: GoType): V[] {
  if (raw === undefined) return [];
  if (Array.isArray(raw)) return goDecode(raw, T.slice(T.ptr(t))) as V[];
  const m = goDecode(raw, T.map('string', T.ptr(t)));
  return m === null ? [] : [...(m as { map: Map<string, V> }).map.values()];
}

/** ConfigWriter.Prime's result, with the dump's own text for `all -o json|yaml`. */
export class NodeProxyDump {
  private constructor(
    readonly raw: string,
    readonly workloads: V[],
    readonly services: V[],
    readonly policies: V[],
    readonly certificates: V[],
    readonly workloadState: Map<string, V>,
  ) {}

  static parse(text: string): NodeProxyDump {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new NodeProxyDumpError(`error unmarshalling config dump response from node proxy: ${(e as Error).message}`);
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) {
      const kind = json === null ? 'null' : Array.isArray(json) ? 'array' : typeof json;
      if (json !== null)
        throw new NodeProxyDumpError(
          `error unmarshalling config dump response from node proxy: json: cannot unmarshal ${kind} into Go value of type configdump.rawDump`,
        );
      json = {};
    }
    // Go matches the rawDump fields case-insensitively; the last of equal keys wins.
    const pick = (name: string): unknown => {
      let out: unknown;
      for (const [k, v] of Object.entries(json as Record<string, unknown>)) if (k.toLowerCase() === name) out = v;
      return out === null ? undefined : out;
    };
    try {
      const services = listOrMap(pick('services'), Service);
      const workloads = listOrMap(pick('workloads'), Workload);
      const certificates = listOrMap(pick('certificates'), CertsDump);
      const policies = listOrMap(pick('policies'), Policy);
      const state = new Map<string, V>();
      const ws = pick('workloadstate');
      if (ws !== undefined) {
        let m: V;
        try {
          m = goDecode(ws, T.map('string', WorkloadState));
        } catch (e) {
          throw new GoJsonError(`error unmarshalling config dump response from node proxy: ${(e as Error).message}`);
        }
        for (const [k, v] of (m as { map: Map<string, V> } | null)?.map ?? []) state.set(k, v);
      }
      return new NodeProxyDump(
        text,
        workloads.filter((w) => w !== null),
        services.filter((x) => x !== null),
        policies.filter((x) => x !== null),
        certificates.filter((x) => x !== null),
        state,
      );
    } catch (e) {
      if (e instanceof GoJsonError) throw new NodeProxyDumpError(e.message);
      throw e;
    }
  }
}

export type NodeProxyFormat = 'json' | 'yaml';

/** `fmt.Fprintln(out, string(json))`, or the yaml of that JSON (sigs.k8s.io/yaml JSONToYAML). */
function dumpOut(json: string, format: NodeProxyFormat): string {
  if (format === 'yaml') return jsonToGoYaml(JSON.parse(json)) + '\n';
  return json + '\n';
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const equalFold = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

// ---- workloads ----

export interface WorkloadFilter {
  address: string;
  node: string;
  namespace: string;
}

function verifyWorkload(f: WorkloadFilter, w: V): boolean {
  if (!f.address && !f.node && !f.namespace) return true;
  if (f.namespace && !equalFold(s(w, 'namespace'), f.namespace)) return false;
  if (f.address && !list(w, 'workloadIps').some((ip) => equalFold(ip as string, f.address))) return false;
  if (f.node && !equalFold(s(w, 'node'), f.node)) return false;
  return true;
}

function destinationName(dest: string, services: readonly V[]): string {
  for (const svc of services) {
    if (`${s(svc, 'namespace')}/${s(svc, 'hostname')}` === dest) return s(svc, 'name');
    for (const addr of list(svc, 'vips')) if (addr === dest) return s(svc, 'name');
  }
  return 'NA';
}

function waypointName(v: V, services: readonly V[]): string {
  const wp = field(v, 'waypoint');
  if (wp === null) return 'None';
  return destinationName(s(wp, 'destination'), services);
}

export function workloadSummary(d: NodeProxyDump, f: WorkloadFilter): string {
  const w = new TabWriter(0, 1);
  const rows = goSortSlice(
    d.workloads.filter((x) => verifyWorkload(f, x)),
    (a, b) => {
      const an = `${s(a, 'namespace')}.${s(a, 'name')}`;
      const bn = `${s(b, 'namespace')}.${s(b, 'name')}`;
      if (an !== bn) return an < bn;
      return s(a, 'node') < s(b, 'node');
    },
  );
  w.row('NAMESPACE', 'POD NAME', 'ADDRESS', 'NODE', 'WAYPOINT', 'PROTOCOL');
  for (const wl of rows) {
    let address = list(wl, 'workloadIps').join(',');
    if (address.length === 0) address = s(wl, 'hostname');
    w.row(s(wl, 'namespace'), s(wl, 'name'), address, s(wl, 'node'), waypointName(wl, d.services), s(wl, 'protocol'));
  }
  return w.flush();
}

export function workloadDump(d: NodeProxyDump, f: WorkloadFilter, format: NodeProxyFormat): string {
  return dumpOut(
    goMarshalIndent(
      d.workloads.filter((x) => verifyWorkload(f, x)),
      T.slice(T.ptr(Workload)),
    ),
    format,
  );
}

// ---- services ----

function byNamespaceName(a: V, b: V, third?: string): number {
  return cmp(s(a, 'namespace'), s(b, 'namespace')) || cmp(s(a, 'name'), s(b, 'name')) || (third ? cmp(s(a, third), s(b, third)) : 0);
}

/** Go's slices.SortFunc (pdqsort, not stable) with cmp. */
function sortFunc(items: V[], c: (a: V, b: V) => number): V[] {
  return goSortSlice(items, (a, b) => c(a, b) < 0);
}

function servicesFiltered(d: NodeProxyDump, namespace: string): V[] {
  return sortFunc(
    d.services.filter((x) => !namespace || equalFold(s(x, 'namespace'), namespace)),
    (a, b) => byNamespaceName(a, b, 'hostname'),
  );
}

export function serviceSummary(d: NodeProxyDump, namespace: string): string {
  const w = new TabWriter(0, 1);
  const byUid = new Map<string, V>();
  for (const wl of d.workloads) byUid.set(s(wl, 'uid'), wl);
  w.row('NAMESPACE', 'SERVICE NAME', 'SERVICE VIP', 'WAYPOINT', 'ENDPOINTS');
  for (const svc of servicesFiltered(d, namespace)) {
    const ips = list(svc, 'vips').map((a) => {
      const i = (a as string).indexOf('/');
      return i >= 0 ? (a as string).slice(i + 1) : '';
    });
    const eps = (field<{ map: Map<string, V> } | null>(svc, 'endpoints')?.map ?? new Map<string, V>()) as Map<string, V>;
    let healthy = 0;
    for (const ep of eps.values()) {
      const wl = ep === null ? undefined : byUid.get(s(ep, 'workloadUid'));
      if (wl && s(wl, 'status') === 'Healthy') healthy++;
    }
    w.row(s(svc, 'namespace'), s(svc, 'name'), ips.join(','), waypointName(svc, d.services), `${healthy}/${eps.size}`);
  }
  return w.flush();
}

export function serviceDump(d: NodeProxyDump, namespace: string, format: NodeProxyFormat): string {
  return dumpOut(goMarshalIndent(servicesFiltered(d, namespace), T.slice(T.ptr(Service))), format);
}

// ---- policies ----

function policiesFiltered(d: NodeProxyDump, namespace: string): V[] {
  return sortFunc(
    d.policies.filter((x) => !namespace || equalFold(s(x, 'namespace'), namespace)),
    (a, b) => byNamespaceName(a, b),
  );
}

export function policySummary(d: NodeProxyDump, namespace: string): string {
  const w = new TabWriter(0, 1);
  w.row('NAMESPACE', 'POLICY NAME', 'ACTION', 'SCOPE');
  for (const p of policiesFiltered(d, namespace)) w.row(s(p, 'namespace'), s(p, 'name'), s(p, 'action'), s(p, 'scope'));
  return w.flush();
}

export function policyDump(d: NodeProxyDump, namespace: string, format: NodeProxyFormat): string {
  return dumpOut(goMarshalIndent(policiesFiltered(d, namespace), T.slice(T.ptr(Policy))), format);
}

// ---- certificates ----

const valueOrNA = (v: string) => (v === '' ? 'NA' : v);

/** time.Parse(time.RFC3339, s) as milliseconds; undefined when Go would not parse it. */
function rfc3339(v: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v)) return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

function certNotExpired(c: V, now: number): boolean {
  const exp = s(c, 'expirationTime');
  const from = s(c, 'validFrom');
  if (exp === '' && from === '') return false;
  const e = rfc3339(exp);
  const f = rfc3339(from);
  if (e === undefined || f === undefined) return false;
  return now > f && now < e;
}

/** fmt's %x of a big.Int parsed from decimal (`<nil>` when it does not parse). */
function serialHex(decimal: string): string {
  if (!/^[+-]?\d+$/.test(decimal)) return '%!x(<nil>)';
  const n = BigInt(decimal);
  return n < 0n ? `-${(-n).toString(16)}` : n.toString(16);
}

export function certificateSummary(d: NodeProxyDump, now = Date.now()): string {
  const w = new TabWriter(0, 5);
  w.row('CERTIFICATE NAME', 'TYPE', 'STATUS', 'VALID CERT', 'SERIAL NUMBER', 'NOT AFTER', 'NOT BEFORE');
  for (const secret of d.certificates) {
    let state = s(secret, 'state');
    if (state.includes('Unavailable')) state = 'Unavailable';
    const id = s(secret, 'identity');
    const chain = list(secret, 'certChain');
    const roots = list(secret, 'rootCerts');
    if (chain.length === 0) {
      w.row(id, 'NA', state, false, 'NA', 'NA', 'NA');
      continue;
    }
    // Before, the root was part of the certChain.
    const legacy = roots.length === 0;
    chain.forEach((ca, i) => {
      const t = i === 0 ? 'Leaf' : i === chain.length - 1 && legacy ? 'Root' : 'Intermediate';
      w.row(
        id,
        t,
        state,
        certNotExpired(ca, now),
        serialHex(s(ca, 'serialNumber')),
        valueOrNA(s(ca, 'expirationTime')),
        valueOrNA(s(ca, 'validFrom')),
      );
    });
    for (const ca of roots)
      w.row(
        id,
        'Root',
        state,
        certNotExpired(ca, now),
        serialHex(s(ca, 'serialNumber')),
        valueOrNA(s(ca, 'expirationTime')),
        valueOrNA(s(ca, 'validFrom')),
      );
  }
  return w.flush();
}

export function certificateDump(d: NodeProxyDump, format: NodeProxyFormat): string {
  return dumpOut(goMarshalIndent(d.certificates, T.slice(T.ptr(CertsDump))), format);
}

// ---- connections ----

export interface ConnectionsFilter {
  namespace: string;
  direction: string;
  raw: boolean;
}

const info = (v: V, name: string) => s(field(v, 'info'), name);

/** net.SplitHostPort's host and port, or undefined. */
function hostAndPort(addr: string): [string, string] | undefined {
  try {
    const { host, port } = splitHostPort(addr);
    return [host, port];
  } catch {
    return undefined;
  }
}

export function connectionsSummary(d: NodeProxyDump, f: ConnectionsFilter): string {
  const w = new TabWriter(0, 1);
  const serviceNames = new Map<string, string>();
  const workloadNames = new Map<string, string>();
  for (const svc of d.services) {
    const vips = list(svc, 'vips');
    let ip = '';
    if (vips.length) {
      const a = vips[0] as string;
      const i = a.indexOf('/');
      ip = i >= 0 ? a.slice(i + 1) : '';
    }
    serviceNames.set(ip || 'None', s(svc, 'hostname'));
  }
  for (const wl of d.workloads) {
    const ips = list(wl, 'workloadIps');
    workloadNames.set((ips[0] as string | undefined) || 'None', `${s(wl, 'name')}.${s(wl, 'namespace')}`);
  }
  const lookup = (addr: string): string => {
    if (f.raw) return addr;
    const [ip, port] = hostAndPort(addr) ?? ['', ''];
    const svc = serviceNames.get(ip);
    if (svc !== undefined) return joinHostPort(svc, port);
    const wl = workloadNames.get(ip);
    if (wl !== undefined) return joinHostPort(wl, port);
    return addr;
  };
  w.row('WORKLOAD', 'DIRECTION', 'LOCAL', 'REMOTE', 'REMOTE TARGET', 'PROTOCOL');
  const states = sortFunc(
    [...d.workloadState.values()],
    (a, b) => cmp(info(a, 'namespace'), info(b, 'namespace')) || cmp(info(a, 'name'), info(b, 'name')),
  );
  for (const wl of states) {
    if (f.namespace && f.namespace !== info(wl, 'namespace')) continue;
    const name = `${info(wl, 'name')}.${info(wl, 'namespace')}`;
    const conns = field(wl, 'connections');
    if (f.direction !== 'outbound') {
      for (const c of list(conns, 'inbound'))
        w.row(name, 'Inbound', lookup(s(c, 'actualDst')), lookup(s(c, 'src')), s(c, 'originalDst'), s(c, 'protocol'));
    }
    if (f.direction !== 'inbound') {
      for (const c of list(conns, 'outbound'))
        w.row(name, 'Outbound', lookup(s(c, 'src')), lookup(s(c, 'actualDst')), lookup(s(c, 'originalDst')), s(c, 'protocol'));
    }
  }
  return w.flush();
}

export function connectionsDump(d: NodeProxyDump, f: ConnectionsFilter, format: NodeProxyFormat): string {
  // istioctl sorts by namespace only here (its comparison names the namespace twice)
  const states = sortFunc([...d.workloadState.values()], (a, b) => cmp(info(a, 'namespace'), info(b, 'namespace'))).filter(
    (x) => !f.namespace || f.namespace === info(x, 'namespace'),
  );
  return dumpOut(goMarshalIndent(states, T.slice(WorkloadState)), format);
}

// ---- all ----

export function fullSummary(d: NodeProxyDump, now = Date.now()): string {
  return (
    '\n' +
    workloadSummary(d, { address: '', node: '', namespace: '' }) +
    '\n' +
    serviceSummary(d, '') +
    '\n' +
    policySummary(d, '') +
    '\n' +
    certificateSummary(d, now)
  );
}

export function fullDump(d: NodeProxyDump, format: NodeProxyFormat): string {
  if (format === 'yaml') return jsonToGoYaml(JSON.parse(d.raw)) + '\n';
  return d.raw + '\n';
}

export type { GoStructValue };
