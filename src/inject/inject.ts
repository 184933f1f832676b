// Sidecar injection of one pod (Istio's pkg/kube/inject injectPod): render the selected templates with the
// pod, mesh config, proxy config and values; strategic-merge each rendered overlay onto the pod; re-apply
// the user's own overrides of injected containers; then Istio's post-processing (probe rewriting for the
// agent, Prometheus merge annotations, the status annotation, container order). Shared by `meshctl
// orch-inject` and the daemon's injection webhook.
import { goBool } from '../lib/gostrconv';
import { INIT_CONTAINER, PROXY_CONTAINER, VALIDATION_CONTAINER } from '../config/containers';
import { labelSelectorMatches, type LabelSelectorLike as LabelSelector } from '../config/meshconfig';
import { GoTemplate, type FuncMap } from '../lib/gotemplate';
import { parseGoYaml, GoYamlParseError } from '../lib/goyaml-parse';
import { goView } from '../orch/goview';
import { strategicMerge, PatchError } from '../orch/smp';
import { DecodeError, goJsonText, normalize, type Json, type JsonObject } from '../orch/typed';
import { injectionFuncs } from './funcs';
import { applyProxyConfigAnnotation, type MeshConfig, type ProxyConfig } from './mesh';
import { dumpAppProbers, rewriteProbes, shouldRewriteAppHTTPProbers, APP_PROBERS_ENV } from './probes';
import { validateAnnotations } from './validate';
import { MeshConfigView, PlainStruct, ProxyConfigView } from './views';

export const ENABLE_CORE_DUMP_CONTAINER = 'enable-core-dump';

export const ANNOTATION = {
  status: 'sidecar.mesh.io/status',
  inject: 'sidecar.mesh.io/inject',
  templates: 'inject.mesh.io/templates',
  proxyConfig: 'proxy.mesh.io/config',
  overrides: 'proxy.mesh.io/overrides',
  interceptionMode: 'sidecar.mesh.io/interceptionMode',
  statusPort: 'status.sidecar.mesh.io/port',
  proxyImageType: 'sidecar.mesh.io/proxyImageType',
  nativeSidecar: 'sidecar.mesh.io/nativeSidecar',
  prometheusMerge: 'prometheus.mesh.io/merge-metrics',
} as const;
export const LABEL_SIDECAR_INJECT = 'sidecar.mesh.io/inject';
export const LABEL_NETWORK = 'topology.mesh.io/network';
export const PROMETHEUS_ANNOTATIONS_ENV = 'MESH_METRICS_ANNOTATIONS';

export class InjectionError extends Error {}

export interface NamespacedName {
  name: string;
  namespace: string;
}

export interface TypeMeta {
  kind: string;
  apiVersion: string;
}

/** Values of the injector (the `values` key of the injector ConfigMap). */
export interface InjectionValues {
  /** The values as map[string]any (numbers are float64). */
  map: Record<string, unknown>;
}

