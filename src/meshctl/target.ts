// A proxy named on the command line (`[<type>/]<name>[.<namespace>]`) found through the control plane instead
// of the orchestrator: the daemon knows every connected proxy from its node (ID `<name>.<namespace>`,
// INSTANCE_IPS, PROXY_CONFIG with the admin and status ports), and answers `/debug/adsz` over ADS. Then
// meshctl talks to the proxy's admin interface directly, as istioctl does through a port-forward.
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { CommandError, type RunContext } from '../cli/context';
import { xdsOptions, xdsRequest, type XdsOptions } from './xds';
import { ipFamily } from '../lib/ip';

export interface ProxyTarget {
  name: string;
  namespace: string;
  /** `<name>.<namespace>`, the proxy ID. */
  id: string;
  /** Hosts the admin (and status) listeners may be reached on, best first. */
  hosts: string[];
  adminPort: number;
  statusPort: number;
  metadata: Record<string, unknown>;
}

/** Istio's InferPodInfo: `[<type>/]<name>[.<namespace>]`, the namespace after the last dot. */
export function parseTarget(arg: string, defaultNamespace: string): { kind: string; name: string; namespace: string } {
  let kind = 'pod';
  let rest = arg;
  const slash = arg.indexOf('/');
  if (slash >= 0) {
    kind = arg.slice(0, slash).toLowerCase();
    rest = arg.slice(slash + 1);
  }
  const dot = rest.lastIndexOf('.');
  if (dot < 0) return { kind, name: rest, namespace: defaultNamespace };
  return { kind, name: rest.slice(0, dot), namespace: rest.slice(dot + 1) };
}

const POD_KINDS = new Set(['pod', 'pods', 'po']);
const WORKLOAD_KINDS = new Set([
  'deployment',
  'deployments',
  'deploy',
  'statefulset',
  'statefulsets',
  'sts',
  'daemonset',
  'daemonsets',
  'ds',
  'replicaset',
  'replicasets',
  'rs',
  'job',
  'jobs',
]);

export interface AdsClientInfo {
  connectionId: string;
  address?: string;
  metadata?: Record<string, unknown>;
}

/** The daemon's view of its connections (`/debug/adsz` over ADS). */
export async function connectedClients(o: XdsOptions): Promise<AdsClientInfo[]> {
  const res = await xdsRequest(o, 'istio.io/debug', ['adsz']);
  const body = res.resources[0] ? Buffer.from(res.resources[0].value).toString() : '';
  try {
    return ((JSON.parse(body) as { clients?: AdsClientInfo[] }).clients ?? []) as AdsClientInfo[];
  } catch {
    throw new CommandError(`unexpected answer from ${o.address} to debug adsz: ${body.slice(0, 200)}`);
  }
}

function localAddresses(): Set<string> {
  const out = new Set<string>(['127.0.0.1', '::1']);
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) out.add(a.address);
  return out;
}

function peerHost(address: string | undefined): string {
  if (!address) return '';
  const a = address.replace(/^ipv[46]:/, '');
  const m = /^\[(.*)\]:\d+$/.exec(a) ?? /^(.*):\d+$/.exec(a);
  return m ? m[1]! : a;
}

function proxyConfigOf(md: Record<string, unknown>): Record<string, unknown> {
  const pc = md['PROXY_CONFIG'];
  return pc && typeof pc === 'object' ? (pc as Record<string, unknown>) : {};
}

/** Finds the proxy `arg` names among the daemon's connections. */
export async function resolveProxy(ctx: RunContext, arg: string): Promise<ProxyTarget> {
  const o = xdsOptions(ctx);
  const ns = (ctx.flags['namespace'] as string) || 'default';
  const t = parseTarget(arg, ns);
  if (!POD_KINDS.has(t.kind) && !WORKLOAD_KINDS.has(t.kind))
    throw new CommandError(`unsupported resource type "${t.kind}": name a pod or a workload`);
  const clients = (await connectedClients(o)).filter((c) => c.metadata && c.metadata['PROXY_CONFIG'] !== undefined);
  const id = `${t.name}.${t.namespace}`;
  const match = POD_KINDS.has(t.kind)
    ? clients.find((c) => c.connectionId.startsWith(`${id}-`))
    : clients.find((c) => c.metadata!['WORKLOAD_NAME'] === t.name && (c.metadata!['NAMESPACE'] ?? '') === t.namespace);
  if (!match) {
    const what = POD_KINDS.has(t.kind) ? `pod "${t.name}"` : `${t.kind} "${t.name}"`;
    throw new CommandError(
      `${what} not found in namespace "${t.namespace}": no proxy of that name is connected to the control plane at ${o.address}`,
    );
  }
  const flagPort = ctx.flags['proxy-admin-port'] as number | undefined;
  return proxyTargetOf(match, t.namespace, ctx.changed.has('proxy-admin-port') && flagPort ? flagPort : undefined, flagPort);
}

/**
 * How to reach a connected proxy: its ID, the hosts its admin listener may be on, and its admin and status
 * ports (from the node's PROXY_CONFIG unless `adminPort` overrides).
 */
export function proxyTargetOf(match: AdsClientInfo, fallbackNamespace: string, adminPort?: number, defaultAdminPort = 15000): ProxyTarget {
  const md = match.metadata!;
  const pc = proxyConfigOf(md);
  const name = match.connectionId.replace(/-\d+$/, '');
  const dot = name.lastIndexOf('.');
  const ips = String(md['INSTANCE_IPS'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const local = localAddresses();
  // The admin interface listens on localhost: a proxy on this host is reached there first.
  const onThisHost = local.has(peerHost(match.address)) || ips.some((ip) => local.has(ip));
  const hosts = [...new Set([...(onThisHost ? ['127.0.0.1'] : []), ...ips])];
  const port = adminPort ?? Number(pc['proxyAdminPort'] ?? defaultAdminPort);
  return {
    name: dot >= 0 ? name.slice(0, dot) : name,
    namespace: dot >= 0 ? name.slice(dot + 1) : fallbackNamespace,
    id: name,
    hosts: hosts.length ? hosts : ['127.0.0.1'],
    adminPort: port,
    statusPort: Number(pc['statusPort'] ?? 15020),
    metadata: md,
  };
}

function request(host: string, port: number, method: string, path: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port, method, path, agent: false, family: ipFamily(host) === 6 ? 6 : 4 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs / 1000}s`)));
    req.end();
  });
}

/** A request to the proxy's admin (or, with port, another) listener; Istio's EnvoyDoWithPort. */
export async function proxyDo(t: ProxyTarget, method: string, path: string, port = t.adminPort, timeoutMs = 30_000): Promise<string> {
  let lastErr: Error | undefined;
  for (const host of t.hosts) {
    try {
      const r = await request(host, port, method, path.startsWith('/') ? path : `/${path}`, timeoutMs);
      if (r.status >= 400) throw new Error(`received unsuccessful response ${r.status}: ${r.body.trim().slice(0, 200)}`);
      return r.body;
    } catch (e) {
      lastErr = e as Error;
    }
  }
  throw new CommandError(`failed to execute command on ${t.name}.${t.namespace} sidecar: ${lastErr?.message ?? 'no address'}`);
}
