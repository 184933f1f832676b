// An in-process stand-in for the Kubernetes API server, for tests of orchestrator clients. It keeps
// the parts of the documented API semantics that list/watch clients depend on:
//
// - one global resourceVersion, bumped by every write (as etcd's revision);
// - list responses carry `metadata.resourceVersion`; list items of built-in types carry no
//   apiVersion/kind (the real server omits them), custom resources do;
// - `?watch=true&resourceVersion=N` streams newline-delimited JSON events (ADDED, MODIFIED, DELETED)
//   that happened after N; an unset or "0" resourceVersion first sends the current state as ADDED;
//   an N older than the retained history is answered with 410 (as an ERROR event on a 200 stream,
//   which is what the watch cache does, or as an HTTP 410, which the API docs describe);
// - `allowWatchBookmarks=true` gets BOOKMARK events, `timeoutSeconds` ends the stream;
// - label selectors (`k=v`, `k!=v`, `k`, `!k`) and field selectors on metadata.name/namespace,
//   with objects that stop (start) matching delivered as DELETED (ADDED);
// - discovery documents (/api, /api/v1, /apis, /apis/{group}, /apis/{group}/{version}) and 404
//   for groups or versions that are not installed;
// - create (POST), replace (PUT, with resourceVersion preconditions), JSON merge patch (PATCH,
//   RFC 7386) and delete (DELETE).
//
// Test-only: never import from src/.
import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface ResourceDef {
  /** '' for the core group. */
  group: string;
  /** Versions served, in preference order (the first is the group's preferred version). */
  versions: readonly string[];
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const BUILTIN_RESOURCES: readonly ResourceDef[] = [
  { group: '', versions: ['v1'], plural: 'services', kind: 'Service', namespaced: true },
  { group: '', versions: ['v1'], plural: 'pods', kind: 'Pod', namespaced: true },
  { group: '', versions: ['v1'], plural: 'namespaces', kind: 'Namespace', namespaced: false },
  { group: '', versions: ['v1'], plural: 'nodes', kind: 'Node', namespaced: false },
  { group: '', versions: ['v1'], plural: 'secrets', kind: 'Secret', namespaced: true },
  { group: 'discovery.k8s.io', versions: ['v1'], plural: 'endpointslices', kind: 'EndpointSlice', namespaced: true },
  { group: 'apiextensions.k8s.io', versions: ['v1'], plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false },
];

const CRD_RESOURCE = BUILTIN_RESOURCES[BUILTIN_RESOURCES.length - 1]!;

const NETWORKING_KINDS = [
  ['Gateway', 'gateways'],
  ['VirtualService', 'virtualservices'],
  ['DestinationRule', 'destinationrules'],
  ['ServiceEntry', 'serviceentries'],
  ['WorkloadEntry', 'workloadentries'],
  ['WorkloadGroup', 'workloadgroups'],
  ['Sidecar', 'sidecars'],
] as const;
const SECURITY_KINDS = [
  ['RequestAuthentication', 'requestauthentications'],
  ['AuthorizationPolicy', 'authorizationpolicies'],
  ['PeerAuthentication', 'peerauthentications'],
] as const;

/** The CRDs of one mesh API group as the project's and Istio's charts install them. */
export function meshCrds(group: string, versions: readonly string[] = ['v1']): ResourceDef[] {
  const kinds = group.startsWith('networking.') ? NETWORKING_KINDS : group.startsWith('security.') ? SECURITY_KINDS : undefined;
  if (!kinds) throw new Error(`meshCrds: unknown group ${group}`);
  return kinds.map(([kind, plural]) => ({ group, versions, plural, kind, namespaced: true }));
}

export type KubeObject = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    uid?: string;
    generation?: number;
    creationTimestamp?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
};

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  watch: boolean;
  /** performance.now() at arrival. */
  at: number;
}

