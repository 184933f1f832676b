// The default GatewayClass controller (PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER): the built-in class of this
// controller (PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME, `mesh`) is created when missing, and again when deleted.
// Follows Istio 1.26's pilot/pkg/config/kube/gateway/gatewayclass.go (ClassController), which runs on every replica
// with no election: a create that loses the race to another replica is not an error. Differs on purpose: only the
// class of our controller is created (Istio's `istio` class is served when it exists, not made; no waypoint class, as
// mesh has no waypoint data plane).
import { OrchApiError, type OrchClient } from '../orch/client';
import { ResourceInformer } from '../orch/informer';
import { registerScope } from '../../lib/log';
import { ReconcileQueue } from '../../lib/reconcile-queue';
import { waitForCrd } from './crd-wait';
import { GATEWAY_API_GROUP } from './types';

const log = registerScope('gateway', 'gateway-api controller');
const PATH = `/apis/${GATEWAY_API_GROUP}/v1/gatewayclasses`;

export class GatewayClassController {
  private readonly names = new Set<string>();
  private readonly informer: ResourceInformer;
  private readonly queue: ReconcileQueue;
  private stopped = false;

  constructor(
    private readonly client: OrchClient,
    private readonly className: string,
    private readonly controllerName: string,
  ) {
    this.queue = new ReconcileQueue({ name: 'gateway class', reconcile: () => this.reconcile(), log, maxAttempts: 25, baseDelayMs: 5 });
    const seen = (name: string | undefined, gone: boolean) => {
      if (!name) return;
      if (gone) this.names.delete(name);
      else this.names.add(name);
      if (name === this.className && this.informer.hasSynced()) this.queue.add('');
    };
    this.informer = new ResourceInformer(
      client,
      { path: PATH, fieldSelector: `metadata.name=${className}`, log },
      { add: (x) => seen(x.metadata.name, false), update: (x) => seen(x.metadata.name, false), delete: (x) => seen(x.metadata.name, true) },
    );
  }

  async start(): Promise<void> {
    if (!(await waitForCrd(this.client, 'gatewayclasses.gateway.networking.k8s.io', () => this.stopped))) return;
    this.informer.start();
    await this.informer.whenSynced();
    this.queue.add('');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer.stop();
    await this.queue.stop();
  }

  private async reconcile(): Promise<void> {
    if (this.names.has(this.className)) return;
    try {
      await this.client.request('POST', PATH, {
        body: {
          apiVersion: `${GATEWAY_API_GROUP}/v1`,
          kind: 'GatewayClass',
          metadata: { name: this.className },
          spec: { controllerName: this.controllerName, description: 'The default mesh GatewayClass' },
        },
      });
      log.info(`created GatewayClass/${this.className}`);
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 409) {
        log.info(`Attempted to create GatewayClass/${this.className}, but it was already created`);
        return;
      }
      throw e;
    }
  }
}
