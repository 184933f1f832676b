// The webhook configuration controllers, as Istio runs them on every replica (no leader election: each
// revision patches its own configurations, and the writes are idempotent):
//
// - the injection patcher (Istio's pkg/webhooks WebhookCertPatcher, on when INJECTION_WEBHOOK_CONFIG_NAME
//   is not empty): every MutatingWebhookConfiguration labelled with this daemon's revision gets the CA
//   bundle in the caBundle of each webhook whose name ends in `sidecar-injector.mesh.io` (or Istio's
//   `sidecar-injector.istio.io`); a configuration of another revision is left alone;
// - the validation controller (Istio's pkg/webhooks/validation/controller, on when
//   VALIDATION_WEBHOOK_CONFIG_NAME is not empty): every ValidatingWebhookConfiguration labelled with this
//   revision gets the CA bundle in all its webhooks, and a failurePolicy of Ignore is switched to Fail
//   once the API server is seen to refuse an invalid object through the webhook (a dry-run create of a
//   Gateway carrying the always-reject annotation), so that the cluster does not fail closed before the
//   webhook answers.
//
// Both follow the CA bundle: a new root is patched everywhere at once.
import { OrchApiError, type OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { REVISION_LABELS } from '../leader';
import { registerScope } from '../lib/log';
import { defineCounter } from '../lib/metrics';
import { ReconcileQueue } from '../lib/reconcile-queue';
import { ALWAYS_REJECT } from './webhook';

const patchLog = registerScope('webhookpatch', 'injection webhook configuration patcher');
const validationLog = registerScope('validationController', 'validation webhook controller');

/** Istio's webhookName ("sidecar-injector.istio.io"), ours first. */
export const INJECTOR_WEBHOOK_SUFFIXES = ['sidecar-injector.mesh.io', 'sidecar-injector.istio.io'] as const;

const patchAttempts = defineCounter<'name'>({ name: 'webhook_patch_attempts_total', help: 'Webhook patching attempts', labelNames: ['name'] });
const patchRetries = defineCounter<'name'>({ name: 'webhook_patch_retries_total', help: 'Webhook patching retries', labelNames: ['name'] });
const patchFailures = defineCounter<'name' | 'reason'>({
  name: 'webhook_patch_failures_total',
  help: 'Webhook patching total failures',
  labelNames: ['name', 'reason'],
});
const configUpdateError = defineCounter<'reason'>({
  name: 'galley_validation_config_update_error',
  help: 'k8s webhook configuration update error',
  labelNames: ['reason'],
});
const configUpdates = defineCounter({ name: 'galley_validation_config_updates', help: 'k8s webhook configuration updates' });
const configLoadError = defineCounter<'reason'>({
  name: 'galley_validation_config_load_error',
  help: 'k8s webhook configuration (re)load error',
  labelNames: ['reason'],
});

interface WebhookEntry {
  name?: string;
  clientConfig?: { caBundle?: string; [k: string]: unknown };
  failurePolicy?: string;
  [k: string]: unknown;
}
interface WebhookConfiguration {
  metadata: { name: string; labels?: Record<string, string>; resourceVersion?: string; [k: string]: unknown };
  webhooks?: WebhookEntry[] | null;
  [k: string]: unknown;
}

/** The revision a webhook configuration belongs to (`mesh.io/rev`, else Istio's `istio.io/rev`). */
export function configRevision(c: WebhookConfiguration): string | undefined {
  const labels = c.metadata.labels ?? {};
  for (const l of REVISION_LABELS) if (l in labels) return labels[l];
  return undefined;
}

/** caBundle as the API carries it (base64 of the PEM bytes). */
export function caBundleField(pem: string): string {
  return Buffer.from(pem, 'utf8').toString('base64');
}

/** Checks that the bundle starts with a PEM certificate (Istio's util.LoadCABundle / verifyCABundle). */
export function verifyCaBundle(pem: string | undefined): string | undefined {
  if (pem === undefined || pem === '') return 'could not read caBundle';
  const m = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/.exec(pem);
  if (!m) return 'could not verify caBundle: could not decode pem';
  if (m[1] !== 'CERTIFICATE') return `could not verify caBundle: cert contains wrong pem type: "${m[1]}"`;
  return undefined;
}

/** The injection webhooks of a configuration patched with `bundle`; undefined when it has none. */
export function patchInjectionWebhooks(c: WebhookConfiguration, bundle: string): { changed: boolean; config: WebhookConfiguration } | undefined {
  let found = false;
  let changed = false;
  const webhooks = (c.webhooks ?? []).map((w) => {
    if (!INJECTOR_WEBHOOK_SUFFIXES.some((s) => (w.name ?? '').endsWith(s))) return w;
    found = true;
    if (w.clientConfig?.caBundle !== bundle) changed = true;
    return { ...w, clientConfig: { ...(w.clientConfig ?? {}), caBundle: bundle } };
  });
  return found ? { changed, config: { ...c, webhooks } } : undefined;
}

/** Istio's updateValidatingWebhookConfiguration decision: what to write, if anything. */
export function patchValidationWebhooks(
  c: WebhookConfiguration,
  bundle: string,
  readyForFailClose: () => Promise<boolean>,
): Promise<{ config: WebhookConfiguration; failClose: boolean } | undefined> {
  const webhooks = c.webhooks ?? [];
  const caChange = webhooks.some((w) => w.clientConfig?.caBundle !== bundle);
  const ignoring = webhooks.some((w) => w.failurePolicy !== undefined && w.failurePolicy !== 'Fail');
  if (!caChange && !ignoring) return Promise.resolve(undefined);
  return (ignoring ? readyForFailClose() : Promise.resolve(true)).then((failClose) => ({
    failClose,
    config: {
      ...c,
      webhooks: webhooks.map((w) => ({
        ...w,
        clientConfig: { ...(w.clientConfig ?? {}), caBundle: bundle },
        ...(failClose ? { failurePolicy: 'Fail' } : {}),
      })),
    },
  }));
}

export interface WebhookControllerOptions {
  client: OrchClient;
  /** REVISION, `default` when unset. */
  revision: string;
  /** The CA bundle (PEM) the webhook server's certificate chains to. */
  caBundle: () => string | undefined;
}

abstract class WebhookConfigController {
  protected readonly configs = new Map<string, WebhookConfiguration>();
  protected readonly informer: ResourceInformer;
  protected readonly queue: ReconcileQueue;

  constructor(
    protected readonly o: WebhookControllerOptions,
    plural: string,
    protected readonly log: ReturnType<typeof registerScope>,
    name: string,
    maxDelayMs: number,
  ) {
    this.queue = new ReconcileQueue({ name, reconcile: (k) => this.reconcile(k), log, baseDelayMs: 100, maxDelayMs });
    const changed = (x: RawObject) => {
      const c = x as unknown as WebhookConfiguration;
      this.configs.set(c.metadata.name, c);
      this.queue.add(c.metadata.name);
    };
    this.informer = new ResourceInformer(
      o.client,
      { path: `/apis/admissionregistration.k8s.io/v1/${plural}`, log },
      {
        add: changed,
        update: changed,
        delete: (x) => void this.configs.delete(String(x.metadata.name)),
      },
    );
  }

  start(): this {
    this.informer.start();
    return this;
  }

  /** The CA bundle changed: every configuration is looked at again. */
  caBundleChanged(): void {
    for (const name of this.configs.keys()) this.queue.add(name);
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  async stop(): Promise<void> {
    await this.informer.stop();
    await this.queue.stop();
  }

  protected abstract reconcile(name: string): Promise<void>;
}

/** Istio's WebhookCertPatcher. */
export class InjectionWebhookPatcher extends WebhookConfigController {
  constructor(o: WebhookControllerOptions) {
    // Istio's fast-slow limiter: quick retries first (conflicts between replicas), then once a minute.
    super(o, 'mutatingwebhookconfigurations', patchLog, 'webhook patcher', 60_000);
  }

  protected async reconcile(name: string): Promise<void> {
    const config = this.configs.get(name);
    if (!config) {
      patchFailures.inc({ name, reason: 'webhook_config_not_found' });
      return;
    }
    const rev = configRevision(config);
    // Not a mesh webhook configuration, or another revision's: that revision patches its own.
    if (rev === undefined) return;
    if (rev !== this.o.revision) {
      patchFailures.inc({ name, reason: 'wrong_revision' });
      return;
    }
    const pem = this.o.caBundle();
    const bad = verifyCaBundle(pem);
    if (bad) {
      this.log.error(`Failed to load CA bundle: ${bad}`);
      patchFailures.inc({ name, reason: 'load_ca_bundle_failure' });
      throw new Error(bad);
    }
    const patched = patchInjectionWebhooks(config, caBundleField(pem!));
    if (!patched) {
      patchFailures.inc({ name, reason: 'webhook_entry_not_found' });
      return;
    }
    if (!patched.changed) return;
    patchAttempts.inc({ name: INJECTOR_WEBHOOK_SUFFIXES[0] });
    try {
      const written = (await this.o.client.request(
        'PUT',
        `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${encodeURIComponent(name)}`,
        { body: patched.config },
      )) as WebhookConfiguration;
      this.configs.set(name, written);
      this.log.info(`patched the caBundle of MutatingWebhookConfiguration ${name}`);
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 404) return;
      patchFailures.inc({ name, reason: 'webhook_update_failure' });
      patchRetries.inc({ name });
      throw new Error(`patching webhook ${name} failed: ${(e as Error).message}`);
    }
  }
}

/** Istio's validation webhook controller. */
export class ValidationWebhookController extends WebhookConfigController {
  private dryRunRejected = false;

  constructor(
    o: WebhookControllerOptions,
    /** The daemon's namespace, where the dry-run Gateway is "created". */
    private readonly namespace: string,
  ) {
    super(o, 'validatingwebhookconfigurations', validationLog, 'validation', 60_000);
  }

  protected async reconcile(name: string): Promise<void> {
    const config = this.configs.get(name);
    if (!config || configRevision(config) !== this.o.revision) return;
    const pem = this.o.caBundle();
    const bad = verifyCaBundle(pem);
    if (bad) {
      this.log.error(`Failed to load CA bundle: ${bad}`);
      configLoadError.inc({ reason: bad.startsWith('could not verify') ? 'could not verify caBundle' : 'could not read caBundle' });
      return; // no point in retrying until the bundle changes
    }
    const patch = await patchValidationWebhooks(config, caBundleField(pem!), () => this.readyForFailClose());
    if (!patch) return;
    try {
      const written = (await this.o.client.request(
        'PUT',
        `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${encodeURIComponent(name)}`,
        { body: patch.config },
      )) as WebhookConfiguration;
      this.configs.set(name, written);
      this.log.info(
        `successfully updated validatingwebhookconfiguration ${name} (failurePolicy=${patch.failClose ? 'Fail' : 'Ignore'}, resourceVersion=${written.metadata.resourceVersion})`,
      );
      configUpdates.inc();
    } catch (e) {
      configUpdateError.inc({ reason: (e instanceof OrchApiError && e.reason) || 'Unknown' });
      throw new Error(`fail to update webhook: ${(e as Error).message}`);
    }
    if (!patch.failClose) throw new Error('webhook is not ready, retry');
  }

  private async readyForFailClose(): Promise<boolean> {
    if (this.dryRunRejected) return true;
    const { rejected, reason } = await this.dryRunOfInvalidConfigRejected();
    if (!rejected) {
      this.log.info(`Not ready to switch validation to fail-closed: ${reason}`);
      return false;
    }
    this.log.info('Endpoint successfully rejected invalid config. Switching to fail-close.');
    this.dryRunRejected = true;
    this.caBundleChanged();
    return true;
  }

  /** A dry-run create of an invalid Gateway: refused by our webhook means validation is in place. */
  private async dryRunOfInvalidConfigRejected(): Promise<{ rejected: boolean; reason?: string }> {
    const collection = `/apis/networking.mesh.io/v1/namespaces/${encodeURIComponent(this.namespace)}/gateways`;
    const invalid = {
      apiVersion: 'networking.mesh.io/v1',
      kind: 'Gateway',
      metadata: {
        name: 'invalid-gateway',
        namespace: this.namespace,
        labels: { [REVISION_LABELS[0]]: this.o.revision },
        annotations: { [ALWAYS_REJECT[0]!]: 'true' },
      },
      spec: {},
    };
    let err: unknown;
    try {
      await this.o.client.request('POST', collection, { body: invalid, query: { dryRun: 'All' } });
    } catch (e) {
      err = e;
      if (e instanceof OrchApiError && e.statusCode === 409) {
        try {
          await this.o.client.request('PUT', `${collection}/invalid-gateway`, { body: invalid, query: { dryRun: 'All' } });
          err = undefined;
        } catch (e2) {
          err = e2;
        }
      }
    }
    if (err === undefined) return { rejected: false, reason: 'dummy invalid config not rejected' };
    const message = (err as Error).message;
    if (message.includes('denied the request')) return { rejected: true };
    if (message.includes('the server could not find the requested resource')) {
      this.log.warn('Missing Gateway CRD, cannot perform validation check. Assuming validation is ready');
      return { rejected: true };
    }
    if (message.includes('does not support dry run')) {
      this.log.warn(
        `One of the validating webhooks does not support DryRun, cannot perform validation check. Assuming validation is ready. Details: ${message}`,
      );
      return { rejected: true };
    }
    return { rejected: false, reason: `dummy invalid rejected for the wrong reason: ${message}` };
  }
}