export interface FakeApiServerOptions {
  /** Watch events retained for resuming watches; older resourceVersions get 410. Default 1000. */
  historyLimit?: number;
  /** How a watch from a compacted resourceVersion is refused. Default 'error-event'. */
  expiredWatch?: 'error-event' | 'http-410';
  /** When set, every request must carry `Authorization: Bearer <token>` (else 401). */
  token?: string;
  /** Send BOOKMARK events this often to watches that allow them; 0 (default) = only on sendBookmarks(). */
  bookmarkIntervalMs?: number;
}

interface StoredEvent {
  rv: number;
  res: ResourceDef;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: KubeObject;
  /** The object before a MODIFIED, to tell selector transitions. */
  prev?: KubeObject;
}

interface Selectors {
  namespace?: string;
  label: LabelRequirement[];
  field: FieldRequirement[];
}

interface Watcher {
  res: ResourceDef;
  version: string;
  sel: Selectors;
  out: http.ServerResponse;
  bookmarks: boolean;
  timers: NodeJS.Timeout[];
}

interface Failure {
  method?: string;
  path: RegExp;
  status: number;
  remaining: number;
}

export class FakeApiServer {
  readonly requests: RecordedRequest[] = [];
  private readonly server: http.Server;
  private readonly resources = new Map<string, ResourceDef>(); // group/plural → def
  private readonly objects = new Map<string, Map<string, KubeObject>>(); // group/plural → ns/name → object
  private history: StoredEvent[] = [];
  private compactedRv = 0;
  private rv = 1;
  private readonly watchers = new Set<Watcher>();
  private held: Array<() => void> | undefined;
  private readonly failures: Failure[] = [];
  private readonly opts: Required<Omit<FakeApiServerOptions, 'token'>> & { token?: string };
  url = '';

