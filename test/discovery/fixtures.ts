// A ConfigStore over a mutable list (the contract of src/config/store.ts) and object builders for
// discovery and generator tests.
import type { ConfigEvent, ConfigStore } from '../../src/config/store';
import type { Config, Kind, ServiceEntrySpec, SpecOf } from '../../src/config/types';
import { configKey } from '../../src/config/types';
import { gatewayApiOptions } from '../../src/config/gateway-api/options';
import { GatewayApiConfigStore } from '../../src/config/gateway-api/store';
import { parseNodeMetadata, parseServiceNode } from '../../src/discovery/proxy';
import type { Proxy } from '../../src/discovery/model';

export class ListStore implements ConfigStore {
  private readonly items = new Map<string, Config>();
  private readonly handlers = new Set<(e: readonly ConfigEvent[]) => void>();

  constructor(configs: Config[] = []) {
    for (const c of configs) this.items.set(configKey(c), c);
  }

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    return [...this.items.values()].filter((c) => c.kind === kind && (namespace === undefined || c.meta.namespace === namespace)) as Config<K>[];
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    return this.items.get(`${kind}/${namespace}/${name}`) as Config<K> | undefined;
  }

  apply(...configs: Config[]): void {
    const events: ConfigEvent[] = configs.map((c) => {
      const old = this.items.get(configKey(c));
      this.items.set(configKey(c), c);
      return old ? { type: 'update', config: c, old } : { type: 'add', config: c };
    });
    for (const h of this.handlers) h(events);
  }

  remove(kind: Kind, namespace: string, name: string): void {
    const old = this.items.get(`${kind}/${namespace}/${name}`);
    if (!old) return;
    this.items.delete(`${kind}/${namespace}/${name}`);
    for (const h of this.handlers) h([{ type: 'delete', config: old, old }]);
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  hasSynced(): boolean {
    return true;
  }

  async whenSynced(): Promise<void> {}

  async close(): Promise<void> {}
}

const API: Record<string, string> = {
  Gateway: 'networking.istio.io/v1',
  VirtualService: 'networking.istio.io/v1',
  DestinationRule: 'networking.istio.io/v1',
  ServiceEntry: 'networking.istio.io/v1',
  WorkloadEntry: 'networking.istio.io/v1',
  WorkloadGroup: 'networking.istio.io/v1',
  Sidecar: 'networking.istio.io/v1',
  RequestAuthentication: 'security.istio.io/v1',
  AuthorizationPolicy: 'security.istio.io/v1',
  PeerAuthentication: 'security.istio.io/v1',
  Telemetry: 'telemetry.istio.io/v1',
  Service: 'v1',
  EndpointSlice: 'discovery.k8s.io/v1',
  Pod: 'v1',
  Namespace: 'v1',
};

let clock = Date.parse('2024-01-01T00:00:00Z');

export function cfg<K extends Kind>(
  kind: K,
  namespace: string,
  name: string,
  spec: SpecOf<K>,
  extra: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    status?: Config['status'];
    created?: string;
    deletionTimestamp?: string;
  } = {},
): Config<K> {
  clock += 1000;
  return {
    kind,
    apiVersion: API[kind]!,
    meta: {
      name,
      namespace,
      labels: extra.labels ?? {},
      annotations: extra.annotations ?? {},
      creationTimestamp: extra.created ?? new Date(clock).toISOString(),
      ...(extra.deletionTimestamp ? { deletionTimestamp: extra.deletionTimestamp } : {}),
    },
    spec,
    ...(extra.status ? { status: extra.status } : {}),
  };
}

/**
 * A mesh-internal STATIC ServiceEntry for `<name>.<namespace>.svc.cluster.local` (how the tests stand in for a
 * Kubernetes Service); `spec` gives its ports, addresses, endpoints or workload selector.
 */
export function internalService(namespace: string, name: string, spec: Partial<ServiceEntrySpec>): Config<'ServiceEntry'> {
  return cfg('ServiceEntry', namespace, name, {
    hosts: [`${name}.${namespace}.svc.cluster.local`],
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    ...spec,
  } as ServiceEntrySpec);
}

export function proxy(nodeId: string, meta: Record<string, unknown> = {}): Proxy {
  return parseServiceNode(nodeId, parseNodeMetadata(meta));
}

/**
 * A Gateway API store over `inner` with the daemon's default options (class `mesh`, our controller and Istio's), and
 * every event it passes on, in order.
 */
export function gatewayApiStore(inner: ConfigStore): { store: GatewayApiConfigStore; events: ConfigEvent[] } {
  const store = new GatewayApiConfigStore(
    inner,
    gatewayApiOptions({ controllerName: 'mesh.io/gateway-controller', defaultClassName: 'mesh', alpha: false, domain: 'cluster.local' }),
  );
  const events: ConfigEvent[] = [];
  store.subscribe((e) => events.push(...e));
  return { store, events };
}
