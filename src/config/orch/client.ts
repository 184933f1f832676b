// The connection to the orchestrator API: a @kubernetes/client-node KubeConfig built from
// --orchconfig (or the in-cluster service account), with every request it authenticates passing
// through the --orchApiQPS/--orchApiBurst token bucket first. client-node authenticates each
// request (list, watch, typed API call) through KubeConfig.applySecurityAuthentication, so that
// is where throttling goes: nothing can reach the API server without taking a token.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type * as K8s from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { buildInfo } from '../../lib/buildinfo';
import { registerScope } from '../../lib/log';
import { limiterFor, type RateLimiter } from './ratelimit';
import { joinHostPort } from '../../lib/hostport';

const log = registerScope('orch', 'orchestrator client and informers');

export type ClientNode = typeof K8s;

/** The daemon's defaults for --orchApiQPS and --orchApiBurst. */
export const DEFAULT_ORCH_API_QPS = 80;
export const DEFAULT_ORCH_API_BURST = 160;

/** Where a service account's credentials are mounted in a pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface OrchClientOptions {
  /** --orchconfig: a client configuration file; unset = in-cluster configuration. */
  orchconfig?: string;
  /** --context: the context of `orchconfig` to use instead of its current-context. */
  context?: string;
  /**
   * A client configuration given as text (a remote cluster's, from a secret), and where it came from
   * for messages. Such a configuration is untrusted: credentials that read local files or run programs
   * are refused unless named in `allowInsecure` (PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS).
   */
  kubeconfig?: { text: string; origin: string; allowInsecure?: readonly string[] };
  /** --orchApiQPS (float): 0 = client-go's default 5, < 0 = unlimited. */
  qps?: number;
  /** --orchApiBurst (int): 0 = client-go's default 10. */
  burst?: number;
  /** MESH_ORCH_CLIENT_CONTENT_TYPE (`protobuf`|`json`); this client always speaks JSON. */
  contentType?: string;
  /** Environment for in-cluster discovery (ORCH_SERVICE_HOST/PORT or KUBERNETES_SERVICE_HOST/PORT). */
  env?: NodeJS.ProcessEnv;
  /** Prefix of the service account directory (tests point it at a temporary tree). */
  serviceAccountPrefix?: string;
  /**
   * User-Agent of every request, Istio's `<program>/<version>` (IstioUserAgent), so the API server's
   * audit log and flow control tell which program asked; default `mesh/<version>`.
   */
  userAgent?: string;
}

/** A problem with the client configuration: the message names the file and entry. */
export class OrchConfigError extends Error {
  override name = 'OrchConfigError';
}

