// The Gateway API deployment controller: for each managed Gateway of a class this controller handles, the objects
// of the `kube-gateway` injection template (ServiceAccount, Deployment running `pilot-agent proxy router`, Service)
// named `<gateway>-<class>`, owner-referenced to the Gateway (the garbage collector removes them with it), applied
// server-side with the controller name as field manager, again whenever the Gateway, its class or one of the
// objects changes. Follows Istio 1.26's pilot/pkg/config/kube/gateway/deploymentcontroller.go (Reconcile,
// configureIstioGateway, extractServicePorts, canManage, apply). The template is rendered by the caller (`render`):
// the injector's templates live above this layer.
// Differs on purpose: the GatewayClass defaults ConfigMaps and infrastructure.parametersRef overlays are not read
// (so, as in Istio without overlays, no HorizontalPodAutoscaler or PodDisruptionBudget is made); no ambient
// `dataplane-mode: none` label (mesh has no ambient mode); the controller-version annotation is read, not written;
// revision tags are not followed (a Gateway labelled with another revision is left alone).
import type { OrchClient } from '../orch/client';
import { OrchApiError } from '../orch/client';
import { ResourceInformer, type RawObject } from '../orch/informer';
import { registerScope } from '../../lib/log';
import { ReconcileQueue } from '../../lib/reconcile-queue';
import { waitForCrd } from './crd-wait';
import { GATEWAY_NAME_LABEL } from './translate';
import type { GatewayListener } from './types';

const log = registerScope('gateway', 'gateway-api controller');

type Obj = Record<string, any>;

/** Istio's label.GatewayManaged, renamed: marks the objects this controller may overwrite. */
export const GATEWAY_MANAGED_LABEL = 'gateway.mesh.io/managed';
/** Istio's ControllerVersionAnnotation and ControllerVersion. */
export const CONTROLLER_VERSION_ANNOTATION = 'gateway.mesh.io/controller-version';
const CONTROLLER_VERSION = 5;
const either = (annos: Readonly<Record<string, string>>, suffix: string): string | undefined =>
  annos[`gateway.mesh.io/${suffix}`] ?? annos[`gateway.istio.io/${suffix}`];

export interface ServicePort {
  name: string;
  port: number;
  appProtocol: string;
}

/** Istio extractServicePorts: the status port, then one port per distinct listener port. */
export function extractServicePorts(listeners: readonly GatewayListener[]): ServicePort[] {
  const out: ServicePort[] = [{ name: 'status-port', port: 15021, appProtocol: 'tcp' }];
  const seen = new Set<number>();
  listeners.forEach((l, i) => {
    if (seen.has(l.port)) return;
    seen.add(l.port);
    const name = l.name.replaceAll('.', '-').slice(0, 63) || `${l.protocol.toLowerCase()}-${i}`;
    out.push({ name, port: l.port, appProtocol: l.protocol.toLowerCase() });
  });
  return out;
}

/** Everything the template reads besides the injector's configuration (Istio's TemplateInput). */
export interface DeployInput {
  gateway: Obj;
  deploymentName: string;
  serviceAccount: string;
  ports: ServicePort[];
  serviceType: string;
  clusterId: string;
  kubeVersion: number;
  revision: string;
  infrastructureLabels: Record<string, string>;
  infrastructureAnnotations: Record<string, string>;
  gatewayNameLabel: string;
}

/** Istio extractInfrastructureMetadata: spec.infrastructure's labels/annotations (not gateway.networking.k8s.io/ ones), else the Gateway's. */
function infrastructure(gw: Obj, which: 'labels' | 'annotations'): Record<string, string> {
  const infra = gw.spec?.infrastructure?.[which] as Record<string, string> | undefined;
  if (infra) return Object.fromEntries(Object.entries(infra).filter(([k]) => !k.startsWith('gateway.networking.k8s.io/')));
  return { ...((gw.metadata?.[which] as Record<string, string> | undefined) ?? {}) };
}

