// `pilot-agent proxy sidecar|router`: assembles the proxy's identity and ProxyConfig from flags, the mesh
// config file and the environment (as Istio's pilot-agent does), renders the bootstrap, and runs the agent:
// xDS proxy on the local socket, status server, and the data-plane proxy (a real Envoy when one is found,
// else this binary's built-in engine), until the proxy exits or the agent is told to stop.
import * as fs from 'node:fs';
import * as os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify as yamlStringify } from 'yaml';
import type { JsonObject } from '@bufbuild/protobuf';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { EnvTable } from '../cli/env';
import { buildInfo } from '../lib/buildinfo';
import { parseGoBool } from '../cli/values';
import { registerScope } from '../lib/log';
import { knownAgentListeners } from './admin-client';
import type { AgentOptions } from './agent';
import {
  bootstrapFilePath,
  BootstrapError,
  renderBootstrap,
  templateParams,
  xdsSocketPath,
  type BootstrapInputs,
} from './bootstrap';
import { checkProxyLogLevels, constructProxyConfig, durationText, splitProxyLogLevel, type NodeType } from './config';
import { ProxyConfigError, proxyConfigToJson, type ProxyConfig } from '../config/proxyconfig';
import { discoveryConnection, DiscoveryConnectionError } from './discovery-connection';
import { identityOptions, IdentityOptionsError, type IdentityOptions } from './identity/options';
import { WorkloadIdentity } from './identity';
import { CompliancePolicyError, parseCompliancePolicy, type CompliancePolicy } from '../lib/compliance';
import { grpcBootstrap } from './grpc-bootstrap';
import { parseReadinessProbe, type ReadinessProbe } from './health/probe';
import {
  allIpv6,
  DownwardApiError,
  nodeMetadata,
  NodeTypeError,
  parseDownwardApi,
  parseNodeType,
  POD_ANNOTATIONS_PATH,
  POD_LABELS_PATH,
  privateIps,
  proxyIdentity,
} from './node';
import { findProxyBinary, proxyArgs, type ProxyLaunch, type ProxyRun } from './process';
import { DnsConfigError, type LocalDnsServerOptions } from '../dns/server';
import { startMemoryRelief } from './memory';
import { armTestFaults, FaultBoundary, parseTestFaults, type TestFault } from './boundary';

const log = registerScope('default');

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

function readOptional(file: string, what: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CommandError(`failed to read ${what} ${file}: ${(e as Error).message}`);
  }
}

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

