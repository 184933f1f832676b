// `meshctl x workload group create` and `meshctl x workload entry configure` (istioctl x workload …):
// a WorkloadGroup as YAML, and the files a VM needs to join the mesh (cluster.env, mesh.yaml, root-cert.pem,
// mesh-token, hosts) built from a WorkloadGroup and what the cluster says about the control plane — or, with
// --ca-dir and no cluster (our addition), what the daemon's CA directory holds: its root, and a token signed
// with its token key.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { ipFamily } from '../lib/ip';
import path from 'node:path';
import { CommandError, flagBool, flagList, flagNumber, flagString, type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { goQuote } from '../lib/gojson';
import { GoYamlParseError, parseGoYaml } from '../lib/goyaml-parse';
import { jsonToGoYaml } from '../lib/goyaml';
import { formatTimestamp } from '../lib/log/clock';
import { loadCaDirectory } from '../ca/offline';
import { mintWorkloadToken, tokenSigningKey } from '../ca/token';
import { readInput } from './io';
import { apiStatus, getErrorText, meshctlOrchClient } from './orch';

const FILE_MODE = 0o744;
const XDS_SECURE_PORT = 15012;
const CA_ROOT_CONFIGMAP = 'mesh-ca-root-cert';
const CA_ROOT_KEY = 'root-cert.pem';
const PROXY_CONFIG_ANNOTATION = 'proxy.mesh.io/config';
const TOKEN_FILE = 'mesh-token';
const TOKEN_AUDIENCE = 'mesh-ca';
const CANONICAL_NAME_LABELS = ['service.mesh.io/canonical-name', 'app.kubernetes.io/name', 'app'];
const CANONICAL_REVISION_LABELS = ['service.mesh.io/canonical-revision', 'app.kubernetes.io/version', 'version'];

type Obj = Record<string, any>;

// ---- pure helpers (tested as tables) ----

/** strings.Cut(s, "="): the key, and the rest after the first "=" ("" when there is none). */
export function splitEqual(s: string): [string, string] {
  const i = s.indexOf('=');
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

/** `--labels` / `--annotations` values as a map (later keys win). */
export function convertToMap(items: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of items) {
    const [k, v] = splitEqual(item);
    out[k] = v;
  }
  return out;
}

/**
 * `--ports name=port` as a map; a port that is not a uint32 is logged and becomes 0, as istioctl does.
 */
export function convertToPortMap(items: readonly string[], warn: (line: string) => void): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) {
    const [k, v] = splitEqual(item);
    let port = 0;
    if (/^[0-9]+$/.test(v) && Number(v) <= 0xffffffff) port = Number(v);
    else {
      const why = /^[0-9]+$/.test(v) ? 'value out of range' : 'invalid syntax';
      warn(`error\tfailed to convert to uint32: strconv.ParseUint: parsing ${goQuote(v)}: ${why}`);
    }
    out[k] = port;
  }
  return out;
}

/** MESH_META_POD_PORTS from a WorkloadEntry template's ports: JSON sorted by name; "" with no ports. */
export function podPortsMeta(ports: Readonly<Record<string, number>>): string {
  const names = Object.keys(ports).sort(byteCompare);
  if (names.length === 0) return '';
  return '[' + names.map((n) => `{"name":${goQuote(n)},"containerPort":${ports[n]},"protocol":""}`).join(',') + ']';
}

/** Istio's shellescape.Quote (its class keeps only `\`, `w`, `@%+=:,./-` unquoted, so nearly all values are quoted). */
export function shellQuote(s: string): string {
  if (s === '') return "''";
  if (/[^\\w@%+=:,./-]/.test(s)) return "'" + s.replaceAll("'", `'"'"'`) + "'";
  return s;
}

/** cluster.env: `KEY=value` lines sorted as strings, each value shell-quoted. */
export function clusterEnvText(env: Readonly<Record<string, string>>): string {
  const lines = Object.entries(env).map(([k, v]) => `${k}=${shellQuote(v)}`);
  lines.sort(byteCompare);
  return lines.join('\n') + '\n';
}

