// `meshctl dashboard metrics-ui` (istioctl 1.26 `dashboard prometheus`, istioctl/pkg/dashboard/dashboard.go):
// a local listener on --address (localhost: 127.0.0.1 and ::1, failing only when neither binds) and --port,
// else --ui-port and then any free port (istioctl's port preference), forwarding each connection to
// Prometheus; it prints the URL, opens a browser unless --browser=false (istioctl's openBrowser, its words),
// and serves until interrupted. istioctl forwards through the kubelet's port-forward stream to the
// Prometheus pod; we connect to the pod's IP, or with no cluster to the address prometheus-address.ts gives.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { joinHostPort } from '../lib/hostport';
import type { OrchClient } from '../config/orch/client';
import type { PodPort } from './dashboard-tunnel';
import { meshctlOrchClient, orchConfigPath } from './orch';
import { findPrometheus, meshNamespace, PROMETHEUS_SELECTOR } from './prometheus-address';
import { parseTarget } from './target';

/** istioctl's openBrowser: the URL, then the browser or the reason it is not opened. */
export function openBrowser(url: string, out: NodeJS.WritableStream, browser: boolean, platform = process.platform): void {
  out.write(`${url}\n`);
  if (!browser) {
    out.write('skipping opening a browser');
    return;
  }
  const opener: Record<string, [string, string[]]> = {
    linux: ['xdg-open', [url]],
    win32: ['rundll32', ['url.dll,FileProtocolHandler', url]],
    darwin: ['open', [url]],
  };
  const cmd = opener[platform];
  if (!cmd) {
    out.write(`Unsupported platform "${platform}"; open ${url} in your browser.\n`);
    return;
  }
  const failed = () => out.write(`Failed to open browser; open ${url} in your browser.\n`);
  try {
    const child = spawn(cmd[0], cmd[1], { stdio: 'ignore', detached: true });
    child.once('error', failed);
    child.unref();
  } catch {
    failed();
  }
}

/** The hosts a bind address stands for: `localhost` is both loopbacks. */
function bindHosts(address: string): string[] {
  return address === 'localhost' ? ['127.0.0.1', '::1'] : [address];
}

function listen(host: string, port: number, onConnection: (c: net.Socket) => void): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer(onConnection);
    s.once('error', reject);
    s.listen({ host, port, ipv6Only: host.includes(':') }, () => {
      s.off('error', reject);
      resolve(s);
    });
  });
}

/** Whether `host` (a URL's hostname) is this machine as seen from a listener on `address`. */
function isLocal(host: string, address: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || h === '::' || h === '0.0.0.0' || /^127\./.test(h) || h === address;
}

/** Each local connection piped to `target` over TCP (a component on this machine, or a pod's IP). */
export function tcpTo(target: URL): (c: net.Socket) => void {
  return (c) => {
    const up = net.connect(Number(target.port || 80), target.hostname.replace(/^\[|\]$/g, ''));
    c.pipe(up).pipe(c);
    c.on('close', () => up.destroy());
    up.on('close', () => c.destroy());
  };
}

/** Local listeners on one port for every host of `address`; at least one must bind. */
async function forwarder(address: string, port: number, onConnection: (c: net.Socket) => void): Promise<{ servers: net.Server[]; port: number }> {
  const servers: net.Server[] = [];
  let bound = port;
  let lastError: Error | undefined;
  for (const host of bindHosts(address)) {
    try {
      const s = await listen(host, bound, onConnection);
      servers.push(s);
      bound = (s.address() as net.AddressInfo).port;
    } catch (e) {
      lastError = e as Error;
    }
  }
  if (servers.length === 0) throw lastError ?? new Error(`unable to listen on ${address}`);
  return { servers, port: bound };
}

/** Forwards `address:<port>` to `target` until SIGINT/SIGTERM, after printing the URL (and opening a browser). */
export async function portForward(ctx: RunContext, flavor: string, target: string, remotePort: number): Promise<void> {
  const to = new URL(target);
  await serveForward(ctx, flavor, remotePort, tcpTo(to), '', (port) => port === Number(to.port || 80) && isLocal(to.hostname, listenAddress(ctx)));
}

function listenAddress(ctx: RunContext): string {
  return (ctx.flags['address'] as string | undefined) || 'localhost';
}

/**
 * istioctl's portForward: the local port is --port, else the component's own port and then any free one
 * (`isSelf` drops a port where the component itself listens on this machine); each connection goes to
 * `onConnection`; the URL (`http://<address>:<port><path>`) is printed and the forward kept until SIGINT/SIGTERM.
 */
