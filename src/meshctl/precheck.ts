// `meshctl x precheck`: istioctl 1.26.8 istioctl/pkg/precheck/precheck.go against the orchestrator API —
// the Kubernetes version (IST0142, minimum 1.29: k8sversion.MinK8SVersion), permission to create what an
// install creates asked by SelfSubjectAccessReview (IST0141), the Gateway API CRDs' served versions
// (IST0156, IST0172), the alpha-annotation analyzer over the live cluster (IST0136), and with --from-version
// the upgrade messages (IST0169: the default zipkin tracer removed in 1.21). Output as istioctl: the messages
// at or above --output-threshold (coloured log lines, or json/yaml), exit 1 when any is a warning or worse.
import { CommandError, flagBool, flagString, type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { MESSAGES, type Arg, type Level, type MessageType } from '../analysis/messages';
import { atLeast, type Message, type Resource } from '../analysis/model';
import { analyze, defaultMeshConfig, sortAndDedupe } from '../analysis/run';
import { selectAnalyzers } from '../analysis/analyzers';
import { type OutputFormat, printMessages } from './analyze/format';
import { readCluster } from './analyze/live';
import { apiStatus, meshctlOrchClient } from './orch';
import { DOCS } from './text';

export const MIN_K8S_MINOR = 29;

/** istioctl's clusterOrigin: messages about the cluster itself print `(Cluster)`. */
const CLUSTER: Resource = { kind: 'Cluster', name: '', namespace: '', labels: {}, annotations: {}, object: {} };

function resource(kind: string, name: string, namespace = ''): Resource {
  return { kind, name, namespace, labels: {}, annotations: {}, object: {} };
}

function message(type: MessageType, r: Resource, params: readonly Arg[]): Message {
  return { type, params, resource: r, line: 0 };
}

/** What an install creates (checkInstallPermissions), namespaced ones in the system namespace. */
const INSTALL_RESOURCES: ReadonlyArray<{ group: string; resource: string; namespaced?: boolean }> = [
  { group: '', resource: 'namespaces' },
  { group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
  { group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' },
  { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' },
  { group: 'rbac.authorization.k8s.io', resource: 'roles', namespaced: true },
  { group: '', resource: 'serviceaccounts', namespaced: true },
  { group: '', resource: 'services', namespaced: true },
  { group: 'apps', resource: 'deployments', namespaced: true },
  { group: '', resource: 'configmaps', namespaced: true },
  { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations' },
  { group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations' },
];

async function checkPermissions(client: OrchClient, meshNamespace: string): Promise<Message[]> {
  const answers = await Promise.all(
    INSTALL_RESOURCES.map(async (r) => {
      const review = (await client.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: { namespace: r.namespaced ? meshNamespace : '', verb: 'create', group: r.group, version: 'v1', resource: r.resource },
          },
        },
      })) as { status?: { allowed?: boolean; reason?: string } };
      if (review.status?.allowed) return undefined;
      return message(MESSAGES.InsufficientPermissions, CLUSTER, [r.resource, review.status?.reason || 'permission denied']);
    }),
  );
  return answers.filter((m): m is Message => m !== undefined);
}

async function checkServerVersion(client: OrchClient): Promise<Message[]> {
  const v = (await client.getJson('/version')) as { major?: string; minor?: string; gitVersion?: string };
  const minor = Number.parseInt(String(v.minor ?? '').replace(/\D.*$/, ''), 10);
  if (!Number.isFinite(minor)) throw new CommandError(`failed to get the Kubernetes version: cannot read minor version ${JSON.stringify(v.minor)}`);
  if (v.major === '1' && minor < MIN_K8S_MINOR)
    return [message(MESSAGES.UnsupportedKubernetesVersion, CLUSTER, [v.gitVersion ?? `v${v.major}.${v.minor}`, `1.${MIN_K8S_MINOR}`])];
  return [];
}

const GATEWAY_GROUP = 'gateway.networking.k8s.io';
const STABLE_KINDS = new Set(['Gateway', 'GatewayClass', 'HTTPRoute', 'GRPCRoute']);
const BETA_KINDS = new Set(['Gateway', 'GatewayClass', 'HTTPRoute', 'ReferenceGrant']);

async function checkGatewayApis(client: OrchClient): Promise<Message[]> {
  const list = (await client.getJson('/apis/apiextensions.k8s.io/v1/customresourcedefinitions')) as {
    items?: Array<{
      metadata: { name: string };
      spec: { group: string; names: { kind: string }; versions?: Array<{ name: string; served?: boolean }> };
    }>;
  };
  const out: Message[] = [];
  for (const crd of list.items ?? []) {
    if (crd.spec.group !== GATEWAY_GROUP) continue;
    const versions = new Set((crd.spec.versions ?? []).filter((v) => v.served).map((v) => v.name));
    const has = versions.size > 0 ? [...versions].sort().join(',') : 'none';
    const r = resource('CustomResourceDefinition', crd.metadata.name);
    if (BETA_KINDS.has(crd.spec.names.kind) && !versions.has('v1beta1'))
      out.push(message(MESSAGES.UnsupportedGatewayAPIVersion, r, [has, 'v1beta1']));
    if (STABLE_KINDS.has(crd.spec.names.kind) && !versions.has('v1')) out.push(message(MESSAGES.FutureUnsupportedGatewayAPIVersion, r, [has, 'v1']));
  }
  return out;
}

/** checkFromVersion: `1.<minor>`; 1.21 stopped sending traces to zipkin.<system namespace> by default. */
async function checkFromVersion(client: OrchClient, version: string, meshNamespace: string): Promise<Message[]> {
  const dot = version.indexOf('.');
  if (dot < 0) throw new CommandError(`invalid version ${version}, expected format like '1.0'`);
  const major = version.slice(0, dot);
  const minors = version.slice(dot + 1);
  if (major !== '1') throw new CommandError(`expected major version 1, got ${version}`);
  if (!/^[+-]?\d+$/.test(minors)) throw new CommandError(`minor version is not a number: ${minors}`);
  if (Number(minors) > 21) return [];
  try {
    await client.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/services/zipkin`);
  } catch (e) {
    if (apiStatus(e) === 404) return [];
    throw e;
  }
  return [
    message(MESSAGES.UpdateIncompatibility, resource('Service', 'zipkin', meshNamespace), [
      'meshConfig.defaultConfig.tracer',
      '1.21',
      `tracing is no longer by default enabled to send to 'zipkin.${meshNamespace}.svc'; follow https://mesh.io/latest/docs/tasks/observability/distributed-tracing/telemetry-api/`,
      '1.21',
    ]),
  ];
}