function byteCompare(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}

/** Go's json.Marshal of a map[string]string: keys sorted, HTML characters escaped. */
function goJsonStringMap(m: Readonly<Record<string, string>>): string {
  return (
    '{' +
    Object.keys(m)
      .sort(byteCompare)
      .map((k) => `${goQuote(k)}:${goQuote(m[k]!)}`)
      .join(',') +
    '}'
  );
}

export function isRevisioned(revision: string): boolean {
  return revision !== '' && revision !== 'default';
}

/** The daemon's Service host for a revision: `meshd[-<rev>].<ns>.svc`. */
export function meshdHost(ns: string, revision: string): string {
  return `${isRevisioned(revision) ? `meshd-${revision}` : 'meshd'}.${ns}.svc`;
}

export function meshdAddress(ns: string, revision: string): string {
  return `${meshdHost(ns, revision)}:${XDS_SECURE_PORT}`;
}

function canonicalService(labels: Readonly<Record<string, string>>, workloadName: string): [string, string] {
  const find = (keys: string[]) => keys.find((k) => k in labels);
  const n = find(CANONICAL_NAME_LABELS);
  const r = find(CANONICAL_REVISION_LABELS);
  return [n !== undefined ? labels[n]! : workloadName, r !== undefined ? labels[r]! : 'latest'];
}

function warnLine(ctx: RunContext, level: string, msg: string): void {
  ctx.stderr.write(`${formatTimestamp(Date.now() * 1000)}\t${level}\t${msg}\n`);
}

// ---- group create ----

export const groupCreate: Handler = async (ctx) => {
  const name = flagString(ctx, 'name');
  const namespace = flagString(ctx, 'namespace');
  if (name === '') throw new CommandError('expecting a workload name');
  if (namespace === '') throw new CommandError('expecting a workload namespace');
  const meta: Obj = {};
  const labels = convertToMap(flagList(ctx, 'labels'));
  const annotations = convertToMap(flagList(ctx, 'annotations'));
  if (Object.keys(labels).length) meta.labels = labels;
  if (Object.keys(annotations).length) meta.annotations = annotations;
  const template: Obj = {};
  const ports = convertToPortMap(flagList(ctx, 'ports'), (l) => warnLine(ctx, ...splitLevel(l)));
  if (Object.keys(ports).length) template.ports = ports;
  const sa = flagString(ctx, 'serviceAccount');
  if (sa) template.serviceAccount = sa;
  const network = flagString(ctx, 'network');
  if (network) template.network = network;
  const locality = flagString(ctx, 'locality');
  if (locality) template.locality = locality;
  const weight = flagNumber(ctx, 'weight');
  if (weight) template.weight = weight;
  const wg = {
    apiVersion: 'networking.mesh.io/v1',
    kind: 'WorkloadGroup',
    metadata: { name, namespace },
    spec: { metadata: meta, template },
  };
  ctx.stdout.write(jsonToGoYaml(wg));
  return 0;
};

function splitLevel(line: string): [string, string] {
  const i = line.indexOf('\t');
  return [line.slice(0, i), line.slice(i + 1)];
}

// ---- entry configure ----

interface WorkloadGroup {
  name: string;
  namespace: string;
  annotations: Record<string, string>;
  spec: {
    metadata: { labels: Record<string, string>; annotations: Record<string, string> };
    template: { serviceAccount: string; ports: Record<string, number>; labels: Record<string, string>; network: string };
    probe?: Obj;
  };
}

function stringMap(v: unknown, where: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new CommandError(`${where}: expected a map of strings`);
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v as Obj)) {
    if (typeof x !== 'string') throw new CommandError(`${where}.${k}: expected a string, got ${JSON.stringify(x)}`);
    out[k] = x;
  }
  return out;
}

