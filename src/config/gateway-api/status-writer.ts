// Writes the Gateway API status the translation computed (GatewayApiConfigStore) to the orchestrator, while this
// daemon leads the gateway status election: Istio 1.26's gateway Controller.SetStatusWrite with its status queue
// (pilot/pkg/config/kube/gateway/controller.go, pilot/pkg/status). Each computed status is handed to a status queue
// (the daemon's status manager: status subresource, one write per change, skipped when the live status is equal or
// the generation moved on) with a function merging it into the live status (status-merge.ts). The Services of managed
// Gateways are watched for their load balancer addresses. Differs on purpose: waypoint-class Gateways get a status
// saying mesh has no waypoint data plane.
import type { OrchClient } from '../orch/client';
import { ResourceInformer, type RawObject } from '../orch/informer';
import { collectionPath } from '../orch/resources';
import { registerScope } from '../../lib/log';
import type { Config } from '../types';
import type { StatusObject, GatewayClassStatus, GatewayStatus, RouteStatus } from './status';
import {
  type GatewayServiceState,
  nackConditions,
  type ProxyNack,
  withNacks,
  gatewayClassStatusToWrite,
  gatewayStatusToWrite,
  routeStatusToWrite,
  WAYPOINT_CLASSES,
  waypointStatus,
  withServiceAddresses,
} from './status-merge';
import type { GatewayApiConfigStore } from './store';
import { GATEWAY_NAME_LABEL, gatewayServices, KUBERNETES_GATEWAY_NAME, PARENT_NAMES_ANNOTATION } from './translate';

const log = registerScope('status', 'status controller for mesh');

/** Where statuses go: the daemon's status manager (src/meshd/status-manager.ts) has this shape. */
export interface StatusQueue {
  push(target: { path: string; generation: number }, fn: (live: unknown, generation: number) => Record<string, unknown>): void;
}

const PLURALS: Readonly<Record<string, string>> = {
  GatewayClass: 'gatewayclasses',
  Gateway: 'gateways',
  HTTPRoute: 'httproutes',
  GRPCRoute: 'grpcroutes',
  TLSRoute: 'tlsroutes',
  TCPRoute: 'tcproutes',
};

function objectPath(apiVersion: string, kind: string, namespace: string | undefined, name: string): string {
  const [group, version] = apiVersion.split('/') as [string, string];
  return `${collectionPath(group, version, PLURALS[kind]!, namespace || undefined)}/${encodeURIComponent(name)}`;
}

export interface GatewayStatusWriterOptions {
  client: OrchClient;
  store: GatewayApiConfigStore;
  queue: StatusQueue;
  /** The controller written in route parents (PILOT_GATEWAY_API_CONTROLLER_NAME). */
  controllerName: string;
  domain: string;
  now?: () => string;
  /** The NACKs of connected gateway proxies (beyond Istio: routes they rejected say so); polled every `nackPollMs`. */
  nacks?: () => readonly ProxyNack[];
  nackPollMs?: number;
}

export class GatewayStatusWriter {
  private readonly services = new Map<string, GatewayServiceState>();
  private readonly informer: ResourceInformer;
  private off: (() => void) | undefined;
  private scheduled = false;
  private stopped = false;
  private nackTimer: NodeJS.Timeout | undefined;
  private nackDigest = '[]';

  constructor(private readonly o: GatewayStatusWriterOptions) {
    const set = (x: RawObject, gone: boolean) => {
      const k = `${x.metadata.namespace}/${x.metadata.name}`;
      const svc = x as unknown as { spec?: { type?: string }; status?: { loadBalancer?: { ingress?: Array<{ ip?: string; hostname?: string }> } } };
      if (gone) this.services.delete(k);
      else this.services.set(k, { ...(svc.spec?.type ? { type: svc.spec.type } : {}), ingress: svc.status?.loadBalancer?.ingress ?? [] });
      this.schedule();
    };
    this.informer = new ResourceInformer(
      o.client,
      { path: '/api/v1/services', labelSelector: GATEWAY_NAME_LABEL, log },
      { add: (x) => set(x, false), update: (x) => set(x, false), delete: (x) => set(x, true) },
    );
  }

