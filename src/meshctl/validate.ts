// `meshctl validate -f …`: istioctl validate's behaviour and output. Each file is read document by
// document; mesh resources go through the config model's one check (src/config/validate/object.ts)
// in strict mode, Services must follow the port naming convention, Deployments are told when they
// lack the labels telemetry needs. Results go to stderr as istioctl writes them (cobra's
// OutOrStderr): `"<file>" is valid`, `"<file>" has warnings: …`, or `Error: N errors occurred: …`.
import fs from 'node:fs';
import { CommandError, flagList, flagString, type Handler } from '../cli/context';
import { isClusterScoped, kindOf, SCHEMAS } from '../config/schemas';
import { parseProtocol } from '../config/validate/protocol';
import { validateObject } from '../config/validate/object';
import { loadEnvoyFilterTypes } from '../config/validate';
import { isObject } from '../config/values';
import { readObjects, type SourceObject } from './documents';
import { goFileError, hasManifestExtension, readStdin, walkFiles } from './files';
import { DOCS, goMap, multiError } from './text';

const MISSING_FILENAME = `error: you must specify resources by --filename.
Example resource specifications include:
   '-f rsrc.yaml'
   '--filename=rsrc.json'`;

/** The API groups of mesh kinds: a kind or version unknown in one of them is a mistake, not foreign YAML. */
const MESH_GROUPS: ReadonlySet<string> = new Set(
  Object.values(SCHEMAS).flatMap((s) => s.apiVersions.filter((av) => av.includes('/')).map((av) => av.slice(0, av.indexOf('/')))),
);

export interface ValidateOptions {
  /** The system namespace (`-i`): its Services and Deployments are not checked. */
  meshNamespace: string;
  /** The namespace given to namespaced resources written without one (`-n`, else `default`). */
  defaultNamespace: string;
}