/** A WorkloadGroup object (from a file or the API) with Istio's defaults filled in. */
export function toWorkloadGroup(o: unknown, source: string): WorkloadGroup {
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new CommandError(`${source}: not a WorkloadGroup object`);
  const obj = o as Obj;
  if (obj.kind !== undefined && obj.kind !== 'WorkloadGroup') {
    throw new CommandError(`${source}: kind is ${JSON.stringify(obj.kind)}, expected WorkloadGroup`);
  }
  const md = (obj.metadata ?? {}) as Obj;
  const spec = (obj.spec ?? {}) as Obj;
  const smd = (spec.metadata ?? {}) as Obj;
  const tpl = (spec.template ?? {}) as Obj;
  const ports: Record<string, number> = {};
  for (const [k, v] of Object.entries((tpl.ports ?? {}) as Obj)) {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw new CommandError(`${source}: spec.template.ports.${k}: expected a port number, got ${JSON.stringify(v)}`);
    }
    ports[k] = v;
  }
  return {
    name: typeof md.name === 'string' ? md.name : '',
    namespace: typeof md.namespace === 'string' ? md.namespace : '',
    annotations: stringMap(md.annotations, `${source}: metadata.annotations`),
    spec: {
      metadata: {
        labels: stringMap(smd.labels, `${source}: spec.metadata.labels`),
        annotations: stringMap(smd.annotations, `${source}: spec.metadata.annotations`),
      },
      template: {
        serviceAccount: typeof tpl.serviceAccount === 'string' && tpl.serviceAccount !== '' ? tpl.serviceAccount : 'default',
        ports,
        labels: stringMap(tpl.labels, `${source}: spec.template.labels`),
        network: typeof tpl.network === 'string' ? tpl.network : '',
      },
      probe: spec.probe && typeof spec.probe === 'object' ? (spec.probe as Obj) : undefined,
    },
  };
}

function parseYamlObject(text: string, source: string): Obj {
  let v: unknown;
  try {
    v = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new CommandError(`${source}: ${e.message}`);
    throw e;
  }
  if (v === null || v === undefined) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new CommandError(`${source}: expected a YAML mapping`);
  return v as Obj;
}

function isPlainObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Proto-JSON merge of `patch` onto `base`: messages merge field by field, lists and scalars replace. */
function mergeProto(base: Obj, patch: Obj): Obj {
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else if (isPlainObject(v) && isPlainObject(out[k])) out[k] = mergeProto(out[k], v);
    else out[k] = v;
  }
  return out;
}

/** Proto JSON leaves out zero values. */
function dropZero(v: unknown): unknown {
  if (Array.isArray(v)) return v.length ? v.map(dropZero) : undefined;
  if (isPlainObject(v)) {
    const out: Obj = {};
    for (const [k, x] of Object.entries(v)) {
      const d = dropZero(x);
      if (d !== undefined) out[k] = d;
    }
    return out;
  }
  if (v === 0 || v === '' || v === false || v === null) return undefined;
  return v;
}

export interface EntryInputs {
  wg: WorkloadGroup;
  /** The mesh ConfigMap's `mesh` key (YAML MeshConfig). */
  meshConfigText: string;
  meshConfigSource: string;
  meshNamespace: string;
  revision: string;
  clusterID: string;
  internalIP: string;
  externalIP: string;
  captureDNS: boolean;
  autoRegister: boolean;
}

export interface EntryFiles {
  meshYaml: string;
  clusterEnv: string;
  /** Printed by istioctl when WorkloadEntry template labels override metadata labels. */
  notices: string[];
}

