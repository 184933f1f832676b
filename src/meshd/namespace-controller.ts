// The namespace controller (Istio's pilot/pkg/serviceregistry/kube/controller/namespacecontroller.go):
// keeps the ConfigMap PILOT_CA_CERT_CONFIGMAP (`mesh-ca-root-cert`, key `root-cert.pem`) holding the
// mesh root in every namespace the daemon watches, where the injected sidecar mounts it. A ConfigMap that
// is deleted is created again, an edited `root-cert.pem` is put back, and a new root (rotation, plugged-in
// certificates reloaded) is written everywhere. It runs only while this daemon leads the
// NamespaceController election.
//
// Which namespaces: all but Kubernetes' own (injection's ignored namespaces, except kube-system, which
// Istio keeps for node proxies there), narrowed to MESH_WATCH_NAMESPACE when set and to the namespaces
// meshConfig discoverySelectors select; terminating namespaces are left alone.
import { OrchApiError, type OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { type LabelSelector, namespaceSelected } from '../config/meshconfig';
import { IGNORED_NAMESPACES } from '../inject/inject';
import { registerScope } from '../lib/log';
import { ReconcileQueue } from '../lib/reconcile-queue';

const log = registerScope('namespace', 'namespace controller (root certificate ConfigMaps)');

/** Istio's CACertNamespaceConfigMapDataName. */
export const ROOT_CERT_KEY = 'root-cert.pem';
/** Label of the ConfigMaps written (Istio: istio.io/config=true). */
export const CONFIG_LABEL = { 'mesh.io/config': 'true' } as const;
/** Istio's maxRetries: 5 ms, 10 ms, … 80 ms. */
const MAX_ATTEMPTS = 5;

/** Namespaces never given the ConfigMap: Kubernetes' own, except kube-system. */
export const SKIPPED_NAMESPACES: ReadonlySet<string> = new Set(IGNORED_NAMESPACES.filter((n) => n !== 'kube-system'));

interface NamespaceObject {
  metadata: { name: string; labels?: Record<string, string> };
  status?: { phase?: string };
}
interface ConfigMapObject {
  metadata: { name: string; namespace: string; resourceVersion?: string; [k: string]: unknown };
  data?: Record<string, string> | null;
  [k: string]: unknown;
}

export interface NamespaceControllerOptions {
  client: OrchClient;
  /** PILOT_CA_CERT_CONFIGMAP. */
  configMapName: string;
  /** The roots to publish (the CA bundle); undefined while there are none. */
  caBundle: () => string | undefined;
  /** MESH_WATCH_NAMESPACE. */
  watchNamespace?: string;
  /** meshConfig discoverySelectors as they are now. */
  discoverySelectors: () => readonly LabelSelector[];
}

/** One run while leading: informers, a queue, and the writes. `stop()` ends it (leadership lost). */
export class NamespaceController {
  private readonly namespaces = new Map<string, NamespaceObject>();
  private readonly configMaps = new Map<string, ConfigMapObject>();
  private readonly nsInformer: ResourceInformer;
  private readonly cmInformer: ResourceInformer;
  private readonly queue: ReconcileQueue;
  private synced = false;

  constructor(private readonly o: NamespaceControllerOptions) {
    this.queue = new ReconcileQueue({
      name: 'namespace controller',
      reconcile: (ns) => this.reconcile(ns),
      log,
      maxAttempts: MAX_ATTEMPTS,
      baseDelayMs: 5,
    });
    const ns = o.watchNamespace;
    this.nsInformer = new ResourceInformer(
      o.client,
      { path: '/api/v1/namespaces', ...(ns ? { fieldSelector: `metadata.name=${ns}` } : {}), log },
      {
        add: (x) => this.namespaceChanged(x),
        update: (x) => this.namespaceChanged(x),
        delete: (x) => void this.namespaces.delete(String(x.metadata.name)),
      },
    );
    this.cmInformer = new ResourceInformer(
      o.client,
      {
        path: ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps` : '/api/v1/configmaps',
        fieldSelector: `metadata.name=${o.configMapName}`,
        log,
      },
      {
        add: (x) => this.configMapChanged(x, false),
        update: (x) => this.configMapChanged(x, false),
        delete: (x) => this.configMapChanged(x, true),
      },
    );
  }

  async start(): Promise<void> {
    log.info(`starting namespace controller: ConfigMap ${this.o.configMapName} in every watched namespace`);
    this.nsInformer.start();
    this.cmInformer.start();
    await Promise.all([this.nsInformer.whenSynced(), this.cmInformer.whenSynced()]);
    this.synced = true;
    this.resyncAll();
  }

  /** A new root, or new discoverySelectors: every namespace is looked at again. */
  resyncAll(): void {
    if (!this.synced) return;
    for (const n of this.namespaces.values()) if (n.status?.phase !== 'Terminating') this.enqueue(n.metadata.name);
  }

  async stop(): Promise<void> {
    await Promise.all([this.nsInformer.stop(), this.cmInformer.stop()]);
    await this.queue.stop();
  }

  /** Resolves when the queue has nothing left to do (for tests and shutdown). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  private selected(ns: string): boolean {
    if (SKIPPED_NAMESPACES.has(ns)) return false;
    if (this.o.watchNamespace && this.o.watchNamespace !== ns) return false;
    const n = this.namespaces.get(ns);
    if (!n) return false;
    return namespaceSelected(this.o.discoverySelectors(), n.metadata.labels ?? {});
  }

  private enqueue(ns: string): void {
    if (this.synced && this.selected(ns)) this.queue.add(ns);
  }

  private namespaceChanged(x: RawObject): void {
    const n = x as unknown as NamespaceObject;
    this.namespaces.set(n.metadata.name, n);
    if (n.status?.phase !== 'Terminating') this.enqueue(n.metadata.name);
  }

  private configMapChanged(x: RawObject, gone: boolean): void {
    const cm = x as unknown as ConfigMapObject;
    if (gone) this.configMaps.delete(cm.metadata.namespace);
    else this.configMaps.set(cm.metadata.namespace, cm);
    this.enqueue(cm.metadata.namespace);
  }

  /** Istio's reconcileCACert → InsertDataToConfigMap: create when missing, else put our key back. */
  private async reconcile(ns: string): Promise<void> {
    if (!this.selected(ns) || this.namespaces.get(ns)?.status?.phase === 'Terminating') return;
    const pem = this.o.caBundle();
    if (pem === undefined) return;
    const name = this.o.configMapName;
    const collection = `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps`;
    const current = this.configMaps.get(ns);
    if (!current) {
      try {
        const created = (await this.o.client.request('POST', collection, {
          body: {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name, namespace: ns, labels: { ...CONFIG_LABEL } },
            data: { [ROOT_CERT_KEY]: pem },
          },
        })) as ConfigMapObject;
        this.configMaps.set(ns, created);
        log.info(`created ConfigMap ${ns}/${name}`);
      } catch (e) {
        // The namespace went away between the event and now: nothing to write into.
        if (e instanceof OrchApiError && e.statusCode === 404) return;
        throw new Error(`error when creating configmap ${name}: ${(e as Error).message}`);
      }
      return;
    }
    if (current.data?.[ROOT_CERT_KEY] === pem) return;
    const updated: ConfigMapObject = { ...current, apiVersion: 'v1', kind: 'ConfigMap', data: { ...(current.data ?? {}), [ROOT_CERT_KEY]: pem } };
    try {
      const written = (await this.o.client.request('PUT', `${collection}/${encodeURIComponent(name)}`, { body: updated })) as ConfigMapObject;
      this.configMaps.set(ns, written);
      log.info(`updated ConfigMap ${ns}/${name}`);
    } catch (e) {
      throw new Error(`error when updating configmap ${name}: ${(e as Error).message}`);
    }
  }
}