export async function serveForward(
  ctx: RunContext,
  flavor: string,
  remotePort: number,
  onConnection: (c: net.Socket) => void,
  urlPath = '',
  isSelf: (port: number) => boolean = () => false,
): Promise<void> {
  const address = listenAddress(ctx);
  const listenPort = (ctx.flags['port'] as number | undefined) ?? 0;
  const prefs = (listenPort !== 0 ? [listenPort] : [remotePort, 0]).filter((p) => p === 0 || !isSelf(p));
  if (prefs.length === 0) throw new CommandError(`--port ${listenPort} is where ${flavor} itself listens: give another`);
  let lastError: Error | undefined;
  // open connections (a browser keeps them alive) end with the forward, as istioctl's process exit ends them
  const open = new Set<net.Socket>();
  const track = (c: net.Socket) => {
    open.add(c);
    c.once('close', () => open.delete(c));
    onConnection(c);
  };
  for (const port of prefs) {
    let fw: { servers: net.Server[]; port: number };
    try {
      fw = await forwarder(address, port, track);
    } catch (e) {
      lastError = e as Error;
      continue;
    }
    openBrowser(`http://${joinHostPort(address, fw.port)}${urlPath}`, ctx.stdout, ctx.flags['browser'] !== false);
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    for (const s of fw.servers) s.close();
    for (const c of open) c.destroy();
    return;
  }
  throw new CommandError(`failure running port forward process: ${lastError?.message ?? `no port for ${flavor}`}`);
}

/** `dashboard metrics-ui`: Prometheus's web UI (the mesh namespace, then --namespace, as istioctl looks). */
export const metricsUi: Handler = async (ctx: RunContext) => {
  const namespaces = [meshNamespace(ctx), (ctx.flags['namespace'] as string | undefined) || 'default'];
  // --ui-port is the pod's port to forward to, and the first choice of local port (istioctl's promPort)
  const uiPort = (ctx.flags['ui-port'] as number | undefined) ?? 9090;
  const target = await findPrometheus(ctx, namespaces, uiPort, `no pods found with selector ${PROMETHEUS_SELECTOR}`);
  await portForward(ctx, 'Prometheus', target, uiPort);
  return 0;
};

/** The addon UIs istioctl opens, by our command name: the pod label it looks for, the URL path, the product. */
const ADDONS: Readonly<Record<string, { selector: string; path: string; product: string }>> = {
  graphs: { selector: 'app.kubernetes.io/name=grafana', path: '', product: 'Grafana' },
  'topology-ui': { selector: 'app=kiali', path: '/kiali', product: 'Kiali' },
  'trace-ui-a': { selector: 'app=jaeger', path: '', product: 'Jaeger' },
  'trace-ui-b': { selector: 'app=skywalking-ui', path: '', product: 'SkyWalking' },
  'trace-ui-c': { selector: 'app=zipkin', path: '', product: 'Zipkin' },
};

function addon(name: keyof typeof ADDONS & string): Handler {
  return async (ctx) => {
    const a = ADDONS[name]!;
    const uiPort = ctx.flags['ui-port'] as number;
    if (!orchConfigPath(ctx)) {
      throw new CommandError(
        `mesh does not run ${a.product}: with a cluster, "meshctl dashboard ${name}" forwards to the pod labelled ${a.selector} ` +
          `(namespace ${meshNamespace(ctx)}, then ${(ctx.flags['namespace'] as string | undefined) || 'default'}), and no cluster is configured ` +
          `(give --orchconfig, or set ORCHCONFIG or KUBECONFIG)`,
      );
    }
    const client = await meshctlOrchClient(ctx, `meshctl dashboard ${name}`);
    const pod = await firstPod(client, [meshNamespace(ctx), (ctx.flags['namespace'] as string | undefined) || 'default'], a.selector);
    if (!pod) throw new CommandError(`no pods found with selector ${a.selector}`);
    await forwardToPod(ctx, client, a.product, { ...pod, port: uiPort }, a.path);
    return 0;
  };
}

export const graphs = addon('graphs');
export const topologyUi = addon('topology-ui');
export const traceUiA = addon('trace-ui-a');
export const traceUiB = addon('trace-ui-b');
export const traceUiC = addon('trace-ui-c');