  async start(): Promise<void> {
    log.info('Starting gateway status writer');
    this.informer.start();
    this.off = this.o.store.subscribe(() => this.schedule());
    await Promise.all([this.informer.whenSynced(), this.o.store.whenSynced()]);
    this.schedule();
    const nacks = this.o.nacks;
    if (nacks && !this.stopped) {
      // The xDS server has no NACK event to subscribe to: a changed set of NACKs is noticed at the next poll.
      this.nackTimer = setInterval(() => {
        if (JSON.stringify(nacks()) !== this.nackDigest) this.schedule();
      }, this.o.nackPollMs ?? 2000);
      this.nackTimer.unref();
    }
  }

  async stop(): Promise<void> {
    log.info('Stopping gateway status writer');
    this.stopped = true;
    if (this.nackTimer) clearInterval(this.nackTimer);
    this.off?.();
    await this.informer.stop();
  }

  /** Changes arriving together are written once. */
  private schedule(): void {
    if (this.scheduled || this.stopped || !this.informer.hasSynced()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.stopped) this.writeAll();
    });
  }

  private writeAll(): void {
    const now = this.o.now ?? (() => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'));
    const nacks = this.o.nacks?.() ?? [];
    this.nackDigest = JSON.stringify(nacks);
    const derived = this.o.store
      .list('VirtualService')
      .filter((vs) => vs.meta.annotations[PARENT_NAMES_ANNOTATION] !== undefined)
      .map((vs) => ({ gateways: vs.spec.gateways ?? [], parents: vs.meta.annotations[PARENT_NAMES_ANNOTATION]! }));
    const rejected = nackConditions(nacks, derived, KUBERNETES_GATEWAY_NAME, (k) => {
      const [kind, ns, name] = k.split('/') as ['HTTPRoute', string, string];
      return this.o.store.get(kind, ns, name)?.meta.generation;
    });
    for (const so of this.o.store.statusObjects()) {
      const rk = `${so.kind}/${so.metadata.namespace ?? ''}/${so.metadata.name}`;
      const r = rejected.get(rk);
      this.push(r ? { ...so, status: withNacks(so.status as RouteStatus, so.metadata.namespace ?? '', r) } : so, now);
    }
    for (const gw of this.o.store.list('KubernetesGateway')) {
      if (!WAYPOINT_CLASSES.has(gw.spec.gatewayClassName)) continue;
      this.push({ apiVersion: gw.apiVersion, kind: 'Gateway', metadata: this.meta(gw), status: waypointStatus(gw.meta.generation) }, now);
    }
  }

  private meta(c: Config): StatusObject['metadata'] {
    return { name: c.meta.name, namespace: c.meta.namespace, ...(c.meta.generation !== undefined ? { generation: c.meta.generation } : {}) };
  }

  private push(so: StatusObject, now: () => string): void {
    const { name, namespace, generation } = so.metadata;
    if (generation === undefined) return;
    const path = objectPath(so.apiVersion, so.kind, namespace, name);
    const ns = namespace ?? '';
    let fn: (live: unknown) => Record<string, unknown>;
    if (so.kind === 'GatewayClass') fn = (live) => gatewayClassStatusToWrite(live, so.status as GatewayClassStatus, now());
    else if (so.kind === 'Gateway') {
      const st = this.withAddresses(ns, name, so.status as GatewayStatus);
      fn = (live) => gatewayStatusToWrite(live, st, now());
    } else fn = (live) => routeStatusToWrite(live, so.status as RouteStatus, ns, this.o.controllerName, now());
    this.o.queue.push({ path, generation }, fn);
  }

  /** The Gateway's addresses from its Service as Istio reports them (managed Gateways: `<name>-<class>`). */
  private withAddresses(ns: string, name: string, st: GatewayStatus): GatewayStatus {
    const gw = this.o.store.get('KubernetesGateway', ns, name);
    if (!gw) return st;
    const host = gatewayServices(gw, gw.spec.gatewayClassName, this.o.domain).hosts[0];
    const suffix = `.${ns}.svc.${this.o.domain}`;
    if (!host?.endsWith(suffix)) return st;
    return withServiceAddresses(st, gw.meta.annotations, this.services.get(`${ns}/${host.slice(0, -suffix.length)}`));
  }
}
