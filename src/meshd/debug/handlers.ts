// Istio's debug interface (pilot/pkg/xds/debug.go): `/debug/*` pages on the HTTP and monitoring
// listeners, reading the providers. Like istiod, requests from non-loopback clients must authenticate.
import type { ServerResponse } from 'node:http';
import { isLoopbackAddress } from '../../serve/address';
import { type RouteHandler, Router, writeJSON, writeText } from '../../serve/router';
import type { MeshdProviders } from '../providers';
import { pprofDisabledHandler, pprofHandler } from './pprof';
import { adszJson, configzJson, connectionsJson, endpointShardzJson, findConnection, registryzJson, synczJson } from './shapes';
import { registerScope } from '../../lib/log';
import { escapeHtml } from '../../lib/html';

const log = registerScope('default');

export interface DebugOptions {
  /** --profile: serve /debug/pprof/. */
  profile: boolean;
  /** UNSAFE_ENABLE_ADMIN_ENDPOINTS: serve /debug/force_disconnect. */
  unsafeAdminEndpoints: boolean;
}

interface DebugEntry {
  /** As listed: a path, possibly with a query (`/debug/adsz?push=true`). */
  name: string;
  help: string;
}

const NOT_CONNECTED = 'Proxy not connected to this Pilot instance. It may be connected to another instance.\n';
const NO_PROXY_ID = 'You must provide a proxyID in the query string\n';

/** The debug pages, registered on a router; the same set goes on the HTTP and the monitoring listener. */
export class DebugPages {
  private readonly entries: DebugEntry[] = [];
  private readonly routes = new Map<string, RouteHandler>();

  constructor(
    private readonly providers: MeshdProviders,
    private readonly options: DebugOptions,
  ) {
    const p = providers;
    if (options.profile) {
      this.add('/debug/pprof/', 'Displays pprof index', pprofHandler);
      this.add('/debug/pprof/cmdline', 'The command line invocation of the current program', pprofHandler);
      this.add('/debug/pprof/profile', 'CPU profile', pprofHandler);
      this.add('/debug/pprof/heap', 'Heap snapshot', pprofHandler);
    }
    if (options.unsafeAdminEndpoints) {
      this.add('/debug/force_disconnect', 'Disconnects a proxy from this Pilot', (req, res, url) => this.forceDisconnect(res, url));
    }
    this.add('/debug/adsz', 'Status and debug interface for ADS', (req, res, url) => this.adsz(res, url));
    if (p.xds.pushAll) this.list('/debug/adsz?push=true', 'Initiates push of the current state to all connected endpoints');
    this.add('/debug/syncz', 'Synchronization status of all Envoys connected to this Pilot instance', (req, res, url) =>
      writeJSON(res, url, synczJson(p.xds.connections(), url.searchParams.get('namespace') ?? '')),
    );
    this.add('/debug/registryz', 'Debug support for registry', (req, res, url) => writeJSON(res, url, registryzJson(p.services())));
    // Istio answers 400 with no body when it reads no orchestrator (no ListRemoteClusters).
    this.add('/debug/clusterz', 'List remote clusters where meshd reads endpoints', (req, res, url) =>
      p.clusters ? writeJSON(res, url, p.clusters()) : void res.writeHead(400).end(),
    );
    const shardz: RouteHandler = (req, res, url) => writeJSON(res, url, endpointShardzJson(p.services(), p.endpoints()));
    this.add('/debug/endpointz', 'Obsolete, use endpointShardz', shardz);
    this.add('/debug/endpointShardz', 'Info about the endpoint shards', shardz);
    this.add('/debug/configz', 'Debug support for config', (req, res, url) => writeJSON(res, url, configzJson(p.configs())));
    const gatewayStatus = p.gatewayStatus;
    if (gatewayStatus)
      this.add('/debug/gateway-status', 'The status of the Gateway API resources, as the leader writes it on Kubernetes', (req, res, url) =>
        writeJSON(res, url, gatewayStatus()),
      );
    this.add('/debug/config_dump', 'ConfigDump in the form of the Envoy admin config dump API for passed in proxyID', (req, res, url) =>
      this.configDump(res, url),
    );
    this.add('/debug/push_status', 'Last PushContext Details', (req, res) => {
      // Istio's StatusJSON: four-space indented, `{}` when nothing was recorded.
      const status = p.pushStatus();
      writeText(res, 200, status && Object.keys(status).length ? JSON.stringify(status, null, 4) : '{}', 'application/json');
    });
    this.add('/debug/connections', 'Info about the connected XDS clients', (req, res, url) =>
      writeJSON(res, url, connectionsJson(p.xds.connections())),
    );
    this.add('/debug/list', 'List all supported debug commands in json', (req, res, url) => writeJSON(res, url, this.commandNames()));
  }

  /** Registers every debug route on `router` (plus the explanatory 404s for what is switched off). */
  register(router: Router): void {
    router.handle('/debug', (req, res) => this.index(res));
    router.handle('/debug/', (req, res) => this.index(res));
    for (const [path, handler] of this.routes) {
      const guarded = this.guard(handler);
      if (path.endsWith('/')) router.handlePrefix(path, guarded);
      else router.handle(path, guarded);
    }
    if (!this.options.profile) router.handlePrefix('/debug/pprof/', pprofDisabledHandler);
    if (!this.options.unsafeAdminEndpoints) {
      router.handle('/debug/force_disconnect', (req, res) =>
        writeText(
          res,
          404,
          'force_disconnect is an unsafe admin endpoint and is off: set UNSAFE_ENABLE_ADMIN_ENDPOINTS=true to enable it (not for production)\n',
        ),
      );
    }
  }