/** Resolves the agent's configuration; throws CommandError for anything the user must fix. */
export async function prepareAgent(ctx: RunContext, cwd = process.cwd(), interfaces = os.networkInterfaces()): Promise<PreparedAgent> {
  const env = new EnvTable(ctx.program.env, ctx.env);
  const raw = (name: string) => ctx.env[name] ?? '';
  const notes: string[] = [];
  const info: string[] = [];

  let nodeType: NodeType;
  try {
    nodeType = parseNodeType(ctx.args[0]);
  } catch (e) {
    if (e instanceof NodeTypeError) throw new CommandError(e.message);
    throw e;
  }

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

  const { level, componentLevels, warnings } = splitProxyLogLevel(ctx.flags['proxyLogLevel'] as string, ctx.flags['proxyComponentLogLevel'] as string);
  notes.push(...warnings);
  const badLevel = checkProxyLogLevels(level, componentLevels);
  if (badLevel) throw new CommandError(badLevel);

  const identity = proxyIdentity({
    type: nodeType,
    podName: raw('POD_NAME'),
    podNamespace: raw('POD_NAMESPACE'),
    instanceIp: env.string('INSTANCE_IP'),
    domain: ctx.flags['domain'] as string,
    machineIps: privateIps(interfaces),
  });
  const ipv6 = allIpv6(identity.ipAddresses);
  const localhost = ipv6 ? '::1' : '127.0.0.1';

  let compliance: CompliancePolicy;
  try {
    compliance = parseCompliancePolicy(env.string('COMPLIANCE_POLICY'));
  } catch (e) {
    if (e instanceof CompliancePolicyError) throw new CommandError(e.message);
    throw e;
  }

  let conn;
  try {
    conn = discoveryConnection({
      compliance,
      proxyConfig: pc,
      xdsRootCa: env.string('XDS_ROOT_CA'),
      meshdSan: env.string('MESHD_SAN'),
      clusterId: env.string('CLUSTER_ID'),
      cwd,
      keepaliveTimeMs: env.duration('GRPC_KEEPALIVE_INTERVAL'),
      keepaliveTimeoutMs: env.duration('GRPC_KEEPALIVE_TIMEOUT'),
    });
  } catch (e) {
    if (e instanceof DiscoveryConnectionError) throw new CommandError(e.message);
    throw e;
  }
  info.push(...conn.info);
  notes.push(...conn.warnings);

  const envoyStatusPort = env.isSet('PROXY_STATUS_PORT') || !ctx.env['ENVOY_STATUS_PORT'] ? env.int('PROXY_STATUS_PORT') : Number(ctx.env['ENVOY_STATUS_PORT']);
  const envoyPrometheusPort =
    env.isSet('PROXY_METRICS_PORT') || !ctx.env['ENVOY_PROMETHEUS_PORT'] ? env.int('PROXY_METRICS_PORT') : Number(ctx.env['ENVOY_PROMETHEUS_PORT']);
  const exitOnZero = env.bool('EXIT_ON_ZERO_ACTIVE_CONNECTIONS');
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
    exitOnZeroActiveConnections: exitOnZero,
    stsPort,
    outlierLogPath,
    pilotSan: conn.pilotSan,
  });
  notes.push(...node.warnings);
  info.push(...node.info);

  let workload: IdentityOptions;
  try {
    workload = identityOptions({ env, raw: ctx.env, proxyConfig: pc, clusterId: env.string('CLUSTER_ID'), metadata: node.metadata, cwd });
  } catch (e) {
    if (e instanceof IdentityOptionsError) throw new CommandError(e.message);
    throw e;
  }
  info.push(...workload.info);
  notes.push(...workload.warnings);

  const inputs: BootstrapInputs = {
    node,
    proxyConfig: pc,
    ipv6,
    envoyStatusPort,
    envoyPrometheusPort,
    exitOnZeroActiveConnections: exitOnZero,
    outlierLogPath,
    stripFragmentFromPath: env.bool('HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED'),
    // The contract's ADS is state-of-the-world; delta only when asked for explicitly.
    xdsType: env.isSet('MESH_DELTA_XDS') && env.bool('MESH_DELTA_XDS') ? 'DELTA_GRPC' : 'GRPC',
    stsPort,
    pilotSan: conn.pilotSan,
    xdsRootCert: conn.rootCertPath,
    workloadIdentitySocketFile: workload.socketFile,
    compliancePolicy: compliance,
  };

  const disableProxy = env.bool('DISABLE_PROXY');
  let bootstrap: AgentOptions['bootstrap'];
  let templateCheck: PreparedAgent['templateCheck'];
  let configFile: string;
  if (pc.customConfigFile) {
    // Istio's CustomConfigFile: the user's bootstrap is used as it is.
    configFile = path.resolve(cwd, pc.customConfigFile);
  } else {
    let json: JsonObject;
    try {
      if (pc.proxyBootstrapTemplatePath) {
        const file = pc.proxyBootstrapTemplatePath;
        const template = readOptional(path.resolve(cwd, file), 'bootstrap template');
        if (template === undefined) throw new CommandError(`failed to read bootstrap template ${file}: no such file`);
        // Go templates (and their ~40 KB of code) only for those who use them, after the certificate request's code.
        const { renderBootstrapTemplate } = await import('./template');
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
    configFile = path.resolve(cwd, bootstrapFilePath(pc.configPath));
    bootstrap = { path: configFile, json };
  }

  let override: string | undefined;
  const overrideFile = env.string('MESH_BOOTSTRAP_OVERRIDE');
  if (overrideFile) {
    const text = readOptional(path.resolve(cwd, overrideFile), 'bootstrap override (MESH_BOOTSTRAP_OVERRIDE)');
    if (text === undefined) notes.push(`Failed to read bootstrap override: ${overrideFile}: no such file`);
    else {
      try {
        override = JSON.stringify(parseYaml(text.split('$(HOST_IP)').join(ctx.env['HOST_IP'] ?? '')));
      } catch (e) {
        throw new CommandError(`failed to convert bootstrap override ${overrideFile} to JSON: ${(e as Error).message}`);
      }
    }
  }

  let proxyLaunch: ProxyLaunch | undefined;
  if (!disableProxy) {
    const envoy = findProxyBinary(pc.binaryPath, ctx.env['PATH'], cwd);
    const enableCoreDump = env.bool('MESH_PROXY_ENABLE_CORE_DUMP');
    if (!envoy && enableCoreDump) notes.push('MESH_PROXY_ENABLE_CORE_DUMP has no effect on the built-in proxy engine (it is a Node.js process)');
    const run: ProxyRun = {
      configFile,
      drainDurationMs: pc.drainDuration,
      parentShutdownDurationMs: pc.parentShutdownDuration,
      ipv6,
      logLevel: level,
      componentLogLevel: componentLevels,
      concurrency: pc.concurrency,
      override,
      realEnvoy: envoy !== undefined,
      skipDeprecatedLogs: env.bool('PROXY_SKIP_DEPRECATED_LOGS'),
      enableCoreDump,
    };
    proxyLaunch = envoy ? { kind: 'exec', command: { file: envoy, args: proxyArgs(run) } } : { kind: 'builtin', run };
    info.push(envoy ? `using Envoy at ${envoy}` : `no envoy executable (binaryPath ${pc.binaryPath}, PATH): using the built-in proxy engine`);
  }

  // Read from the node metadata, which merges proxyMetadata, MESH_META_* and Istio's ISTIO_META_* spellings.
  const metaBool = (key: string): boolean => {
    const v = node.metadata[key];
    if (v === undefined || v === '') return false;
    try {
      return typeof v === 'boolean' ? v : parseGoBool(String(v));
    } catch {
      notes.push(`node metadata ${key}=${JSON.stringify(v)} is not a boolean: read as false`);
      return false;
    }
  };
  // Istio's isDNSServerEnabled: capture on a sidecar (gateways rarely need it), or the server asked for outright.
  const dnsServer = (metaBool('DNS_CAPTURE') && nodeType === 'sidecar') || metaBool('ENABLE_DNS_SERVER');
  let dns: LocalDnsServerOptions | undefined;
  if (dnsServer) {
    dns = {
      address: env.string('DNS_PROXY_ADDR'),
      proxyNamespace: raw('POD_NAMESPACE'),
      proxyDomain: identity.dnsDomain,
      forwardParallel: env.bool('DNS_FORWARD_PARALLEL'),
    };
    info.push(`DNS proxy on ${dns.address || 'localhost:15053'}: readiness waits for the DNS name table from the discovery daemon`);
  }
  if (stsPort > 0) notes.push(`--stsPort ${stsPort}: the security token service is not part of this build; no STS server is started`);
  if (env.string('MESH_ORCH_APP_PROBERS')) notes.push('MESH_ORCH_APP_PROBERS: application probe rewriting is not part of this build; /app-health/ answers 400');

  let healthProbe: ReadinessProbe | undefined;
  try {
    healthProbe = parseReadinessProbe(pc.other['readinessProbe'], 'proxy config readinessProbe');
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  if (healthProbe) info.push(`application health check (readinessProbe ${healthProbe.method.kind}): reported to the discovery daemon for the WorkloadEntry`);

  let grpcBootstrapOut: AgentOptions['grpcBootstrap'];
  if (env.isSet('GRPC_XDS_BOOTSTRAP') && env.string('GRPC_XDS_BOOTSTRAP') !== '') {
    grpcBootstrapOut = {
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

  const options: AgentOptions = {
    nodeType,
    bootstrap: disableProxy ? undefined : bootstrap,
    proxyLaunch,
    proxyEnv: ctx.env,
    cwd,
    xds: { socketPath: path.resolve(cwd, xdsSocketPath(pc.configPath)), upstream: conn.upstream },
    adminHost: localhost,
    adminPort: pc.proxyAdminPort,
    statusPort: pc.statusPort > 0 ? pc.statusPort : undefined,
    terminationDrainDurationMs: pc.terminationDrainDuration,
    exitOnZeroActiveConnections: exitOnZero,
    minimumDrainDurationMs: env.duration('MINIMUM_DRAIN_DURATION'),
    knownListeners: knownAgentListeners(envoyStatusPort, envoyPrometheusPort),
    dns,
    metricsLocalhostOnly: env.bool('METRICS_LOCALHOST_ACCESS_ONLY'),
    grpcBootstrap: grpcBootstrapOut,
    identity: workload,
    ...(healthProbe ? { healthCheck: { probe: healthProbe, ipAddresses: identity.ipAddresses } } : {}),
  };
  return { options, proxyConfig: pc, nodeType, nodeId: identity.nodeId, ipAddresses: identity.ipAddresses, info, notes, ...(templateCheck ? { templateCheck } : {}) };
}

/** How long the agent waits for its first certificate before loading the rest of itself. */
const FIRST_CERTIFICATE_BEFORE_LOAD_MS = 1000;

export const run: Handler = async (ctx) => {
  const prepared = await prepareAgent(ctx);
  const { options, proxyConfig: pc } = prepared;
  log.info(`Version ${buildInfo().version}`);
  log.info(`Effective config: ${yamlStringify(proxyConfigToJson(pc)).trimEnd()}`);
  log.info('Proxy role', { ips: prepared.ipAddresses.join(','), type: prepared.nodeType, id: prepared.nodeId });
  for (const n of prepared.info) log.info(n);
  for (const n of prepared.notes) log.warn(n);
  log.info(
    `termination drain ${durationText(pc.terminationDrainDuration)}, exit on zero active connections ${options.exitOnZeroActiveConnections}` +
      (options.exitOnZeroActiveConnections ? ` (minimum drain ${durationText(options.minimumDrainDurationMs)})` : ''),
  );

  // The workload certificate is asked for before the rest of the agent (xDS proxy, status server, Envoy's
  // message types) is loaded: a pod's first certificate is on the path to its readiness.
  // MESH_TEST_FAULT is a test-only hook (see boundary.ts); a bad value fails the start rather than arming nothing.
  let testFaults: TestFault[] = [];
  try {
    testFaults = parseTestFaults(ctx.env['MESH_TEST_FAULT'] ?? '');
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  const boundary = new FaultBoundary();
  const identity = options.identity
    ? new WorkloadIdentity({ options: options.identity, cwd: options.cwd, serveSds: options.proxyLaunch !== undefined, guard: boundary })
    : undefined;
  try {
    await identity?.begin();
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  // Loading the rest blocks this thread for ~0.1–0.3 s; the CA's answer waits for it unless it came first.
  // Nothing is lost by waiting: the xDS connection waits for this certificate (mutual TLS) and the proxy's
  // SDS for it too. A CA that is slow or down only delays the rest by this bound.
  await identity?.certificateOrTimeout(FIRST_CERTIFICATE_BEFORE_LOAD_MS);
  if (prepared.templateCheck) {
    const { validateBootstrap } = await import('./bootstrap-schema');
    try {
      validateBootstrap(prepared.templateCheck.json, prepared.templateCheck.source);
    } catch (e) {
      // The schema knows the types mesh emits; a template may use others that Envoy knows.
      log.warn((e as Error).message);
    }
  }
  const { Agent } = await import('./agent');
  let agent: InstanceType<typeof Agent>;
  try {
    agent = new Agent({ ...options, boundary, ...(identity ? { workloadIdentity: identity } : {}) });
  } catch (e) {
    if (e instanceof DnsConfigError) throw new CommandError(`failed to start local DNS server: ${e.message}`);
    throw e;
  }
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    log.info(`Received ${sig}, starting graceful shutdown`);
    // A second SIGINT (an impatient Ctrl-C) stops at once.
    if (signals > 1 && sig === 'SIGINT') agent.quit();
    else agent.terminate();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const relief = startMemoryRelief({ onRelease: (before, after) => log.debug(`released memory when idle: RSS ${mb(before)} → ${mb(after)} MB`) });
  // The data-plane engine shares this process: an exception of a side subsystem must not end it.
  const uninstall = boundary.install();
  const disarm = testFaults.length > 0 ? armTestFaults(boundary, testFaults) : undefined;
  try {
    try {
      await agent.start();
    } catch (e) {
      throw new CommandError((e as Error).message);
    }
    return await agent.run();
  } finally {
    disarm?.();
    uninstall();
    relief.stop();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
};

const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
