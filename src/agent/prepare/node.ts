// Who the proxy is: its identity (Istio's initProxy + ServiceNode: IPs, ID, DNS domain) and the node
// metadata it announces over xDS (pilot-agent's bootstrap node metadata: ports, pod labels and annotations
// from the downward API, MESH_META_*), with the ports the agent's own listeners use.
import * as fs from 'node:fs';
import * as os from 'node:os';
import path from 'node:path';
import type { ProxyConfig } from '../../config/proxyconfig';
import { buildInfo } from '../../lib/buildinfo';
import type { NodeType } from '../config';
import {
  DownwardApiError,
  nodeMetadata,
  parseDownwardApi,
  POD_ANNOTATIONS_PATH,
  POD_LABELS_PATH,
  privateIps,
  proxyIdentity,
  type NodeInfo,
  type ProxyIdentity,
} from '../node';
import type { PrepareStep } from './inputs';

export function prepareProxyIdentity(s: PrepareStep, nodeType: NodeType, interfaces: ReturnType<typeof os.networkInterfaces>): ProxyIdentity {
  return proxyIdentity({
    type: nodeType,
    podName: s.ctx.env['POD_NAME'] ?? '',
    podNamespace: s.ctx.env['POD_NAMESPACE'] ?? '',
    instanceIp: s.env.string('INSTANCE_IP'),
    domain: s.ctx.flags['domain'] as string,
    machineIps: privateIps(interfaces),
  });
}

/** The node and the settings it shares with the bootstrap. */
export interface PreparedNode {
  node: NodeInfo;
  envoyStatusPort: number;
  envoyPrometheusPort: number;
  exitOnZeroActiveConnections: boolean;
  stsPort: number;
  outlierLogPath: string;
}

export function prepareNode(s: PrepareStep, pc: ProxyConfig, identity: ProxyIdentity, pilotSan: string[]): PreparedNode {
  const { ctx, env, cwd, notes } = s;
  // Istio's older ENVOY_* spellings count only when ours are not set.
  const envoyStatusPort =
    env.isSet('PROXY_STATUS_PORT') || !ctx.env['ENVOY_STATUS_PORT'] ? env.int('PROXY_STATUS_PORT') : Number(ctx.env['ENVOY_STATUS_PORT']);
  const envoyPrometheusPort =
    env.isSet('PROXY_METRICS_PORT') || !ctx.env['ENVOY_PROMETHEUS_PORT'] ? env.int('PROXY_METRICS_PORT') : Number(ctx.env['ENVOY_PROMETHEUS_PORT']);
  const exitOnZeroActiveConnections = env.bool('EXIT_ON_ZERO_ACTIVE_CONNECTIONS');
  const stsPort = ctx.flags['stsPort'] as number;
  const outlierLogPath = ctx.flags['outlierLogPath'] as string;

  const node = nodeMetadata({
    env: ctx.env,
    proxyConfig: pc,
    identity,
    meshVersion: buildInfo().version,
    podLabels: readDownwardApi(path.resolve(cwd, POD_LABELS_PATH), notes),
    podAnnotations: readDownwardApi(path.resolve(cwd, POD_ANNOTATIONS_PATH), notes),
    envoyStatusPort,
    envoyPrometheusPort,
    exitOnZeroActiveConnections,
    stsPort,
    outlierLogPath,
    pilotSan,
  });
  notes.push(...node.warnings);
  s.info.push(...node.info);
  return { node, envoyStatusPort, envoyPrometheusPort, exitOnZeroActiveConnections, stsPort, outlierLogPath };
}

/** A downward API file (pod labels or annotations); a missing or unreadable one is a note, not a failure. */
function readDownwardApi(file: string, notes: string[]): Record<string, string> | undefined {
  let text: string | undefined;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') notes.push(`failed to read ${file}: ${(e as Error).message}`);
    return undefined;
  }
  try {
    return parseDownwardApi(text, file);
  } catch (e) {
    if (e instanceof DownwardApiError) {
      notes.push(e.message);
      return undefined;
    }
    throw e;
  }
}
