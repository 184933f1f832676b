// From a merged MeshOperator to Kubernetes objects: which components are on (Istio's component.Get), the chart
// values each one sees, the chart render, the `k8s` settings applied afterwards as strategic merge patches
// (Istio's postProcess), and Istio's output order (manifest-generate's sortManifests).
import { gunzipSync } from 'node:zlib';
import { jsonToGoYaml } from '../lib/goyaml';
import { parseGoYamlAll, GoYamlParseError, splitYamlDocuments } from '../lib/goyaml-parse';
import { ChartRenderError, renderChart } from '../lib/gotemplate/helm';
import { TEMPLATES as INJECTION_TEMPLATES } from '../inject/builtin.gen';
import { strategicMerge } from '../orch/smp';
import type { JsonObject } from '../orch/typed';
import { jsonModel, type MergedOperator } from './operator';
import { ManifestInputError, type ManifestSource } from './source';
import { deepClone, getPath, getString, isTree, mergeFrom, setPath, type Tree } from './tree';

export type Obj = Record<string, any>;

export interface ComponentDef {
  /** Istio's UserFacingName. */
  name: 'Base' | 'Pilot' | 'IngressGateways' | 'EgressGateways' | 'Cni' | 'Nodeproxy';
  specName: string;
  default: boolean;
  multi: boolean;
  resourceType: string;
  resourceName: string;
  containerName: string;
  /** Chart directory under charts/ ('' when mesh has no chart for it). */
  chart: string;
  valuesRoot: string;
  altEnablementPath?: string;
  /** The Helm release name the chart is published under (`manifest translate`). */
  releaseName?: string;
}

export const COMPONENTS: readonly ComponentDef[] = [
  {
    name: 'Base',
    specName: 'base',
    default: true,
    multi: false,
    resourceType: '',
    resourceName: '',
    containerName: '',
    chart: 'base',
    valuesRoot: 'global',
    releaseName: 'base',
  },
  {
    name: 'Pilot',
    specName: 'pilot',
    default: true,
    multi: false,
    resourceType: 'Deployment',
    resourceName: 'meshd',
    containerName: 'discovery',
    chart: 'mesh-control/mesh-discovery',
    valuesRoot: 'pilot',
    releaseName: 'meshd',
  },
  {
    name: 'IngressGateways',
    specName: 'ingressGateways',
    default: true,
    multi: true,
    resourceType: 'Deployment',
    resourceName: 'mesh-ingressgateway',
    containerName: 'mesh-proxy',
    chart: 'gateways/mesh-gateway',
    valuesRoot: 'gateways.mesh-ingressgateway',
    altEnablementPath: 'spec.values.gateways.mesh-ingressgateway.enabled',
  },
  {
    name: 'EgressGateways',
    specName: 'egressGateways',
    default: false,
    multi: true,
    resourceType: 'Deployment',
    resourceName: 'mesh-egressgateway',
    containerName: 'mesh-proxy',
    chart: 'gateways/mesh-gateway',
    valuesRoot: 'gateways.mesh-egressgateway',
    altEnablementPath: 'spec.values.gateways.mesh-egressgateway.enabled',
  },
  {
    name: 'Cni',
    specName: 'cni',
    default: false,
    multi: false,
    resourceType: 'DaemonSet',
    resourceName: 'mesh-cni-node',
    containerName: 'install-cni',
    chart: 'mesh-cni',
    valuesRoot: 'cni',
    releaseName: 'cni',
  },
  {
    name: 'Nodeproxy',
    specName: 'nodeproxy',
    default: false,
    multi: false,
    resourceType: 'DaemonSet',
    resourceName: 'nodeproxy',
    containerName: 'mesh-proxy',
    chart: '',
    valuesRoot: 'nodeproxy',
  },
];

/** One enabled instance of a component (a gateway component may have several). */
export interface ComponentSpec {
  name: string;
  namespace: string;
  label: Record<string, string>;
  hub?: string;
  tag?: unknown;
  raw: Tree;
}

