// The daemon's mesh configuration file (--meshConfig, Istio's MeshConfig YAML; in a cluster the
// `mesh` key of the mesh ConfigMap mounted as a file). Read at start and watched: the fields the daemon
// acts on are parsed and checked here, and a change on disk is announced to who reads them. A file
// that does not exist is the built-in default mesh (Istio's behaviour); one that cannot be parsed is
// an error at start and, later, a warning that keeps the previous version.
import { existsSync, type FSWatcher, readFileSync, watch } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { registerScope } from '../lib/log';
import { MeshConfigError } from './meshconfig-error';
import { DEFAULT_MESH_TELEMETRY, parseMeshTelemetry, type MeshTelemetry } from './mesh-telemetry';

const log = registerScope('default');

/** A Kubernetes LabelSelector (metav1.LabelSelector / Istio's mesh LabelSelector). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

/** A metav1.LabelSelector as written in objects (operators not checked yet). */
export interface LabelSelectorLike {
  matchLabels?: Readonly<Record<string, string>>;
  matchExpressions?: ReadonlyArray<{ key: string; operator: string; values?: readonly string[] }>;
}

/** meshConfig.pathNormalization.normalization, DEFAULT read as BASE (what Istio's listener builder does). */
export type PathNormalization = 'NONE' | 'BASE' | 'MERGE_SLASHES' | 'DECODE_AND_MERGE_SLASHES';
const PATH_NORMALIZATIONS = ['DEFAULT', 'NONE', 'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'];

/** What the daemon reads of MeshConfig. */
export interface MeshConfigView {
  /** discoverySelectors: namespaces whose objects are read; none = every namespace. */
  discoverySelectors: LabelSelector[];
  pathNormalization: PathNormalization;
  /** accessLog*, enableTracing, defaultConfig.tracing, extensionProviders, defaultProviders. */
  telemetry: MeshTelemetry;
}

export const DEFAULT_MESH_CONFIG: MeshConfigView = { discoverySelectors: [], pathNormalization: 'BASE', telemetry: DEFAULT_MESH_TELEMETRY };

export { MeshConfigError };

const OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/** Parses the mesh config text; errors name the file and the field. */
export function parseMeshConfig(text: string, file: string): MeshConfigView {
  let doc: unknown;
  try {
    const docs = parseAllDocuments(text);
    const first = docs.find((d) => d.contents !== null);
    if (first?.errors.length) throw new Error(first.errors[0]!.message);
    doc = first ? first.toJS() : {};
  } catch (e) {
    throw new MeshConfigError(`mesh config ${file}: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) doc = {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new MeshConfigError(`mesh config ${file}: expected a MeshConfig object`);
  const pathNormalization = pathNormalizationOf((doc as Record<string, unknown>).pathNormalization, file);
  const telemetry = parseMeshTelemetry(doc as Record<string, unknown>, file);
  const raw = (doc as Record<string, unknown>).discoverySelectors;
  if (raw === undefined || raw === null) return { discoverySelectors: [], pathNormalization, telemetry };
  if (!Array.isArray(raw)) throw new MeshConfigError(`mesh config ${file}: discoverySelectors: must be a list of label selectors`);
  return { discoverySelectors: raw.map((s, i) => labelSelector(s, `${file}: discoverySelectors[${i}]`)), pathNormalization, telemetry };
}

function pathNormalizationOf(v: unknown, file: string): PathNormalization {
  if (v === undefined || v === null) return 'BASE';
  if (typeof v !== 'object' || Array.isArray(v))
    throw new MeshConfigError(`mesh config ${file}: pathNormalization: must be an object with a normalization field`);
  const n = (v as Record<string, unknown>).normalization;
  if (n === undefined || n === null) return 'BASE';
  if (typeof n !== 'string' || !PATH_NORMALIZATIONS.includes(n)) {
    throw new MeshConfigError(
      `mesh config ${file}: pathNormalization.normalization: invalid value ${JSON.stringify(n)}, one of ${PATH_NORMALIZATIONS.join(', ')}`,
    );
  }
  return n === 'DEFAULT' ? 'BASE' : (n as PathNormalization);
}

function labelSelector(v: unknown, where: string): LabelSelector {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new MeshConfigError(`mesh config ${where}: must be a label selector`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'matchLabels' && k !== 'matchExpressions') throw new MeshConfigError(`mesh config ${where}: unknown field ${JSON.stringify(k)}`);
  }
  const out: LabelSelector = {};
  if (o.matchLabels !== undefined && o.matchLabels !== null) {
    if (typeof o.matchLabels !== 'object' || Array.isArray(o.matchLabels))
      throw new MeshConfigError(`mesh config ${where}.matchLabels: must be a map of strings`);
    out.matchLabels = {};
    for (const [k, val] of Object.entries(o.matchLabels)) {
      if (typeof val !== 'string') throw new MeshConfigError(`mesh config ${where}.matchLabels.${k}: must be a string`);
      out.matchLabels[k] = val;
    }
  }
  if (o.matchExpressions !== undefined && o.matchExpressions !== null) {
    if (!Array.isArray(o.matchExpressions)) throw new MeshConfigError(`mesh config ${where}.matchExpressions: must be a list`);
    out.matchExpressions = o.matchExpressions.map((e: unknown, i) => {
      const at = `${where}.matchExpressions[${i}]`;
      const x = (e ?? {}) as Record<string, unknown>;
      if (typeof x.key !== 'string' || x.key === '') throw new MeshConfigError(`mesh config ${at}.key: required`);
      // Istio: `"X" is not a valid label selector operator`.
      if (typeof x.operator !== 'string' || !OPERATORS.has(x.operator)) {
        throw new MeshConfigError(`mesh config ${at}.operator: ${JSON.stringify(x.operator ?? '')} is not a valid label selector operator`);
      }
      const values = x.values === undefined || x.values === null ? [] : x.values;
      if (!Array.isArray(values) || values.some((s) => typeof s !== 'string'))
        throw new MeshConfigError(`mesh config ${at}.values: must be a list of strings`);
      if ((x.operator === 'In' || x.operator === 'NotIn') && values.length === 0) {
        throw new MeshConfigError(`mesh config ${at}.values: for 'in', 'notin' operators, values set can't be empty`);
      }
      if ((x.operator === 'Exists' || x.operator === 'DoesNotExist') && values.length > 0) {
        throw new MeshConfigError(`mesh config ${at}.values: values set must be empty for exists and does not exist`);
      }
      return { key: x.key, operator: x.operator as 'In', values: values as string[] };
    });
  }
  return out;
}

