// The proxy's bootstrap (Istio's pilot-agent bootstrap: the built-in one, a --templateFile/
// proxyBootstrapTemplatePath template, or the user's customConfigFile as it is), the MESH_BOOTSTRAP_OVERRIDE
// merged over it, and the gRPC clients' xDS bootstrap (GRPC_XDS_BOOTSTRAP).
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { JsonObject } from '@bufbuild/protobuf';
import { CommandError } from '../../cli/context';
import type { ProxyConfig } from '../../config/proxyconfig';
import type { AgentOptions } from '../agent';
import { bootstrapFilePath, BootstrapError, renderBootstrap, templateParams, xdsSocketPath, type BootstrapInputs } from '../bootstrap';
import { grpcBootstrap } from '../grpc-bootstrap';
import type { NodeInfo } from '../node';
import type { PreparedDiscovery } from './discovery';
import { readOptional, type PrepareStep } from './inputs';
import type { PreparedNode } from './node';

export interface PreparedBootstrap {
  /** The bootstrap the agent writes; undefined when the user's customConfigFile is used as it is. */
  bootstrap?: { path: string; json: JsonObject };
  /** A bootstrap rendered from the user's template, to check against Envoy's schema. */
  templateCheck?: { json: JsonObject; source: string };
  /** The file the proxy starts from. */
  configFile: string;
  /** MESH_BOOTSTRAP_OVERRIDE as JSON, for --config-yaml. */
  override?: string;
}

export async function prepareBootstrap(
  s: PrepareStep,
  o: { pc: ProxyConfig; ipv6: boolean; node: PreparedNode; discovery: PreparedDiscovery; workloadIdentitySocketFile: string },
): Promise<PreparedBootstrap> {
  const { env } = s;
  const inputs: BootstrapInputs = {
    node: o.node.node,
    proxyConfig: o.pc,
    ipv6: o.ipv6,
    envoyStatusPort: o.node.envoyStatusPort,
    envoyPrometheusPort: o.node.envoyPrometheusPort,
    exitOnZeroActiveConnections: o.node.exitOnZeroActiveConnections,
    outlierLogPath: o.node.outlierLogPath,
    stripFragmentFromPath: env.bool('HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED'),
    // The contract's ADS is state-of-the-world; delta only when asked for explicitly.
    xdsType: env.isSet('MESH_DELTA_XDS') && env.bool('MESH_DELTA_XDS') ? 'DELTA_GRPC' : 'GRPC',
    stsPort: o.node.stsPort,
    pilotSan: o.discovery.connection.pilotSan,
    xdsRootCert: o.discovery.connection.rootCertPath,
    workloadIdentitySocketFile: o.workloadIdentitySocketFile,
    compliancePolicy: o.discovery.compliance,
  };
  const rendered = await renderProxyBootstrap(s.cwd, o.pc, inputs);
  const override = bootstrapOverride(s);
  return { ...rendered, ...(override !== undefined ? { override } : {}) };
}

async function renderProxyBootstrap(cwd: string, pc: ProxyConfig, inputs: BootstrapInputs): Promise<Omit<PreparedBootstrap, 'override'>> {
  // Istio's CustomConfigFile: the user's bootstrap is used as it is.
  if (pc.customConfigFile) return { configFile: path.resolve(cwd, pc.customConfigFile) };
  let json: JsonObject;
  let templateCheck: PreparedBootstrap['templateCheck'];
  try {
    if (pc.proxyBootstrapTemplatePath) {
      const file = pc.proxyBootstrapTemplatePath;
      const template = readOptional(path.resolve(cwd, file), 'bootstrap template');
      if (template === undefined) throw new CommandError(`failed to read bootstrap template ${file}: no such file`);
      // Go templates (and their ~40 KB of code) only for those who use them, after the certificate request's code.
      const { renderBootstrapTemplate } = await import('../template');
      json = renderBootstrapTemplate(template, templateParams(inputs), file);
      templateCheck = { json, source: `bootstrap rendered from ${file}` };
    } else {
      // The built-in bootstrap is checked against Envoy's schema by the tests, not at every start.
      json = renderBootstrap(inputs);
    }
  } catch (e) {
    if (e instanceof BootstrapError) throw new CommandError(`failed to generate bootstrap config: ${e.message}`);
    throw e;
  }
  const configFile = path.resolve(cwd, bootstrapFilePath(pc.configPath));
  return { bootstrap: { path: configFile, json }, configFile, ...(templateCheck ? { templateCheck } : {}) };
}

/** MESH_BOOTSTRAP_OVERRIDE's file as JSON, with $(HOST_IP) replaced; a missing file is a note. */
function bootstrapOverride(s: PrepareStep): string | undefined {
  const overrideFile = s.env.string('MESH_BOOTSTRAP_OVERRIDE');
  if (!overrideFile) return undefined;
  const text = readOptional(path.resolve(s.cwd, overrideFile), 'bootstrap override (MESH_BOOTSTRAP_OVERRIDE)');
  if (text === undefined) {
    s.notes.push(`Failed to read bootstrap override: ${overrideFile}: no such file`);
    return undefined;
  }
  try {
    return JSON.stringify(parseYaml(text.split('$(HOST_IP)').join(s.ctx.env['HOST_IP'] ?? '')));
  } catch (e) {
    throw new CommandError(`failed to convert bootstrap override ${overrideFile} to JSON: ${(e as Error).message}`);
  }
}

/** GRPC_XDS_BOOTSTRAP: the bootstrap gRPC clients in the pod read to reach the agent's xDS proxy. */
export function prepareGrpcBootstrap(s: PrepareStep, pc: ProxyConfig, node: NodeInfo): AgentOptions['grpcBootstrap'] {
  const { env, cwd } = s;
  if (!env.isSet('GRPC_XDS_BOOTSTRAP') || env.string('GRPC_XDS_BOOTSTRAP') === '') return undefined;
  return {
    path: path.resolve(cwd, env.string('GRPC_XDS_BOOTSTRAP')),
    json: grpcBootstrap({
      nodeId: node.id,
      locality: node.locality,
      metadata: node.metadata,
      xdsSocketPath: xdsSocketPath(pc.configPath),
      cwd,
      certDir: env.string('OUTPUT_CERTS') || undefined,
    }),
  };
}