/** Istio's Component.Get. */
export function componentSpecs(c: ComponentDef, iop: Tree): ComponentSpec[] {
  const defaultNs = getString(iop, 'metadata.namespace');
  let def = c.default;
  let altEnabled = false;
  if (c.altEnablementPath && getPath(iop, c.altEnablementPath)[0] === true) {
    def = true;
    altEnabled = true;
  }
  const build = (m: Tree): ComponentSpec => ({
    name: typeof m.name === 'string' ? m.name : '',
    namespace: (typeof m.namespace === 'string' && m.namespace) || defaultNs || 'mesh-system',
    label: isTree(m.label) ? (m.label as Record<string, string>) : {},
    hub: typeof m.hub === 'string' ? m.hub : undefined,
    tag: m.tag,
    raw: m,
  });
  const enabled = (m: Tree) => m.enabled !== false || altEnabled;
  const [v, found] = getPath(iop, `spec.components.${c.specName}`);
  const defaults = def ? [build({})] : [];
  if (c.multi) {
    if (!found || !Array.isArray(v)) return defaults;
    return v.filter(isTree).filter(enabled).map(build);
  }
  if (!found || !isTree(v)) return defaults;
  return enabled(v) ? [build(v)] : [];
}

/** Istio's applyComponentValuesToHelmValues: the chart values one component instance sees. */
export function componentValues(c: ComponentDef, spec: ComponentSpec, iop: Tree): Tree {
  const merged = deepClone(iop);
  const root = c.valuesRoot;
  if (c.name === 'IngressGateways' || c.name === 'EgressGateways') {
    setPath(merged, `spec.values.${root}.name`, spec.name || c.resourceName);
    setPath(merged, `spec.values.${root}.labels`, spec.label);
    const ports = getPath(spec.raw, 'k8s.service.ports')[0];
    if (Array.isArray(ports) && ports.length > 0) setPath(merged, `spec.values.${root}.ports`, deepClone(ports));
    setPath(merged, 'spec.values.gatewayType', root.slice('gateways.'.length));
  }
  const k8s = spec.raw.k8s;
  if (c.resourceType === 'Deployment' && isTree(k8s)) {
    const hpa = k8s.hpaSpec;
    if (isTree(hpa)) {
      if (typeof hpa.minReplicas === 'number') setPath(merged, `spec.values.${root}.autoscaleMin`, hpa.minReplicas);
      if (typeof hpa.maxReplicas === 'number' && hpa.maxReplicas > 0) setPath(merged, `spec.values.${root}.autoscaleMax`, hpa.maxReplicas);
    }
    if (typeof k8s.replicaCount === 'number' && k8s.replicaCount > 0) setPath(merged, `spec.values.${root}.replicaCount`, k8s.replicaCount);
  }
  if (spec.hub) setPath(merged, `spec.values.${root}.hub`, spec.hub);
  if (spec.tag !== undefined && spec.tag !== null) setPath(merged, `spec.values.${root}.tag`, String(spec.tag));
  return merged;
}

// ---------------------------------------------------------------------------------------------------------------
// Charts

function chartFiles(source: ManifestSource, chart: string): Map<string, string> {
  const prefix = `charts/${chart}`;
  const files = new Map<string, string>();
  for (const p of source.list(prefix)) files.set(p.slice(prefix.length + 1), source.read(p)!);
  if (!files.has('values.yaml') && ![...files.keys()].some((k) => k.startsWith('templates/'))) {
    throw new ManifestInputError(`chart ${JSON.stringify(chart)} not found in ${source.where} (expected ${prefix}/templates/)`);
  }
  return files;
}

function parseYamlOrFail(text: string, where: string): unknown[] {
  try {
    // JSON documents (the CRDs, 2 MB of them) skip the YAML parser: JSON is YAML, and JSON.parse is far cheaper.
    return splitYamlDocuments(text).flatMap((d) => {
      const trimmed = d.trim();
      if (trimmed.startsWith('{')) {
        try {
          return [JSON.parse(trimmed) as unknown];
        } catch {
          // not plain JSON after all (a flow mapping with YAML syntax): the YAML parser decides
        }
      }
      return parseGoYamlAll(d).map(jsonModel);
    });
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new ManifestInputError(`${where}: ${e.message}`);
    throw e;
  }
}

/** The CRDs the base chart installs: Istio's, and a copy of each under the mesh.io group of the same name. */
/** The Gateway API release whose CRDs `values.base.gatewayApiCRDs` installs: the one Istio 1.26 supports. */
export const GATEWAY_API_VERSION = 'v1.3.0';
const GATEWAY_API_CHANNELS = ['standard', 'experimental'];

