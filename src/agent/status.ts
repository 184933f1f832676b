// The agent's status server on ProxyConfig.statusPort (15020), Istio's layout: /healthz/ready, the merged
// /stats/prometheus (agent metrics, then the proxy's), and the localhost-only POST endpoints /quitquitquit
// and /drain. The proxy's own :15021 listener forwards /healthz/ready here (it is in the bootstrap).
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registerScope } from '../lib/log';
import { metricsText } from '../lib/metrics';
import type { AdminClient } from './admin-client';
import { HttpCallError } from './http-client';
import { scrapeFailures, scrapesTotal } from './metrics';
import { UNGUARDED, type Guard } from './boundary';

const log = registerScope('healthcheck', 'status server of the mesh agent');

/** Prometheus text format 0.0.4, what Istio's merged endpoint answers with. */
export const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

export interface Readiness {
  check(): Promise<void>;
}

export interface StatusServerOptions {
  /** 0 picks a free port (tests); ProxyConfig validation keeps users at 1..65535. */
  port: number;
  /** Listen address; default all interfaces, as Istio's `:15020`. */
  host?: string;
  readiness: Readiness;
  /** The proxy's admin API; undefined when the agent runs without a proxy (DISABLE_PROXY). */
  admin?: AdminClient;
  onQuit: () => void;
  onDrain: () => void;
  /** METRICS_LOCALHOST_ACCESS_ONLY */
  metricsLocalhostOnly?: boolean;
  /** The agent's fault boundary: requests are the status server's entry points, /stats/prometheus the metrics merge's. */
  guard?: Guard;
}

/** Istio's IsRequestFromLocalhost: the peer address is a loopback address. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.replace(/^::ffff:/, '');
  return a === '::1' || /^127\./.test(a);
}

export class StatusServer {
  private server: http.Server | undefined;
  private lastProbeOk = false;
  private readonly guard: Guard;
  private boundPort: number | undefined;
  private readonly mergedStats: (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => Promise<void>;

  constructor(private readonly o: StatusServerOptions) {
    this.guard = o.guard ?? UNGUARDED;
    this.mergedStats = this.guard.entry(
      'metrics',
      (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => this.stats(req, res, url),
      async (e, _req, res) => {
        if (!res.headersSent) text(res, 500, `failed to merge metrics: ${e.message}\n`);
        else res.end();
      },
    );
  }

  async start(): Promise<number> {
    // A request that fails is answered 500 (Go's net/http ends the connection after a handler's panic);
    // the server goes on with the next one.
    const failed = (req: http.IncomingMessage, res: http.ServerResponse, e: Error) => {
      log.error(`status server: ${req.method} ${req.url}: ${e.message}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    };
    const handle = this.guard.entry(
      'status',
      (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res),
      async (e, req, res) => failed(req, res, e),
    );
    const server = http.createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // a restart binds the port first given out again (port 0 in tests picks one once)
      server.listen(this.boundPort ?? this.o.port, this.o.host, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((e: Error) => {
      throw new Error(`Error listening on status port: ${e.message}`);
    });
    this.server = server;
    const port = (server.address() as AddressInfo).port;
    this.boundPort = port;
    log.info(`status server listening on port ${port}`);
    return port;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const p = url.pathname;
    if (p === '/healthz/ready') return this.ready(res);
    if (p === '/stats/prometheus') return this.mergedStats(req, res, url);
    if (p === '/quitquitquit' || p === '/drain') {
      if (!isLoopback(req.socket.remoteAddress)) return text(res, 403, 'Only requests from localhost are allowed\n');
      if (req.method !== 'POST') return text(res, 405, 'Method Not Allowed\n');
      text(res, 200, 'OK');
      if (p === '/quitquitquit') {
        log.info('handling /quitquitquit, notifying pilot-agent to exit');
        this.o.onQuit();
      } else {
        log.info('handling /drain, starting drain');
        this.o.onDrain();
      }
      return;
    }
    if (p.startsWith('/app-health/') || p.startsWith('/app-lifecycle/')) {
      log.error(`Prober does not exists url ${p}`);
      return text(res, 400, `app prober config does not exists for ${p}`);
    }
    text(res, 404, '404 page not found\n');
  }

  private async ready(res: http.ServerResponse): Promise<void> {
    try {
      await this.o.readiness.check();
      if (!this.lastProbeOk) log.info('proxy is ready');
      this.lastProbeOk = true;
      res.writeHead(200);
      res.end();
    } catch (e) {
      log.warn(`proxy is NOT ready: ${(e as Error).message}`);
      this.lastProbeOk = false;
      text(res, 503, `${(e as Error).message}\n`);
    }
  }

  private async stats(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    if (this.o.metricsLocalhostOnly && !isLoopback(req.socket.remoteAddress)) {
      return text(res, 403, 'Only requests from localhost are allowed\n');
    }
    scrapesTotal.inc();
    let proxy = '';
    if (this.o.admin) {
      const headers: Record<string, string> = {};
      for (const h of ['accept', 'user-agent', 'x-prometheus-scrape-timeout-seconds']) {
        const v = req.headers[h];
        if (typeof v === 'string' && v) headers[h] = v;
      }
      const timeout = Number(headers['x-prometheus-scrape-timeout-seconds']);
      try {
        const r = await this.o.admin.get(`stats/prometheus${url.search}`, Number.isFinite(timeout) && timeout > 0 ? timeout * 1000 : 10_000, headers);
        if (r.status !== 200) throw new Error(`error scraping ${this.o.admin.url('stats/prometheus')}, status code: ${r.status}`);
        proxy = r.body;
      } catch (e) {
        log.error(`failed scraping envoy metrics: ${e instanceof HttpCallError ? e.message : (e as Error).message}`);
        scrapeFailures.inc({ type: 'envoy' });
      }
    }
    let agent = '';
    try {
      agent = await metricsText();
    } catch (e) {
      log.error(`failed scraping and writing agent metrics: ${(e as Error).message}`);
      scrapeFailures.inc({ type: 'agent' });
    }
    res.writeHead(200, { 'Content-Type': PROMETHEUS_TEXT });
    res.end(joinExpositions(agent, proxy));
  }
}

/** Plain concatenation, as Istio merges: each part ends with a newline. */
export function joinExpositions(...parts: string[]): string {
  return parts
    .filter((p) => p !== '')
    .map((p) => (p.endsWith('\n') ? p : `${p}\n`))
    .join('');
}

function text(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body);
}