  private constructor(opts: FakeApiServerOptions) {
    this.opts = { historyLimit: 1000, expiredWatch: 'error-event', bookmarkIntervalMs: 0, ...opts };
    for (const r of BUILTIN_RESOURCES) this.install(r);
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) sendStatus(res, 500, 'InternalError', String(e));
        else res.destroy();
      });
    });
  }

  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const s = new FakeApiServer(opts);
    await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    s.url = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
    return s;
  }

  async close(): Promise<void> {
    this.releaseWatches();
    this.closeWatches();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The current global resourceVersion. */
  get resourceVersion(): number {
    return this.rv;
  }

  // ---------------------------------------------------------------------------------------------
  // What is installed

  /**
   * Installs (serves) a resource, e.g. the CRDs of a mesh group, with its CustomResourceDefinition
   * object (established) for resources that are not built in. Idempotent.
   */
  install(...defs: ResourceDef[]): void {
    for (const d of defs) {
      const key = resKey(d.group, d.plural);
      this.resources.set(key, d);
      if (!this.objects.has(key)) this.objects.set(key, new Map());
      if (BUILTIN_RESOURCES.includes(d) || !this.resources.has(resKey(CRD_RESOURCE.group, CRD_RESOURCE.plural))) continue;
      const crd: KubeObject = {
        metadata: { name: `${d.plural}.${d.group}` },
        spec: {
          group: d.group,
          names: { kind: d.kind, plural: d.plural },
          scope: d.namespaced ? 'Namespaced' : 'Cluster',
          versions: d.versions.map((v, i) => ({ name: v, served: true, storage: i === 0 })),
        },
        status: { conditions: [{ type: 'Established', status: 'True' }] },
      };
      const stored = this.objects.get(resKey(CRD_RESOURCE.group, CRD_RESOURCE.plural))!.get(objKey(CRD_RESOURCE, undefined, crd.metadata.name));
      if (stored) this.doUpdate(CRD_RESOURCE, { ...crd, metadata: { ...stored.metadata } });
      else this.doCreate(CRD_RESOURCE, crd);
    }
  }

  /**
   * Stops serving a resource as a CRD deletion does: its objects are deleted (events), its watches end,
   * then its CustomResourceDefinition goes.
   */
  uninstall(group: string, plural: string): void {
    const key = resKey(group, plural);
    const res = this.resources.get(key);
    if (res) for (const o of [...this.objects.get(key)!.values()]) this.doDelete(res, o.metadata.namespace, o.metadata.name);
    this.resources.delete(key);
    this.objects.delete(key);
    for (const w of [...this.watchers]) if (w.res.group === group && w.res.plural === plural) this.endWatch(w);
    const crds = this.objects.get(resKey(CRD_RESOURCE.group, CRD_RESOURCE.plural))!;
    if (crds.has(objKey(CRD_RESOURCE, undefined, `${plural}.${group}`))) this.doDelete(CRD_RESOURCE, undefined, `${plural}.${group}`);
  }

  // ---------------------------------------------------------------------------------------------
  // Writes (also reachable over HTTP)

  /** Creates an object; apiVersion and kind name its resource. Returns the stored object. */
  create(obj: KubeObject): KubeObject {
    const { res } = this.resourceOf(obj);
    return this.doCreate(res, clone(obj));
  }

  /** Replaces an object (PUT). A set metadata.resourceVersion must match the stored one. */
  update(obj: KubeObject): KubeObject {
    const { res } = this.resourceOf(obj);
    return this.doUpdate(res, clone(obj));
  }

  /** Creates or replaces, ignoring resourceVersion preconditions. */
  apply(obj: KubeObject): KubeObject {
    const { res } = this.resourceOf(obj);
    const existing = this.objects.get(resKey(res.group, res.plural))!.get(objKey(res, obj.metadata.namespace, obj.metadata.name));
    const copy = clone(obj);
    delete copy.metadata.resourceVersion;
    return existing ? this.doUpdate(res, copy) : this.doCreate(res, copy);
  }

  /** JSON merge patch (RFC 7386) of one object. */
  patch(apiVersion: string, kind: string, namespace: string | undefined, name: string, patch: unknown): KubeObject {
    const res = this.resourceByKind(apiVersion, kind);
    return this.doPatch(res, namespace, name, patch);
  }

  delete(apiVersion: string, kind: string, namespace: string | undefined, name: string): KubeObject {
    const res = this.resourceByKind(apiVersion, kind);
    return this.doDelete(res, namespace, name);
  }

  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const res = this.resourceByKind(apiVersion, kind);
    const o = this.objects.get(resKey(res.group, res.plural))!.get(objKey(res, namespace, name));
    return o && clone(o);
  }

  // ---------------------------------------------------------------------------------------------
  // Controls for tests

  /** Ends every open watch stream, as the server does on restart or when a watch times out. */
  closeWatches(): void {
    for (const w of [...this.watchers]) this.endWatch(w);
  }

  /** New watch requests wait unanswered until releaseWatches() (a network partition, for tests of gaps). */
  holdWatches(): void {
    this.held ??= [];
  }

  releaseWatches(): void {
    const held = this.held;
    this.held = undefined;
    for (const go of held ?? []) go();
  }

  /** Forgets all retained watch history: every resourceVersion before now becomes too old. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
  }

  setHistoryLimit(n: number): void {
    this.opts.historyLimit = n;
    this.trimHistory();
  }

  /** Sends a BOOKMARK with the current resourceVersion on every watch that allows bookmarks. */
  sendBookmarks(): void {
    for (const w of this.watchers) if (w.bookmarks) this.bookmark(w);
  }

  /** The next `count` requests matching answer `status` with a Status body. */
  failRequests(path: RegExp, status: number, count = 1, method?: string): void {
    this.failures.push({ path, status, remaining: count, ...(method ? { method } : {}) });
  }

  /** Open watch streams as `group/plural` (core group: `/plural`), for assertions. */
  openWatches(): string[] {
    return [...this.watchers].map((w) => `${w.res.group}/${w.res.plural}`).sort();
  }

  /** Writes a client configuration file pointing at this server; returns its path. */
  async writeKubeconfig(dir: string, opts: { token?: string; fileName?: string; insecureSkipTlsVerify?: boolean } = {}): Promise<string> {
    await mkdir(dir, { recursive: true });
    const token = opts.token ?? this.opts.token ?? 'test-token';
    const file = join(dir, opts.fileName ?? 'orchconfig');
    const lines = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${this.url}`,
      ...(opts.insecureSkipTlsVerify ? ['    insecure-skip-tls-verify: true'] : []),
      'users:',
      '- name: tester',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: tester',
      'current-context: fake',
      '',
    ];
    await writeFile(file, lines.join('\n'));
    return file;
  }

  // ---------------------------------------------------------------------------------------------
  // Storage

  private resourceOf(obj: KubeObject): { res: ResourceDef } {
    if (!obj.apiVersion || !obj.kind) throw new Error('object needs apiVersion and kind');
    return { res: this.resourceByKind(obj.apiVersion, obj.kind) };
  }

  private resourceByKind(apiVersion: string, kind: string): ResourceDef {
    const [group, version] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    for (const r of this.resources.values()) if (r.group === group && r.kind === kind && r.versions.includes(version)) return r;
    throw new Error(`${apiVersion} ${kind} is not installed`);
  }

  private bump(): number {
    this.rv += 1;
    return this.rv;
  }

  private doCreate(res: ResourceDef, obj: KubeObject): KubeObject {
    const name = obj.metadata?.name;
    if (!name) throw new ApiError(422, 'Invalid', `${res.kind} "": metadata.name: Required value: name is required`);
    if (res.namespaced && !obj.metadata.namespace) obj.metadata.namespace = 'default';
    if (!res.namespaced) delete obj.metadata.namespace;
    const store = this.objects.get(resKey(res.group, res.plural))!;
    const k = objKey(res, obj.metadata.namespace, name);
    if (store.has(k)) throw new ApiError(409, 'AlreadyExists', `${res.plural} "${name}" already exists`);
    const rv = this.bump();
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    obj.metadata.generation = 1;
    obj.metadata.resourceVersion = String(rv);
    delete obj.apiVersion;
    delete obj.kind;
    store.set(k, obj);
    this.record({ rv, res, type: 'ADDED', object: obj });
    return this.render(res, res.versions[0]!, obj);
  }

  private doUpdate(res: ResourceDef, obj: KubeObject): KubeObject {
    const store = this.objects.get(resKey(res.group, res.plural))!;
    if (res.namespaced && !obj.metadata.namespace) obj.metadata.namespace = 'default';
    const k = objKey(res, obj.metadata.namespace, obj.metadata.name);
    const prev = store.get(k);
    if (!prev) throw new ApiError(404, 'NotFound', `${res.plural} "${obj.metadata.name}" not found`);
    if (obj.metadata.resourceVersion !== undefined && obj.metadata.resourceVersion !== prev.metadata.resourceVersion) {
      throw new ApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${res.plural} "${obj.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    return this.store(res, prev, obj);
  }

  private doPatch(res: ResourceDef, namespace: string | undefined, name: string, patch: unknown): KubeObject {
    const store = this.objects.get(resKey(res.group, res.plural))!;
    const prev = store.get(objKey(res, namespace, name));
    if (!prev) throw new ApiError(404, 'NotFound', `${res.plural} "${name}" not found`);
    const next = mergePatch(clone(prev), patch) as KubeObject;
    // identity fields cannot be patched away
    next.metadata = { ...next.metadata, name: prev.metadata.name, uid: prev.metadata.uid };
    if (prev.metadata.namespace) next.metadata.namespace = prev.metadata.namespace;
    return this.store(res, prev, next);
  }

  private store(res: ResourceDef, prev: KubeObject, next: KubeObject): KubeObject {
    const rv = this.bump();
    delete next.apiVersion;
    delete next.kind;
    next.metadata.uid = prev.metadata.uid;
    next.metadata.creationTimestamp = prev.metadata.creationTimestamp;
    const specChanged = JSON.stringify(withoutMeta(prev)) !== JSON.stringify(withoutMeta(next));
    next.metadata.generation = (prev.metadata.generation ?? 1) + (specChanged ? 1 : 0);
    next.metadata.resourceVersion = String(rv);
    this.objects.get(resKey(res.group, res.plural))!.set(objKey(res, next.metadata.namespace, next.metadata.name), next);
    this.record({ rv, res, type: 'MODIFIED', object: next, prev });
    return this.render(res, res.versions[0]!, next);
  }

  private doDelete(res: ResourceDef, namespace: string | undefined, name: string): KubeObject {
    const store = this.objects.get(resKey(res.group, res.plural))!;
    const k = objKey(res, namespace, name);
    const prev = store.get(k);
    if (!prev) throw new ApiError(404, 'NotFound', `${res.plural} "${name}" not found`);
    store.delete(k);
    const rv = this.bump();
    // The DELETED event carries the last state at the deletion's resourceVersion.
    const gone = clone(prev);
    gone.metadata.resourceVersion = String(rv);
    this.record({ rv, res, type: 'DELETED', object: gone });
    return this.render(res, res.versions[0]!, gone);
  }

  private record(ev: StoredEvent): void {
    this.history.push(ev);
    this.trimHistory();
    for (const w of this.watchers) if (w.res === ev.res) this.deliver(w, ev);
  }

  private trimHistory(): void {
    while (this.history.length > this.opts.historyLimit) this.compactedRv = this.history.shift()!.rv;
  }

  private render(res: ResourceDef, version: string, obj: KubeObject): KubeObject {
    return { apiVersion: res.group ? `${res.group}/${version}` : version, kind: res.kind, ...clone(obj) };
  }

  // ---------------------------------------------------------------------------------------------
  // HTTP

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const method = req.method ?? 'GET';
    this.requests.push({ method, path: url.pathname, query: url.searchParams, watch, at: performance.now() });

    if (this.opts.token !== undefined && req.headers.authorization !== `Bearer ${this.opts.token}`) {
      return sendStatus(res, 401, 'Unauthorized', 'Unauthorized');
    }
    const failure = this.failures.find((f) => f.remaining > 0 && f.path.test(url.pathname + url.search) && (!f.method || f.method === method));
    if (failure) {
      failure.remaining -= 1;
      return sendStatus(res, failure.status, reasonOf(failure.status), `injected failure ${failure.status}`);
    }
    const body = method === 'GET' || method === 'DELETE' ? undefined : await readBody(req);
    try {
      await this.route(method, url, watch, req, res, body);
    } catch (e) {
      if (e instanceof ApiError) return sendStatus(res, e.code, e.reason, e.message);
      throw e;
    }
  }

  private async route(
    method: string,
    url: URL,
    watch: boolean,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: string | undefined,
  ): Promise<void> {
    const parts = url.pathname.split('/').filter(Boolean);
    // Discovery
    if (method === 'GET' && parts.length === 1 && parts[0] === 'api')
      return sendJson(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    if (method === 'GET' && parts.length === 1 && parts[0] === 'apis') return sendJson(res, 200, this.groupList());
    if (method === 'GET' && parts[0] === 'apis' && parts.length === 2) {
      const g = this.groupDoc(parts[1]!);
      return g ? sendJson(res, 200, g) : notFound(res);
    }
    if (method === 'GET' && ((parts[0] === 'api' && parts.length === 2) || (parts[0] === 'apis' && parts.length === 3))) {
      const [group, version] = parts[0] === 'api' ? ['', parts[1]!] : [parts[1]!, parts[2]!];
      const doc = this.resourceListDoc(group, version);
      return doc ? sendJson(res, 200, doc) : notFound(res);
    }

    // Resources: /api/v1/... or /apis/{group}/{version}/...
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === 'api' && parts.length >= 3) [group, version, rest] = ['', parts[1]!, parts.slice(2)];
    else if (parts[0] === 'apis' && parts.length >= 4) [group, version, rest] = [parts[1]!, parts[2]!, parts.slice(3)];
    else return notFound(res);

    let namespace: string | undefined;
    let plural: string;
    let name: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1]!;
      plural = rest[2]!;
      name = rest[3];
      if (rest.length > 4) return notFound(res);
    } else {
      plural = rest[0]!;
      name = rest[1];
      if (rest.length > 2) return notFound(res);
    }
    const def = this.resources.get(resKey(group, plural));
    if (!def || !def.versions.includes(version)) return notFound(res);
    if (namespace !== undefined && !def.namespaced) return notFound(res);

    if (name === undefined) {
      if (method === 'GET' && watch) return this.serveWatch(def, version, namespace, url.searchParams, req, res);
      if (method === 'GET') return sendJson(res, 200, this.list(def, version, selectorsOf(namespace, url.searchParams)));
      if (method === 'POST') {
        const obj = parseObject(body);
        if (namespace !== undefined) {
          if (obj.metadata?.namespace && obj.metadata.namespace !== namespace) {
            throw new ApiError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
          }
          obj.metadata = { ...obj.metadata, namespace };
        }
        return sendJson(res, 201, this.render(def, version, stripRender(this.doCreate(def, obj))));
      }
      return sendStatus(res, 405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    }

    if (method === 'GET') {
      const o = this.objects.get(resKey(def.group, def.plural))!.get(objKey(def, namespace, name));
      return o ? sendJson(res, 200, this.render(def, version, o)) : sendStatus(res, 404, 'NotFound', `${def.plural} "${name}" not found`);
    }
    if (method === 'PUT') {
      const obj = parseObject(body);
      if (obj.metadata?.name !== name) throw new ApiError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
      if (namespace !== undefined) obj.metadata.namespace = namespace;
      return sendJson(res, 200, this.render(def, version, stripRender(this.doUpdate(def, obj))));
    }
    if (method === 'PATCH') {
      const ct = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      if (ct !== 'application/merge-patch+json') {
        return sendStatus(
          res,
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json`,
        );
      }
      let patch: unknown;
      try {
        patch = JSON.parse(body ?? '');
      } catch (e) {
        throw new ApiError(400, 'BadRequest', `error decoding patch: ${(e as Error).message}`);
      }
      return sendJson(res, 200, this.render(def, version, stripRender(this.doPatch(def, namespace, name, patch))));
    }
    if (method === 'DELETE') return sendJson(res, 200, this.render(def, version, stripRender(this.doDelete(def, namespace, name))));
    return sendStatus(res, 405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
  }

  private groupList(): unknown {
    const groups = new Map<string, ResourceDef[]>();
    for (const r of this.resources.values()) if (r.group) groups.set(r.group, [...(groups.get(r.group) ?? []), r]);
    return { kind: 'APIGroupList', apiVersion: 'v1', groups: [...groups.keys()].map((g) => this.groupDoc(g)) };
  }

  private groupDoc(group: string): unknown {
    const versions: string[] = [];
    for (const r of this.resources.values()) if (r.group === group) for (const v of r.versions) if (!versions.includes(v)) versions.push(v);
    if (versions.length === 0) return undefined;
    const gv = (v: string) => ({ groupVersion: `${group}/${v}`, version: v });
    return { kind: 'APIGroup', apiVersion: 'v1', name: group, versions: versions.map(gv), preferredVersion: gv(versions[0]!) };
  }

  private resourceListDoc(group: string, version: string): unknown {
    const resources = [...this.resources.values()].filter((r) => r.group === group && r.versions.includes(version));
    if (resources.length === 0) return undefined;
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group ? `${group}/${version}` : version,
      resources: resources.map((r) => ({
        name: r.plural,
        singularName: r.kind.toLowerCase(),
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
      })),
    };
  }

  private list(def: ResourceDef, version: string, sel: Selectors): unknown {
    const custom = !BUILTIN_RESOURCES.some((b) => b.group === def.group && b.plural === def.plural);
    const items = [...this.objects.get(resKey(def.group, def.plural))!.values()]
      .filter((o) => matches(o, sel))
      .sort(byNamespaceName)
      .map((o) => (custom ? this.render(def, version, o) : clone(o)));
    return {
      kind: `${def.kind}List`,
      apiVersion: def.group ? `${def.group}/${version}` : version,
      metadata: { resourceVersion: String(this.rv) },
      items,
    };
  }

  private serveWatch(
    def: ResourceDef,
    version: string,
    namespace: string | undefined,
    q: URLSearchParams,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): void {
    const start = (): void => {
      if (res.destroyed || req.destroyed) return;
      const rvParam = q.get('resourceVersion') ?? '';
      const from = rvParam === '' || rvParam === '0' ? undefined : Number(rvParam);
      if (from !== undefined && (!Number.isInteger(from) || from < 0)) {
        return sendStatus(res, 400, 'BadRequest', `invalid resource version: ${rvParam}`);
      }
      if (from !== undefined && from < this.compactedRv) {
        const message = `too old resource version: ${from} (${this.compactedRv + 1})`;
        if (this.opts.expiredWatch === 'http-410') return sendStatus(res, 410, 'Expired', message);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'ERROR', object: statusObject(410, 'Expired', message) }) + '\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      const w: Watcher = {
        res: def,
        version,
        sel: selectorsOf(namespace, q),
        out: res,
        bookmarks: q.get('allowWatchBookmarks') === 'true',
        timers: [],
      };
      this.watchers.add(w);
      res.on('close', () => this.endWatch(w));
      if (from === undefined) {
        for (const o of [...this.objects.get(resKey(def.group, def.plural))!.values()].sort(byNamespaceName)) {
          if (matches(o, w.sel)) this.send(w, 'ADDED', o);
        }
      } else {
        for (const ev of this.history) if (ev.rv > from && ev.res === def) this.deliver(w, ev);
      }
      const timeout = Number(q.get('timeoutSeconds') ?? '0');
      if (timeout > 0) w.timers.push(setTimeout(() => this.endWatch(w), timeout * 1000));
      if (w.bookmarks && this.opts.bookmarkIntervalMs > 0) {
        const t = setInterval(() => this.bookmark(w), this.opts.bookmarkIntervalMs);
        w.timers.push(t);
      }
    };
    if (this.held) this.held.push(start);
    else start();
  }

  private deliver(w: Watcher, ev: StoredEvent): void {
    const now = matches(ev.object, w.sel);
    if (ev.type === 'MODIFIED' && ev.prev) {
      const before = matches(ev.prev, w.sel);
      if (before && now) this.send(w, 'MODIFIED', ev.object);
      else if (before) this.send(w, 'DELETED', ev.object);
      else if (now) this.send(w, 'ADDED', ev.object);
      return;
    }
    if (now) this.send(w, ev.type, ev.object);
  }

  private send(w: Watcher, type: string, obj: KubeObject): void {
    if (w.out.writableEnded) return;
    w.out.write(JSON.stringify({ type, object: this.render(w.res, w.version, obj) }) + '\n');
  }

  private bookmark(w: Watcher): void {
    if (w.out.writableEnded) return;
    const apiVersion = w.res.group ? `${w.res.group}/${w.version}` : w.version;
    w.out.write(
      JSON.stringify({ type: 'BOOKMARK', object: { kind: w.res.kind, apiVersion, metadata: { resourceVersion: String(this.rv) } } }) + '\n',
    );
  }

  private endWatch(w: Watcher): void {
    if (!this.watchers.delete(w)) return;
    for (const t of w.timers) clearTimeout(t);
    if (!w.out.writableEnded) w.out.end();
  }
}