/**
 * The Kubernetes Gateway API CRDs of one release channel, from manifests/gateway-api/ (vendored unchanged). Istio's
 * docs have users apply them with kubectl before using the Gateway API; here one value of the base chart does it.
 */
export function gatewayApiCrds(source: ManifestSource, channel: unknown): Obj[] {
  if (typeof channel !== 'string' || !GATEWAY_API_CHANNELS.includes(channel)) {
    throw new ManifestInputError(
      `${source.where}: values.base.gatewayApiCRDs: ${JSON.stringify(channel)} is not a Gateway API release channel (${GATEWAY_API_CHANNELS.join(', ')}, or "" for none)`,
    );
  }
  const rel = `gateway-api/${GATEWAY_API_VERSION}/${channel}-install.yaml.gz`;
  const gz = source.read(rel);
  if (gz === undefined) throw new ManifestInputError(`${source.where}: ${rel} not found`);
  const text = gunzipSync(Buffer.from(gz, 'base64')).toString();
  return parseYamlOrFail(text, `${source.where}: ${rel}`).filter((d): d is Obj => isTree(d) && typeof d.kind === 'string');
}

export function meshCrds(gzBase64: string): Obj[] {
  const istio = (JSON.parse(gunzipSync(Buffer.from(gzBase64, 'base64')).toString()) as { items: Obj[] }).items;
  const out: Obj[] = [];
  for (const c of istio) {
    out.push(c);
    const from: string = c.spec.group;
    if (!from.endsWith('.istio.io')) continue;
    const to = from.replace(/\.istio\.io$/, '.mesh.io');
    const m = JSON.parse(JSON.stringify(c).split(from).join(to)) as Obj;
    m.metadata.name = `${m.spec.names.plural}.${to}`;
    // Short names stay with Istio's kinds so `kubectl get vs` is unambiguous.
    delete m.spec.names.shortNames;
    m.spec.names.categories = ['mesh-io'];
    const labels: Record<string, string> = m.metadata.labels ?? {};
    for (const k of Object.keys(labels)) if (/istio|Tiller/.test(k + labels[k])) delete labels[k];
    delete m.metadata.annotations?.['helm.sh/resource-policy'];
    out.push(m);
  }
  return out;
}

/** Chart values: the chart's defaults < the profile's chart values < the component's values (Helm's coalesce). */
function chartValues(files: Map<string, string>, chart: string, source: ManifestSource, vals: Tree): Tree {
  const defaults = files.has('values.yaml') ? parseYamlOrFail(files.get('values.yaml')!, `${source.where}: charts/${chart}/values.yaml`)[0] : {};
  const out: Tree = isTree(defaults) ? defaults : {};
  const profile = typeof vals.profile === 'string' ? vals.profile : '';
  if (profile) {
    const rel = `profiles/values/${profile}.yaml`;
    const text = source.read(rel);
    if (text !== undefined) {
      const pv = parseYamlOrFail(text, `${source.where}: ${rel}`)[0];
      if (isTree(pv)) mergeFrom(out, pv);
    }
  }
  return coalesce(out, vals);
}

/** Helm's coalesce of user values over defaults: maps merge, a null deletes, anything else replaces. */
function coalesce(base: Tree, over: Tree): Tree {
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete base[k];
    else if (isTree(v) && isTree(base[k])) coalesce(base[k] as Tree, v);
    else base[k] = deepClone(v);
  }
  return base;
}

export interface RenderedComponent {
  component: ComponentDef;
  spec: ComponentSpec;
  values: Tree;
  objects: Obj[];
}

