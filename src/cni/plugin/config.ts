// The plugin's network configuration (what install-cni writes into the CNI config, and the runtime
// hands us on stdin with the previous plugin's result), and the result we hand on.
import { CniError, CniErrorCode, versionAtLeast } from './skel';

/** Name of the plugin binary and of its `type` in CNI configurations. */
export const PLUGIN_TYPE = 'mesh-cni';
/** The client configuration install-cni writes into the run dir for the plugin. */
export const PLUGIN_KUBECONFIG_NAME = 'mesh-cni-kubeconfig';
/** The plugin's own log file in the run dir (it must not write to stdout). */
export const PLUGIN_LOG_NAME = 'mesh-cni.log';

export interface PluginConfig {
  cniVersion: string;
  name: string;
  type: string;
  pluginLogLevel: string;
  cniAgentRunDir: string;
  ambientEnabled: boolean;
  excludeNamespaces: string[];
  podNamespace: string;
  /** The previous plugin's result as given (keys as written), or undefined when first in the chain. */
  prevResult?: Record<string, unknown>;
}

function field<T>(conf: Record<string, unknown>, key: string, want: 'string' | 'boolean', def: T): T {
  const v = conf[key];
  if (v === undefined || v === null) return def;
  if (typeof v !== want) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `failed to parse network configuration: field "${key}" must be a ${want}, got ${JSON.stringify(v)}`,
    );
  }
  return v as T;
}

/** Reads the plugin's fields from an already validated configuration object. */
export function parsePluginConfig(conf: Record<string, unknown>, version: string): PluginConfig {
  const excl = conf.exclude_namespaces;
  if (excl !== undefined && excl !== null && (!Array.isArray(excl) || excl.some((x) => typeof x !== 'string'))) {
    throw new CniError(CniErrorCode.DecodingFailure, 'failed to parse network configuration: field "exclude_namespaces" must be a list of strings');
  }
  const prev = conf.prevResult;
  if (prev !== undefined && prev !== null && (typeof prev !== 'object' || Array.isArray(prev))) {
    throw new CniError(CniErrorCode.DecodingFailure, 'could not parse prevResult: it is not a JSON object');
  }
  return {
    cniVersion: version,
    name: String(conf.name),
    type: field(conf, 'type', 'string', ''),
    pluginLogLevel: field(conf, 'plugin_log_level', 'string', ''),
    cniAgentRunDir: field(conf, 'cni_agent_run_dir', 'string', ''),
    ambientEnabled: field(conf, 'ambient_enabled', 'boolean', false),
    excludeNamespaces: (excl as string[] | undefined) ?? [],
    podNamespace: field(conf, 'pod_namespace', 'string', ''),
    ...(prev ? { prevResult: prev as Record<string, unknown> } : {}),
  };
}

/** A key of a result object, matched case-insensitively as Go's JSON decoding does. */
function get(obj: Record<string, unknown>, key: string): unknown {
  if (key in obj) return obj[key];
  const lower = key.toLowerCase();
  for (const [k, v] of Object.entries(obj)) if (k.toLowerCase() === lower) return v;
  return undefined;
}

/** The pod's addresses from the previous result (`ips[].address`, or 0.2.0's ip4/ip6), without prefix. */
export function prevResultAddresses(prev: Record<string, unknown> | undefined): string[] {
  if (!prev) return [];
  const out: string[] = [];
  const ips = get(prev, 'ips');
  if (Array.isArray(ips)) {
    for (const ip of ips) {
      const a = ip && typeof ip === 'object' ? get(ip as Record<string, unknown>, 'address') : undefined;
      if (typeof a === 'string') out.push(a.split('/')[0]!);
    }
  }
  for (const fam of ['ip4', 'ip6']) {
    const v = get(prev, fam);
    const a = v && typeof v === 'object' ? get(v as Record<string, unknown>, 'ip') : undefined;
    if (typeof a === 'string') out.push(a.split('/')[0]!);
  }
  return out;
}

/**
 * What a chained plugin prints on success: the previous result in the configuration's version, or an
 * empty result when there was none. Results from 0.3.0 on share one shape; an IP's `version` field
 * exists only before 1.0.0.
 */
export function resultFor(conf: PluginConfig): Record<string, unknown> {
  const version = conf.cniVersion;
  const prev = conf.prevResult;
  if (!versionAtLeast(version, '0.3.0')) {
    return prev ? { ...prev, cniVersion: version } : { cniVersion: version, dns: {} };
  }
  if (!prev) return { cniVersion: version, dns: {} };
  const out: Record<string, unknown> = { cniVersion: version };
  const interfaces = get(prev, 'interfaces');
  if (Array.isArray(interfaces) && interfaces.length > 0) out.interfaces = interfaces;
  const ips = get(prev, 'ips');
  if (Array.isArray(ips) && ips.length > 0) {
    out.ips = ips.map((raw) => {
      const ip = (raw ?? {}) as Record<string, unknown>;
      const address = get(ip, 'address');
      const entry: Record<string, unknown> = {};
      if (!versionAtLeast(version, '1.0.0')) {
        entry.version = get(ip, 'version') ?? (typeof address === 'string' && address.includes(':') ? '6' : '4');
      }
      const iface = get(ip, 'interface');
      if (iface !== undefined && iface !== null) entry.interface = iface;
      entry.address = address;
      const gw = get(ip, 'gateway');
      if (gw !== undefined && gw !== null && gw !== '') entry.gateway = gw;
      return entry;
    });
  }
  const routes = get(prev, 'routes');
  if (Array.isArray(routes) && routes.length > 0) out.routes = routes;
  const dns = get(prev, 'dns');
  out.dns = dns && typeof dns === 'object' ? dns : {};
  return out;
}