async function checkControlPlane(ctx: RunContext, client: OrchClient, meshNamespace: string): Promise<Message[]> {
  const [version, perms, gateways, live] = await Promise.all([
    checkServerVersion(client),
    checkPermissions(client, meshNamespace),
    checkGatewayApis(client),
    readCluster(client, { meshNamespace, revision: '', cluster: 'local' }),
  ]);
  const namespace = flagString(ctx, 'namespace');
  const alpha = analyze(live.resources, {
    analyzers: selectAnalyzers(['annotations.K8sAnalyzer']),
    namespace: namespace || undefined,
    suppressions: [],
    mesh: live.mesh ?? defaultMeshConfig(),
    meshNamespace,
  });
  return [...version, ...perms, ...gateways, ...alpha.messages];
}

/** formatting.Print of the messages; `(Cluster)` for cluster-wide ones as istioctl's clusterOrigin prints. */
function render(ms: readonly Message[], format: OutputFormat): string {
  const text = printMessages(ms, format, format === 'log');
  return text
    .replace(/\(Cluster \)/g, '(Cluster)')
    .replace(/"origin": "Cluster "/g, '"origin": "Cluster"')
    .replace(/origin: ['"]?Cluster ['"]?\n/g, 'origin: Cluster\n');
}

export const run: Handler = async (ctx) => {
  const client = await meshctlOrchClient(ctx, 'precheck');
  const meshNamespace = flagString(ctx, 'meshNamespace') || 'mesh-system';
  let msgs: Message[] = [];
  if (!flagBool(ctx, 'skip-controlplane')) msgs = await checkControlPlane(ctx, client, meshNamespace);
  const from = flagString(ctx, 'from-version');
  if (from) msgs.push(...(await checkFromVersion(client, from, meshNamespace)));
  msgs = sortAndDedupe(msgs);
  const threshold = flagString(ctx, 'output-threshold') as Level;
  const shown = msgs.filter((m) => atLeast(m.type.level, threshold));
  if (shown.length === 0)
    ctx.stderr.write(
      '\x1b[32m\u2714\x1b[0m No issues found when checking the cluster. Mesh is safe to install or upgrade!\n' +
        '  To get started, check out https://mesh.io/latest/docs/setup/getting-started/.\n',
    );
  else ctx.stdout.write(render(shown, flagString(ctx, 'output').toLowerCase() as OutputFormat) + '\n');
  if (msgs.some((m) => atLeast(m.type.level, 'Warning')))
    throw new CommandError(
      `Issues found when checking the cluster. Mesh may not be safe to install or upgrade.\nSee ${DOCS.configAnalysis} for more information about causes and resolutions.`,
    );
  return 0;
};