/** mesh.yaml and cluster.env from the group and the mesh config (istioctl's createMeshConfig/createClusterEnv). */
export function entryFiles(i: EntryInputs): EntryFiles {
  const notices: string[] = [];
  const mesh = parseYamlObject(i.meshConfigText, i.meshConfigSource);
  let dc: Obj = isPlainObject(mesh.defaultConfig) ? { ...mesh.defaultConfig } : {};
  const proxyMetadata: Record<string, string> = { ...stringMap(dc.proxyMetadata, `${i.meshConfigSource}: defaultConfig.proxyMetadata`) };
  if (isRevisioned(i.revision) && !dc.discoveryAddress) dc.discoveryAddress = meshdAddress(i.meshNamespace, i.revision);
  for (const [where, annotations] of [
    ['metadata.annotations', i.wg.annotations],
    ['spec.metadata.annotations', i.wg.spec.metadata.annotations],
  ] as const) {
    const pc = annotations[PROXY_CONFIG_ANNOTATION];
    if (pc === undefined) continue;
    const patch = parseYamlObject(pc, `WorkloadGroup ${where}[${PROXY_CONFIG_ANNOTATION}]`);
    dc = mergeProto(dc, patch);
    Object.assign(proxyMetadata, stringMap(dc.proxyMetadata, `${PROXY_CONFIG_ANNOTATION} proxyMetadata`));
  }
  const labels: Record<string, string> = { ...i.wg.spec.metadata.labels };
  const we = i.wg.spec.template;
  if (Object.keys(we.labels).length > 0) {
    const shown = Object.keys(we.labels)
      .sort(byteCompare)
      .map((k) => `${k}:${we.labels[k]}`)
      .join(' ');
    notices.push(`Labels should be set in the metadata. The following WorkloadEntry labels will override metadata labels: map[${shown}]`);
    Object.assign(labels, we.labels);
  }
  if (i.wg.spec.probe) dc.readinessProbe = dropZero(i.wg.spec.probe);
  else delete dc.readinessProbe;

  const md = proxyMetadata;
  const [cs, cr] = canonicalService(labels, i.wg.name);
  md.CANONICAL_SERVICE = cs;
  md.CANONICAL_REVISION = cr;
  md.POD_NAMESPACE = i.wg.namespace;
  md.SERVICE_ACCOUNT = we.serviceAccount;
  md.TRUST_DOMAIN = typeof mesh.trustDomain === 'string' ? mesh.trustDomain : '';
  md.MESH_META_CLUSTER_ID = i.clusterID;
  md.MESH_META_MESH_ID = typeof dc.meshId === 'string' ? dc.meshId : '';
  md.MESH_META_NETWORK = we.network;
  const pp = podPortsMeta(we.ports);
  if (pp) md.MESH_META_POD_PORTS = pp;
  md.MESH_META_WORKLOAD_NAME = i.wg.name;
  labels['service.mesh.io/canonical-name'] = cs;
  labels['service.mesh.io/canonical-revision'] = cr;
  md.MESH_METAJSON_LABELS = goJsonStringMap(labels);
  if (i.captureDNS) md.MESH_META_DNS_CAPTURE = 'true';
  if (i.autoRegister) md.MESH_META_AUTO_REGISTER_GROUP = i.wg.name;
  dc.proxyMetadata = md;
  const meshYaml = jsonToGoYaml({ defaultConfig: dc });

  // cluster.env: the proxy metadata, then what the group and the flags fix.
  const ports = Object.values(we.ports).map(String);
  const statusPort = typeof dc.statusPort === 'number' ? dc.statusPort : 0;
  let exclude = '22,15090,15021';
  if (statusPort !== 15090 && statusPort !== 15021) exclude += statusPort !== 0 ? `,${statusPort}` : ',15020';
  const overrides: Record<string, string> = {
    MESH_INBOUND_PORTS: ports.length ? ports.join(',') : '*',
    MESH_NAMESPACE: i.wg.namespace,
    MESH_SERVICE: `${i.wg.name}.${i.wg.namespace}`,
    MESH_SERVICE_CIDR: '*',
    MESH_LOCAL_EXCLUDE_PORTS: exclude,
    SERVICE_ACCOUNT: we.serviceAccount,
  };
  if (isRevisioned(i.revision)) overrides.CA_ADDR = meshdAddress(i.meshNamespace, i.revision);
  if (i.internalIP) overrides.MESH_SVC_IP = i.internalIP;
  else if (i.externalIP) {
    overrides.MESH_SVC_IP = i.externalIP;
    overrides.REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION = 'true';
  }
  const clusterEnv = clusterEnvText({ ...md, ...overrides });
  return { meshYaml, clusterEnv, notices };
}

