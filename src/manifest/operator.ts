// The MeshOperator resource (Istio's IstioOperator, renamed; `install.istio.io/IstioOperator` is accepted too):
// reading the -f files and --set flags, overlaying them on a profile as Istio's MergeInputs does (base profile <
// requested profile < files in order < --set flags in order), translating the top-level settings into chart
// values, and refusing fields the resource does not have with the path that named them.
import { readFileSync } from 'node:fs';
import { parseGoYamlAll, GoYamlParseError } from '../lib/goyaml-parse';
import { buildInfo } from '../lib/buildinfo';
import { VALUES as INJECT_VALUES } from '../inject/builtin.gen';
import { ManifestInputError, type ManifestSource } from './source';
import { deepClone, getBool, getPath, getString, isTree, mergeFrom, PathError, setPath, setSpecPaths, splitSetFlag, type Tree } from './tree';

export const OPERATOR_KINDS: ReadonlyArray<[string, string]> = [
  ['install.mesh.io/v1alpha1', 'MeshOperator'],
  ['install.istio.io/v1alpha1', 'IstioOperator'],
];

/** JSON model of a parsed YAML document (bigint → number, Map → object). */
export function jsonModel(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), jsonModel(x)]));
  if (Array.isArray(v)) return v.map(jsonModel);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonModel(x)]));
  return v;
}

function parseOperatorYaml(text: string, where: string): Tree {
  let docs: unknown[];
  try {
    docs = parseGoYamlAll(text).filter((d) => d !== null && d !== undefined);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new ManifestInputError(`${where}: unable to parse file: ${e.message}`);
    throw e;
  }
  if (docs.length > 1) throw new ManifestInputError(`${where}: contains multiple MeshOperator CRs, only one per file is supported`);
  if (docs.length === 0) return {};
  const doc = jsonModel(docs[0]);
  if (!isTree(doc)) throw new ManifestInputError(`${where}: not a MeshOperator resource (a YAML mapping was expected)`);
  return doc;
}

// ---------------------------------------------------------------------------------------------------------------
// The resource's shape, for unknown-field errors. `true` means any content (free maps, Kubernetes types).

type Shape = true | { [field: string]: Shape } | { list: Shape };

const K8S: Shape = Object.fromEntries(
  [
    'affinity',
    'env',
    'hpaSpec',
    'imagePullPolicy',
    'nodeSelector',
    'podDisruptionBudget',
    'podAnnotations',
    'priorityClassName',
    'readinessProbe',
    'replicaCount',
    'resources',
    'service',
    'strategy',
    'tolerations',
    'serviceAnnotations',
    'securityContext',
    'volumes',
    'volumeMounts',
    'overlays',
  ].map((f) => [f, true as Shape]),
);
const COMPONENT: Shape = { enabled: true, namespace: true, hub: true, tag: true, k8s: K8S };
const GATEWAY: Shape = { ...COMPONENT, name: true, label: true };

/** The component keys under spec.components (Istio's, with ztunnel written nodeproxy). */
export const COMPONENT_FIELDS = ['base', 'pilot', 'cni', 'nodeproxy', 'ingressGateways', 'egressGateways'] as const;

const SPEC: Shape = {
  profile: true,
  installPackagePath: true,
  hub: true,
  tag: true,
  namespace: true,
  revision: true,
  compatibilityVersion: true,
  meshConfig: true,
  unvalidatedValues: true,
  components: {
    base: COMPONENT,
    pilot: COMPONENT,
    cni: COMPONENT,
    nodeproxy: COMPONENT,
    ingressGateways: { list: GATEWAY },
    egressGateways: { list: GATEWAY },
  },
  values: true, // checked against the charts' values below
};

const TOP: Shape = { apiVersion: true, kind: true, metadata: true, spec: SPEC };

/** Values that hold Kubernetes objects or user maps: their content is not checked key by key. */
const OPEN_VALUES = new Set([
  'resources',
  'affinity',
  'nodeSelector',
  'tolerations',
  'env',
  'podAnnotations',
  'podLabels',
  'serviceAnnotations',
  'labels',
  'securityContext',
  'seccompProfile',
  'autoscaleBehavior',
  'deploymentLabels',
  'templates',
  'injectedAnnotations',
  'meshNetworks',
  'readinessProbe',
  'lifecycle',
  'startupProbe',
  'defaultResources',
]);

/**
 * Keys `values` may hold: every key the charts' own defaults, the profiles' chart values and the injector's
 * values declare; where a default is an empty map, any key below it.
 */
export function valuesShape(source: ManifestSource): Shape {
  const shape: Record<string, Shape> = {};
  const add = (into: Record<string, Shape>, v: unknown): void => {
    if (!isTree(v)) return;
    for (const [k, x] of Object.entries(v)) {
      if (isTree(x) && Object.keys(x).length > 0 && !OPEN_VALUES.has(k)) {
        const cur = into[k];
        if (cur === true) continue;
        const next = (cur ?? {}) as Record<string, Shape>;
        into[k] = next;
        add(next, x);
      } else into[k] = true;
    }
  };
  for (const f of source.list('charts').filter((p) => p.endsWith('/values.yaml'))) add(shape, parseOperatorYaml(source.read(f)!, f));
  for (const f of source.list('profiles/values')) if (f.endsWith('.yaml')) add(shape, parseOperatorYaml(source.read(f)!, f));
  add(shape, INJECT_VALUES);
  // Sections whose content mesh passes through untouched (mesh config, tags) or has no chart for (the node proxy).
  for (const free of ['meshConfig', 'revisionTags', 'nodeproxy', 'ztunnel', 'compatibilityVersion', 'experimental']) shape[free] = true;
  return shape;
}

