// The CNI protocol side of the plugin (the CNI specification, and the skeleton every Go plugin uses:
// containernetworking/cni pkg/skel): which CNI_* variables each command needs, how the network
// configuration on stdin is checked, which spec versions we speak, and the error object printed on
// stdout with its well-known code.

/** Error codes of the CNI specification ("Error" section); 999 is the skeleton's catch-all. */
export const CniErrorCode = {
  IncompatibleCNIVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironmentVariables: 4,
  IOFailure: 5,
  DecodingFailure: 6,
  InvalidNetworkConfig: 7,
  InvalidNetNS: 8,
  TryAgainLater: 11,
  Internal: 999,
} as const;

export class CniError extends Error {
  constructor(
    readonly code: number,
    readonly msg: string,
    readonly details = '',
  ) {
    super(details ? `${msg}: ${details}` : msg);
    this.name = 'CniError';
  }

  /** The error result printed on stdout (CNI spec: cniVersion, code, msg, details). */
  toJSON(cniVersion: string): Record<string, unknown> {
    const out: Record<string, unknown> = { cniVersion, code: this.code, msg: this.msg };
    if (this.details) out.details = this.details;
    return out;
  }
}

/** The spec version this implementation follows, and every version a configuration may ask for. */
export const CURRENT_CNI_VERSION = '1.1.0';
export const SUPPORTED_CNI_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'GC' | 'STATUS';

export interface CmdArgs {
  command: CniCommand;
  containerID: string;
  netns: string;
  ifName: string;
  args: string;
  path: string;
  netnsOverride: string;
  stdin: string;
}

type Required = Partial<Record<string, boolean>>;

/** Variable → commands that require it (true) or merely validate it when set. */
const VARS: ReadonlyArray<{ name: string; key: keyof CmdArgs; required: Required; validate?: (v: string) => CniError | undefined }> = [
  { name: 'CNI_COMMAND', key: 'command', required: { ADD: true, CHECK: true, DEL: true, GC: true, STATUS: true } },
  { name: 'CNI_CONTAINERID', key: 'containerID', required: { ADD: true, CHECK: true, DEL: true }, validate: validateContainerID },
  { name: 'CNI_NETNS', key: 'netns', required: { ADD: true, CHECK: true, DEL: false } },
  { name: 'CNI_IFNAME', key: 'ifName', required: { ADD: true, CHECK: true, DEL: true }, validate: validateInterfaceName },
  { name: 'CNI_ARGS', key: 'args', required: { ADD: false, CHECK: false, DEL: false } },
  { name: 'CNI_PATH', key: 'path', required: { ADD: true, CHECK: true, DEL: true, GC: true, STATUS: true } },
  { name: 'CNI_NETNS_OVERRIDE', key: 'netnsOverride', required: { ADD: false, CHECK: false, DEL: false } },
];

const VALID_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

function validateContainerID(id: string): CniError | undefined {
  if (!VALID_NAME.test(id)) return new CniError(CniErrorCode.InvalidEnvironmentVariables, 'invalid characters in containerID', id);
  return undefined;
}

function validateInterfaceName(name: string): CniError | undefined {
  const bad = (msg: string, details = '') => new CniError(CniErrorCode.InvalidEnvironmentVariables, msg, details);
  if (name.length > 15) return bad('interface name is too long', 'interface name should be less than 16 characters');
  if (name === '.' || name === '..') return bad('interface name is . or ..');
  if (/[/:\s]/.test(name)) return bad('interface name contains / or : or whitespace characters');
  return undefined;
}

/**
 * Reads the CNI_* variables for the command they name. A missing CNI_COMMAND is reported as such
 * (the caller prints the "about" text instead when nothing at all was asked).
 */
export function argsFromEnv(env: NodeJS.ProcessEnv): Omit<CmdArgs, 'stdin'> {
  const out: Record<string, string> = {};
  const command = env.CNI_COMMAND ?? '';
  const missing: string[] = [];
  for (const v of VARS) {
    const value = env[v.name] ?? '';
    out[v.key] = value;
    if (value === '') {
      if (v.required[command] || v.name === 'CNI_COMMAND') missing.push(v.name);
    } else if (v.required[command] && v.validate) {
      const err = v.validate(value);
      if (err) throw err;
    }
  }
  if (missing.length > 0) {
    throw new CniError(CniErrorCode.InvalidEnvironmentVariables, `required env variables [${missing.join(',')}] missing`);
  }
  const known: readonly string[] = ['ADD', 'DEL', 'CHECK', 'VERSION', 'GC', 'STATUS'];
  if (!known.includes(command)) throw new CniError(CniErrorCode.InvalidEnvironmentVariables, `unknown CNI_COMMAND: ${command}`);
  return out as unknown as Omit<CmdArgs, 'stdin'>;
}

