// The admin API (Envoy's /ready, /server_info, /config_dump, /stats, /stats/prometheus, /clusters,
// /listeners, /logging, /drain_listeners, /healthcheck/fail|ok, /quitquitquit…) on the bootstrap's
// admin address. Mutating endpoints require POST, as in Envoy.
import http from 'node:http';
import type { JsonValue } from '@bufbuild/protobuf';
import { LOG_LEVELS, parseLogLevel, type LoggerRegistry } from '../log';
import { Re2SyntaxError, searcher } from '../../lib/re2';
import { prometheusChunks, renderStatsJson, renderStatsText, type StatsQuery } from '../stats/render';
import type { StatsStore } from '../stats/store';
import type { TagProducer } from '../stats/tags';

export interface AdminHandlers {
  stats: StatsStore;
  tags: TagProducer;
  loggers: LoggerRegistry;
  /** Refreshes server.uptime/memory gauges before stats are read. */
  refreshServerStats(): void;
  state(): 'LIVE' | 'DRAINING' | 'PRE_INITIALIZING' | 'INITIALIZING';
  serverInfo(): JsonValue;
  /** GET /certs: the certificates of every live TLS context (Envoy's admin.v3.Certificates). */
  certs(): JsonValue;
  configDump(q: URLSearchParams): JsonValue;
  clustersText(): string;
  clustersJson(): JsonValue;
  listenersText(): string;
  listenersJson(): JsonValue;
  drainListeners(opts: { graceful: boolean; inboundOnly: boolean }): void;
  healthcheck(fail: boolean): void;
  quit(): void;
  memory(): JsonValue;
  resetCounters(): void;
  /** Engine workers: this thread's stats merged with every worker's (what /stats shows then). */
  mergedStats?: () => Promise<StatsStore>;
  /** Engine workers: a /logging change to repeat in every worker. */
  loggingChanged?: (q: URLSearchParams) => void;
  /** Extra POST routes (engine worker test hooks, only when enabled). */
  extraRoutes?: Record<string, { help: string; handle: (q: URLSearchParams) => Promise<string> }>;
}

type Route = { method: 'GET' | 'POST' | 'ANY'; help: string; handle: (q: URLSearchParams, res: http.ServerResponse) => void };

