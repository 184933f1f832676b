// One list+watch of one collection, on client-node's ListWatch (what makeInformer builds), with the
// lifecycle client-go's reflector has and ListWatch leaves to its user:
//
// - ListWatch itself relists on 410 Gone (an HTTP 410 or a watch ERROR event with code 410), and
//   resumes a watch that the server ended from the last resourceVersion it saw (bookmarks included);
// - on any other error it stops; we restart it with exponential backoff (client-go: 800 ms doubling
//   to 30 s, jittered), which resumes from the last resourceVersion when there is one and relists
//   otherwise; the backoff resets once the list succeeds or events flow again;
// - "synced" is when the first list has been applied.
import type * as K8s from '@kubernetes/client-node';
import type { Scope } from '../../lib/log';
import { defineCounter } from '../../lib/metrics';
import type { OrchClient } from './client';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Up to this fraction of the delay is added at random. */
  jitter: number;
}

const syncErrors = defineCounter({
  name: 'controller_sync_errors_total',
  help: 'Total number of errorMetric syncing controllers.',
  labelNames: ['cluster'] as const,
});

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 800, maxMs: 30_000, jitter: 1 };

/** client-go's pager page size for a reflector's list. */
export const PAGE_SIZE = 500;

interface ListPage {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: K8s.KubernetesObject[] | null;
}

/**
 * Lists a collection in pages of `pageSize` (`limit` + `continue`, one consistent snapshot), as
 * client-go's pager does, so a large collection is never one huge answer. A continue token that
 * expired before the last page (410) restarts the list in one piece, as the pager falls back to.
 */
export async function listPaged(
  client: OrchClient,
  path: string,
  selectors: { fieldSelector?: string | undefined; labelSelector?: string | undefined },
  signal: AbortSignal | undefined,
  pageSize: number,
): Promise<{ items: K8s.KubernetesObject[]; resourceVersion: string }> {
  const items: K8s.KubernetesObject[] = [];
  let token = '';
  let limit = pageSize;
  for (;;) {
    const query: Record<string, string> = {};
    if (selectors.fieldSelector) query.fieldSelector = selectors.fieldSelector;
    if (selectors.labelSelector) query.labelSelector = selectors.labelSelector;
    if (limit > 0) query.limit = String(limit);
    if (token) query.continue = token;
    let body: ListPage;
    try {
      body = (await client.getJson(path, query, signal)) as ListPage;
    } catch (e) {
      if (token && (e as { statusCode?: number }).statusCode === 410) {
        items.length = 0;
        token = '';
        limit = 0;
        continue;
      }
      throw e;
    }
    if (!body || typeof body !== 'object' || (body.items !== undefined && body.items !== null && !Array.isArray(body.items))) {
      throw new Error(`GET ${path}: the answer is not a list`);
    }
    if (!body.metadata?.resourceVersion) throw new Error(`GET ${path}: the list has no metadata.resourceVersion`);
    for (const o of body.items ?? []) items.push(o);
    token = body.metadata.continue ?? '';
    if (!token) return { items, resourceVersion: body.metadata.resourceVersion };
  }
}

export interface RawObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  [k: string]: unknown;
}

export interface InformerHandlers {
  add(obj: RawObject): void;
  update(obj: RawObject): void;
  delete(obj: RawObject): void;
  /**
   * The collection answered 404 (a CRD not installed, or removed). `stop`: the informer stops (the
   * handler has dealt with it); `retry`: it is retried with backoff like any failure.
   */
  notFound?(err: Error): 'retry' | 'stop';
}

export interface InformerOptions {
  /** Collection path: `/api/v1/services`, `/apis/networking.istio.io/v1/namespaces/ns/virtualservices`. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  /** Items per list page (default 500, client-go's pager). */
  pageSize?: number;
  backoff?: Partial<BackoffOptions>;
  log: Scope;
  /** Cluster id of the controller_sync_errors_total series (default Orchestrator). */
  cluster?: string;
}

export class ResourceInformer {
  private readonly lw: K8s.ListWatch<K8s.KubernetesObject>;
  private readonly backoff: BackoffOptions;
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  private listAbort: AbortController | undefined;
  private stopped = true;
  private syncedFlag = false;
  private readonly syncWaiters: Array<() => void> = [];
  private readonly delays = new Set<() => void>();

  constructor(
    private readonly client: OrchClient,
    private readonly opts: InformerOptions,
    private readonly handlers: InformerHandlers,
  ) {
    this.backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
    const list = async (): Promise<K8s.KubernetesListObject<K8s.KubernetesObject>> => {
      this.listAbort = new AbortController();
      const { items, resourceVersion } = await listPaged(client, opts.path, opts, this.listAbort.signal, opts.pageSize ?? PAGE_SIZE);
      // ListWatch applies the list synchronously once this promise settles; by the next turn of the
      // event loop the items are in place.
      setImmediate(() => this.listed());
      return { apiVersion: '', kind: '', metadata: { resourceVersion }, items } as K8s.KubernetesListObject<K8s.KubernetesObject>;
    };
    // ListWatch's own reconnect delay (1 s doubling to 30 s while a resumed watch sees no events)
    // ends early when we stop, and does not keep the process alive.
    const delayFn = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.delays.delete(finish);
          resolve();
        }, ms);
        timer.unref();
        const finish = () => {
          clearTimeout(timer);
          resolve();
        };
        this.delays.add(finish);
      });
    this.lw = new client.lib.ListWatch(
      opts.path,
      client.newWatch(() => this.stopped),
      list,
      false,
      opts.labelSelector || undefined,
      opts.fieldSelector,
      {
        delayFn,
      },
    );
    this.lw.on('add', (o) => this.event(() => handlers.add(o as RawObject)));
    this.lw.on('update', (o) => this.event(() => handlers.update(o as RawObject)));
    this.lw.on('delete', (o) => this.event(() => handlers.delete(o as RawObject)));
    this.lw.on('error', (err) => this.failed(err));
  }

  get path(): string {
    return this.opts.path;
  }

  hasSynced(): boolean {
    return this.syncedFlag;
  }

  whenSynced(): Promise<void> {
    return this.syncedFlag ? Promise.resolve() : new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    this.listAbort?.abort();
    for (const finish of [...this.delays]) finish();
    this.delays.clear();
    await this.lw.stop();
  }

  private run(): void {
    this.lw.start().catch((e: unknown) => this.failed(e));
  }

  private event(apply: () => void): void {
    if (this.stopped) return;
    this.failures = 0;
    apply();
  }

  private listed(): void {
    if (this.stopped) return;
    this.failures = 0;
    if (this.syncedFlag) return;
    this.syncedFlag = true;
    for (const w of this.syncWaiters.splice(0)) w();
  }

  private failed(err: unknown): void {
    if (this.stopped) return; // stopping aborts the request, which ListWatch reports as an error
    const e = err instanceof Error ? err : new Error(String(err));
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 404 && this.handlers.notFound && this.handlers.notFound(e) === 'stop') {
      this.stopped = true;
      void this.lw.stop();
      return;
    }
    syncErrors.inc({ cluster: this.opts.cluster ?? 'Orchestrator' });
    const base = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** this.failures);
    const delay = Math.round(base * (1 + Math.random() * this.backoff.jitter));
    this.failures += 1;
    this.opts.log.warn(`list/watch ${this.opts.path} failed: ${e.message}; retrying in ${delay}ms`);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (!this.stopped) this.run();
    }, delay);
  }
}