function renderComponent(c: ComponentDef, spec: ComponentSpec, iop: Tree, source: ManifestSource): RenderedComponent {
  const compIop = componentValues(c, spec, iop);
  const vals = (getPath(compIop, 'spec.values')[0] ?? {}) as Tree;
  const files = chartFiles(source, c.chart);
  const values = chartValues(files, c.chart, source, vals);
  let rendered;
  try {
    rendered = renderChart(
      c.chart,
      files,
      values,
      { name: 'mesh', namespace: spec.namespace },
      {
        meshCRDs: () => {
          const gz = files.get('files/crd-all.gen.json.gz');
          if (gz === undefined) throw new Error(`charts/${c.chart}/files/crd-all.gen.json.gz not found`);
          return meshCrds(gz);
        },
        gatewayApiCRDs: (channel: unknown) => gatewayApiCrds(source, channel),
        injectionTemplates: () => INJECTION_TEMPLATES,
        injectorValues: (v: unknown) => JSON.stringify(injectorValues(v as Tree), null, 2),
      },
    );
  } catch (e) {
    if (e instanceof ChartRenderError) throw new ManifestInputError(`${source.where}: ${e.message}`);
    throw e;
  }
  const objects: Obj[] = [];
  for (const [file, text] of rendered.files) {
    for (const doc of parseYamlOrFail(text, `${source.where}: charts/${c.chart}/${file} (rendered)`)) {
      if (!isTree(doc) || Object.keys(doc).length === 0) continue;
      if (typeof doc.kind !== 'string' || typeof doc.apiVersion !== 'string') {
        throw new ManifestInputError(`${source.where}: charts/${c.chart}/${file}: rendered a document with no apiVersion/kind`);
      }
      objects.push(doc as Obj);
    }
  }
  return { component: c, spec, values: vals, objects: postProcess(c, spec, objects, vals) };
}

/** The values the injector reads (the `values` key of mesh-sidecar-injector): what injection templates use. */
function injectorValues(v: Tree): Tree {
  const keep = ['global', 'pilot', 'sidecarInjectorWebhook', 'revision', 'gateways', 'meshConfig'];
  const out: Tree = {};
  for (const k of keep) if (k in v) out[k] = deepClone(v[k]);
  if (isTree(out.pilot)) out.pilot = { cni: (out.pilot as Tree).cni, env: (out.pilot as Tree).env };
  return out;
}

const STRUCTS: Record<string, string> = { Deployment: 'apps.Deployment', DaemonSet: 'apps.DaemonSet', Service: 'core.Service' };

function mergePatch(base: Obj, patch: Obj): Obj {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete base[k];
    else if (isTree(v) && isTree(base[k])) mergePatch(base[k], v);
    else base[k] = v;
  }
  return base;
}

/** Istio's postProcess: each `k8s.<field>` as a strategic merge patch on the component's resource. */
function postProcess(c: ComponentDef, spec: ComponentSpec, objects: Obj[], vals: Tree): Obj[] {
  const k8s = spec.raw.k8s;
  if (!isTree(k8s)) return objects;
  let rn = spec.name || c.resourceName;
  if (c.name === 'Pilot') {
    const rev = typeof vals.revision === 'string' && vals.revision ? vals.revision : 'default';
    if (rev !== 'default') rn = `${rn}-${rev}`;
  }
  const rt = c.resourceType;
  const container = (field: string) => (v: unknown) => ({ spec: { template: { spec: { containers: [{ name: c.containerName, [field]: v }] } } } });
  const podSpec = (field: string) => (v: unknown) => ({ spec: { template: { spec: { [field]: v } } } });
  const patches: Record<string, [string, (v: unknown) => Obj]> = {
    affinity: [rt, podSpec('affinity')],
    env: [rt, container('env')],
    hpaSpec: ['HorizontalPodAutoscaler', (v) => ({ spec: v })],
    imagePullPolicy: [rt, container('imagePullPolicy')],
    nodeSelector: [rt, podSpec('nodeSelector')],
    podDisruptionBudget: ['PodDisruptionBudget', (v) => ({ spec: v })],
    podAnnotations: [rt, (v) => ({ spec: { template: { metadata: { annotations: v } } } })],
    priorityClassName: [rt, podSpec('priorityClassName')],
    readinessProbe: [rt, container('readinessProbe')],
    replicaCount: [rt, (v) => ({ spec: { replicas: v } })],
    resources: [rt, container('resources')],
    strategy: [rt, (v) => ({ spec: { strategy: v } })],
    tolerations: [rt, podSpec('tolerations')],
    serviceAnnotations: ['Service', (v) => ({ metadata: { annotations: v } })],
    service: ['Service', (v) => ({ spec: v })],
    securityContext: [rt, podSpec('securityContext')],
  };
  const raw = deepClone(k8s);
  if ((c.name === 'IngressGateways' || c.name === 'EgressGateways') && isTree(raw.service)) (raw.service as Tree).ports = [];
  for (const field of Object.keys(patches).sort()) {
    if (!(field in raw)) continue;
    const [kind, make] = patches[field]!;
    const patch = make(raw[field]);
    objects.forEach((o, i) => {
      if (o.kind !== kind || o.metadata?.name !== rn) return;
      const struct = STRUCTS[kind];
      let next = struct ? (strategicMerge(o as JsonObject, patch as JsonObject, struct) as Obj) : mergePatch(deepClone(o), deepClone(patch));
      if (field === 'podDisruptionBudget' && next.spec && 'maxUnavailable' in next.spec && 'minAvailable' in next.spec) {
        delete next.spec.minAvailable;
      }
      objects[i] = next;
    });
  }
  const overlays = raw.overlays;
  if (Array.isArray(overlays)) {
    for (const ov of overlays.filter(isTree)) {
      objects.forEach((o) => {
        if (o.kind !== ov.kind || o.metadata?.name !== ov.name) return;
        for (const p of Array.isArray(ov.patches) ? ov.patches.filter(isTree) : []) {
          if (typeof p.path !== 'string') continue;
          if (p.value === undefined || p.value === null) deleteAt(o, p.path);
          else setPath(o, p.path, deepClone(p.value));
        }
      });
    }
  }
  return objects;
}

