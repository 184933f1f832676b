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
import { findPrometheus, meshNamespace, PROMETHEUS_SELECTOR } from './prometheus-address';

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

/** Local listeners on one port for every host of `address`; at least one must bind. */
async function forwarder(address: string, port: number, target: URL): Promise<{ servers: net.Server[]; port: number }> {
  const onConnection = (c: net.Socket) => {
    const up = net.connect(Number(target.port || 80), target.hostname.replace(/^\[|\]$/g, ''));
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  };
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
  const address = (ctx.flags['address'] as string | undefined) || 'localhost';
  const listenPort = (ctx.flags['port'] as number | undefined) ?? 0;
  const to = new URL(target);
  // A Prometheus on this machine at the port we would listen on: listening there would forward to ourselves.
  const self = (port: number) => port !== 0 && port === Number(to.port || 80) && isLocal(to.hostname, address);
  const prefs = (listenPort !== 0 ? [listenPort] : [remotePort, 0]).filter((p) => !self(p));
  if (prefs.length === 0) throw new CommandError(`--port ${listenPort} is where ${flavor} itself listens (${target}): give another`);
  let lastError: Error | undefined;
  for (const port of prefs) {
    let fw: { servers: net.Server[]; port: number };
    try {
      fw = await forwarder(address, port, to);
    } catch (e) {
      lastError = e as Error;
      continue;
    }
    openBrowser(`http://${joinHostPort(address, fw.port)}`, ctx.stdout, ctx.flags['browser'] !== false);
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    for (const s of fw.servers) s.close();
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