export function parseValues(text: string, where: string): InjectionValues {
  let doc: unknown;
  try {
    doc = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new InjectionError(`could not parse configuration values: ${where}: ${e.message}`);
    throw e;
  }
  if (doc === null || doc === undefined) doc = {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new InjectionError(`could not parse configuration values: ${where}: not a mapping`);
  return { map: doc as Record<string, unknown> };
}

function dig(v: unknown, ...path: string[]): unknown {
  let cur = v;
  for (const k of path) {
    if (!cur || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v);
}

/** A set of parsed templates by name. */
export type Templates = ReadonlyMap<string, GoTemplate>;

export function parseTemplates(raw: Readonly<Record<string, string>>, env: Readonly<Record<string, string | undefined>>): Templates {
  const funcs: FuncMap = injectionFuncs(env);
  const out = new Map<string, GoTemplate>();
  for (const [name, src] of Object.entries(raw)) out.set(name, GoTemplate.parse('inject', src, funcs));
  return out;
}

export interface InjectionParameters {
  /** The pod (normalized core.Pod JSON). */
  pod: JsonObject;
  deployMeta: NamespacedName;
  typeMeta: TypeMeta;
  templates: Templates;
  defaultTemplates: readonly string[];
  aliases?: Readonly<Record<string, readonly string[]>>;
  meshConfig: MeshConfig;
  proxyConfig: ProxyConfig;
  values: InjectionValues;
  revision: string;
  /** Cluster env overrides (webhook URL parameters): MESH_META_CLUSTER_ID, MESH_META_NETWORK. */
  proxyEnvs: Record<string, string>;
  injectedAnnotations?: Readonly<Record<string, string>>;
  /** The environment templates read with `env` (ENABLE_NATIVE_SIDECARS, …). */
  env: Readonly<Record<string, string | undefined>>;
  proxyUID?: bigint;
  proxyGID?: bigint;
}

type Container = JsonObject & { name?: string };

function meta(pod: JsonObject): JsonObject {
  return (pod.metadata ?? (pod.metadata = {})) as JsonObject;
}
function spec(pod: JsonObject): JsonObject {
  return (pod.spec ?? (pod.spec = {})) as JsonObject;
}
function annotations(pod: JsonObject): Record<string, string> {
  return ((meta(pod).annotations as Record<string, string>) ?? {}) as Record<string, string>;
}
function containers(pod: JsonObject, which: 'containers' | 'initContainers'): Container[] {
  return ((spec(pod)[which] as Container[]) ?? []) as Container[];
}
function findContainer(name: string, list: readonly Container[]): Container | undefined {
  return list.find((c) => c.name === name);
}
function findContainerInPod(name: string, pod: JsonObject): Container | undefined {
  return findContainer(name, containers(pod, 'containers')) ?? findContainer(name, containers(pod, 'initContainers'));
}

type Reorder = 'first' | 'last' | 'remove';

function modifyContainers(list: readonly Container[], name: string, how: Reorder): Container[] {
  const rest = list.filter((c) => c.name !== name);
  const match = [...list].reverse().find((c) => c.name === name);
  if (!match) return rest;
  if (how === 'first') return [match, ...rest];
  if (how === 'last') return [...rest, match];
  return rest;
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

export function normalizePod(pod: unknown): JsonObject {
  return normalize(pod, 'core.Pod');
}

/** Decodes a rendered overlay (Istio decodes it as YAML into map[string]any before the strategic merge). */
function parseOverlay(overlayText: string): JsonObject | InjectionError {
  let patch: unknown;
  try {
    patch = parseGoYaml(overlayText);
  } catch (e) {
    if (e instanceof GoYamlParseError) return new InjectionError(`strategic merge: ${e.message}`);
    throw e;
  }
  if (patch === null || patch === undefined) patch = {};
  if (typeof patch !== 'object' || Array.isArray(patch)) return new InjectionError('strategic merge: invalid JSON document');
  return patch as JsonObject;
}

/** Strategic-merges a decoded overlay onto `target`, as Istio's applyOverlayYAML. */
function applyOverlayYaml(target: JsonObject, patch: JsonObject | InjectionError): JsonObject {
  if (patch instanceof InjectionError) throw patch;
  return applyOverlay(target, patch);
}

function applyOverlay(target: JsonObject, patch: JsonObject): JsonObject {
  try {
    return normalizePod(strategicMerge(normalizePod(target), patch, 'core.Pod'));
  } catch (e) {
    if (e instanceof PatchError) throw new InjectionError(`strategic merge: ${e.message}`);
    if (e instanceof DecodeError) throw new InjectionError(`unmarshal patched pod: ${e.message}`);
    throw e;
  }
}

interface InjectionStatus {
  containers: string[];
  initContainers: string[];
}

function injectionStatus(pod: JsonObject): InjectionStatus | undefined {
  const v = annotations(pod)[ANNOTATION.status];
  if (v === undefined) return undefined;
  try {
    const s = JSON.parse(v) as { containers?: unknown; initContainers?: unknown };
    if (!s || typeof s !== 'object') return undefined;
    const names = (x: unknown) => (Array.isArray(x) ? x.filter((n): n is string => typeof n === 'string') : []);
    return { containers: names(s.containers), initContainers: names(s.initContainers) };
  } catch {
    return undefined;
  }
}

const PROMETHEUS_SCRAPE = 'prometheus_io_scrape';
const PROMETHEUS_PORT = 'prometheus_io_port';
const PROMETHEUS_PATH = 'prometheus_io_path';

function sanitizeLabelName(k: string): string {
  return k.replace(/[^a-zA-Z0-9_]/g, '_');
}

function prometheusPort(pod: JsonObject): string | undefined {
  for (const [k, v] of Object.entries(annotations(pod))) if (sanitizeLabelName(k) === PROMETHEUS_PORT) return v;
  return undefined;
}

function clearPrometheusAnnotations(pod: JsonObject): void {
  const annos = annotations(pod);
  for (const k of Object.keys(annos)) {
    if ([PROMETHEUS_SCRAPE, PROMETHEUS_PORT, PROMETHEUS_PATH].includes(sanitizeLabelName(k))) delete annos[k];
  }
}

/** To re-inject an injected pod, first take out what the last injection added. */
function stripPod(params: InjectionParameters): JsonObject {
  const prev = injectionStatus(params.pod);
  if (!prev) return params.pod;
  const pod = clone(params.pod);
  let cs = containers(pod, 'containers');
  for (const c of prev.containers) cs = modifyContainers(cs, c, 'remove');
  let ics = containers(pod, 'initContainers');
  for (const c of prev.initContainers) ics = modifyContainers(ics, c, 'remove');
  spec(pod).containers = cs;
  if (ics.length || spec(pod).initContainers !== undefined) spec(pod).initContainers = ics;
  const target = String(params.meshConfig.defaultConfig.statusPort ?? 0);
  if (prometheusPort(pod) === target) clearPrometheusAnnotations(pod);
  delete (meta(pod).annotations as Record<string, string> | undefined)?.[ANNOTATION.status];
  return normalizePod(pod);
}

function parseOverrides(pod: JsonObject): { containers: Container[]; initContainers: Container[] } {
  const text = annotations(pod)[ANNOTATION.overrides];
  if (text === undefined) return { containers: [], initContainers: [] };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new InjectionError(`${ANNOTATION.overrides}: ${(e as Error).message}`);
  }
  const o = (v ?? {}) as { containers?: unknown; initContainers?: unknown };
  const list = (x: unknown) => (Array.isArray(x) ? (x as Container[]) : []);
  return { containers: list(o.containers), initContainers: list(o.initContainers) };
}

/** Puts containers recorded in the overrides annotation back, so re-injection sees the pod the user wrote. */
function reinsertOverrides(pod: JsonObject): JsonObject {
  const existing = parseOverrides(pod);
  const out = clone(pod);
  const cs = containers(out, 'containers');
  for (const c of existing.containers) if (!findContainer(String(c.name), cs)) cs.push(c);
  if (cs.length) spec(out).containers = cs;
  const ics = containers(out, 'initContainers');
  for (const c of existing.initContainers) if (!findContainer(String(c.name), ics)) ics.push(c);
  if (ics.length) spec(out).initContainers = ics;
  return normalizePod(out);
}

const KNOWN_IMAGE_TYPES = ['distroless', 'debug'];

/** Istio's ProxyImage: <hub>/<image>:<tag>[-<variant>], the variant from values, ProxyConfig.image or annotation. */
export function proxyImage(values: InjectionValues, pc: ProxyConfig, annos: Record<string, string>): string {
  const global = dig(values.map, 'global');
  const tagV = dig(global, 'tag');
  let tag = tagV === undefined || tagV === null ? '' : typeof tagV === 'number' ? String(tagV) : str(tagV);
  let imageType = str(dig(global, 'variant'));
  const image = pc.image as { imageType?: string } | undefined;
  if (image) imageType = image.imageType ?? '';
  const name = str(dig(global, 'proxy', 'image')) || 'proxyv2';
  if (ANNOTATION.proxyImageType in annos) imageType = annos[ANNOTATION.proxyImageType]!;
  if (imageType !== '') {
    for (const t of KNOWN_IMAGE_TYPES) {
      if (tag.endsWith('-' + t)) {
        tag = tag.slice(0, -(t.length + 1));
        break;
      }
    }
    if (imageType !== 'default') tag = `${tag}-${imageType}`;
  }
  return `${str(dig(global, 'hub'))}/${name}:${tag}`;
}

function clusterAndNetwork(params: InjectionParameters): { cluster: string; network: string } {
  let cluster = str(dig(params.values.map, 'global', 'multiCluster', 'clusterName'));
  let network = str(dig(params.values.map, 'global', 'network'));
  if (params.proxyEnvs.MESH_META_CLUSTER_ID) cluster = params.proxyEnvs.MESH_META_CLUSTER_ID;
  if (params.proxyEnvs.MESH_META_NETWORK) network = params.proxyEnvs.MESH_META_NETWORK;
  const labels = (meta(params.pod).labels as Record<string, string>) ?? {};
  if (LABEL_NETWORK in labels) network = labels[LABEL_NETWORK]!;
  return { cluster, network };
}

function selectTemplates(params: InjectionParameters): string[] {
  const a = annotations(params.pod)[ANNOTATION.templates];
  const names = a !== undefined ? a.split(',').map((n) => n.trim()) : [...params.defaultTemplates];
  return names.flatMap((n) => params.aliases?.[n] ?? [n]);
}

function nativeSidecarsEnabled(params: InjectionParameters, pod: JsonObject): boolean {
  const v = annotations(pod)[ANNOTATION.nativeSidecar];
  if (v === 'true') return true;
  if (v === 'false') return false;
  return /^(1|t|T|TRUE|true|True)$/.test(params.env.ENABLE_NATIVE_SIDECARS ?? '');
}

/** Renders the templates; returns the merged pod and the pod made of the overlays alone. */
function runTemplate(params: InjectionParameters): { merged: JsonObject; template: JsonObject } {
  const errs = validateAnnotations(annotations(params.pod));
  if (errs.length) {
    throw new InjectionError(`${errs.length} error${errs.length > 1 ? 's' : ''} occurred:\n${errs.map((e) => `\t* ${e}`).join('\n')}\n\n`);
  }
  const { cluster, network } = clusterAndNetwork(params);
  if (cluster) params.proxyEnvs.MESH_META_CLUSTER_ID = cluster;
  if (network) params.proxyEnvs.MESH_META_NETWORK = network;

  const stripped = reinsertOverrides(stripPod(params));
  const data = new PlainStruct('inject.SidecarTemplateData', {
    TypeMeta: new PlainStruct('v1.TypeMeta', { Kind: params.typeMeta.kind, APIVersion: params.typeMeta.apiVersion }),
    DeploymentMeta: new PlainStruct('types.NamespacedName', { Name: params.deployMeta.name, Namespace: params.deployMeta.namespace }),
    ObjectMeta: goView((stripped.metadata as Json) ?? {}, 'meta.ObjectMeta'),
    Spec: goView((stripped.spec as Json) ?? {}, 'core.PodSpec'),
    ProxyConfig: new ProxyConfigView(params.proxyConfig),
    MeshConfig: new MeshConfigView(params.meshConfig),
    Values: params.values.map,
    Revision: params.revision,
    ProxyImage: proxyImage(params.values, params.proxyConfig, (meta(stripped).annotations as Record<string, string>) ?? {}),
    ProxyUID: params.proxyUID ?? 1337n,
    ProxyGID: params.proxyGID ?? 1337n,
    InboundTrafficPolicyMode: params.meshConfig.inboundTrafficPolicyMode === 'LOCALHOST' ? 'localhost' : 'passthrough',
    CompliancePolicy: params.env.COMPLIANCE_POLICY ?? '',
  });

  let merged = params.pod;
  let template: JsonObject = normalizePod({});
  for (const name of selectTemplates(params)) {
    const t = params.templates.get(name);
    if (!t) throw new InjectionError(`requested template "${name}" not found; have ${[...params.templates.keys()].join(', ')}`);
    const out = parseOverlay(t.execute(data));
    try {
      template = applyOverlayYaml(template, out);
    } catch (e) {
      if (e instanceof InjectionError) throw new InjectionError(`failed applying injection overlay: ${e.message}`);
      throw e;
    }
    // With native sidecars the template puts the proxy in initContainers; move a user-customized proxy there too.
    if (
      nativeSidecarsEnabled(params, merged) &&
      findContainer(PROXY_CONTAINER, containers(template, 'initContainers')) &&
      findContainer(PROXY_CONTAINER, containers(merged, 'containers'))
    ) {
      merged = clone(merged);
      const proxy = findContainer(PROXY_CONTAINER, containers(merged, 'containers'))!;
      spec(merged).containers = containers(merged, 'containers').filter((c) => c !== proxy);
      spec(merged).initContainers = [...containers(merged, 'initContainers'), proxy];
    }
    try {
      merged = applyOverlayYaml(merged, out);
    } catch (e) {
      if (e instanceof InjectionError)
        throw new InjectionError(`failed parsing generated injected YAML (check mesh sidecar injector configuration): ${e.message}`);
      throw e;
    }
  }
  return { merged, template };
}

function podWithContainer(which: 'containers' | 'initContainers', c: Container): JsonObject {
  const overlay = normalizePod({ spec: which === 'containers' ? { containers: [c] } : { containers: [], initContainers: [c] } });
  if (which === 'initContainers') (overlay.spec as JsonObject).containers = [];
  return overlay;
}

/** Applies the user's own definition of containers the template injects (an explicit `mesh-proxy` container). */
function reapplyOverwrittenContainers(finalPod: JsonObject, original: JsonObject, template: JsonObject, pc: ProxyConfig): JsonObject {
  const existing = parseOverrides(original);
  const statusText = annotations(original)[ANNOTATION.status];
  const alreadyInjected = statusText !== undefined;
  const injected = alreadyInjected ? parseStatusContainers(statusText) : { containers: [], initContainers: [] };
  const overrides: { containers: Container[]; initContainers: Container[] } = { containers: [], initContainers: [] };
  for (const c of containers(template, 'containers')) {
    if (injected.containers.includes(String(c.name))) continue;
    const match = findContainer(String(c.name), existing.containers) ?? findContainer(String(c.name), containers(original, 'containers'));
    if (!match) continue;
    const overlay = normalize(clone(match), 'core.Container');
    if (overlay.image === 'auto') delete overlay.image;
    overrides.containers.push(overlay);
    finalPod = applyOverlay(finalPod, podWithContainer('containers', overlay));
  }
  for (const c of containers(template, 'initContainers')) {
    if (injected.initContainers.includes(String(c.name))) continue;
    const match = findContainer(String(c.name), existing.initContainers) ?? findContainerInPod(String(c.name), original);
    if (!match) continue;
    const overlay = normalize(clone(match), 'core.Container');
    if (overlay.image === 'auto') delete overlay.image;
    overrides.initContainers.push(overlay);
    finalPod = applyOverlay(finalPod, podWithContainer('initContainers', overlay));
  }
  if (!alreadyInjected && (overrides.containers.length > 0 || overrides.initContainers.length > 0)) {
    const annos = (meta(finalPod).annotations ?? (meta(finalPod).annotations = {})) as Record<string, string>;
    const value: JsonObject = {};
    if (overrides.containers.length) value.containers = overrides.containers;
    if (overrides.initContainers.length) value.initContainers = overrides.initContainers;
    annos[ANNOTATION.overrides] = goJsonText(value);
  }
  adjustInitContainerUser(finalPod, original, pc);
  return finalPod;
}

function parseStatusContainers(status: string): { containers: string[]; initContainers: string[] } {
  try {
    const v = JSON.parse(status) as Record<string, unknown>;
    const names = (x: unknown) => (Array.isArray(x) ? x.map(String) : []);
    return { containers: names(v.containers), initContainers: names(v.initContainers) };
  } catch {
    return { containers: [], initContainers: [] };
  }
}

/** A user-set runAsUser/runAsGroup on the proxy carries over to the init/validation container and iptables -u. */
function adjustInitContainerUser(finalPod: JsonObject, original: JsonObject, pc: ProxyConfig): void {
  const user = findContainerInPod(PROXY_CONTAINER, original);
  const sc = user?.securityContext as JsonObject | undefined;
  if (!user || !sc || (sc.runAsUser === undefined && sc.runAsGroup === undefined)) return;
  const init =
    findContainer(INIT_CONTAINER, containers(finalPod, 'initContainers')) ??
    findContainer(VALIDATION_CONTAINER, containers(finalPod, 'initContainers'));
  if (!init) return;
  const tproxy = pc.interceptionMode === 'TPROXY' || annotations(finalPod)[ANNOTATION.interceptionMode] === 'TPROXY';
  if (tproxy && sc.runAsUser !== undefined) {
    const sidecar = findContainerInPod(PROXY_CONTAINER, finalPod);
    if (!sidecar) return;
    (sidecar.securityContext as JsonObject).runAsUser = 0;
  }
  if (!tproxy && init.name === VALIDATION_CONTAINER) {
    const isc = (init.securityContext ?? (init.securityContext = {})) as JsonObject;
    if (sc.runAsUser !== undefined) isc.runAsUser = sc.runAsUser;
    if (sc.runAsGroup !== undefined) isc.runAsGroup = sc.runAsGroup;
  }
  if (sc.runAsUser === undefined || sc.runAsUser === 0) return;
  const args = (init.args as string[]) ?? [];
  const i = args.indexOf('-u');
  if (i >= 0 && i + 1 < args.length) args[i + 1] = String(sc.runAsUser);
}

function enablePrometheusMerge(mc: MeshConfig, annos: Record<string, string>): boolean {
  const v = annos[ANNOTATION.prometheusMerge];
  if (v !== undefined) {
    const b = goBool(v);
    if (b !== undefined) return b;
  }
  return mc.enablePrometheusMerge ?? true;
}

function applyPrometheusMerge(pod: JsonObject, mc: MeshConfig): void {
  const annos = annotations(pod);
  let scrape = true;
  for (const [k, v] of Object.entries(annos)) {
    if (sanitizeLabelName(k) !== PROMETHEUS_SCRAPE) continue;
    const b = goBool(v);
    if (b !== undefined) {
      scrape = b;
      break;
    }
  }
  if (!scrape || !enablePrometheusMerge(mc, annos)) return;
  const target = String(mc.defaultConfig.statusPort ?? 0);
  const cur = prometheusPort(pod);
  if (cur !== undefined && cur === target) return;
  const cfg = { scrape: '', path: '', port: '' };
  for (const [k, v] of Object.entries(annos)) {
    const s = sanitizeLabelName(k);
    if (s === PROMETHEUS_PORT) cfg.port = v;
    else if (s === PROMETHEUS_SCRAPE) cfg.scrape = v;
    else if (s === PROMETHEUS_PATH) cfg.path = v;
  }
  const sidecar = findContainerInPod(PROXY_CONTAINER, pod);
  if (sidecar && (cfg.scrape || cfg.path || cfg.port)) {
    const env = ((sidecar.env as JsonObject[]) ?? (sidecar.env = [])) as JsonObject[];
    env.push({ name: PROMETHEUS_ANNOTATIONS_ENV, value: goJsonText(cfg) });
  }
  const a = (meta(pod).annotations ?? (meta(pod).annotations = {})) as Record<string, string>;
  clearPrometheusAnnotations(pod);
  a['prometheus.io/port'] = target;
  a['prometheus.io/path'] = '/stats/prometheus';
  a['prometheus.io/scrape'] = 'true';
}

function applyRewrite(pod: JsonObject, params: InjectionParameters): void {
  const sidecar = findContainerInPod(PROXY_CONTAINER, pod);
  if (!sidecar) return;
  const spec = dig(params.values.map, 'sidecarInjectorWebhook', 'rewriteAppHTTPProbe');
  if (!shouldRewriteAppHTTPProbers(annotations(pod), spec === true)) return;
  const statusPort = Number(params.meshConfig.defaultConfig.statusPort ?? 0);
  const prober = dumpAppProbers(pod, statusPort);
  if (prober !== '') {
    const previouslyInjected = ANNOTATION.status in annotations(pod);
    const env = ((sidecar.env as JsonObject[]) ?? (sidecar.env = [])) as JsonObject[];
    sidecar.env = mergeOrAppendProbers(previouslyInjected, env, prober);
  }
  rewriteProbes(annotations(pod), pod, statusPort);
}

function mergeOrAppendProbers(previouslyInjected: boolean, env: JsonObject[], probers: string): JsonObject[] {
  if (!previouslyInjected) return [...env, { name: APP_PROBERS_ENV, value: probers }];
  const i = env.findIndex((e) => e.name === APP_PROBERS_ENV);
  if (i < 0) return env;
  try {
    const existing = JSON.parse(String(env[i]!.value)) as Record<string, unknown>;
    const merged = { ...(JSON.parse(probers) as Record<string, unknown>), ...existing };
    const sorted = Object.fromEntries(
      Object.keys(merged)
        .sort()
        .map((k) => [k, merged[k]]),
    );
    const out = [...env];
    out[i] = { name: APP_PROBERS_ENV, value: goJsonText(sorted as Json) };
    return out;
  } catch {
    return env;
  }
}

function injectionStatusValue(template: JsonObject, revision: string): string {
  const names = (list: unknown) => (Array.isArray(list) && list.length ? (list as Array<{ name?: string }>).map((c) => c.name ?? '') : null);
  const s = spec(template);
  return goJsonText({
    initContainers: names(s.initContainers),
    containers: names(s.containers),
    volumes: names(s.volumes),
    imagePullSecrets: names(s.imagePullSecrets),
    revision: revision || 'default',
  });
}

function reorderPod(pod: JsonObject, params: InjectionParameters): void {
  let mc = params.meshConfig;
  const pca = annotations(params.pod)[ANNOTATION.proxyConfig];
  if (pca !== undefined) mc = applyProxyConfigAnnotation(mc, pca);
  const hold =
    mc.defaultConfig.holdApplicationUntilProxyStarts === true ||
    dig(params.values.map, 'global', 'proxy', 'holdApplicationUntilProxyStarts') === true;
  const s = spec(pod);
  s.containers = modifyContainers(containers(pod, 'containers'), PROXY_CONTAINER, hold ? 'first' : 'last');
  let ics = containers(pod, 'initContainers');
  if (findContainer(PROXY_CONTAINER, ics)) {
    ics = modifyContainers(ics, ENABLE_CORE_DUMP_CONTAINER, 'first');
    ics = modifyContainers(ics, PROXY_CONTAINER, 'first');
    ics = modifyContainers(ics, VALIDATION_CONTAINER, 'first');
    ics = modifyContainers(ics, INIT_CONTAINER, 'first');
  } else {
    ics = modifyContainers(ics, VALIDATION_CONTAINER, 'first');
    ics = modifyContainers(ics, INIT_CONTAINER, 'last');
    ics = modifyContainers(ics, ENABLE_CORE_DUMP_CONTAINER, 'last');
  }
  s.initContainers = ics;
}

function updateClusterEnvs(pod: JsonObject, envs: Record<string, string>): void {
  const c = findContainerInPod(PROXY_CONTAINER, pod);
  if (!c || Object.keys(envs).length === 0) return;
  const kept = ((c.env as JsonObject[]) ?? []).filter((e) => !(String(e.name) in envs));
  for (const k of Object.keys(envs).sort()) kept.push({ name: k, value: envs[k]! });
  c.env = kept;
}

function postProcessPod(pod: JsonObject, template: JsonObject, params: InjectionParameters): void {
  const m = meta(pod);
  if (!m.annotations) m.annotations = {};
  if (!m.labels) m.labels = {};
  updateClusterEnvs(pod, params.proxyEnvs);
  applyPrometheusMerge(pod, params.meshConfig);
  applyRewrite(pod, params);
  if (params.proxyEnvs.MESH_META_NETWORK !== undefined) (m.labels as Record<string, string>)[LABEL_NETWORK] = params.proxyEnvs.MESH_META_NETWORK;
  (m.annotations as Record<string, string>)[ANNOTATION.status] = injectionStatusValue(template, params.revision);
  for (const [k, v] of Object.entries(params.injectedAnnotations ?? {})) (m.annotations as Record<string, string>)[k] = v;
  reorderPod(pod, params);
}

/** Injects the sidecar into `params.pod`; returns the injected pod (normalized core.Pod JSON). */
export function injectPod(params: InjectionParameters): JsonObject {
  let merged: JsonObject;
  let template: JsonObject;
  try {
    ({ merged, template } = runTemplate(params));
  } catch (e) {
    if (e instanceof Error && !(e instanceof TypeError) && !(e instanceof RangeError))
      throw new InjectionError(`failed to run injection template: ${e.message}`);
    throw e;
  }
  let pod = reapplyOverwrittenContainers(clone(merged), params.pod, template, params.proxyConfig);
  pod = clone(pod);
  postProcessPod(pod, template, params);
  return normalizePod(pod);
}

// ---- policy ----

export type { LabelSelectorLike as LabelSelector } from '../config/meshconfig';

function selectorMatches(sel: LabelSelector, labels: Record<string, string>): boolean | undefined {
  // An empty selector selects nothing here (Istio skips it).
  if (!Object.keys(sel.matchLabels ?? {}).length && !(sel.matchExpressions ?? []).length) return undefined;
  return labelSelectorMatches(sel, labels);
}

export const IGNORED_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage'];

export interface InjectPolicy {
  policy: 'enabled' | 'disabled' | string;
  neverInjectSelector?: LabelSelector[];
  alwaysInjectSelector?: LabelSelector[];
}

/** Istio's injectRequired: host networking, system namespaces, the inject label/annotation, selectors, policy. */
export function injectRequired(config: InjectPolicy, pod: JsonObject): boolean {
  const s = spec(pod);
  if (s.hostNetwork === true) return false;
  const m = meta(pod);
  if (IGNORED_NAMESPACES.includes(String(m.namespace ?? ''))) return false;
  const annos = (m.annotations as Record<string, string>) ?? {};
  const labels = (m.labels as Record<string, string>) ?? {};
  let selector = annos[ANNOTATION.inject] ?? '';
  if (LABEL_SIDECAR_INJECT in labels) selector = labels[LABEL_SIDECAR_INJECT]!;
  let useDefault = false;
  let inject = false;
  switch (selector.toLowerCase()) {
    case 'y':
    case 'yes':
    case 'true':
    case 'on':
      inject = true;
      break;
    case '':
      useDefault = true;
      break;
  }
  if (useDefault) {
    for (const sel of config.neverInjectSelector ?? []) {
      if (selectorMatches(sel, labels)) {
        inject = false;
        useDefault = false;
        break;
      }
    }
  }
  if (useDefault) {
    for (const sel of config.alwaysInjectSelector ?? []) {
      if (selectorMatches(sel, labels)) {
        inject = true;
        useDefault = false;
        break;
      }
    }
  }
  if (config.policy === 'disabled') return useDefault ? false : inject;
  if (config.policy === 'enabled') return useDefault ? true : inject;
  return false;
}