/** The hosts file line that lets the VM reach the daemon through the ingress gateway. */
export function hostsText(ingressIP: string, meshNamespace: string, revision: string): string {
  return ipFamily(ingressIP) ? `${ingressIP} ${meshdHost(meshNamespace, revision)}\n` : '';
}

async function readGroupFromApi(client: OrchClient, name: string, namespace: string): Promise<unknown> {
  // mesh's own group first; Istio's group is accepted beside it.
  let first: unknown;
  for (const group of ['networking.mesh.io', 'networking.istio.io']) {
    try {
      return await client.getJson(`/apis/${group}/v1/namespaces/${encodeURIComponent(namespace)}/workloadgroups/${encodeURIComponent(name)}`);
    } catch (e) {
      first ??= e;
      if (apiStatus(e) !== 404) break;
    }
  }
  throw new CommandError(
    `workloadgroup ${name} not found in namespace ${namespace}: ${getErrorText(first, 'workloadgroups.networking.mesh.io', name)}`,
  );
}

async function getConfigMap(client: OrchClient, ns: string, name: string): Promise<Obj> {
  return (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps/${encodeURIComponent(name)}`)) as Obj;
}

/** global.multiCluster.clusterName of the injector's values (ConfigMap mesh-sidecar-injector[-<rev>]). */
async function clusterIDFromInjector(client: OrchClient, meshNamespace: string, revision: string): Promise<string> {
  const name = isRevisioned(revision) ? `mesh-sidecar-injector-${revision}` : 'mesh-sidecar-injector';
  let cm: Obj;
  try {
    cm = await getConfigMap(client, meshNamespace, name);
  } catch (e) {
    throw new Error(`fetch injection template: ${getErrorText(e, 'configmaps', name)}`);
  }
  const text = typeof cm.data?.values === 'string' ? (cm.data.values as string) : '';
  let values: Obj;
  try {
    values = JSON.parse(text) as Obj;
  } catch (e) {
    throw new Error(text === '' ? 'unexpected end of JSON input' : (e as Error).message);
  }
  const v = values?.global?.multiCluster?.clusterName;
  return typeof v === 'string' ? v : '';
}

async function ingressAddress(client: OrchClient, service: string, meshNamespace: string): Promise<string> {
  const parts = service.split('.');
  const [name, ns] = parts.length === 2 ? [parts[0]!, parts[1]!] : [service, meshNamespace];
  try {
    const svc = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}/services/${encodeURIComponent(name)}`)) as Obj;
    const lb = svc.status?.loadBalancer?.ingress;
    if (Array.isArray(lb) && lb.length > 0) return typeof lb[0]?.ip === 'string' ? lb[0].ip : '';
    const ext = svc.spec?.externalIPs;
    if (Array.isArray(ext) && ext.length > 0) return String(ext[0]);
  } catch {
    // Istio ignores a missing Service: the hosts file stays empty and a warning says how to fix it.
  }
  return '';
}

function writeFile(dir: string, name: string, text: string): string {
  const file = path.join(dir, name);
  try {
    writeFileSync(file, text, { mode: FILE_MODE });
  } catch (e) {
    throw new CommandError(`open ${file}: ${(e as Error).message}`);
  }
  return file;
}

/**
 * Where entry configure gets what it does not compute: the cluster (Istio's path), or with --ca-dir the
 * daemon's CA directory and files (no cluster).
 */
interface EntrySource {
  group(): Promise<WorkloadGroup>;
  clusterID(): Promise<string | undefined>;
  meshConfig(): Promise<{ text: string; source: string }>;
  rootCert(namespace: string): Promise<string>;
  token(namespace: string, serviceAccount: string, ttlSeconds: number): Promise<string>;
  /** The address for `hosts` when --ingressIP gives none ('' = none). */
  ingressIP(): Promise<string>;
  close(): void;
}