// -----------------------------------------------------------------------------------------------
// Helpers

class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

function resKey(group: string, plural: string): string {
  return `${group}/${plural}`;
}

function objKey(res: ResourceDef, namespace: string | undefined, name: string): string {
  return res.namespaced ? `${namespace ?? 'default'}/${name}` : `/${name}`;
}

function byNamespaceName(a: KubeObject, b: KubeObject): number {
  const ka = `${a.metadata.namespace ?? ''}/${a.metadata.name}`;
  const kb = `${b.metadata.namespace ?? ''}/${b.metadata.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function clone<T>(v: T): T {
  return structuredClone(v);
}

function withoutMeta(o: KubeObject): unknown {
  const { metadata: _m, ...rest } = o;
  return rest;
}

function stripRender(o: KubeObject): KubeObject {
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest as KubeObject;
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

type LabelRequirement = { key: string; op: '=' | '!=' | 'exists' | '!exists'; value?: string };
// `type` is a field selector of Secrets only (as the real server has it).
type FieldRequirement = { field: 'metadata.name' | 'metadata.namespace' | 'type'; op: '=' | '!='; value: string };

function selectorsOf(namespace: string | undefined, q: URLSearchParams): Selectors {
  const label: LabelRequirement[] = [];
  for (const term of (q.get('labelSelector') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([^!=\s]+)\s*(!=|==|=)\s*(.*)$/.exec(term);
    if (m) label.push({ key: m[1]!, op: m[2] === '!=' ? '!=' : '=', value: m[3]! });
    else if (term.startsWith('!')) label.push({ key: term.slice(1), op: '!exists' });
    else label.push({ key: term, op: 'exists' });
  }
  const field: FieldRequirement[] = [];
  for (const term of (q.get('fieldSelector') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(metadata\.name|metadata\.namespace|type)\s*(!=|==|=)\s*(.*)$/.exec(term);
    if (!m) throw new ApiError(400, 'BadRequest', `"${term}" is not a known field selector: only "metadata.name", "metadata.namespace", "type"`);
    field.push({ field: m[1] as FieldRequirement['field'], op: m[2] === '!=' ? '!=' : '=', value: m[3]! });
  }
  return { ...(namespace !== undefined ? { namespace } : {}), label, field };
}

function matches(o: KubeObject, sel: Selectors): boolean {
  if (sel.namespace !== undefined && o.metadata.namespace !== sel.namespace) return false;
  const labels = o.metadata.labels ?? {};
  for (const r of sel.label) {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    if (r.op === 'exists' && !has) return false;
    if (r.op === '!exists' && has) return false;
    if (r.op === '=' && labels[r.key] !== r.value) return false;
    if (r.op === '!=' && labels[r.key] === r.value) return false;
  }
  for (const r of sel.field) {
    const v =
      r.field === 'metadata.name'
        ? o.metadata.name
        : r.field === 'type'
          ? String((o as { type?: unknown }).type ?? '')
          : (o.metadata.namespace ?? '');
    if ((r.op === '=') !== (v === r.value)) return false;
  }
  return true;
}

function statusObject(code: number, reason: string, message: string): unknown {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

function sendJson(res: http.ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendStatus(res: http.ServerResponse, code: number, reason: string, message: string): void {
  sendJson(res, code, statusObject(code, reason, message));
}

function notFound(res: http.ServerResponse): void {
  sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
}

function reasonOf(code: number): string {
  return (
    {
      401: 'Unauthorized',
      403: 'Forbidden',
      404: 'NotFound',
      409: 'Conflict',
      410: 'Expired',
      429: 'TooManyRequests',
      500: 'InternalError',
      503: 'ServiceUnavailable',
    }[code] ?? 'Unknown'
  );
}

function parseObject(body: string | undefined): KubeObject {
  let v: unknown;
  try {
    v = JSON.parse(body ?? '');
  } catch (e) {
    throw new ApiError(400, 'BadRequest', `error decoding body: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ApiError(400, 'BadRequest', 'the body must be an object');
  const o = v as KubeObject;
  o.metadata ??= { name: '' };
  return o;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
