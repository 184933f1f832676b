// The agent's own ProxyConfig (Istio's pilot-agent config.ConstructProxyConfig): the model's defaults
// (src/config/proxyconfig.ts), the mesh config file's `defaultConfig`, env PROXY_CONFIG, then the command
// line's --concurrency/--serviceCluster; and Envoy's log flags from --proxyLogLevel (pkg/envoy). Pure:
// the command reads the file and the environment and passes their text in.
import { formatDurationMs } from '../lib/duration';
import {
  applyMeshConfigDefaults,
  applyProxyConfigText,
  defaultProxyConfig,
  ProxyConfigError,
  validateProxyConfig,
  type MeshConfigFile,
  type ProxyConfig,
} from '../config/proxyconfig';

export type NodeType = 'sidecar' | 'router';

export interface ProxyConfigInputs {
  /** The mesh config file's content, when the file exists (a missing file means built-in defaults). */
  meshConfig?: MeshConfigFile;
  /** Env PROXY_CONFIG (YAML or JSON ProxyConfig); empty or undefined when unset. */
  proxyConfigEnv?: string;
  /** --serviceCluster: used when the config names no serviceCluster. */
  serviceCluster: string;
  /** --concurrency: 0 means not given. */
  concurrency: number;
  nodeType: NodeType;
  /** MESH_CPU_LIMIT (whole cores, rounded up): sizes a gateway's concurrency when nothing else does. */
  cpuLimit?: number;
}

export interface ProxyConfigResult {
  proxyConfig: ProxyConfig;
  warnings: string[];
}

/**
 * Istio's ConstructProxyConfig: defaults (with a gateway's concurrency left unset), the file's defaultConfig,
 * PROXY_CONFIG, then --concurrency/--serviceCluster, validated.
 */
export function constructProxyConfig(inputs: ProxyConfigInputs): ProxyConfigResult {
  const warnings: string[] = [];
  let pc = defaultProxyConfig();
  // A gateway listens on all cores unless told otherwise.
  if (inputs.nodeType !== 'sidecar') pc.concurrency = undefined;

  if (inputs.meshConfig && inputs.meshConfig.text.trim() !== '') pc = applyMeshConfigDefaults(pc, inputs.meshConfig, warnings);
  if (inputs.proxyConfigEnv && inputs.proxyConfigEnv.trim() !== '') {
    pc = applyProxyConfigText(pc, inputs.proxyConfigEnv, 'failed to unmarshal mesh config from environment [PROXY_CONFIG]', 'PROXY_CONFIG');
  }

  if (inputs.concurrency !== 0) pc.concurrency = inputs.concurrency;
  else if (inputs.nodeType === 'router' && pc.concurrency === undefined && inputs.cpuLimit && inputs.cpuLimit > 0) {
    pc.concurrency = Math.ceil(inputs.cpuLimit);
  }
  if (pc.serviceCluster === '') pc.serviceCluster = inputs.serviceCluster;

  const errors = validateProxyConfig(pc);
  if (errors.length) {
    const sources = ['defaults', inputs.meshConfig ? `mesh config file ${inputs.meshConfig.path}` : '', inputs.proxyConfigEnv ? 'PROXY_CONFIG' : ''];
    throw new ProxyConfigError(`invalid proxy config (${sources.filter(Boolean).join(' + ')}): ${errors.join('; ')}`);
  }
  return { proxyConfig: pc, warnings };
}

/** Go-style duration text for logs ("45s", "1m0s"). */
export function durationText(ms: number): string {
  return formatDurationMs(ms);
}

/**
 * Envoy's log flags from Istio's single --proxyLogLevel (`info,misc:error,upstream:debug`): the bare level
 * becomes `-l`, the `component:level` entries `--component-log-level`; the deprecated
 * --proxyComponentLogLevel is used only when --proxyLogLevel names no components. Invalid entries are dropped
 * with a warning, as Istio does.
 */
export function splitProxyLogLevel(
  proxyLogLevel: string,
  proxyComponentLogLevel: string,
): { level: string; componentLevels: string; warnings: string[] } {
  const warnings: string[] = [];
  let level = '';
  const components: string[] = [];
  for (const entry of proxyLogLevel.split(',')) {
    if (entry === '') continue;
    const parts = entry.split(':');
    if (parts.length === 1) level = parts[0]!;
    else if (parts.length === 2) components.push(entry);
    else warnings.push(`dropping invalid log level: ${entry}`);
  }
  return { level, componentLevels: components.length ? components.join(',') : proxyComponentLogLevel, warnings };
}

export const PROXY_LOG_LEVEL_NAMES = ['trace', 'debug', 'info', 'warning', 'warn', 'error', 'critical', 'off'] as const;

/** Checks the levels Envoy would refuse, so a typo fails here with a message rather than in the proxy. */
export function checkProxyLogLevels(level: string, componentLevels: string): string | undefined {
  const ok = (l: string) => (PROXY_LOG_LEVEL_NAMES as readonly string[]).includes(l);
  if (level !== '' && !ok(level))
    return `invalid --proxyLogLevel ${JSON.stringify(level)}: level must be one of trace, debug, info, warning, error, critical, off`;
  for (const c of componentLevels.split(',').filter(Boolean)) {
    const [name, l] = c.split(':');
    if (!name || !l || !ok(l))
      return `invalid component log level ${JSON.stringify(c)}: expected <component>:<level> with level one of trace, debug, info, warning, error, critical, off`;
  }
  return undefined;
}
