// Injection over a stream of YAML documents (Istio's IntoResourceFile / IntoObject, what kube-inject runs):
// workload kinds are decoded, their pod template injected and re-encoded as Go clients print them; any
// other document is copied through untouched. Host-networked or opted-out workloads are left alone with a
// warning, as Istio does.
import { jsonToGoYaml } from '../lib/goyaml';
import { parseGoYaml, splitYamlDocuments, GoYamlParseError } from '../lib/goyaml-parse';
import { DecodeError, normalize, WORKLOAD_KINDS, type JsonObject } from '../orch/typed';
import {
  ANNOTATION,
  IGNORED_NAMESPACES,
  injectPod,
  injectRequired,
  InjectionError,
  normalizePod,
  type InjectionValues,
  type NamespacedName,
  type Templates,
  type TypeMeta,
} from './inject';
import { applyProxyConfigAnnotation, MeshConfigError, type MeshConfig } from './mesh';

export interface ResourceInjection {
  templates: Templates;
  values: InjectionValues;
  revision: string;
  meshConfig: MeshConfig;
  env: Readonly<Record<string, string | undefined>>;
  warn: (message: string) => void;
}

const CRONJOB_NAME = /^(.+)-\d{8,10}$/;

/** Istio's kube.GetDeployMetaFromPod: the workload that owns a pod, guessed from its owner reference. */
export function deployMetaFromPod(pod: JsonObject): { deploy: NamespacedName; typeMeta: TypeMeta } {
  const m = (pod.metadata ?? {}) as JsonObject;
  const labels = (m.labels as Record<string, string>) ?? {};
  const deploy = { name: String(m.name ?? ''), namespace: String(m.namespace ?? '') };
  const typeMeta: TypeMeta = { kind: 'Pod', apiVersion: 'v1' };
  if (String(m.generateName ?? '').length > 0) {
    const ref = ((m.ownerReferences as JsonObject[]) ?? []).find((r) => r.controller === true);
    if (ref) {
      typeMeta.apiVersion = String(ref.apiVersion ?? '');
      typeMeta.kind = String(ref.kind ?? '');
      deploy.name = String(ref.name ?? '');
      const hash = labels['pod-template-hash'];
      const rolloutHash = labels['rollouts-pod-template-hash'];
      if (typeMeta.kind === 'ReplicaSet' && hash && deploy.name.endsWith(hash)) {
        deploy.name = deploy.name.slice(0, deploy.name.length - hash.length - 1);
        typeMeta.kind = 'Deployment';
      } else if (typeMeta.kind === 'ReplicaSet' && rolloutHash && deploy.name.endsWith(rolloutHash)) {
        deploy.name = deploy.name.slice(0, deploy.name.length - rolloutHash.length - 1);
        typeMeta.kind = 'Rollout';
        typeMeta.apiVersion = 'v1alpha1';
      } else if (typeMeta.kind === 'ReplicationController' && labels.deploymentconfig) {
        deploy.name = labels.deploymentconfig;
        typeMeta.kind = 'DeploymentConfig';
      } else if (typeMeta.kind === 'Job') {
        const jn = CRONJOB_NAME.exec(deploy.name);
        if (jn) {
          deploy.name = jn[1]!;
          typeMeta.kind = 'CronJob';
          typeMeta.apiVersion = 'batch/v1';
        }
      }
    }
  }
  if (deploy.name === '') deploy.name = String(m.name ?? '');
  return { deploy, typeMeta };
}

/** Go's %q of a string. */
function quote(s: string): string {
  return JSON.stringify(s);
}

interface PodHolder {
  typeMeta: TypeMeta;
  deploy: NamespacedName;
  /** The object holding the pod template's metadata and spec. */
  metaOwner: JsonObject;
  specOwner: JsonObject;
}

function holderOf(kind: string, obj: JsonObject): PodHolder {
  const typeMeta: TypeMeta = { kind: String(obj.kind ?? ''), apiVersion: String(obj.apiVersion ?? '') };
  const om = (obj.metadata ?? {}) as JsonObject;
  const objName = { name: String(om.name ?? ''), namespace: String(om.namespace ?? '') };
  const spec = (obj.spec ?? (obj.spec = {})) as JsonObject;
  switch (kind) {
    case 'CronJob': {
      const jt = (spec.jobTemplate ?? (spec.jobTemplate = {})) as JsonObject;
      const jspec = (jt.spec ?? (jt.spec = {})) as JsonObject;
      const tmpl = (jspec.template ?? (jspec.template = {})) as JsonObject;
      return { typeMeta, deploy: objName, metaOwner: jt, specOwner: tmpl };
    }
    case 'Pod': {
      const { deploy, typeMeta: tm } = deployMetaFromPod(obj);
      return { typeMeta: tm, deploy, metaOwner: obj, specOwner: obj };
    }
    default: {
      if (spec.template === null || spec.template === undefined) throw new InjectionError('spec.template is required value');
      const tmpl = spec.template as JsonObject;
      return { typeMeta, deploy: objName, metaOwner: tmpl, specOwner: tmpl };
    }
  }
}