/** A non-success answer from the API server, with its HTTP status and the Status reason. */
export class OrchApiError extends Error {
  override name = 'OrchApiError';
  constructor(
    readonly statusCode: number,
    readonly reason: string | undefined,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
  /** client-node's ListWatch reads `statusCode` / `code` to recognise 410 Gone. */
  get code(): number {
    return this.statusCode;
  }
}

export interface OrchClient {
  readonly lib: ClientNode;
  /** Throttled: every request authenticated through it waits for a token first. */
  readonly kubeConfig: K8s.KubeConfig;
  /** API server URL. */
  readonly server: string;
  /** `--orchconfig <file>` or `in-cluster`, for messages. */
  readonly origin: string;
  readonly limiter: RateLimiter;
  /** GET a path (`/api/v1/services`) as JSON; non-2xx answers throw OrchApiError. */
  getJson(path: string, query?: Record<string, string>, signal?: AbortSignal): Promise<unknown>;
  /**
   * Any other request (POST, PATCH, DELETE…) with a JSON body, answered as JSON; non-2xx answers throw
   * OrchApiError carrying the Status reason (`Conflict`, `NotFound`…).
   */
  request(method: OrchMethod, path: string, opts?: OrchRequestOptions): Promise<unknown>;
  /**
   * A client-node Watch that asks for bookmarks and a server-side timeout, as client-go's reflector
   * does. A watch that connects after `stopped()` turned true is aborted at once.
   */
  newWatch(stopped?: () => boolean): K8s.Watch;
  /** Rejects pending throttled requests; later requests fail. */
  close(): void;
}

export type OrchMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OrchRequestOptions {
  body?: unknown;
  /** Default `application/json`; a PATCH names its patch type (`application/merge-patch+json`). */
  contentType?: string;
  query?: Record<string, string>;
  signal?: AbortSignal;
  /** The answer as text, not parsed (container logs, a pod's pages through the API server's proxy). */
  text?: boolean;
}

let clientNode: Promise<ClientNode> | undefined;

/**
 * Loads @kubernetes/client-node on first use: the daemon in --configDir mode never pays for it, and
 * a runtime the library cannot run on gets an error that says so instead of a stack from deep inside it.
 */
export function loadClientNode(): Promise<ClientNode> {
  // client-node's WebSocket library looks for the optional native addon bufferutil when it loads; the
  // single executable cannot load addons from disk and Node warns on stderr about the attempt.
  process.env.WS_NO_BUFFER_UTIL ??= '1';
  clientNode ??= import('@kubernetes/client-node').catch((e: unknown) => {
    clientNode = undefined;
    const err = e as Error;
    const hint = /undici/.test(err.stack ?? '')
      ? ' (client-node 2.x ships undici 8, which needs Node >= 22.19; on Node 20 it must be given undici 6 or 7)'
      : '';
    throw new Error(`cannot load @kubernetes/client-node on Node ${process.version}: ${err.message}${hint}`);
  });
  return clientNode;
}

export async function createOrchClient(opts: OrchClientOptions = {}): Promise<OrchClient> {
  const lib = await loadClientNode();
  const limiter = limiterFor(opts.qps ?? DEFAULT_ORCH_API_QPS, opts.burst ?? DEFAULT_ORCH_API_BURST);
  reportContentType(opts.contentType);
  const userAgent = opts.userAgent || `mesh/${buildInfo().version}`;

  class ThrottledKubeConfig extends lib.KubeConfig {
    override async applySecurityAuthentication(context: K8s.RequestContext): Promise<void> {
      await limiter.take();
      context.setHeaderParam('User-Agent', userAgent);
      return super.applySecurityAuthentication(context);
    }
  }
  const kc = new ThrottledKubeConfig();
  reuseConnections(kc);
  const origin = opts.kubeconfig
    ? opts.kubeconfig.origin
    : opts.orchconfig !== undefined && opts.orchconfig !== ''
      ? `--orchconfig ${opts.orchconfig}`
      : 'in-cluster';
  if (opts.kubeconfig) loadUntrusted(kc, opts.kubeconfig.text, opts.kubeconfig.origin, opts.kubeconfig.allowInsecure ?? []);
  else if (opts.orchconfig) loadFile(kc, opts.orchconfig, opts.context);
  else loadInCluster(kc, opts.env ?? process.env, opts.serviceAccountPrefix ?? '');
  const cluster = allowPlainHttp(kc, origin);
  const server = cluster.server.replace(/\/+$/, '');

  class BookmarkingWatch extends lib.Watch {
    constructor(
      config: K8s.KubeConfig,
      private readonly stopped: () => boolean,
    ) {
      super(config);
      // client-node ends a watch that has been silent for 30 s and starts another, so every quiet
      // collection reconnects twice a minute. The API server sends a bookmark about once a minute on
      // watches that allow them and ends each watch itself after timeoutSeconds: two minutes of silence
      // is a dead connection.
      (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = 120_000;
    }

    override async watch(
      path: string,
      queryParams: Record<string, string | number | boolean | undefined>,
      callback: (phase: string, apiObj: any, watchObj?: any) => void,
      done: (err: any) => void,
    ): Promise<AbortController> {
      // Bookmarks keep the resourceVersion of quiet resources fresh, so a reconnect resumes instead of
      // hitting 410; the randomised timeout (client-go: 5–10 min) spreads reconnects of many clients.
      const timeoutSeconds = 300 + Math.floor(Math.random() * 300);
      // ListWatch calls this from callbacks whose promise nobody awaits, and its stop() only aborts a
      // watch that has already connected: a stopped informer must not connect, and a failure to start
      // (the client closed while waiting for a token) must come back through `done` as an error.
      if (this.stopped()) return aborted();
      let ctrl: AbortController;
      try {
        ctrl = await super.watch(path, { ...queryParams, allowWatchBookmarks: true, timeoutSeconds }, callback, done);
      } catch (e) {
        done(e);
        return aborted();
      }
      if (this.stopped()) ctrl.abort();
      return ctrl;
    }
  }

  const http = new lib.IsomorphicFetchHttpLibrary();
  const send = async (method: OrchMethod, path: string, opts: OrchRequestOptions): Promise<unknown> => {
    const url = new URL(server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const ctx = new lib.RequestContext(url.toString(), lib.HttpMethod[method]);
    ctx.setHeaderParam('Accept', opts.text ? '*/*' : 'application/json');
    if (opts.body !== undefined) {
      ctx.setHeaderParam('Content-Type', opts.contentType ?? 'application/json');
      ctx.setBody(JSON.stringify(opts.body));
    }
    if (opts.signal) ctx.setSignal(opts.signal);
    await kc.applySecurityAuthentication(ctx);
    const resp = await http.send(ctx).toPromise();
    const text = await resp.body.text();
    if (resp.httpStatusCode < 200 || resp.httpStatusCode > 299) throw apiError(resp.httpStatusCode, method, path, text);
    if (opts.text) return text;
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch (e) {
      throw new OrchApiError(resp.httpStatusCode, undefined, path, `${method} ${path}: invalid JSON in the answer: ${(e as Error).message}`);
    }
  };
  return {
    lib,
    kubeConfig: kc,
    server,
    origin,
    limiter,
    async getJson(path, query, signal) {
      return send('GET', path, { query, signal });
    },
    request: (method, path, opts = {}) => send(method, path, opts),
    newWatch: (stopped = () => false) => new BookmarkingWatch(kc, stopped),
    close: () => limiter.close(),
  };
}

type DispatcherFactory = (cluster: K8s.Cluster | null, agentOptions: Record<string, unknown>) => unknown;

/**
 * client-node makes a new undici Agent for every request, so no connection is ever reused: each list,
 * watch and lease renewal pays a TCP and TLS handshake. The agent depends only on the cluster and the
 * credentials (re-read from their files per request, so a rotated client certificate still takes
 * effect): one agent is kept per distinct set and reused until they change.
 */
function reuseConnections(kc: K8s.KubeConfig): void {
  const target = kc as unknown as { createDispatcher: DispatcherFactory };
  const make = target.createDispatcher.bind(kc);
  let cached: { key: string; dispatcher: unknown } | undefined;
  target.createDispatcher = (cluster, agentOptions) => {
    const h = createHash('sha256');
    h.update(JSON.stringify([cluster?.name, cluster?.server, cluster?.proxyUrl, agentOptions.rejectUnauthorized, agentOptions.servername]));
    for (const k of ['ca', 'cert', 'key', 'pfx', 'passphrase'] as const) h.update(`|${k}|`).update(String(agentOptions[k] ?? ''));
    const key = h.digest('hex');
    if (cached?.key !== key) cached = { key, dispatcher: make(cluster, agentOptions) };
    return cached.dispatcher;
  };
}

function aborted(): AbortController {
  const c = new AbortController();
  c.abort();
  return c;
}

function loadFile(kc: K8s.KubeConfig, file: string, context?: string): void {
  const where = `orchestrator client configuration ${file}`;
  try {
    kc.loadFromFile(file);
  } catch (e) {
    throw new OrchConfigError(`cannot load ${where}: ${(e as Error).message}`);
  }
  if (context) {
    if (!kc.getContextObject(context)) throw new OrchConfigError(`${where}: context "${context}" does not exist`);
    kc.setCurrentContext(context);
  }
  checkContext(kc, where);
}

/**
 * Istio's sanitizeKubeConfig for configurations that come from secrets: auth providers other than oidc,
 * exec plugins and credentials read from files could leak the daemon's own secrets or run commands.
 */
function loadUntrusted(kc: K8s.KubeConfig, text: string, origin: string, allow: readonly string[]): void {
  const where = `orchestrator client configuration ${origin}`;
  // Checked on the document itself: client-node reads `token-file` while loading.
  let doc: { users?: Array<{ name?: string; user?: Record<string, unknown> }> };
  try {
    doc = (parseYaml(text) ?? {}) as typeof doc;
  } catch (e) {
    throw new OrchConfigError(`cannot load ${where}: ${(e as Error).message}`);
  }
  for (const u of Array.isArray(doc.users) ? doc.users : []) {
    const user = u?.user ?? {};
    const refuse = (what: string) => {
      throw new OrchConfigError(`${where}: user "${u?.name ?? ''}": ${what} is not allowed`);
    };
    const provider = (user['auth-provider'] as { name?: string } | undefined)?.name;
    if (provider && provider !== 'oidc' && !allow.includes(provider)) refuse(`auth provider ${provider}`);
    if (user['client-key'] && !allow.includes('clientKey')) refuse('clientKey');
    if (user['client-certificate'] && !allow.includes('clientCertificate')) refuse('clientCertificate');
    if (user['token-file'] && !allow.includes('tokenFile')) refuse('tokenFile');
    if (user.exec && !allow.includes('exec')) refuse('exec');
  }
  try {
    kc.loadFromString(text);
  } catch (e) {
    throw new OrchConfigError(`cannot load ${where}: ${(e as Error).message}`);
  }
  checkContext(kc, where);
}

function checkContext(kc: K8s.KubeConfig, where: string): void {
  const current = kc.getCurrentContext();
  if (!current) throw new OrchConfigError(`${where}: current-context is not set`);
  const ctx = kc.getContextObject(current);
  if (!ctx) throw new OrchConfigError(`${where}: current-context "${current}" is not among its contexts`);
  if (!kc.getCluster(ctx.cluster)) {
    throw new OrchConfigError(`${where}: context "${current}" names cluster "${ctx.cluster}", which is not among its clusters`);
  }
  if (ctx.user && !kc.getUser(ctx.user)) {
    throw new OrchConfigError(`${where}: context "${current}" names user "${ctx.user}", which is not among its users`);
  }
  checkServer(kc, where);
}

function loadInCluster(kc: K8s.KubeConfig, env: NodeJS.ProcessEnv, prefix: string): void {
  const host = env.ORCH_SERVICE_HOST || env.KUBERNETES_SERVICE_HOST;
  const port = env.ORCH_SERVICE_PORT || env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new OrchConfigError(
      'no --orchconfig given and not running in a cluster: ORCH_SERVICE_HOST/ORCH_SERVICE_PORT ' +
        '(or KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT) are not set',
    );
  }
  for (const [what, file] of [
    ['service account token', `${prefix}${SERVICE_ACCOUNT_DIR}/token`],
    ['cluster CA certificate', `${prefix}${SERVICE_ACCOUNT_DIR}/ca.crt`],
  ] as const) {
    try {
      readFileSync(file);
    } catch (e) {
      throw new OrchConfigError(`in-cluster configuration: cannot read the ${what} ${file}: ${(e as Error).message}`);
    }
  }
  kc.loadFromCluster(prefix);
  // loadFromCluster reads KUBERNETES_SERVICE_*; our product's names win when set.
  const c = kc.getCurrentCluster()!;
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  kc.loadFromOptions({
    clusters: [{ ...c, server: `${scheme}://${joinHostPort(host, port)}` }],
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  checkServer(kc, 'in-cluster configuration');
}

function checkServer(kc: K8s.KubeConfig, where: string): void {
  const c = kc.getCurrentCluster()!;
  if (!c.server) throw new OrchConfigError(`${where}: cluster "${c.name}" has no server`);
  let u: URL;
  try {
    u = new URL(c.server);
  } catch {
    throw new OrchConfigError(`${where}: cluster "${c.name}" server "${c.server}" is not a URL`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') {
    throw new OrchConfigError(`${where}: cluster "${c.name}" server "${c.server}" must be http:// or https://`);
  }
}

/**
 * client-node refuses http:// servers unless insecure-skip-tls-verify is set; with no TLS there is
 * nothing to verify, so (as kubectl does) we accept them, and say so.
 */
function allowPlainHttp(kc: K8s.KubeConfig, origin: string): K8s.Cluster {
  const c = kc.getCurrentCluster()!;
  if (!c.server.startsWith('http:') || c.skipTLSVerify) return c;
  log.info(`orchestrator API server ${c.server} (${origin}) is plain HTTP: no TLS`);
  const patched: K8s.Cluster = { ...c, skipTLSVerify: true };
  kc.loadFromOptions({
    clusters: kc.clusters.map((x) => (x.name === c.name ? patched : x)),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return patched;
}

function reportContentType(contentType: string | undefined): void {
  const ct = (contentType ?? 'protobuf').trim().toLowerCase();
  if (ct === 'json') return;
  if (ct === 'protobuf') {
    log.info('MESH_ORCH_CLIENT_CONTENT_TYPE=protobuf: this orchestrator client speaks JSON only; using application/json');
  } else {
    log.warn(`MESH_ORCH_CLIENT_CONTENT_TYPE=${contentType}: unknown content type (protobuf or json); using application/json`);
  }
}

function apiError(statusCode: number, method: OrchMethod, path: string, body: string): OrchApiError {
  let reason: string | undefined;
  let message = body.trim().slice(0, 500);
  try {
    const s = JSON.parse(body) as { kind?: string; reason?: string; message?: string };
    if (s && s.kind === 'Status') {
      reason = s.reason;
      message = s.message ?? message;
    }
  } catch {
    // not a Status object: keep the raw text
  }
  return new OrchApiError(statusCode, reason, path, `${method} ${path}: ${statusCode}${reason ? ` ${reason}` : ''}: ${message}`);
}
