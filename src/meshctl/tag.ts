// `meshctl tag generate <tag> --revision <rev>` (istioctl tag generate): the MutatingWebhookConfiguration and
// the Service of a revision tag, built from the revision's own injection webhook found in the cluster (its CA
// bundle, service, path and reinvocation policy), as Istio's revision-tags chart templates render them; for the
// `default` tag also the cluster-wide ValidatingWebhookConfiguration. Differs on purpose: the tag's webhook also
// answers Istio's `istio.io/rev=<tag>` label (two more webhooks), since mesh accepts Istio's labels beside its own.
import { CommandError, flagBool, flagString, type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { buildInfo } from '../lib/buildinfo';
import { jsonToGoYaml } from '../lib/goyaml';
import { apiStatus, withOrch } from './orch';

export const REV = 'mesh.io/rev';
export const ISTIO_REV = 'istio.io/rev';
const ISTIO_NS_INJECTION = 'istio-injection';
export const TAG = 'mesh.io/tag';
const INJECTION_SUFFIX = 'sidecar-injector.mesh.io';
const INJECT_LABEL = 'sidecar.mesh.io/inject';
const NS_INJECTION = 'mesh-injection';
const SYSTEM_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage'];

export type Obj = Record<string, any>;

/** What the tag's webhook copies from the revision's canonical injection webhook. */
export interface CanonicalWebhook {
  /** The revision, "" for `default`. */
  revision: string;
  caBundle?: string;
  url?: string;
  service?: string;
  path?: string;
  reinvocationPolicy?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** Reads the canonical webhook (istioctl's tagWebhookConfigFromCanonicalWebhook). */
export function canonicalWebhook(wh: Obj): CanonicalWebhook {
  const labels: Record<string, string> = { ...(wh.metadata?.labels ?? {}) };
  const rev = labels[REV];
  if (rev === undefined) throw new Error(`could not extract revision from webhook "${wh.metadata?.name}"`);
  const w = (wh.webhooks ?? []).find((x: Obj) => typeof x.name === 'string' && x.name.endsWith(INJECTION_SUFFIX));
  if (!w) throw new Error(`could not find sidecar-injector webhook in canonical webhook "${wh.metadata?.name}"`);
  delete labels.app;
  return {
    revision: rev === 'default' ? '' : rev,
    caBundle: w.clientConfig?.caBundle,
    url: w.clientConfig?.url,
    service: w.clientConfig?.service?.name,
    path: w.clientConfig?.service?.path,
    reinvocationPolicy: w.reinvocationPolicy,
    labels,
    annotations: { ...(wh.metadata?.annotations ?? {}) },
  };
}

function commonLabels(release = 'meshd'): Record<string, string> {
  const version = buildInfo().version;
  return {
    'app.kubernetes.io/instance': release,
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/part-of': 'mesh',
    'app.kubernetes.io/version': version,
    'helm.sh/chart': `meshd-${version}`.replaceAll('+', '_').slice(0, 63).replace(/-+$/, ''),
  };
}

function expr(key: string, operator: string, values?: string[]): Obj {
  return values ? { key, operator, values } : { key, operator };
}

export interface TagOptions {
  tag: string;
  meshNamespace: string;
  autoInjectNamespaces: boolean;
  webhookName: string;
}

/** The tag's MutatingWebhookConfiguration (the chart's revision-tags-mwc.yaml with the canonical webhook's settings). */
export function tagWebhook(c: CanonicalWebhook, o: TagOptions): Obj {
  const core = (prefix: string, namespaceSelector: Obj[], objectSelector: Obj[]): Obj => {
    const clientConfig: Obj = {};
    if (c.caBundle) clientConfig.caBundle = c.caBundle;
    if (c.url) clientConfig.url = c.url;
    else
      clientConfig.service = {
        name: c.service ?? (c.revision ? `meshd-${c.revision}` : 'meshd'),
        namespace: o.meshNamespace,
        path: c.path ?? '',
        port: 443,
      };
    return {
      admissionReviewVersions: ['v1'],
      clientConfig,
      failurePolicy: 'Fail',
      name: `${prefix}sidecar-injector.mesh.io`,
      namespaceSelector: { matchExpressions: namespaceSelector },
      objectSelector: { matchExpressions: objectSelector },
      reinvocationPolicy: c.reinvocationPolicy || 'Never',
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
      sideEffects: 'None',
    };
  };
  const notDisabled = expr(INJECT_LABEL, 'NotIn', ['false']);
  const webhooks = [
    core('rev.namespace.', [expr(REV, 'In', [o.tag]), expr(NS_INJECTION, 'DoesNotExist')], [notDisabled]),
    core('rev.object.', [expr(REV, 'DoesNotExist'), expr(NS_INJECTION, 'DoesNotExist')], [notDisabled, expr(REV, 'In', [o.tag])]),
    // Istio's label beside ours: a namespace (or pod) labelled istio.io/rev=<tag> reaches the same revision,
    // unless it also carries mesh.io/rev (which the two webhooks above decide on).
    core(
      'istio-rev.namespace.',
      [expr(ISTIO_REV, 'In', [o.tag]), expr(REV, 'DoesNotExist'), expr(NS_INJECTION, 'DoesNotExist'), expr(ISTIO_NS_INJECTION, 'DoesNotExist')],
      [notDisabled],
    ),
    core(
      'istio-rev.object.',
      [expr(ISTIO_REV, 'DoesNotExist'), expr(REV, 'DoesNotExist'), expr(NS_INJECTION, 'DoesNotExist'), expr(ISTIO_NS_INJECTION, 'DoesNotExist')],
      [notDisabled, expr(ISTIO_REV, 'In', [o.tag]), expr(REV, 'DoesNotExist')],
    ),
  ];
  if (o.tag === 'default') {
    webhooks.push(core('namespace.', [expr(NS_INJECTION, 'In', ['enabled'])], [notDisabled]));
    webhooks.push(
      core(
        'object.',
        [expr(NS_INJECTION, 'DoesNotExist'), expr(REV, 'DoesNotExist')],
        [expr(INJECT_LABEL, 'In', ['true']), expr(REV, 'DoesNotExist')],
      ),
    );
    if (o.autoInjectNamespaces) {
      webhooks.push(
        core(
          'auto.',
          [expr(NS_INJECTION, 'DoesNotExist'), expr(REV, 'DoesNotExist'), expr('kubernetes.io/metadata.name', 'NotIn', SYSTEM_NAMESPACES)],
          [expr(INJECT_LABEL, 'DoesNotExist'), expr(REV, 'DoesNotExist')],
        ),
      );
    }
  }
  const name = o.webhookName || (o.meshNamespace === 'mesh-system' ? `mesh-revision-tag-${o.tag}` : `mesh-revision-tag-${o.tag}-${o.meshNamespace}`);
  const labels = {
    [TAG]: o.tag,
    [REV]: c.revision || 'default',
    'install.operator.mesh.io/owning-resource': 'unknown',
    'operator.mesh.io/component': 'Pilot',
    app: 'sidecar-injector',
    release: 'meshd',
    'app.kubernetes.io/name': 'meshd',
    ...commonLabels(),
    ...c.labels,
  };
  const metadata: Obj = { creationTimestamp: null, labels, name };
  if (Object.keys(c.annotations).length) metadata.annotations = c.annotations;
  return { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata, webhooks };
}

export const VALIDATOR = 'meshd-default-validator';
/** Both API groups are validated: mesh's own and Istio's, which mesh accepts beside them. */
const VALIDATED_GROUPS = [
  'security.mesh.io',
  'networking.mesh.io',
  'telemetry.mesh.io',
  'extensions.mesh.io',
  'security.istio.io',
  'networking.istio.io',
  'telemetry.istio.io',
  'extensions.istio.io',
];

/**
 * The default tag's ValidatingWebhookConfiguration (the `default` chart's validatingwebhook.yaml): validation by
 * the tag's revision, addressed like its injection webhook but on /validate. `existing` is the validator already in
 * the cluster: a webhook the daemon has switched to Fail keeps its policy (left out, so the server's Fail stays).
 */
export function defaultValidator(c: CanonicalWebhook, o: TagOptions, existing?: Obj): Obj {
  const clientConfig: Obj = {};
  if (c.caBundle) clientConfig.caBundle = c.caBundle;
  if (c.url) {
    try {
      const u = new URL(c.url);
      u.pathname = '/validate';
      clientConfig.url = u.toString();
    } catch {
      clientConfig.url = c.url;
    }
  } else clientConfig.service = { name: c.revision ? `meshd-${c.revision}` : 'meshd', namespace: o.meshNamespace, path: '/validate', port: 443 };
  const webhook: Obj = {
    admissionReviewVersions: ['v1'],
    clientConfig,
    failurePolicy: 'Ignore',
    name: 'validation.mesh.io',
    objectSelector: { matchExpressions: [expr(REV, 'DoesNotExist')] },
    rules: [{ apiGroups: VALIDATED_GROUPS, apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['*'] }],
    sideEffects: 'None',
  };
  const current = (existing?.webhooks ?? []).find((w: Obj) => w.name === webhook.name);
  if (current) {
    if (current.failurePolicy === 'Fail') delete webhook.failurePolicy;
    else if (current.failurePolicy) webhook.failurePolicy = current.failurePolicy;
  }
  const labels = {
    app: 'meshd',
    mesh: 'meshd',
    [REV]: c.revision || 'default',
    [TAG]: 'default',
    'operator.mesh.io/component': 'Pilot',
    'app.kubernetes.io/name': 'meshd',
    ...commonLabels('mesh'),
    ...c.labels,
  };
  const metadata: Obj = { creationTimestamp: null, labels, name: VALIDATOR };
  if (Object.keys(c.annotations).length) metadata.annotations = c.annotations;
  return { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata, webhooks: [webhook] };
}

/** The tag's Service (revision-tags-svc.yaml): the revision's daemon under the tag's name. */
export function tagService(revision: string, o: TagOptions): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      creationTimestamp: null,
      labels: {
        [REV]: revision || 'default',
        [TAG]: o.tag,
        'install.operator.mesh.io/owning-resource': 'unknown',
        'operator.mesh.io/component': 'Pilot',
        app: 'meshd',
        mesh: 'pilot',
        release: 'meshd',
        'app.kubernetes.io/name': 'meshd',
        ...commonLabels(),
      },
      name: `meshd-revision-tag-${o.tag}`,
      namespace: o.meshNamespace,
    },
    spec: {
      ports: [
        { name: 'grpc-xds', port: 15010, protocol: 'TCP' },
        { name: 'https-dns', port: 15012, protocol: 'TCP' },
        { name: 'https-webhook', port: 443, protocol: 'TCP', targetPort: 15017 },
        { name: 'http-monitoring', port: 15014, protocol: 'TCP' },
      ],
      selector: revision ? { app: 'meshd', [REV]: revision } : { app: 'meshd', mesh: 'pilot' },
    },
    status: { loadBalancer: {} },
  };
}