/** The mesh config a pod is injected with: the `proxy.mesh.io/config` annotation over meshConfig.defaultConfig. */
export function podMeshConfig(meshConfig: MeshConfig, pod: JsonObject): MeshConfig {
  const pca = ((((pod.metadata ?? {}) as JsonObject).annotations as Record<string, string>) ?? {})[ANNOTATION.proxyConfig];
  if (pca === undefined) return meshConfig;
  try {
    return applyProxyConfigAnnotation(meshConfig, pca);
  } catch (e) {
    if (e instanceof MeshConfigError) throw new InjectionError(e.message);
    throw e;
  }
}

/** What the injection webhook adds to kube-inject's inputs (the injector ConfigMap's fields, URL parameters). */
export interface PodInjectionExtras {
  defaultTemplates?: readonly string[];
  aliases?: Readonly<Record<string, readonly string[]>>;
  injectedAnnotations?: Readonly<Record<string, string>>;
  proxyEnvs?: Record<string, string>;
}

/**
 * Injects one pod whose injection is decided (injectRequired): the one path `meshctl orch-inject` and the
 * daemon's injection webhook both take. `opts.meshConfig` is already podMeshConfig's.
 */
export function injectWorkloadPod(
  pod: JsonObject,
  deploy: NamespacedName,
  typeMeta: TypeMeta,
  opts: Omit<ResourceInjection, 'warn'> & PodInjectionExtras,
): JsonObject {
  return injectPod({
    pod,
    deployMeta: deploy,
    typeMeta,
    templates: opts.templates,
    defaultTemplates: opts.defaultTemplates ?? ['sidecar'],
    ...(opts.aliases ? { aliases: opts.aliases } : {}),
    ...(opts.injectedAnnotations ? { injectedAnnotations: opts.injectedAnnotations } : {}),
    meshConfig: opts.meshConfig,
    proxyConfig: opts.meshConfig.defaultConfig,
    values: opts.values,
    revision: opts.revision,
    proxyEnvs: opts.proxyEnvs ?? {},
    env: opts.env,
  });
}

/** Injects one decoded object (already normalized as its kind); returns it changed or as is. */
export function injectObject(kind: string, obj: JsonObject, opts: ResourceInjection): JsonObject {
  if (kind === 'List') {
    const items = (obj.items as unknown[]) ?? [];
    obj.items = items.map((item) => {
      const k = kindOfItem(item);
      if (!k) return item as JsonObject;
      const typed = normalize(item, WORKLOAD_KINDS[k]!);
      return injectObject(k, typed, opts);
    }) as JsonObject[];
    return obj;
  }
  const h = holderOf(kind, obj);
  const metadata = (h.metaOwner.metadata ?? {}) as JsonObject;
  const podSpec = (h.specOwner.spec ?? {}) as JsonObject;
  const name = String(metadata.name ?? '') || h.deploy.name;
  const fullName = h.deploy.namespace ? `${h.deploy.namespace}/${name}` : name;
  const kindName = h.typeMeta.kind;
  if (podSpec.hostNetwork === true) {
    opts.warn(
      kindName
        ? `===> Skipping injection because ${kindName} ${quote(fullName)} has host networking enabled\n`
        : `===> Skipping injection because ${quote(fullName)} has host networking enabled\n`,
    );
    return obj;
  }
  const pod = normalizePod({ metadata, spec: podSpec });
  const meshConfig = podMeshConfig(opts.meshConfig, pod);
  if (!injectRequired({ policy: 'enabled' }, pod)) {
    opts.warn(
      kindName
        ? `===> Skipping injection because ${kindName} ${quote(fullName)} has sidecar injection disabled\n`
        : `===> Skipping injection because ${quote(fullName)} has sidecar injection disabled\n`,
    );
    return obj;
  }
  const injected = injectWorkloadPod(pod, h.deploy, h.typeMeta, { ...opts, meshConfig });
  h.metaOwner.metadata = injected.metadata!;
  h.specOwner.spec = injected.spec!;
  return obj;
}

function kindOfItem(item: unknown): string | undefined {
  if (!item || typeof item !== 'object') return undefined;
  const k = (item as { kind?: unknown }).kind;
  return typeof k === 'string' && k in WORKLOAD_KINDS ? k : undefined;
}

/** Injects every document of `text`; returns the output text (each document followed by "---"). */
export function injectResources(text: string, opts: ResourceInjection): string {
  let out = '';
  for (const raw of splitYamlDocuments(text)) {
    let doc: unknown;
    try {
      doc = parseGoYaml(raw);
    } catch (e) {
      if (e instanceof GoYamlParseError) throw new InjectionError(`error converting YAML to JSON: ${e.message}`);
      throw e;
    }
    const kind = doc && typeof doc === 'object' && !Array.isArray(doc) ? (doc as { kind?: unknown }).kind : undefined;
    if (typeof kind !== 'string' || !(kind in WORKLOAD_KINDS)) {
      out += raw + '---\n';
      continue;
    }
    let typed: JsonObject;
    try {
      typed = normalize(doc, WORKLOAD_KINDS[kind]!, { fromYaml: true });
    } catch (e) {
      if (e instanceof DecodeError) throw new InjectionError(e.message);
      throw e;
    }
    const injected = injectObject(kind, typed, opts);
    out += jsonToGoYaml(kind === 'List' ? injected : normalize(injected, WORKLOAD_KINDS[kind]!)) + '---\n';
  }
  return out;
}

export { IGNORED_NAMESPACES };