async function firstPod(
  client: OrchClient,
  namespaces: readonly string[],
  selector: string,
): Promise<{ pod: string; namespace: string } | undefined> {
  for (const ns of namespaces) {
    let list: { items?: Array<{ metadata?: { name?: string; namespace?: string } }> };
    try {
      list = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods`, { labelSelector: selector })) as typeof list;
    } catch {
      continue; // istioctl's inferPodMeta goes on to the next namespace
    }
    const p = list.items?.[0];
    if (p?.metadata?.name) return { pod: p.metadata.name, namespace: p.metadata.namespace ?? ns };
  }
  return undefined;
}

/** Through the API server's port-forward: one upgrade first (istioctl's fw.Start), then a stream per connection. */
async function forwardToPod(ctx: RunContext, client: OrchClient, flavor: string, to: PodPort, urlPath: string): Promise<void> {
  const { probe, tunnel } = await import('./dashboard-tunnel');
  try {
    await probe(client, to);
  } catch (e) {
    throw new CommandError(
      `failure running port forward process: pod ${to.pod}.${to.namespace} port ${to.port} through ${client.server}: ${(e as Error).message}`,
    );
  }
  await serveForward(ctx, flavor, to.port, (c) => tunnel(client, to, c, (m) => ctx.stderr.write(`${m}\n`)), urlPath);
}

/**
 * The pod a control-plane or proxy dashboard opens, with a cluster (istioctl's createDashCmd and
 * controlZDashCmd): `-l` picks the first pod it selects in `namespace`, else the argument
 * `[<type>/]<name>[.<namespace>]`, a workload kind standing for its first pod.
 */
async function podOf(ctx: RunContext, client: OrchClient, namespace: string): Promise<{ pod: string; namespace: string }> {
  const selector = (ctx.flags['selector'] as string | undefined) ?? '';
  if (selector) {
    const p = await firstPod(client, [namespace], selector);
    if (!p) throw new CommandError('no pods found');
    return p;
  }
  const t = parseTarget(ctx.args[0]!, namespace);
  if (['pod', 'pods', 'po'].includes(t.kind)) return { pod: t.name, namespace: t.namespace };
  const { workloadSelector } = await import('./dashboard-workload');
  const labels = await workloadSelector(client, t.kind, t.name, t.namespace);
  const p = await firstPod(client, [t.namespace], labels);
  if (!p) throw new CommandError(`no pods found for ${t.kind}/${t.name} in namespace ${t.namespace}`);
  return p;
}

/** istioctl's argument checks of the pod dashboards. */
function checkPodArgs(ctx: RunContext): void {
  const selector = (ctx.flags['selector'] as string | undefined) ?? '';
  if (!selector && ctx.args.length < 1) throw new CommandError('specify a pod or --selector');
  if (selector && ctx.args.length > 0) throw new CommandError('name cannot be provided when a selector is specified');
}

/** The host meshctl reaches the daemon on with no cluster: that of --xds-address. */
async function daemonHost(ctx: RunContext): Promise<string> {
  const { xdsOptions } = await import('./xds');
  const address = xdsOptions(ctx).address;
  const m = /^\[(.*)\]:\d+$/.exec(address) ?? /^(.*):\d+$/.exec(address);
  return m ? m[1]! : address;
}

/** A page of the daemon: through its pod with a cluster, else on the daemon meshctl talks to over xDS. */
function daemonPage(flavor: string, port: (ctx: RunContext) => number, urlPath: string): Handler {
  return async (ctx) => {
    if (orchConfigPath(ctx)) {
      checkPodArgs(ctx);
      const client = await meshctlOrchClient(ctx, 'meshctl dashboard');
      const ns = (ctx.flags['namespace'] as string | undefined) || meshNamespace(ctx);
      const p = await podOf(ctx, client, ns);
      await forwardToPod(ctx, client, `${flavor} ${p.pod}`, { ...p, port: port(ctx) }, urlPath);
      return 0;
    }
    if (ctx.flags['selector']) throw new CommandError('--selector needs a cluster: with none, the daemon is the one at --xds-address');
    const target = new URL(`http://${joinHostPort(await daemonHost(ctx), port(ctx))}`);
    const self = (p: number) => p === Number(target.port) && isLocal(target.hostname, listenAddress(ctx));
    await serveForward(ctx, flavor, port(ctx), tcpTo(target), urlPath, self);
    return 0;
  };
}

/** `dashboard controlz`: the daemon's ControlZ (--ctrlz_port, 9876). */
export const controlz = daemonPage('ControlZ', (ctx) => (ctx.flags['ctrlz_port'] as number | undefined) ?? 9876, '');
/** `dashboard meshd-debug`: the daemon's debug pages on its monitoring port (istioctl's 15014). */
export const meshdDebug = daemonPage('mesh debug', () => 15014, '/debug');

/** `dashboard proxy` and `proxy-legacy`: a proxy's admin page, its pod with a cluster, else found over xDS. */
export const proxy: Handler = async (ctx) => {
  checkPodArgs(ctx);
  const uiPort = (ctx.flags['ui-port'] as number | undefined) ?? 15000;
  if (orchConfigPath(ctx)) {
    const client = await meshctlOrchClient(ctx, 'meshctl dashboard proxy');
    const p = await podOf(ctx, client, (ctx.flags['namespace'] as string | undefined) || 'default');
    await forwardToPod(ctx, client, `proxy ${p.pod}`, { ...p, port: uiPort }, '');
    return 0;
  }
  if (ctx.flags['selector']) throw new CommandError('--selector needs a cluster: with none, name the proxy as proxy-status lists it');
  const { resolveProxy } = await import('./target');
  const t = await resolveProxy(ctx, ctx.args[0]!);
  const port = ctx.changed.has('ui-port') ? uiPort : t.adminPort;
  const target = new URL(`http://${joinHostPort(t.hosts[0]!, port)}`);
  const self = (p: number) => p === port && isLocal(target.hostname, listenAddress(ctx));
  await serveForward(ctx, `proxy ${t.id}`, port, tcpTo(target), '', self);
  return 0;
};
export const proxyLegacy = proxy;