export const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

export async function list(client: OrchClient, p: string, labelSelector: string): Promise<Obj[]> {
  const res = (await client.getJson(p, { labelSelector })) as Obj;
  return (res.items ?? []) as Obj[];
}

/**
 * The objects of tag `tag` (istioctl's tag.Generate): its webhook, the default tag's validator, its Service. `forApply`
 * adds the check `tag set` makes and `generate` does not: a tag may not take the name of a revision.
 */
export async function tagObjects(ctx: RunContext, client: OrchClient, tag: string, forApply: boolean): Promise<Obj[]> {
  const revision = flagString(ctx, 'revision');
  if (!ctx.changed.has('revision')) throw new CommandError('required flag(s) "revision" not set');
  const meshNamespace = flagString(ctx, 'meshNamespace') || 'mesh-system';
  const overwrite = flagBool(ctx, 'overwrite');
  if (forApply && !overwrite && tag !== 'default') {
    const collisions = await list(client, MWC, `${REV}=${tag},!${TAG}`);
    if (collisions.length > 0) throw new CommandError(`cannot create revision tag "${tag}": found existing control plane revision with same name`);
  }
  const webhooks = await list(client, MWC, `${REV}=${revision},!${TAG}`);
  const services = await list(client, `/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/services`, `${REV}=${revision},!${TAG},app=meshd`);
  if (services.length > 1) {
    throw new CommandError(`cannot modify tag: found multiple canonical services with revision "${revision}" in namespace "${meshNamespace}"`);
  }
  if (webhooks.length === 0 && services.length === 0) {
    throw new CommandError(`cannot modify tag: cannot find MutatingWebhookConfiguration or Service with revision "${revision}"`);
  }
  if (webhooks.length > 1) throw new CommandError(`cannot modify tag: found multiple canonical webhooks or services with revision "${revision}"`);
  if (webhooks.length === 0) throw new CommandError(`cannot modify tag: cannot find MutatingWebhookConfiguration with revision "${revision}"`);
  if (!overwrite) {
    const tagWebhooks = await list(client, MWC, `${TAG}=${tag}`);
    const tagServices = await list(client, `/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/services`, `${TAG}=${tag}`);
    if (tagWebhooks.length > 0 || tagServices.length > 0) throw new CommandError(`revision tag "${tag}" already exists, and --overwrite is false`);
  }
  let canonical: CanonicalWebhook;
  try {
    canonical = canonicalWebhook(webhooks[0]!);
  } catch (e) {
    throw new CommandError(`failed to create tag webhook config: ${(e as Error).message}`);
  }
  const opts: TagOptions = {
    tag,
    meshNamespace,
    autoInjectNamespaces: flagBool(ctx, 'auto-inject-namespaces'),
    webhookName: flagString(ctx, 'webhook-name'),
  };
  const objects = [tagWebhook(canonical, opts)];
  if (tag === 'default') {
    let existing: Obj | undefined;
    try {
      existing = (await client.getJson(`/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${VALIDATOR}`)) as Obj;
    } catch (e) {
      if (apiStatus(e) !== 404) throw new CommandError(`failed to create validating webhook config: ${(e as Error).message}`);
    }
    objects.push(defaultValidator(canonical, opts, existing));
  }
  objects.push(tagService(canonical.revision, opts));
  return objects;
}

/** The tag given as the one argument, with istioctl's texts for none or several. */
export function tagArgument(ctx: RunContext): string {
  if (ctx.args.length === 0) throw new CommandError('must provide a tag for modification');
  if (ctx.args.length > 1) throw new CommandError('must provide a single tag for creation');
  return ctx.args[0]!;
}

export const generate: Handler = async (ctx) => {
  const tag = tagArgument(ctx);
  const objects = await withOrch(ctx, 'tag generate', (client) => tagObjects(ctx, client, tag, false));
  ctx.stdout.write(objects.map((o) => jsonToGoYaml(o)).join('\n---\n'));
  return 0;
};