function checkShape(v: unknown, shape: Shape, path: string, out: string[]): void {
  if (shape === true || v === null || v === undefined) return;
  if ('list' in shape && Object.keys(shape).length === 1) {
    if (!Array.isArray(v)) {
      out.push(`${path}: expected a list`);
      return;
    }
    v.forEach((e, i) => checkShape(e, shape.list as Shape, `${path}[${i}]`, out));
    return;
  }
  if (!isTree(v)) {
    if (Array.isArray(v) || Object.keys(shape).length > 0) out.push(`${path}: expected a map, got ${JSON.stringify(v)}`);
    return;
  }
  for (const [k, x] of Object.entries(v)) {
    const sub = (shape as Record<string, Shape>)[k];
    const p = path ? `${path}.${k}` : k;
    if (sub === undefined) out.push(`${p}: unknown field ${JSON.stringify(k)}`);
    else checkShape(x, sub, p, out);
  }
}

/** Unknown or mistyped fields of one input, each as `<path>: <problem>`. */
export function shapeErrors(doc: Tree, values: Shape): string[] {
  const out: string[] = [];
  checkShape(doc, TOP, '', out);
  const vals = getPath(doc, 'spec.values')[0];
  if (vals !== undefined) checkShape(vals, values, 'spec.values', out);
  return out;
}

