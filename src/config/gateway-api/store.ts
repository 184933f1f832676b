// A ConfigStore that adds, beside its source's own Gateways and VirtualServices, those translated from the Gateway
// API objects of the same source (translate.ts), and keeps the status it computed for them. Every reader of the
// store (registries, push context, debug pages) then serves Gateway API objects through the Gateway/VirtualService
// path unchanged. Istio's counterpart: pilot/pkg/config/kube/gateway/controller.go, a ConfigStoreController whose
// List(gvk.Gateway / gvk.VirtualService) returns the translated configs, aggregated with the CRD controller.
import { createHash } from 'node:crypto';
import type { ConfigEvent, ConfigStore } from '../store';
import { type Config, configKey, type Kind } from '../types';
import { type GatewayApiStatus, type StatusObject, statusObjects } from './status';
import { type GatewayApiOptions, newTranslationMemo, type TranslationMemo, translateGatewayApi } from './translate';

/** Kinds whose changes can change the translation. */
const INPUT_KINDS: ReadonlySet<Kind> = new Set<Kind>([
  'GatewayClass',
  'KubernetesGateway',
  'HTTPRoute',
  'GRPCRoute',
  'ReferenceGrant',
  'TLSRoute',
  'TCPRoute',
  'Service',
  'ServiceEntry',
  'Namespace',
  'Secret',
]);

/** The route kinds: a change of those alone keeps the translation's memo (translate.ts TranslationMemo). */
const ROUTE_KINDS: ReadonlySet<Kind> = new Set<Kind>(['HTTPRoute', 'GRPCRoute']);

type Derived = Map<string, Config>;

export class GatewayApiConfigStore implements ConfigStore {
  private derived: Derived = new Map();
  /** The derived configs by kind, as list() hands them out (the push context lists them on every build). */
  private derivedByKind = new Map<Kind, Config[]>();
  /** A digest of each derived config's spec and meta, to tell an unchanged translation without serializing the old one again. */
  private derivedDigest = new Map<string, string>();
  private memo: TranslationMemo = newTranslationMemo();
  private current: GatewayApiStatus = { gatewayClasses: new Map(), gateways: new Map(), routes: new Map() };
  private readonly handlers = new Set<(events: readonly ConfigEvent[]) => void>();
  private readonly off: () => void;

  constructor(
    private readonly inner: ConfigStore,
    private readonly opts: GatewayApiOptions,
  ) {
    this.off = inner.subscribe((events) => this.onEvents(events));
    if (inner.hasSynced()) this.recompute();
  }

  /** The status of every Gateway API object this controller owns, as last computed. */
  status(): GatewayApiStatus {
    return this.current;
  }

  /** Each object with a computed status, as a Kubernetes object (what `kubectl get -o yaml` would show). */
  statusObjects(): StatusObject[] {
    return statusObjects(this.current, (kind, ns, name) => this.inner.get(kind, ns, name));
  }

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    const own = this.inner.list(kind, namespace);
    if (kind !== 'Gateway' && kind !== 'VirtualService') return own;
    const all = (this.derivedByKind.get(kind) ?? []) as Config<K>[];
    const extra = namespace === undefined ? all : all.filter((c) => c.meta.namespace === namespace);
    return extra.length === 0 ? own : own.length === 0 ? extra : [...own, ...extra];
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    return this.inner.get(kind, namespace, name) ?? (this.derived.get(`${kind}/${namespace}/${name}`) as Config<K> | undefined);
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  hasSynced(): boolean {
    return this.inner.hasSynced();
  }

  async whenSynced(): Promise<void> {
    await this.inner.whenSynced();
    if (this.derived.size === 0) this.recompute();
  }

  /** Stops listening to the source; the source itself is closed by whoever opened it. */
  async close(): Promise<void> {
    this.off();
  }

  private onEvents(events: readonly ConfigEvent[]): void {
    const relevant = events.some((e) => INPUT_KINDS.has(e.config.kind));
    if (events.some((e) => INPUT_KINDS.has(e.config.kind) && !ROUTE_KINDS.has(e.config.kind))) this.memo = newTranslationMemo();
    const derivedEvents = relevant || this.derived.size === 0 ? this.recompute() : [];
    const all = derivedEvents.length > 0 ? [...events, ...derivedEvents] : events;
    for (const h of this.handlers) h(all);
  }

  /** Translates again; returns the events that turn the previous derived configs into the new ones. */
  private recompute(): ConfigEvent[] {
    const list = <K extends Kind>(k: K): readonly Config<K>[] => this.inner.list(k);
    const out = translateGatewayApi(
      {
        gatewayClasses: list('GatewayClass'),
        gateways: list('KubernetesGateway'),
        httpRoutes: list('HTTPRoute'),
        grpcRoutes: list('GRPCRoute'),
        referenceGrants: list('ReferenceGrant'),
        services: list('Service'),
        serviceEntries: list('ServiceEntry'),
        namespaces: list('Namespace'),
        secrets: list('Secret'),
        tlsRoutes: list('TLSRoute'),
        tcpRoutes: list('TCPRoute'),
      },
      this.opts,
      this.memo,
    );
    this.current = out.status;
    const next: Derived = new Map();
    for (const c of [...out.gateways, ...out.virtualServices]) next.set(configKey(c), c);
    const events: ConfigEvent[] = [];
    const digests = new Map<string, string>();
    for (const [k, c] of next) {
      const old = this.derived.get(k);
      if (old === c) {
        digests.set(k, this.derivedDigest.get(k)!); // reused by the translation: unchanged
        continue;
      }
      const digest = createHash('sha1')
        .update(JSON.stringify([c.spec, c.meta]))
        .digest('base64');
      digests.set(k, digest);
      if (!old) events.push({ type: 'add', config: c });
      else if (this.derivedDigest.get(k) !== digest) events.push({ type: 'update', config: c, old });
      else next.set(k, old); // unchanged: keep the old object so identity-based caches stay warm
    }
    this.derivedDigest = digests;
    for (const [k, c] of this.derived) if (!next.has(k)) events.push({ type: 'delete', config: c, old: c });
    this.derived = next;
    this.derivedByKind = new Map();
    for (const c of next.values()) {
      const list = this.derivedByKind.get(c.kind) ?? [];
      list.push(c);
      this.derivedByKind.set(c.kind, list);
    }
    return events;
  }
}