  /**
   * `/debug/<name>` answered inside the process, for debug requests that arrive over ADS (Istio's DebugGen):
   * the page's status and body. Pages that answer asynchronously (pprof) are not offered this way.
   */
  serveInternal(name: string): { status: number; body: string } {
    const url = new URL(`/debug/${name}`, 'http://meshd');
    const handler = this.routes.get(url.pathname);
    const capture = captureResponse();
    if (!handler || url.pathname.startsWith('/debug/pprof/')) {
      capture.res.writeHead(404);
      capture.res.end('404 page not found\n');
    } else {
      void handler({} as never, capture.res, url);
    }
    return capture.result();
  }

  /** Istio's `/debug/list`: sorted names without `/debug/`, leaving out `list` itself and pprof. */
  commandNames(): string[] {
    return this.entries
      .map((e) => e.name.replace('/debug/', ''))
      .filter((n) => n !== 'list' && !n.includes('pprof'))
      .sort();
  }

  private add(path: string, help: string, handler: RouteHandler): void {
    this.list(path, help);
    this.routes.set(path, handler);
  }

  private list(name: string, help: string): void {
    this.entries.push({ name, help });
  }

  /** Istio's allowAuthenticatedOrLocalhost. */
  private guard(handler: RouteHandler): RouteHandler {
    return async (req, res, url) => {
      if (!isLoopbackAddress(req.socket.remoteAddress)) {
        const ids = this.providers.authenticateDebug ? await this.providers.authenticateDebug(req) : undefined;
        if (!ids) {
          log.error(`Failed to authenticate ${url.pathname}${url.search} from ${req.socket.remoteAddress}`);
          res.writeHead(401).end();
          return;
        }
      }
      await handler(req, res, url);
    };
  }

  private index(res: ServerResponse): void {
    const rows = [...this.entries]
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((e) => `\t<tr>\n\t<td><a href='${escapeHtml(e.name)}'>${escapeHtml(e.name)}</a></td><td>${escapeHtml(e.help)}</td>\n\t</tr>`)
      .join('\n');
    writeText(res, 200, INDEX_HEAD + rows + INDEX_TAIL, 'text/html; charset=utf-8');
  }

  private adsz(res: ServerResponse, url: URL): void {
    const xds = this.providers.xds;
    if (url.searchParams.get('push')) {
      if (!xds.pushAll) {
        writeText(res, 404, 'push on demand is not offered by this xDS server\n');
        return;
      }
      const n = xds.pushAll();
      writeText(res, 200, `Pushed to ${n} servers\n`);
      return;
    }
    const proxyID = url.searchParams.get('proxyID') ?? '';
    const conns = xds.connections();
    if (proxyID) {
      const con = findConnection(conns, proxyID);
      if (!con) {
        writeText(res, 404, NOT_CONNECTED);
        return;
      }
      writeJSON(res, url, adszJson([con]));
      return;
    }
    writeJSON(res, url, adszJson(conns));
  }

  private configDump(res: ServerResponse, url: URL): void {
    const con = this.connectionFor(res, url);
    if (!con) return;
    const types = (url.searchParams.get('types') ?? '')
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const dump = this.providers.xds.configDump(con.id, { includeEds: url.searchParams.has('include_eds'), types });
    if (dump === undefined) {
      writeText(res, 404, NOT_CONNECTED);
      return;
    }
    writeJSON(res, url, dump);
  }

  private forceDisconnect(res: ServerResponse, url: URL): void {
    const con = this.connectionFor(res, url);
    if (!con) return;
    if (!this.providers.xds.forceDisconnect(con.id)) {
      writeText(res, 404, NOT_CONNECTED);
      return;
    }
    log.info(`force_disconnect: closed ADS connection ${con.id}`);
    writeText(res, 200, 'OK');
  }

  /** Istio's getDebugConnection + errorHandler: 400 without proxyID, 404 when not connected here. */
  private connectionFor(res: ServerResponse, url: URL) {
    const proxyID = url.searchParams.get('proxyID') ?? '';
    if (!proxyID) {
      writeText(res, 400, NO_PROXY_ID);
      return undefined;
    }
    const con = findConnection(this.providers.xds.connections(), proxyID);
    if (!con) writeText(res, 404, NOT_CONNECTED);
    return con;
  }
}

const INDEX_HEAD = `<html>
<head>
<title>Pilot Debug Console</title>
</head>
<style>
#endpoints {
  font-family: "Trebuchet MS", Arial, Helvetica, sans-serif;
  border-collapse: collapse;
}
#endpoints td, #endpoints th {
  border: 1px solid #ddd;
  padding: 8px;
}
#endpoints tr:nth-child(even){background-color: #f2f2f2;}
#endpoints tr:hover {background-color: #ddd;}
#endpoints th {
  padding-top: 12px;
  padding-bottom: 12px;
  text-align: left;
  background-color: black;
  color: white;
}
</style>
<body>
<br/>
<p style = "font-family:Arial,Helvetica,sans-serif;">
Note: Use <b>pretty</b> in query string (like <b>debug/configz?pretty</b>) to format the output.
</p>
<table id="endpoints">
<tr><th>Endpoint</th><th>Description</th></tr>
`;
const INDEX_TAIL = `
</table>
<br/>
</body>
</html>
`;

/** A ServerResponse stand-in recording what a synchronous page handler writes. */
function captureResponse(): { res: ServerResponse; result(): { status: number; body: string } } {
  let status = 200;
  let body = '';
  const res = {
    writeHead(code: number) {
      status = code;
      return res;
    },
    setHeader() {
      return res;
    },
    write(chunk: string | Buffer) {
      body += String(chunk);
      return true;
    },
    end(chunk?: string | Buffer) {
      if (chunk !== undefined) body += String(chunk);
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, result: () => ({ status, body }) };
}