function send(res: http.ServerResponse, status: number, body: string, type = 'text/plain; charset=UTF-8'): void {
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-cache, max-age=0',
    'x-content-type-options': 'nosniff',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Bytes a response may hold unsent before the writer waits for the client to read: bounds a scrape's memory. */
const STREAM_BUFFERED = 1024 * 1024;

/**
 * A large answer (a /stats/prometheus of tens of MiB) written as its chunks come, with backpressure: the
 * chunks are made while the client reads, and other work runs between them. Chunked transfer, as Envoy's.
 */
async function stream(res: http.ServerResponse, chunks: Iterator<Buffer>, type: string): Promise<void> {
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache, max-age=0', 'x-content-type-options': 'nosniff' });
  try {
    for (let c = chunks.next(); !c.done; c = chunks.next()) {
      if (res.destroyed) return;
      res.write(c.value);
      if (res.writableLength > STREAM_BUFFERED) await drained(res);
    }
    res.end();
  } catch (e) {
    // headers are gone: cut the answer short rather than end it as if complete
    res.destroy(e as Error);
  }
}

function drained(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function sendJson(res: http.ServerResponse, v: JsonValue): void {
  send(res, 200, `${JSON.stringify(v, null, 2)}\n`, 'application/json');
}

/** POST /logging's query applied to a logger registry (also each engine worker's); throws on a bad name or level. */
export function applyLoggingQuery(loggers: LoggerRegistry, q: URLSearchParams): void {
  for (const [k, v] of q) {
    if (k === 'level') {
      const l = parseLogLevel(v);
      if (!l) throw new Error('unknown level');
      loggers.setAll(l);
    } else if (k === 'paths') {
      loggers.applyComponentLevels(v);
    } else {
      const l = parseLogLevel(v);
      if (!l || !loggers.set(k, l)) throw new Error('unknown logger or level');
    }
  }
}

function flag(q: URLSearchParams, name: string): boolean {
  return q.has(name) && q.get(name) !== 'false';
}

export class AdminServer {
  private readonly server: http.Server;
  private readonly routes: Record<string, Route>;

  constructor(private readonly h: AdminHandlers) {
    const stats = (q: URLSearchParams, res: http.ServerResponse, forceFormat?: string) => {
      let filter: ((name: string) => boolean) | undefined;
      const f = q.get('filter');
      if (f) {
        try {
          filter = searcher(f);
        } catch (e) {
          send(res, 400, `Invalid re2 regex: ${(e as Error).message}\n`);
          return;
        }
      }
      h.refreshServerStats();
      const sq: StatsQuery = { usedOnly: q.has('usedonly'), filter };
      const format = forceFormat ?? q.get('format') ?? 'text';
      const render = (store: StatsStore) => {
        if (format === 'json') send(res, 200, renderStatsJson(store, sq), 'application/json');
        else if (format === 'prometheus') void stream(res, prometheusChunks(store, h.tags, sq), 'text/plain; version=0.0.4; charset=UTF-8');
        else if (format === 'text') send(res, 200, renderStatsText(store, sq));
        else send(res, 400, `usage: /stats?format=(json|prometheus|text)\n`);
      };
      if (!h.mergedStats) render(h.stats);
      else h.mergedStats().then(render, (e: Error) => send(res, 500, `${e.message}\n`));
    };
    const logging = (q: URLSearchParams, res: http.ServerResponse) => {
      const usage = () => {
        let u = 'usage: /logging?<name>=<level> (change single level)\n';
        u += 'usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n';
        u += `usage: /logging?level=<level> (change all levels)\nlevels: ${LOG_LEVELS.join(' ')}\n`;
        return u;
      };
      try {
        applyLoggingQuery(h.loggers, q);
      } catch {
        send(res, 404, usage());
        return;
      }
      if ([...q.keys()].length > 0) h.loggingChanged?.(q);
      let out = 'active loggers:\n';
      for (const [n, l] of h.loggers.entries()) out += `  ${n}: ${l}\n`;
      send(res, 200, out);
    };
    this.routes = {
      '/ready': {
        method: 'GET',
        help: 'print server state, return 200 if LIVE, otherwise return 503',
        handle: (_q, res) => {
          const st = h.state();
          send(res, st === 'LIVE' ? 200 : 503, `${st}\n`);
        },
      },
      '/server_info': { method: 'GET', help: 'print server version/status information', handle: (_q, res) => sendJson(res, h.serverInfo()) },
      '/config_dump': {
        method: 'GET',
        help: 'dump current Envoy configs (experimental)',
        handle: (q, res) => {
          try {
            sendJson(res, h.configDump(q));
          } catch (e) {
            if (e instanceof Re2SyntaxError) send(res, 400, `Error while parsing name_regex: ${e.message}\n`);
            else send(res, 404, `${(e as Error).message}\n`);
          }
        },
      },
      '/stats': { method: 'GET', help: 'print server stats', handle: (q, res) => stats(q, res) },
      '/stats/prometheus': { method: 'GET', help: 'print server stats in prometheus format', handle: (q, res) => stats(q, res, 'prometheus') },
      '/clusters': {
        method: 'GET',
        help: 'upstream cluster status',
        handle: (q, res) => (q.get('format') === 'json' ? sendJson(res, h.clustersJson()) : send(res, 200, h.clustersText())),
      },
      '/listeners': {
        method: 'GET',
        help: 'print listener info',
        handle: (q, res) => (q.get('format') === 'json' ? sendJson(res, h.listenersJson()) : send(res, 200, h.listenersText())),
      },
      '/logging': { method: 'ANY', help: 'query/change logging levels', handle: logging },
      '/drain_listeners': {
        method: 'POST',
        help: 'drain listeners',
        handle: (q, res) => {
          h.drainListeners({ graceful: flag(q, 'graceful'), inboundOnly: flag(q, 'inboundonly') });
          send(res, 200, 'OK\n');
        },
      },
      '/healthcheck/fail': {
        method: 'POST',
        help: 'cause the server to fail health checks',
        handle: (_q, res) => {
          h.healthcheck(true);
          send(res, 200, 'OK\n');
        },
      },
      '/healthcheck/ok': {
        method: 'POST',
        help: 'cause the server to pass health checks',
        handle: (_q, res) => {
          h.healthcheck(false);
          send(res, 200, 'OK\n');
        },
      },
      '/quitquitquit': {
        method: 'POST',
        help: 'exit the server',
        handle: (_q, res) => {
          send(res, 200, 'OK\n');
          res.once('finish', () => setImmediate(() => h.quit()));
        },
      },
      '/memory': { method: 'GET', help: 'print current allocation/heap usage', handle: (_q, res) => sendJson(res, h.memory()) },
      '/hot_restart_version': {
        method: 'GET',
        help: 'print the hot restart compatibility version',
        handle: (_q, res) => send(res, 200, 'disabled\n'),
      },
      '/runtime': { method: 'GET', help: 'print runtime values', handle: (_q, res) => sendJson(res, { entries: {}, layers: [] }) },
      '/certs': { method: 'GET', help: 'print certs on machine', handle: (_q, res) => sendJson(res, h.certs()) },
      '/reset_counters': {
        method: 'POST',
        help: 'reset all counters to zero',
        handle: (_q, res) => {
          h.resetCounters();
          send(res, 200, 'OK\n');
        },
      },
    };
    for (const [p, r] of Object.entries(h.extraRoutes ?? {})) {
      this.routes[p] = {
        method: 'POST',
        help: r.help,
        handle: (q, res) =>
          void r.handle(q).then(
            (body) => send(res, 200, body),
            (e: Error) => send(res, 400, `${e.message}\n`),
          ),
      };
    }
    this.server = http.createServer((req, res) => this.dispatch(req, res));
    this.server.keepAliveTimeout = 5000;
  }

  private help(): string {
    let out = 'admin commands are:\n  /: print this help\n';
    for (const [p, r] of Object.entries(this.routes).sort(([a], [b]) => (a < b ? -1 : 1))) out += `  ${p}: ${r.help}\n`;
    return out;
  }

  private dispatch(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://admin');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (path === '/') {
      send(res, 200, this.help());
      return;
    }
    const r = this.routes[path];
    if (!r) {
      send(res, 404, `invalid path. ${this.help()}`);
      return;
    }
    if (r.method === 'POST' && req.method !== 'POST') {
      send(res, 405, 'This endpoint requires POST.\n');
      return;
    }
    try {
      r.handle(url.searchParams, res);
    } catch (e) {
      send(res, 500, `${(e as Error).message}\n`);
    }
  }

  listen(opts: { host: string; port: number } | { path: string }): Promise<{ host: string; port: number } | { path: string }> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen('path' in opts ? { path: opts.path } : { host: opts.host, port: opts.port }, () => {
        this.server.removeListener('error', reject);
        const a = this.server.address();
        if (a && typeof a === 'object') resolve({ host: a.address, port: a.port });
        else resolve({ path: String(a) });
      });
    });
  }

  close(): Promise<void> {
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}
