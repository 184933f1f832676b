// ControlZ (Istio's pkg/ctrlz): an introspection web UI and its JSON API on --ctrlz_address/--ctrlz_port.
// Paths follow Istio: `/` home, `/<topic>z/` pages, `/<topic>j/` JSON (`/scopej/<scope>` GET/PUT,
// `/memj/forcecollection` PUT, `/signalj/SIGUSR1` PUT/POST, `/homej/exit` PUT).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { joinHostPort } from '../../lib/hostport';
import { readBody, writeText } from '../router';
import { startHttpListener, type Listener } from '../listeners';
import { appSignalWatcherCount, notifyAppSignal } from '../appsignals';
import {
  allScopes,
  applyScopeUpdate,
  argsInfo,
  envInfo,
  findScopeJson,
  forceCollection,
  homeInfo,
  localIP,
  memInfo,
  metricFamilies,
  procInfo,
  type ScopeJson,
  startGcCounting,
  stopGcCounting,
  TOPICS,
  versionInfo,
} from './topics';
import * as pages from './pages';

export interface ControlZOptions {
  /** --ctrlz_address; `*` means every address. */
  address: string;
  /** --ctrlz_port; 0 picks a free port. */
  port: number;
  /** PUT /homej/exit: shut the process down (the daemon's graceful shutdown). */
  onExit: () => void;
}

export const CTRLZ_FLAG = '--ctrlz_address/--ctrlz_port';

/** The address string ControlZ listens on, from its two flags. */
export function controlzAddress(address: string, port: number): string {
  return joinHostPort(address === '*' ? '' : address, port);
}

function renderJSON(res: ServerResponse, status: number, value: unknown): void {
  // Go's json.Encoder ends the document with a newline.
  writeText(res, status, JSON.stringify(value) + '\n', 'application/json; charset=utf-8');
}

function methodNotAllowed(res: ServerResponse): void {
  writeText(res, 405, 'Method Not Allowed\n');
}