/**
 * labels.Selector.Matches of the selector LabelSelectorAsSelector makes: an empty selector selects
 * everything, an unknown operator nothing. The one label-selector matcher (mesh config, injection,
 * analysis); the config model's plain label maps use discovery/labels.
 */
export function labelSelectorMatches(sel: LabelSelectorLike, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(labels[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(labels[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/** Whether a namespace with these labels is selected by discoverySelectors (none = all). */
export function namespaceSelected(selectors: readonly LabelSelector[], labels: Readonly<Record<string, string>>): boolean {
  return selectors.length === 0 || selectors.some((s) => labelSelectorMatches(s, labels));
}

/** Reads the file; a missing file is the default mesh. Throws MeshConfigError when it cannot be used. */
export function readMeshConfig(file: string): MeshConfigView {
  if (!file || !existsSync(file)) return DEFAULT_MESH_CONFIG;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new MeshConfigError(`mesh config ${file}: ${(e as Error).message}`);
  }
  return parseMeshConfig(text, file);
}

/**
 * Watches the file's directory (a mounted ConfigMap is replaced by swapping a symlink, which a watch on
 * the file itself misses) and calls `onChange` with each new version that parses and differs.
 */
export function watchMeshConfig(file: string, initial: MeshConfigView, onChange: (m: MeshConfigView) => void): () => void {
  const dir = path.dirname(path.resolve(file || '.'));
  // No file and no directory: the default mesh, nothing to watch (Istio's default path rarely exists outside a pod).
  if (!file || !existsSync(dir)) return () => {};
  let current = JSON.stringify(initial);
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const reload = () => {
    timer = undefined;
    let next: MeshConfigView;
    try {
      next = readMeshConfig(file);
    } catch (e) {
      log.warn(`${(e as Error).message}; keeping the previous mesh config`);
      return;
    }
    const text = JSON.stringify(next);
    if (text === current) return;
    current = text;
    log.info(`mesh config ${file} changed`);
    onChange(next);
  };
  try {
    watcher = watch(dir, { persistent: false }, () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(reload, 100);
    });
  } catch (e) {
    log.warn(`cannot watch the mesh config directory ${dir}: ${(e as Error).message}; changes need a restart`);
  }
  return () => {
    if (timer) clearTimeout(timer);
    watcher?.close();
  };
}
