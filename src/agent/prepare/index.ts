// `pilot-agent proxy sidecar|router`, resolved: the proxy's identity and ProxyConfig from flags, the mesh
// config file and the environment (as Istio's pilot-agent does), its bootstrap, how the proxy runs, the
// DNS proxy and the status server's checks: everything the Agent is started with. Each step is a file here.
import * as os from 'node:os';
import path from 'node:path';
import type { JsonObject } from '@bufbuild/protobuf';
import type { RunContext } from '../../cli/context';
import { EnvTable } from '../../lib/env';
import type { ProxyConfig } from '../../config/proxyconfig';
import { knownAgentListeners } from '../admin-client';
import type { AgentOptions } from '../agent';
import { xdsSocketPath } from '../bootstrap';
import type { NodeType } from '../config';
import { allIpv6 } from '../node';
import { prepareBootstrap, prepareGrpcBootstrap } from './bootstrap';
import { prepareDiscovery } from './discovery';
import { prepareDns } from './dns';
import { prepareWorkloadIdentity } from './identity';
import type { PrepareStep } from './inputs';
import { prepareNode, prepareProxyIdentity } from './node';
import { prepareProxyLaunch } from './proxy';
import { prepareNodeType, prepareProxyConfig } from './proxy-config';
import { prepareAppMetrics, prepareHealthProbe } from './status';

/** Everything `proxy` needs, resolved from the command line and environment; built by prepareAgent. */
export interface PreparedAgent {
  options: AgentOptions;
  proxyConfig: ProxyConfig;
  nodeType: NodeType;
  nodeId: string;
  ipAddresses: string[];
  /** Facts worth a log line. */
  info: string[];
  /** Things the user may want to fix. */
  notes: string[];
  /** A bootstrap rendered from the user's template, to check against Envoy's schema. */
  templateCheck?: { json: JsonObject; source: string };
}

/** Resolves the agent's configuration; throws CommandError for anything the user must fix. */
export async function prepareAgent(ctx: RunContext, cwd = process.cwd(), interfaces = os.networkInterfaces()): Promise<PreparedAgent> {
  const s: PrepareStep = { ctx, env: new EnvTable(ctx.program.env, ctx.env), cwd, info: [], notes: [] };
  const { env } = s;
  const nodeType = prepareNodeType(s);
  const proxy = prepareProxyConfig(s, nodeType);
  const pc = proxy.proxyConfig;
  const identity = prepareProxyIdentity(s, nodeType, interfaces);
  const ipv6 = allIpv6(identity.ipAddresses);
  const discovery = prepareDiscovery(s, pc);
  const node = prepareNode(s, pc, identity, discovery.connection.pilotSan);
  const workload = prepareWorkloadIdentity(s, pc, node.node.metadata);
  const disableProxy = env.bool('DISABLE_PROXY');
  const boot = await prepareBootstrap(s, { pc, ipv6, node, discovery, workloadIdentitySocketFile: workload.socketFile });
  const proxyLaunch = disableProxy ? undefined : prepareProxyLaunch(s, { proxy, configFile: boot.configFile, ipv6, override: boot.override });
  const dns = prepareDns(s, nodeType, node.node.metadata, identity.dnsDomain);
  const healthProbe = prepareHealthProbe(s, pc, node.stsPort);
  const grpcBootstrap = prepareGrpcBootstrap(s, pc, node.node);

  const options: AgentOptions = {
    nodeType,
    bootstrap: disableProxy ? undefined : boot.bootstrap,
    proxyLaunch,
    proxyEnv: ctx.env,
    cwd,
    xds: { socketPath: path.resolve(cwd, xdsSocketPath(pc.configPath)), upstream: discovery.connection.upstream },
    adminHost: ipv6 ? '::1' : '127.0.0.1',
    adminPort: pc.proxyAdminPort,
    statusPort: pc.statusPort > 0 ? pc.statusPort : undefined,
    terminationDrainDurationMs: pc.terminationDrainDuration,
    exitOnZeroActiveConnections: node.exitOnZeroActiveConnections,
    minimumDrainDurationMs: env.duration('MINIMUM_DRAIN_DURATION'),
    knownListeners: knownAgentListeners(node.envoyStatusPort, node.envoyPrometheusPort),
    dns,
    metricsLocalhostOnly: env.bool('METRICS_LOCALHOST_ACCESS_ONLY'),
    proxyStatsPort: node.envoyPrometheusPort,
    appMetrics: prepareAppMetrics(s, nodeType, pc.statusPort),
    grpcBootstrap,
    identity: workload,
    ...(healthProbe ? { healthCheck: { probe: healthProbe, ipAddresses: identity.ipAddresses } } : {}),
  };
  const { info, notes } = s;
  const templateCheck = boot.templateCheck;
  return {
    options,
    proxyConfig: pc,
    nodeType,
    nodeId: identity.nodeId,
    ipAddresses: identity.ipAddresses,
    info,
    notes,
    ...(templateCheck ? { templateCheck } : {}),
  };
}