/** Istio configureIstioGateway's TemplateInput. */
export function deployInput(gw: Obj, o: { clusterId: string; kubeVersion: number; revision: string }): DeployInput {
  const annos = (gw.metadata.annotations ?? {}) as Record<string, string>;
  const defaultName = `${gw.metadata.name}-${gw.spec.gatewayClassName}`;
  return {
    gateway: gw,
    deploymentName: either(annos, 'name-override') ?? defaultName,
    serviceAccount: either(annos, 'service-account') ?? defaultName,
    ports: extractServicePorts(gw.spec.listeners ?? []),
    serviceType: annos['networking.mesh.io/service-type'] ?? annos['networking.istio.io/service-type'] ?? 'LoadBalancer',
    clusterId: o.clusterId,
    kubeVersion: o.kubeVersion,
    revision: o.revision,
    infrastructureLabels: infrastructure(gw, 'labels'),
    infrastructureAnnotations: infrastructure(gw, 'annotations'),
    gatewayNameLabel: GATEWAY_NAME_LABEL,
  };
}

/** Istio IsManaged on the raw spec: no address, or one IP address. */
function managed(gw: Obj): boolean {
  const a = (gw.spec?.addresses ?? []) as Array<{ type?: string }>;
  return a.length === 0 || (a.length === 1 && (a[0]!.type === undefined || a[0]!.type === 'IPAddress'));
}

/** Istio ManagedGatewayControllerVersion: whether a Gateway marked by another controller version is ours to handle. */
function versionHandled(gw: Obj): boolean {
  const cur = either((gw.metadata.annotations ?? {}) as Record<string, string>, 'controller-version');
  if (cur === undefined) return true;
  const n = Number(cur);
  return Number.isInteger(n) && n <= CONTROLLER_VERSION;
}

const CHILDREN = [
  { kind: 'Deployment', path: '/apis/apps/v1/deployments' },
  { kind: 'Service', path: '/api/v1/services' },
  { kind: 'ServiceAccount', path: '/api/v1/serviceaccounts' },
] as const;

export interface GatewayDeploymentOptions {
  client: OrchClient;
  /** Controllers whose classes are deployed with `kube-gateway` (ours, Istio's). */
  controllers: readonly string[];
  /** Classes served when no GatewayClass object of that name exists: class → controller. */
  builtinClasses: Readonly<Record<string, string>>;
  /** The field manager (PILOT_GATEWAY_API_CONTROLLER_NAME), as Istio's. */
  fieldManager: string;
  clusterId: string;
  revision: string;
  /** The `kube-gateway` template's objects for one Gateway; throws when it cannot be rendered. */
  render: (input: DeployInput) => Obj[];
}

const key = (ns: string, name: string) => `${ns}/${name}`;

export class GatewayDeploymentController {
  private readonly gateways = new Map<string, Obj>();
  private readonly classes = new Map<string, string>();
  private readonly children = new Map<string, Map<string, Obj>>(CHILDREN.map((c) => [c.kind, new Map()]));
  private readonly informers: ResourceInformer[] = [];
  private readonly queue: ReconcileQueue;
  private kubeVersion = 0;
  private synced = false;
  private stopped = false;

  constructor(private readonly o: GatewayDeploymentOptions) {
    this.queue = new ReconcileQueue({ name: 'gateway deployment', reconcile: (k) => this.reconcile(k), log, maxAttempts: 5, baseDelayMs: 5 });
    const gwPath = '/apis/gateway.networking.k8s.io/v1/gateways';
    this.watch(gwPath, undefined, (x, gone) => {
      const k = key(x.metadata.namespace!, x.metadata.name!);
      if (gone) this.gateways.delete(k);
      else this.gateways.set(k, x);
      this.enqueue(k);
    });
    this.watch('/apis/gateway.networking.k8s.io/v1/gatewayclasses', undefined, (x, gone) => {
      if (gone) this.classes.delete(x.metadata.name!);
      else this.classes.set(x.metadata.name!, String((x as Obj).spec?.controllerName ?? ''));
      for (const [k, gw] of this.gateways) if (gw.spec?.gatewayClassName === x.metadata.name) this.enqueue(k);
    });
    for (const c of CHILDREN)
      this.watch(c.path, GATEWAY_NAME_LABEL, (x, gone) => {
        const cache = this.children.get(c.kind)!;
        const k = key(x.metadata.namespace!, x.metadata.name!);
        if (gone) cache.delete(k);
        else cache.set(k, x);
        // Istio's EnqueueForParentHandler: the owning Gateway is reconciled again.
        for (const ref of (x.metadata.ownerReferences ?? []) as Obj[]) if (ref.kind === 'Gateway') this.enqueue(key(x.metadata.namespace!, ref.name));
      });
  }