/** The network configuration must be a JSON object with a valid network name. */
export function validateNetworkConfig(stdin: string): Record<string, unknown> {
  let conf: unknown;
  try {
    conf = JSON.parse(stdin);
  } catch (e) {
    throw new CniError(CniErrorCode.DecodingFailure, `error unmarshall network config: ${(e as Error).message}`);
  }
  if (conf === null || typeof conf !== 'object' || Array.isArray(conf)) {
    throw new CniError(CniErrorCode.DecodingFailure, 'error unmarshall network config: the network configuration is not a JSON object');
  }
  const name = (conf as { name?: unknown }).name;
  if (name === undefined || name === '') throw new CniError(CniErrorCode.InvalidNetworkConfig, 'missing network name');
  if (typeof name !== 'string' || !VALID_NAME.test(name)) {
    throw new CniError(CniErrorCode.InvalidNetworkConfig, 'invalid characters found in network name', String(name));
  }
  return conf as Record<string, unknown>;
}

/** `cniVersion` of a configuration; absent means the first version of the spec. */
export function configVersion(conf: Record<string, unknown>): string {
  const v = conf.cniVersion;
  if (v === undefined || v === '') return '0.1.0';
  if (typeof v !== 'string')
    throw new CniError(CniErrorCode.DecodingFailure, `decoding version from network config: cniVersion must be a string, got ${JSON.stringify(v)}`);
  return v;
}

export function checkVersionSupported(version: string): void {
  if (!(SUPPORTED_CNI_VERSIONS as readonly string[]).includes(version)) {
    throw new CniError(
      CniErrorCode.IncompatibleCNIVersion,
      'incompatible CNI versions',
      `config is "${version}", plugin supports [${SUPPORTED_CNI_VERSIONS.map((v) => `"${v}"`).join(' ')}]`,
    );
  }
}

function parseVersion(v: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  if (!m) throw new CniError(CniErrorCode.DecodingFailure, `unable to parse CNI version "${v}"`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

export function versionAtLeast(v: string, min: string): boolean {
  const a = parseVersion(v);
  const b = parseVersion(min);
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return true;
}

/** The VERSION answer. */
export function versionInfo(): string {
  return JSON.stringify({ cniVersion: CURRENT_CNI_VERSION, supportedVersions: SUPPORTED_CNI_VERSIONS }) + '\n';
}

/**
 * CNI_ARGS for Kubernetes: `K=V` pairs separated by `;` (types.LoadArgs into Istio's K8sArgs). Keys other
 * than the pod's are an error unless IgnoreUnknown is true; container runtimes pass IgnoreUnknown=1.
 */
export function parseK8sArgs(args: string): { podName: string; podNamespace: string; infraContainerID: string; podUID: string } {
  const known: Record<string, string> = { K8S_POD_NAME: '', K8S_POD_NAMESPACE: '', K8S_POD_INFRA_CONTAINER_ID: '', K8S_POD_UID: '' };
  let ignoreUnknown = false;
  const unknown: string[] = [];
  for (const pair of args === '' ? [] : args.split(';')) {
    const kv = pair.split('=');
    if (kv.length !== 2) throw new CniError(CniErrorCode.Internal, `ARGS: invalid pair ${JSON.stringify(pair)}`);
    const [key, value] = kv as [string, string];
    if (key === 'IgnoreUnknown') {
      const v = value.toLowerCase();
      if (v !== '1' && v !== 'true' && v !== '0' && v !== 'false') {
        throw new CniError(
          CniErrorCode.Internal,
          `ARGS: error parsing value of pair ${JSON.stringify(pair)}: boolean unmarshal error: invalid input ${value}`,
        );
      }
      ignoreUnknown = v === '1' || v === 'true';
    } else if (key in known) known[key] = value;
    else unknown.push(pair);
  }
  if (unknown.length > 0 && !ignoreUnknown) {
    throw new CniError(CniErrorCode.Internal, `ARGS: unknown args ${JSON.stringify(unknown)}`);
  }
  return {
    podName: known.K8S_POD_NAME!,
    podNamespace: known.K8S_POD_NAMESPACE!,
    infraContainerID: known.K8S_POD_INFRA_CONTAINER_ID!,
    podUID: known.K8S_POD_UID!,
  };
}