function checkKind(doc: Tree, where: string): void {
  const api = doc.apiVersion;
  const kind = doc.kind;
  if (api === undefined && kind === undefined) return;
  if (!OPERATOR_KINDS.some(([a, k]) => a === api && k === kind)) {
    throw new ManifestInputError(
      `${where}: expected kind MeshOperator (apiVersion install.mesh.io/v1alpha1) or IstioOperator (install.istio.io/v1alpha1), got ${String(kind)} (${String(api)})`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------------------

export interface OperatorInputs {
  /** -f files, overlaid left to right; `-` is stdin (last only). */
  files: readonly string[];
  /** --set flags, `path=value`, applied in order after the files. */
  sets: readonly string[];
  /** --manifests/-d. */
  manifests: string;
  /** --revision/-r. */
  revision: string;
  /** Settings detected from the cluster (--cluster-specific), applied over the profile, under the user's. */
  clusterSettings?: readonly string[];
  /** --force: validation problems are reported as warnings and generation goes on (Istio's --force). */
  force?: boolean;
  /** Reads stdin for `-f -`. */
  stdin?: () => string;
}

/** Istio's applyFlagAliases: --manifests and --revision become --set flags. */
export function flagAliases(sets: readonly string[], manifests: string, revision: string): string[] {
  const out = [...sets];
  if (manifests) out.push(`installPackagePath=${manifests}`);
  if (revision && revision !== 'default') out.push(`revision=${revision}`);
  return out;
}

function readProfile(source: ManifestSource, name: string): Tree {
  const rel = `profiles/${name}.yaml`;
  const text = source.read(rel);
  if (text === undefined) {
    const known = source
      .list('profiles')
      .filter((p) => /^profiles\/[^/]+\.yaml$/.test(p))
      .map((p) => p.slice('profiles/'.length, -'.yaml'.length));
    throw new ManifestInputError(`profile ${JSON.stringify(name)} not found in ${source.where} (profiles: ${known.join(', ')})`);
  }
  const doc = parseOperatorYaml(text, `${source.where}: ${rel}`);
  return doc;
}

const UNVALIDATED_HINT = ' (chart values mesh does not know can be passed unchecked under spec.unvalidatedValues)';

/** Merged MeshOperator (as a tree) and the source its charts come from. */
export interface MergedOperator {
  iop: Tree;
  source: ManifestSource;
  warnings: string[];
}

/** Istio's MergeInputs plus its validation (unknown fields are refused here, naming the input). */
export function mergeInputs(o: OperatorInputs, pickSource: (dir: string) => ManifestSource): MergedOperator {
  const user: Tree = { apiVersion: 'install.mesh.io/v1alpha1', kind: 'MeshOperator', metadata: {}, spec: {} };
  const docs: Array<[Tree, string]> = [];
  o.files.forEach((f, i) => {
    let text: string;
    if (f === '-') {
      if (i !== o.files.length - 1) throw new ManifestInputError('stdin is only allowed as the last filename');
      text = o.stdin ? o.stdin() : readFileSync(0, 'utf8');
    } else {
      try {
        text = readFileSync(f.trim(), 'utf8');
      } catch (e) {
        throw new ManifestInputError(`${f}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or directory' : (e as Error).message}`);
      }
    }
    const doc = parseOperatorYaml(text, f);
    checkKind(doc, f);
    if (doc.spec === null) delete doc.spec;
    docs.push([doc, f]);
    mergeFrom(user, doc);
  });
  const sets = flagAliases(o.sets, o.manifests, o.revision);
  for (const s of sets) {
    const [p] = splitSetFlag(s);
    if (p === '') throw new ManifestInputError(`--set ${JSON.stringify(s)}: no path before "="`);
    try {
      setSpecPaths(user, [s]);
    } catch (e) {
      if (e instanceof PathError) throw new ManifestInputError(`--set ${s}: ${e.message}`);
      throw e;
    }
  }
  const source = pickSource(getString(user, 'spec.installPackagePath'));
  const values = valuesShape(source);
  const problems: string[] = [];
  for (const [doc, f] of docs) {
    const errs = shapeErrors(doc, values);
    if (errs.length) problems.push(`${f}: invalid MeshOperator: ${errs.join('; ')}`);
  }
  for (const s of o.sets) {
    const probe: Tree = { spec: {} };
    setSpecPaths(probe, [s]);
    const errs = shapeErrors(probe, values);
    if (errs.length) problems.push(`--set ${s}: ${errs.join('; ')}`);
  }
  const warnings: string[] = [];
  if (problems.length && !o.force) throw new ManifestInputError(problems.join('; ') + UNVALIDATED_HINT);
  for (const p of problems) warnings.push(`spec invalid; continuing because of --force: ${p}`);

  const profile = getString(user, 'spec.profile') || 'default';
  const userValues = getPath(user, 'spec.values')[0];
  const base = readProfile(source, 'default');
  if (profile !== 'default') mergeFrom(base, readProfile(source, profile));
  setSpecPaths(base, o.clusterSettings ?? []);
  // The build's own image tag, as Istio compiles its hub/tag in (a user's hub/tag still wins).
  setSpecPaths(base, [`tag=${buildInfo().version}`]);
  mergeFrom(base, user);
  const iop = translateToValues(base);
  if (isTree(userValues)) mergeFrom(iop, { spec: { values: userValues } });
  try {
    validateMerged(iop);
  } catch (e) {
    if (!(e instanceof ManifestInputError) || !o.force) throw e;
    warnings.push(`spec invalid; continuing because of --force: ${e.message}`);
  }
  const unvalidated = getPath(iop, 'spec.unvalidatedValues')[0];
  if (isTree(unvalidated)) mergeFrom(iop, { spec: { values: unvalidated } });
  return { iop, source, warnings };
}

/** Istio's translateIstioOperatorToHelm: top-level settings become chart values. */
function translateToValues(base: Tree): Tree {
  const translations: Array<[string, string]> = [
    ['spec.hub', 'global.hub'],
    ['spec.tag', 'global.tag'],
    ['spec.revision', 'revision'],
    ['spec.meshConfig', 'meshConfig'],
    ['spec.compatibilityVersion', 'compatibilityVersion'],
  ];
  for (const [from, to] of translations) {
    const [v, found] = getPath(base, from);
    if (!found) continue;
    if (isTree(v)) mergeFrom(base, { spec: { values: { meshConfig: deepClone(v) } } });
    else setPath(base, `spec.values.${to}`, to === 'global.tag' || to === 'compatibilityVersion' ? String(v) : v);
  }
  setPath(base, 'spec.values.pilot.enabled', getBool(base, 'spec.components.pilot.enabled'));
  setPath(base, 'spec.values.pilot.cni.enabled', getBool(base, 'spec.components.cni.enabled'));
  const ns = getString(base, 'spec.values.global.meshNamespace');
  if (ns) setPath(base, 'metadata.namespace', ns);
  return base;
}

const REVISION_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The checks Istio runs on the merged resource (hub, tag, revision); problems are errors. */
function validateMerged(iop: Tree): void {
  const errs: string[] = [];
  const rev = getPath(iop, 'spec.revision')[0];
  if (rev !== undefined && rev !== '' && (typeof rev !== 'string' || !REVISION_RE.test(rev) || rev.length > 63)) {
    errs.push(`invalid revision specified: ${String(rev)}`);
  }
  const hub = getPath(iop, 'spec.hub')[0];
  if (hub !== undefined && (typeof hub !== 'string' || /\s/.test(hub))) errs.push(`invalid hub: ${String(hub)}`);
  const tag = getPath(iop, 'spec.tag')[0];
  if (tag !== undefined && !/^[\w][\w.-]{0,127}$/.test(String(tag))) errs.push(`invalid tag: ${String(tag)}`);
  const gwNames = new Set<string>();
  for (const kind of ['ingressGateways', 'egressGateways']) {
    const list = getPath(iop, `spec.components.${kind}`)[0];
    if (!Array.isArray(list)) continue;
    for (const g of list) {
      const name = isTree(g) && typeof g.name === 'string' ? g.name : '';
      if (name && gwNames.has(name)) errs.push(`duplicate gateway name: ${name}`);
      if (name) gwNames.add(name);
    }
  }
  if (errs.length) throw new ManifestInputError(`invalid MeshOperator: ${errs.join('; ')}`);
}