  private watch(path: string, labelSelector: string | undefined, fn: (x: RawObject, gone: boolean) => void): void {
    this.informers.push(
      new ResourceInformer(
        this.o.client,
        { path, ...(labelSelector ? { labelSelector } : {}), log },
        { add: (x) => fn(x, false), update: (x) => fn(x, false), delete: (x) => fn(x, true) },
      ),
    );
  }

  /** Starts once the Gateway CRD is served (Istio waits for it too); returns at once. */
  start(): void {
    void (async () => {
      if (!(await waitForCrd(this.o.client, 'gateways.gateway.networking.k8s.io', () => this.stopped))) return;
      await this.run();
    })().catch((e: unknown) => log.error(`gateway deployment controller did not start: ${(e as Error).message}`));
  }

  private async run(): Promise<void> {
    const v = (await this.o.client.getJson('/version')) as { major?: string; minor?: string };
    if (this.stopped) return;
    this.kubeVersion = Number.parseInt(v.major ?? '1', 10) * 100 + Number.parseInt((v.minor ?? '0').replace(/\D.*$/, ''), 10);
    for (const i of this.informers) i.start();
    await Promise.all(this.informers.map((i) => i.whenSynced()));
    this.synced = true;
    for (const k of this.gateways.keys()) this.enqueue(k);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.informers.map((i) => i.stop()));
    await this.queue.stop();
  }

  /** Resolves when nothing is queued (tests). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  private enqueue(k: string): void {
    if (this.synced) this.queue.add(k);
  }

  private revisionOf(gw: Obj): string | undefined {
    const l = (gw.metadata.labels ?? {}) as Record<string, string>;
    return l['mesh.io/rev'] ?? l['istio.io/rev'];
  }

  /** Istio Reconcile + configureIstioGateway. */
  private async reconcile(k: string): Promise<void> {
    const gw = this.gateways.get(k);
    if (!gw) return;
    const className = String(gw.spec?.gatewayClassName ?? '');
    const controller = this.classes.get(className) ?? this.o.builtinClasses[className];
    if (!controller || !this.o.controllers.includes(controller)) return;
    const rev = this.revisionOf(gw);
    if (rev !== undefined && rev !== (this.o.revision || 'default')) return;
    if (!managed(gw) || !versionHandled(gw)) return;
    log.info(`reconciling gateway ${k}`);
    let objects: Obj[];
    try {
      objects = this.o.render(deployInput(gw, { clusterId: this.o.clusterId, kubeVersion: this.kubeVersion, revision: this.o.revision }));
    } catch (e) {
      log.error(`error rendering templates for gateway ${k}: ${(e as Error).message}`);
      return;
    }
    for (const obj of objects) await this.apply(controller, obj);
    log.info(`gateway ${k} updated`);
  }

  private async find(path: string): Promise<Obj | undefined> {
    try {
      return (await this.o.client.getJson(path)) as Obj;
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 404) return undefined;
      throw e;
    }
  }

  /** Istio apply: our managed label, skipped when the object exists and is not ours, server-side apply forced. */
  private async apply(controller: string, obj: Obj): Promise<void> {
    obj.metadata.labels = { ...(obj.metadata.labels ?? {}), [GATEWAY_MANAGED_LABEL]: controller.replaceAll('/', '-') };
    const ns = obj.metadata.namespace as string;
    const name = obj.metadata.name as string;
    const base = CHILDREN.find((c) => c.kind === obj.kind)?.path;
    if (!base) throw new Error(`unknown kind ${obj.kind} in the rendered template`);
    const path = `${base.replace(/\/([a-z]+)$/, `/namespaces/${encodeURIComponent(ns)}/$1`)}/${encodeURIComponent(name)}`;
    // The informers see only objects carrying the gateway-name label; one without it is looked up (Istio's informers see all).
    const existing = this.children.get(obj.kind)?.get(key(ns, name)) ?? (await this.find(path));
    if (existing) {
      if (!(GATEWAY_MANAGED_LABEL in (existing.metadata.labels ?? {}))) {
        log.debug(`skipping ${obj.kind} ${ns}/${name}, already managed`);
        return;
      }
      obj.metadata.resourceVersion = existing.metadata.resourceVersion;
    }
    try {
      await this.o.client.request('PATCH', path, {
        body: obj,
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager: this.o.fieldManager, force: 'true' },
      });
    } catch (e) {
      const why = e instanceof OrchApiError ? `${e.statusCode} ${e.message}` : (e as Error).message;
      throw new Error(`apply failed: patch ${obj.apiVersion}/${obj.kind} ${ns}/${name}: ${why}`);
    }
  }
}
