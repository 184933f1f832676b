// The proxy's role and ProxyConfig from the command line, the mesh config file and PROXY_CONFIG (Istio's
// pilot-agent config.ConstructProxyConfig), and Envoy's log levels from --proxyLogLevel.
import path from 'node:path';
import { CommandError } from '../../cli/context';
import { ProxyConfigError, type ProxyConfig } from '../../config/proxyconfig';
import { checkProxyLogLevels, constructProxyConfig, splitProxyLogLevel, type NodeType } from '../config';
import { NodeTypeError, parseNodeType } from '../node';
import { readOptional, type PrepareStep } from './inputs';

/** `sidecar` or `router`, the command's argument. */
export function prepareNodeType(s: PrepareStep): NodeType {
  try {
    return parseNodeType(s.ctx.args[0]);
  } catch (e) {
    if (e instanceof NodeTypeError) throw new CommandError(e.message);
    throw e;
  }
}

export interface PreparedProxyConfig {
  proxyConfig: ProxyConfig;
  /** Envoy's `-l` (empty: its default). */
  logLevel: string;
  /** Envoy's `--component-log-level`. */
  componentLogLevel: string;
}

export function prepareProxyConfig(s: PrepareStep, nodeType: NodeType): PreparedProxyConfig {
  const { ctx, env, cwd, notes } = s;
  const meshConfigFlag = ctx.flags['meshConfig'] as string;
  const meshConfigPath = path.resolve(cwd, meshConfigFlag);
  const meshConfigText = meshConfigFlag ? readOptional(meshConfigPath, 'mesh config file') : undefined;
  if (meshConfigText === undefined && ctx.changed.has('meshConfig')) {
    throw new CommandError(`failed to read mesh config file ${meshConfigFlag}: no such file`);
  }
  let pc: ProxyConfig;
  try {
    const r = constructProxyConfig({
      meshConfig: meshConfigText === undefined ? undefined : { path: meshConfigFlag, text: meshConfigText },
      proxyConfigEnv: ctx.env['PROXY_CONFIG'],
      serviceCluster: ctx.flags['serviceCluster'] as string,
      concurrency: ctx.flags['concurrency'] as number,
      nodeType,
      cpuLimit: env.int('MESH_CPU_LIMIT'),
    });
    pc = r.proxyConfig;
    notes.push(...r.warnings);
  } catch (e) {
    if (e instanceof ProxyConfigError) throw new CommandError(`failed to get proxy config: ${e.message}`);
    throw e;
  }
  const templateFile = ctx.flags['templateFile'] as string;
  if (templateFile && pc.customConfigFile === '') pc.proxyBootstrapTemplatePath = templateFile;

  const { level, componentLevels, warnings } = splitProxyLogLevel(
    ctx.flags['proxyLogLevel'] as string,
    ctx.flags['proxyComponentLogLevel'] as string,
  );
  notes.push(...warnings);
  const badLevel = checkProxyLogLevels(level, componentLevels);
  if (badLevel) throw new CommandError(badLevel);
  return { proxyConfig: pc, logLevel: level, componentLogLevel: componentLevels };
}