function deleteAt(o: Obj, path: string): void {
  const parts = path.split('.');
  const last = parts.pop()!;
  const [parent, found] = getPath(o, parts.join('.'));
  if (found && isTree(parent)) delete parent[last];
}

// ---------------------------------------------------------------------------------------------------------------
// Order and output

function group(o: Obj): string {
  const api = String(o.apiVersion);
  return api.includes('/') ? api.slice(0, api.indexOf('/')) : '';
}

/** manifest-generate's objectKindOrdering. */
export function kindOrder(o: Obj): number {
  const gk = `${group(o)}/${o.kind}`;
  switch (gk) {
    case 'apiextensions.k8s.io/CustomResourceDefinition':
      return -1000;
    case '/ServiceAccount':
    case 'rbac.authorization.k8s.io/ClusterRole':
      return 1;
    case 'rbac.authorization.k8s.io/ClusterRoleBinding':
      return 2;
    case 'admissionregistration.k8s.io/ValidatingWebhookConfiguration':
      return 3;
    case '/ConfigMap':
    case '/Secrets':
      return 100;
    case 'extensions/Deployment':
    case 'apps/Deployment':
      return 1000;
    case 'autoscaling/HorizontalPodAutoscaler':
      return 1001;
    case '/Service':
      return 10000;
    default:
      return 1000;
  }
}

function cmp(a: string | number, b: string | number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Istio's sortManifests: kind order, then group, kind and name; stable for equal keys. */
export function sortObjects(all: Obj[]): Obj[] {
  return all
    .map((o, i) => [o, i] as const)
    .sort(
      ([a, ia], [b, ib]) =>
        cmp(kindOrder(a), kindOrder(b)) ||
        cmp(group(a), group(b)) ||
        cmp(String(a.kind), String(b.kind)) ||
        cmp(String(a.metadata?.name ?? ''), String(b.metadata?.name ?? '')) ||
        ia - ib,
    )
    .map(([o]) => o);
}

export function objectYaml(o: Obj): string {
  return jsonToGoYaml(o);
}

export interface Generated {
  components: RenderedComponent[];
  warnings: string[];
}

/** Renders every enabled component, in Istio's component order. */
export function renderAll(m: MergedOperator): Generated {
  const warnings = [...m.warnings];
  const out: RenderedComponent[] = [];
  for (const c of COMPONENTS) {
    for (const spec of componentSpecs(c, m.iop)) {
      if (!c.chart) {
        warnings.push(`component ${c.specName} is enabled but this build of mesh has no ${c.specName} chart: its objects are not generated`);
        continue;
      }
      out.push(renderComponent(c, spec, m.iop, m.source));
    }
  }
  return { components: out, warnings };
}

/** `manifest generate`'s output: every object, sorted, each followed by Istio's `\n---\n` separator. */
export function generatedText(g: Generated): string {
  return sortObjects(g.components.flatMap((c) => c.objects))
    .map((o) => objectYaml(o) + '\n---\n')
    .join('');
}