/** The ControlZ request listener; exported for tests that do not need a socket. */
export function controlzHandler(onExit: () => void) {
  const instance = `${process.execPath} - ${localIP()}`;
  const page = (res: ServerResponse, title: string, active: string | undefined, body: string, script?: string, status = 200) =>
    writeText(res, status, pages.layout({ title, instance, topics: TOPICS, active, body, script }), 'text/html; charset=utf-8');

  const htmlTopics: Record<string, (res: ServerResponse) => Promise<void> | void> = {
    scope: (res) => page(res, 'Logging Scopes', 'scope', pages.scopesBody(allScopes()), pages.SCOPES_JS),
    mem: (res) => page(res, 'Memory Usage', 'mem', pages.memBody(memInfo()), pages.MEM_JS),
    env: (res) => page(res, 'Environment Variables', 'env', pages.envBody(envInfo())),
    proc: (res) => page(res, 'Process Info', 'proc', pages.procBody(procInfo()), pages.PROC_JS),
    arg: (res) => page(res, 'Command-Line Arguments', 'arg', pages.argsBody(argsInfo())),
    version: (res) => page(res, 'Version Info', 'version', pages.versionBody(versionInfo())),
    metric: async (res) => page(res, 'Metrics', 'metric', pages.metricsBody(await metricFamilies())),
    signal: (res) => page(res, 'Signals', 'signal', pages.signalsBody(appSignalWatcherCount()), pages.SIGNALS_JS),
  };

  const jsonTopics: Record<string, () => unknown> = {
    mem: memInfo,
    env: () => envInfo(),
    proc: procInfo,
    arg: argsInfo,
    version: versionInfo,
  };

  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const method = req.method ?? 'GET';

    if (path === '/') {
      if (method !== 'GET') return methodNotAllowed(res);
      return page(res, 'Home', undefined, pages.homeBody(homeInfo(), TOPICS), pages.HOME_JS);
    }
    if (path === '/homej' || path === '/homej/') {
      if (method !== 'GET') return methodNotAllowed(res);
      return renderJSON(res, 200, homeInfo());
    }
    if (path === '/homej/exit') {
      if (method !== 'PUT') return methodNotAllowed(res);
      res.writeHead(202).end();
      setImmediate(onExit);
      return;
    }

    const m = /^\/([a-z]+)([zj])(\/.*)?$/.exec(path);
    const prefix = m?.[1];
    const kind = m?.[2];
    const rest = m?.[3];
    if (m && prefix && TOPICS.some((t) => t.prefix === prefix)) {
      if (rest === undefined) {
        // gorilla/mux StrictSlash: `/scopez` → `/scopez/`.
        res.writeHead(301, { Location: `${path}/${url.search}` }).end();
        return;
      }
      if (kind === 'z') {
        if (rest !== '/') return notFoundPage(res, path);
        if (method !== 'GET') return methodNotAllowed(res);
        return htmlTopics[prefix]!(res);
      }
      return json(prefix, rest, method, req, res, path);
    }
    if (method !== 'GET') return methodNotAllowed(res);
    notFoundPage(res, path);
  };

  function notFoundPage(res: ServerResponse, path: string): void {
    page(res, 'Page Not Found', undefined, pages.notFoundBody(path), undefined, 404);
  }

  async function json(prefix: string, rest: string, method: string, req: IncomingMessage, res: ServerResponse, path: string) {
    if (prefix === 'scope') {
      if (rest === '/') {
        if (method !== 'GET') return methodNotAllowed(res);
        return renderJSON(res, 200, allScopes());
      }
      const name = decodeURIComponent(rest.slice(1));
      if (method === 'GET') {
        const info = findScopeJson(name);
        if (!info) return writeText(res, 400, `unknown scope name: ${name}`);
        return renderJSON(res, 200, info);
      }
      if (method === 'PUT') {
        let update: Partial<ScopeJson>;
        try {
          const parsed: unknown = JSON.parse((await readBody(req, 1 << 20)).toString('utf8'));
          if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('expected a JSON object');
          update = parsed as Partial<ScopeJson>;
        } catch (e) {
          return writeText(res, 400, `unable to decode request: ${(e as Error).message}`);
        }
        if (!applyScopeUpdate(name, update)) return writeText(res, 400, `unknown scope name: ${name}`);
        res.writeHead(202).end();
        return;
      }
      return methodNotAllowed(res);
    }
    if (prefix === 'mem' && rest === '/forcecollection') {
      if (method !== 'PUT') return methodNotAllowed(res);
      forceCollection();
      res.writeHead(202).end();
      return;
    }
    if (prefix === 'signal') {
      if (rest !== '/SIGUSR1') return notFoundPage(res, path);
      if (method !== 'PUT' && method !== 'POST') return methodNotAllowed(res);
      notifyAppSignal('SIGUSR1', `Remote: ${req.socket.remoteAddress}:${req.socket.remotePort}`);
      res.writeHead(202).end();
      return;
    }
    if (prefix === 'metric') {
      if (rest !== '/') return notFoundPage(res, path);
      return renderJSON(res, 200, await metricFamilies());
    }
    const get = jsonTopics[prefix];
    if (!get || rest !== '/') return notFoundPage(res, path);
    if (method !== 'GET') return methodNotAllowed(res);
    return renderJSON(res, 200, get());
  }
}

/** Starts ControlZ; the returned listener stops it. */
export async function startControlZ(o: ControlZOptions): Promise<Listener> {
  const handler = controlzHandler(o.onExit);
  const listener = await startHttpListener({
    name: 'ctrlz',
    flag: CTRLZ_FLAG,
    address: controlzAddress(o.address, o.port),
    handler: (req, res) => {
      handler(req, res).catch((e: unknown) => {
        if (!res.headersSent) writeText(res, 500, String((e as Error).message ?? e));
      });
    },
  });
  startGcCounting();
  const drain = listener.drain.bind(listener);
  listener.drain = async (deadline) => {
    stopGcCounting();
    await drain(deadline);
  };
  return listener;
}