function clusterSource(ctx: RunContext, client: OrchClient, meshNamespace: string, revision: string): EntrySource {
  const file = flagString(ctx, 'file');
  return {
    async group() {
      if (file !== '') return toWorkloadGroup(parseYamlObject(readInput(file), file), file);
      const name = flagString(ctx, 'name');
      const namespace = flagString(ctx, 'namespace');
      return toWorkloadGroup(await readGroupFromApi(client, name, namespace), `workloadgroup ${namespace}/${name}`);
    },
    async clusterID() {
      try {
        return (await clusterIDFromInjector(client, meshNamespace, revision)) || undefined;
      } catch (e) {
        throw new CommandError(`failed to automatically determine the --clusterID: ${(e as Error).message}`);
      }
    },
    async meshConfig() {
      const meshCM = isRevisioned(revision) ? `mesh-${revision}` : 'mesh';
      try {
        const cm = await getConfigMap(client, meshNamespace, meshCM);
        return { text: typeof cm.data?.mesh === 'string' ? (cm.data.mesh as string) : '', source: `configmap ${meshNamespace}/${meshCM}` };
      } catch (e) {
        throw new CommandError(`configmap ${meshCM} was not found in namespace ${meshNamespace}: ${getErrorText(e, 'configmaps', meshCM)}`);
      }
    },
    async rootCert(namespace) {
      try {
        const cm = await getConfigMap(client, namespace, CA_ROOT_CONFIGMAP);
        return String(cm.data?.[CA_ROOT_KEY] ?? '');
      } catch (e) {
        throw new CommandError(
          `configmap ${CA_ROOT_CONFIGMAP} was not found in namespace ${namespace}: ${getErrorText(e, 'configmaps', CA_ROOT_CONFIGMAP)}`,
        );
      }
    },
    async token(namespace, sa, ttlSeconds) {
      try {
        const token = (await client.request(
          'POST',
          `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(sa)}/token`,
          {
            body: {
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenRequest',
              metadata: { name: sa, namespace },
              spec: { audiences: [TOKEN_AUDIENCE], expirationSeconds: ttlSeconds },
            },
          },
        )) as Obj;
        return String(token?.status?.token ?? '');
      } catch (e) {
        throw new CommandError(
          `could not create a token under service account ${sa} in namespace ${namespace}: ${getErrorText(e, 'serviceaccounts', sa)}`,
        );
      }
    },
    ingressIP: () => ingressAddress(client, flagString(ctx, 'ingressService'), meshNamespace),
    close: () => client.close(),
  };
}

/**
 * No cluster (--ca-dir): the group from -f, the mesh config from --meshConfigFile (the daemon's --meshConfig;
 * Istio's built-in defaults without it), the root and a token from the daemon's CA directory — the token
 * signed with its token key (src/ca/token.ts), which the daemon trusts with no JWT_RULE.
 */
function caDirSource(ctx: RunContext, caDir: string): EntrySource {
  const file = flagString(ctx, 'file');
  if (file === '')
    throw new CommandError(
      '--ca-dir (no cluster) needs the WorkloadGroup as a file: give -f <workloadgroup.yaml> (meshctl x workload group create writes one)',
    );
  let bundle: ReturnType<typeof loadCaDirectory> | undefined;
  const ca = () => {
    try {
      return (bundle ??= loadCaDirectory(caDir));
    } catch (e) {
      throw new CommandError(`--ca-dir ${(e as Error).message}`);
    }
  };
  return {
    group: async () => toWorkloadGroup(parseYamlObject(readInput(file), file), file),
    clusterID: async () => undefined,
    async meshConfig() {
      const meshFile = flagString(ctx, 'meshConfigFile');
      if (meshFile === '') return { text: '', source: 'the default mesh config' };
      try {
        return { text: readFileSync(meshFile, 'utf8'), source: meshFile };
      } catch (e) {
        throw new CommandError(`--meshConfigFile ${meshFile}: ${(e as Error).message}`);
      }
    },
    rootCert: async () => ca().rootCertPem,
    async token(namespace, sa, ttlSeconds) {
      ca();
      try {
        // Made here if the daemon has not made it yet: it reads the same file.
        const key = tokenSigningKey(caDir, true)!;
        return mintWorkloadToken(key, { namespace, serviceAccount: sa, audiences: [TOKEN_AUDIENCE], ttlSeconds });
      } catch (e) {
        throw new CommandError(`could not create a token for service account ${sa} in namespace ${namespace}: ${(e as Error).message}`);
      }
    },
    ingressIP: async () => '',
    close: () => undefined,
  };
}

