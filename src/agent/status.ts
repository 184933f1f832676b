// The agent's status server on ProxyConfig.statusPort (15020), Istio's layout: /healthz/ready, the merged
// /stats/prometheus and /metrics (agent metrics, the proxy's, then the application's: metrics-merge.ts), and the localhost-only POST endpoints /quitquitquit
// and /drain. The proxy's own :15021 listener forwards /healthz/ready here (it is in the bootstrap).
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registerScope } from '../lib/log';
import { metricsText } from '../lib/metrics';
import type { AdminClient } from './admin-client';
import { httpStream, type HttpStreamResult } from './http-client';
import { joinHostPort } from '../lib/hostport';
import { appMetricsUrl, FMT_TEXT, negotiateMetricsFormat, scrapeHeaders, scrapeTimeoutMs, type AppScrapeConfig } from './metrics-merge';
import { scrapeFailures, scrapesTotal } from './metrics';
import { UNGUARDED, type Guard } from './boundary';

const log = registerScope('healthcheck', 'status server of the mesh agent');

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
  /** The proxy's Prometheus listener port (PROXY_METRICS_PORT, 15090); undefined scrapes the admin API itself. */
  proxyStatsPort?: number;
  /** The application's metrics endpoint from MESH_METRICS_ANNOTATIONS (sidecars only). */
  app?: AppScrapeConfig;
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
    // `/metrics` is Prometheus's default path, `/stats/prometheus` the proxy's: Istio serves the merge on both.
    if (p === '/stats/prometheus' || p === '/metrics') return this.mergedStats(req, res, url);
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
    const headers = scrapeHeaders(req.headers);
    const timeoutMs = scrapeTimeoutMs(headers['x-prometheus-scrape-timeout-seconds']) ?? DEFAULT_SCRAPE_TIMEOUT_MS;
    const admin = this.o.admin;
    // Istio scrapes the proxy's own Prometheus listener (15090), which the bootstrap routes to the admin API.
    const proxyUrl = admin
      ? this.o.proxyStatsPort
        ? `http://${joinHostPort(admin.host, this.o.proxyStatsPort)}/stats/prometheus${url.search}`
        : admin.url(`stats/prometheus${url.search}`)
      : undefined;
    const app = this.o.app;
    // Istio's handleStats: both scrapes answered (headers), the agent's metrics written, then each body passed
    // on as it arrives (io.Copy): a proxy exposition of tens of MiB is never held whole
    const [proxy, application] = await Promise.all([
      proxyUrl ? scrape(proxyUrl, headers, timeoutMs, 'envoy') : undefined,
      app ? scrape(appMetricsUrl(app), headers, timeoutMs, 'application') : undefined,
    ]);
    let agent = '';
    try {
      agent = await metricsText();
    } catch (e) {
      log.error(`failed scraping and writing agent metrics: ${(e as Error).message}`);
      scrapeFailures.inc({ type: 'agent' });
    }
    // The application's format decides the answer's (text without one); its part goes last, since an
    // OpenMetrics exposition ends with `# EOF`.
    res.writeHead(200, { 'Content-Type': app ? negotiateMetricsFormat(application?.headers['content-type']) : FMT_TEXT });
    const out = new ExpositionWriter(res);
    out.part(agent);
    if (proxy) await copyPart(out, proxy.body, 'envoy');
    if (application) await copyPart(out, application.body, 'application');
    res.end();
  }
}

const DEFAULT_SCRAPE_TIMEOUT_MS = 10_000;

/** One GET of a metrics endpoint, at its headers; a failure is logged and counted (scrape_failures_total{type}), never thrown. */
async function scrape(
  target: string,
  headers: Record<string, string>,
  timeoutMs: number,
  type: 'envoy' | 'application',
): Promise<HttpStreamResult | undefined> {
  try {
    const r = await httpStream(target, { timeoutMs, headers });
    if (r.status !== 200) {
      r.body.resume();
      throw new Error(`error scraping ${target}, status code: ${r.status}`);
    }
    return r;
  } catch (e) {
    log.error(`failed scraping ${type} metrics: ${(e as Error).message}`);
    scrapeFailures.inc({ type });
    return undefined;
  }
}

/** The merged answer: parts one after the other, each ending with a newline (plain concatenation, as Istio merges). */
class ExpositionWriter {
  private endsLine = true;
  constructor(private readonly res: http.ServerResponse) {}
  /** Writes a piece; false when the client is slow (wait for 'drain'). */
  write(b: string | Buffer): boolean {
    if (b.length === 0) return true;
    this.endsLine = (typeof b === 'string' ? b.charCodeAt(b.length - 1) : b[b.length - 1]) === 10;
    return this.res.write(b);
  }
  /** Ends the current part: a newline when it did not end with one. */
  endPart(): void {
    if (!this.endsLine) this.write('\n');
  }
  part(text: string): void {
    this.write(text);
    this.endPart();
  }
  get closed(): boolean {
    return this.res.destroyed;
  }
  drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }
}

/** Copies one scraped body into the answer with backpressure; a failure midway is logged and counted, as Istio's io.Copy error. */
async function copyPart(out: ExpositionWriter, body: http.IncomingMessage, type: 'envoy' | 'application'): Promise<void> {
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (out.closed) break;
      if (!out.write(chunk)) await out.drained();
    }
  } catch (e) {
    log.error(`failed scraping and writing ${type} metrics: ${(e as Error).message}`);
    scrapeFailures.inc({ type });
  } finally {
    body.destroy();
  }
  out.endPart();
}

function text(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body);
}