/** What one file's documents came to. */
export interface FileResult {
  errors: string[];
  warnings: string[];
  /** Lines written while reading (the Deployment telemetry-label notes). */
  notes: string[];
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function meta(o: Record<string, unknown>): { name: string; namespace: string; labels: Record<string, unknown> } {
  const m = isObject(o.metadata) ? o.metadata : {};
  return { name: str(m.name), namespace: str(m.namespace), labels: isObject(m.labels) ? m.labels : {} };
}

/** validateServicePortPrefix: named ports (or an appProtocol) mesh can read the protocol from. */
export function servicePortErrors(o: Record<string, unknown>, opts: ValidateOptions): string[] {
  const { name, namespace } = meta(o);
  if (namespace === opts.meshNamespace) return [];
  const spec = isObject(o.spec) ? o.spec : {};
  const ports = Array.isArray(spec.ports) ? spec.ports : [];
  const who = JSON.stringify(`${name}/${namespace}/:`);
  const out: string[] = [];
  for (const p of ports) {
    if (!isObject(p)) continue;
    if (typeof p.protocol === 'string' && p.protocol.toUpperCase() === 'UDP') continue;
    if (typeof p.appProtocol === 'string') {
      if (parseProtocol(p.appProtocol).unsupported)
        out.push(`service ${who} doesn't follow Mesh protocol selection. This is not recommended, See ${DOCS.protocolSelection}`);
    } else if (typeof p.name !== 'string') {
      out.push(`service ${who} has an unnamed port. This is not recommended, See ${DOCS.deploymentRequirements}`);
    } else if (parseProtocol(p.name.split('-')[0]).unsupported) {
      out.push(`service ${who} port ${JSON.stringify(p.name)} does not follow the Mesh naming convention. See ${DOCS.deploymentRequirements}`);
    }
  }
  return out;
}

const CANONICAL_NAME = ['service.mesh.io/canonical-name', 'app.kubernetes.io/name', 'app'];
const CANONICAL_REVISION = ['service.mesh.io/canonical-revision', 'app.kubernetes.io/version', 'version'];

/** validateDeploymentLabel: a note (not an error) when the pod template lacks the canonical service labels. */
export function deploymentNote(o: Record<string, unknown>, opts: ValidateOptions): string | undefined {
  const { name, namespace } = meta(o);
  if (namespace === opts.meshNamespace) return undefined;
  const spec = isObject(o.spec) ? o.spec : {};
  const tmpl = isObject(spec.template) ? spec.template : undefined;
  const labels = tmpl && isObject(tmpl.metadata) && isObject(tmpl.metadata.labels) ? (tmpl.metadata.labels as Record<string, string>) : {};
  const has = (keys: string[]): boolean => keys.some((k) => typeof labels[k] === 'string');
  if (has(CANONICAL_NAME) && has(CANONICAL_REVISION)) return undefined;
  return `deployment ${JSON.stringify(`${name}/${namespace}:`)} may not provide Mesh metrics and telemetry labels: ${goMap(labels, true)}. See ${DOCS.deploymentRequirements}`;
}

/** One object: errors and warnings, each `Kind/namespace/name: message` (namespace as written). */
export function validateOne(so: SourceObject, opts: ValidateOptions, out: FileResult): void {
  const o = so.value;
  const kind = str(o.kind);
  const { name, namespace } = meta(o);
  const prefix = `${kind}/${namespace}/${name}:`;
  const apiVersion = str(o.apiVersion);
  const known = kindOf(apiVersion, kind);
  const copy =
    known && !isClusterScoped(known) && namespace === ''
      ? { ...o, metadata: { ...(isObject(o.metadata) ? o.metadata : {}), namespace: opts.defaultNamespace } }
      : o;
  const v = validateObject(copy, { strict: true, crd: true, origin: { source: so.source, document: so.document, line: so.line } });
  if (v.unknownType) {
    const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
    // A mistake in one of mesh's groups is an error; other YAML (Deployments, CRDs of other projects)
    // is not mesh's to judge, as istioctl says nothing about it either.
    if (MESH_GROUPS.has(group)) for (const w of v.warnings) out.errors.push(`${prefix} ${w.replace(/: skipped$/, '')}`);
  } else {
    for (const w of v.warnings) out.warnings.push(`${prefix} ${w}`);
  }
  for (const e of v.errors) out.errors.push(`${prefix} ${e}`);
  if (kind === 'Service' && apiVersion === 'v1') for (const e of servicePortErrors(o, opts)) out.errors.push(`${prefix} ${e}`);
  if (kind === 'Deployment') {
    const note = deploymentNote(o, opts);
    if (note) out.notes.push(note);
  }
}

/** validateFile: every document of one file; a document that is not YAML stops the file. */
export function validateText(text: string, file: string, opts: ValidateOptions): FileResult {
  const out: FileResult = { errors: [], warnings: [], notes: [] };
  const read = readObjects(text, file);
  const firstBad = read.errors[0];
  for (const so of read.objects) {
    // istioctl stops at the first document it cannot decode; the ones before it are checked.
    if (firstBad && compareDocs(so.document, firstBad.document) > 0) break;
    validateOne(so, opts, out);
  }
  if (firstBad) out.errors.push(`failed to decode file ${file}: ${firstBad.message}`);
  return out;
}

function compareDocs(a: string, b: string): number {
  return Number(/^\[(\d+)\]/.exec(a)?.[1]) - Number(/^\[(\d+)\]/.exec(b)?.[1]);
}

/** Whether a manifest may contain an EnvoyFilter (whose check needs the Envoy types loaded first). */
export function mayHoldEnvoyFilter(text: string): boolean {
  return /EnvoyFilter/.test(text);
}

/** `"x" has warnings: ` + the list, istioctl's warningToString. */
function warningsText(ws: readonly string[]): string {
  return `\n\t${ws.map((w) => `* ${w}`).join('\n\t')}\n`;
}

export const run: Handler = async (ctx) => {
  const names = flagList(ctx, 'filename');
  if (names.length === 0) throw new CommandError(MISSING_FILENAME);
  const opts: ValidateOptions = {
    meshNamespace: flagString(ctx, 'meshNamespace') || 'mesh-system',
    defaultNamespace: flagString(ctx, 'namespace') || 'default',
  };
  const errors: string[] = [];
  const results = new Map<string, FileResult>();
  const processFile = async (file: string): Promise<void> => {
    let text: string;
    try {
      text = file === '-' ? readStdin() : fs.readFileSync(file, 'utf8');
    } catch (e) {
      errors.push(`cannot read file ${JSON.stringify(file)}: ${goFileError('open', file, e)}`);
      return;
    }
    if (mayHoldEnvoyFilter(text)) await loadEnvoyFilterTypes();
    const r = validateText(text, file, opts);
    for (const n of r.notes) ctx.stderr.write(n + '\n');
    errors.push(...r.errors);
    results.set(file, r);
  };
  for (const name of names) {
    if (name === '-') {
      await processFile(name);
      continue;
    }
    let st: fs.Stats;
    try {
      st = fs.statSync(name);
    } catch (e) {
      errors.push(`cannot stat file ${JSON.stringify(name)}: ${goFileError('stat', name, e)}`);
      continue;
    }
    if (!st.isDirectory()) {
      await processFile(name);
      continue;
    }
    let files: string[];
    try {
      files = walkFiles(name);
    } catch (e) {
      errors.push(goFileError('lstat', name, e));
      continue;
    }
    for (const f of files) if (hasManifestExtension(f)) await processFile(f);
  }

  const report = (file: string, r: FileResult, valid: boolean): void => {
    if (file === '-') {
      if (r.warnings.length > 0) ctx.stderr.write(warningsText(r.warnings));
      else if (valid) ctx.stderr.write('validation succeed\n');
      return;
    }
    if (r.warnings.length > 0) ctx.stderr.write(`${JSON.stringify(file)} has warnings: ${warningsText(r.warnings)}\n`);
    else if (valid) ctx.stderr.write(`${JSON.stringify(file)} is valid\n`);
  };
  // istioctl lists files in map order; these are in the order they were read.
  for (const [file, r] of results) report(file, r, errors.length === 0);
  if (errors.length > 0) throw new CommandError(multiError(errors));
  return 0;
};