export const entryConfigure: Handler = async (ctx) => {
  const file = flagString(ctx, 'file');
  const name = flagString(ctx, 'name');
  const namespace = flagString(ctx, 'namespace');
  const outputDir = flagString(ctx, 'output');
  if (file === '' && (name === '' || namespace === '')) {
    throw new CommandError('expecting a WorkloadGroup artifact file or the name and namespace of an existing WorkloadGroup');
  }
  if (outputDir === '') throw new CommandError('expecting an output directory');
  const internalIP = flagString(ctx, 'internalIP');
  const externalIP = flagString(ctx, 'externalIP');
  if (internalIP && externalIP) throw new CommandError('the flags --internalIP and --externalIP are mutually exclusive');
  const meshNamespace = flagString(ctx, 'meshNamespace') || 'mesh-system';
  const revision = flagString(ctx, 'revision');
  const tokenDuration = flagNumber(ctx, 'tokenDuration');
  const caDir = flagString(ctx, 'ca-dir');

  let source: EntrySource;
  if (caDir !== '') source = caDirSource(ctx, caDir);
  else {
    try {
      source = clusterSource(ctx, await meshctlOrchClient(ctx, 'workload entry configure'), meshNamespace, revision);
    } catch (e) {
      if (e instanceof CommandError)
        throw new CommandError(`${e.message}; with no cluster, give --ca-dir <the daemon's CA directory, ./var/lib/mesh/ca>`);
      throw e;
    }
  }
  try {
    const wg = await source.group();
    let clusterID = flagString(ctx, 'clusterID');
    if (!ctx.changed.has('clusterID')) clusterID = (await source.clusterID()) ?? clusterID;

    try {
      mkdirSync(outputDir, { recursive: true, mode: FILE_MODE });
    } catch (e) {
      throw new CommandError(`mkdir ${outputDir}: ${(e as Error).message}`);
    }

    const mesh = await source.meshConfig();
    const files = entryFiles({
      wg,
      meshConfigText: mesh.text,
      meshConfigSource: mesh.source,
      meshNamespace,
      revision,
      clusterID,
      internalIP,
      externalIP,
      captureDNS: flagBool(ctx, 'capture-dns'),
      autoRegister: flagBool(ctx, 'autoregister'),
    });
    for (const n of files.notices) ctx.stdout.write(n + '\n');
    writeFile(outputDir, 'mesh.yaml', files.meshYaml);
    writeFile(outputDir, 'cluster.env', files.clusterEnv);
    writeFile(outputDir, 'root-cert.pem', await source.rootCert(wg.namespace));

    const sa = wg.spec.template.serviceAccount;
    writeFile(outputDir, TOKEN_FILE, await source.token(wg.namespace, sa, tokenDuration));
    ctx.stderr.write(
      `Warning: a security token for namespace ${goQuote(wg.namespace)} and service account ${goQuote(sa)} has been generated and ` +
        `stored at ${goQuote(path.join(outputDir, TOKEN_FILE))}\n`,
    );

    let ingressIP = flagString(ctx, 'ingressIP');
    if (!ipFamily(ingressIP)) ingressIP = await source.ingressIP();
    const hosts = hostsText(ingressIP, meshNamespace, revision);
    // With no cluster the VM may reach the daemon without a hosts entry (a discoveryAddress it can resolve).
    if (hosts === '' && caDir === '') {
      warnLine(
        ctx,
        'warn',
        `Could not auto-detect IP for ${meshdHost(meshNamespace, revision)}/${meshNamespace}. ` +
          'Use --ingressIP to manually specify the Gateway address to reach meshd from the VM.',
      );
    }
    writeFile(outputDir, 'hosts', hosts);
    ctx.stdout.write(`Configuration generation into directory ${outputDir} was successful\n`);
    return 0;
  } finally {
    source.close();
  }
};
