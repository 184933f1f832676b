// The mesh CNI plugin (`mesh-cni`, or `mesh cni-plugin`): called by the container runtime for every pod
// sandbox, after the pod's network plugin. For a pod with a sidecar it programs the sidecar's capture
// rules inside the pod's network namespace, which is what the privileged mesh-init container would
// otherwise do. CNI spec: commands from CNI_* variables, the network configuration on stdin, the result
// or an error object on stdout, logs never on stdout.
import { renameSync, statSync } from 'node:fs';
import path from 'node:path';
import { buildInfo } from '../../lib/buildinfo';
import { configure, defaultLogOptions, registerScope, type LevelName, levelFromName } from '../../lib/log';
import type { OrchClient } from '../../config/orch';
import { AnnotationError, iptablesFlags, newRedirect } from './redirect';
import { extractPodInfo, skipReason } from './pod';
import { checkCapture, checkPodNetns, programCapture, removeCapture, type CaptureIO } from './capture';
import { parsePluginConfig, PLUGIN_KUBECONFIG_NAME, PLUGIN_LOG_NAME, prevResultAddresses, resultFor, type PluginConfig } from './config';
import {
  argsFromEnv,
  checkVersionSupported,
  CniError,
  CniErrorCode,
  configVersion,
  CURRENT_CNI_VERSION,
  parseK8sArgs,
  SUPPORTED_CNI_VERSIONS,
  validateNetworkConfig,
  versionAtLeast,
  versionInfo,
  type CmdArgs,
} from './skel';

const log = registerScope('cni-plugin', 'CNI plugin');

/** Istio's plugin asks the orchestrator for the pod up to 30 times, a second apart. */
export const POD_RETRIEVAL_ATTEMPTS = 30;
export const POD_RETRIEVAL_INTERVAL_MS = 1000;
/** One pod GET may not hang the pod's start for longer than this. */
const POD_REQUEST_TIMEOUT_MS = 10_000;
/** The plugin's log file is cut at this size (Istio's rolling log, 10 MB). */
const LOG_FILE_MAX_BYTES = 10 << 20;
/** The installer's own pods are let through when the API cannot be reached (they carry its fresh credentials). */
const INSTALLER_POD_PREFIX = 'mesh-cni-node-';

export interface PluginIO {
  env: NodeJS.ProcessEnv;
  readStdin: () => Promise<string>;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  capture?: CaptureIO;
  /** Builds the orchestrator client from the plugin's client configuration file. */
  orchClient?: (kubeconfig: string) => Promise<OrchClient>;
  sleep?: (ms: number) => Promise<void>;
}

function print(out: NodeJS.WritableStream, value: unknown): void {
  out.write(JSON.stringify(value, null, 4));
}

export async function runCniPlugin(io: PluginIO): Promise<number> {
  // Stdout belongs to the CNI protocol: nothing may log there, even before the configuration is read.
  configure({ ...defaultLogOptions(), jsonEncoding: true, outputPaths: ['stderr'] }, { scopes: ['cni-plugin'] });
  let version = CURRENT_CNI_VERSION;
  try {
    let args: Omit<CmdArgs, 'stdin'>;
    try {
      args = argsFromEnv(io.env);
    } catch (e) {
      if (e instanceof CniError && e.code === CniErrorCode.InvalidEnvironmentVariables && !io.env.CNI_COMMAND) {
        io.stderr.write(`CNI plugin mesh-cni ${buildInfo().version}\nCNI protocol versions supported: ${SUPPORTED_CNI_VERSIONS.join(', ')}\n`);
        return 0;
      }
      throw e;
    }
    if (args.command === 'VERSION') {
      io.stdout.write(versionInfo());
      return 0;
    }
    let stdin: string;
    try {
      stdin = await io.readStdin();
    } catch (e) {
      throw new CniError(CniErrorCode.IOFailure, `error reading from stdin: ${(e as Error).message}`);
    }
    const raw = validateNetworkConfig(stdin);
    version = configVersion(raw);
    const cmd: CmdArgs = { ...args, stdin };
    switch (cmd.command) {
      case 'ADD': {
        checkVersionSupported(version);
        const conf = pluginConfig(raw, version);
        await add(cmd, conf, io);
        print(io.stdout, resultFor(conf));
        return 0;
      }
      case 'DEL': {
        checkVersionSupported(version);
        await del(cmd, pluginConfig(raw, version), io);
        return 0;
      }
      case 'CHECK': {
        if (!versionAtLeast(version, '0.4.0')) throw new CniError(CniErrorCode.IncompatibleCNIVersion, 'config version does not allow CHECK');
        checkVersionSupported(version);
        await check(cmd, pluginConfig(raw, version), io);
        return 0;
      }
      default: {
        // GC and STATUS (spec 1.1.0): the plugin keeps no state to collect and needs nothing to be ready.
        if (!versionAtLeast(version, '1.1.0'))
          throw new CniError(CniErrorCode.IncompatibleCNIVersion, `config version does not allow ${cmd.command}`);
        checkVersionSupported(version);
        return 0;
      }
    }
  } catch (e) {
    const err = e instanceof CniError ? e : new CniError(CniErrorCode.Internal, (e as Error).message ?? String(e));
    log.error(`mesh-cni failed with: ${err.message}`);
    print(io.stdout, err.toJSON(version));
    return 1;
  }
}

function pluginConfig(raw: Record<string, unknown>, version: string): PluginConfig {
  const conf = parsePluginConfig(raw, version);
  configurePluginLogging(conf);
  return conf;
}

/**
 * Logs go to stderr (the runtime keeps them) and to a size-capped file in the agent run dir, at the
 * level install-cni put into the configuration.
 */
function configurePluginLogging(conf: PluginConfig): void {
  const level = levelFromName(conf.pluginLogLevel) !== undefined ? (conf.pluginLogLevel as LevelName) : undefined;
  const base = { ...defaultLogOptions(), jsonEncoding: true, outputLevels: level ? [{ scope: 'all', level }] : [] };
  const file = conf.cniAgentRunDir ? path.join(conf.cniAgentRunDir, PLUGIN_LOG_NAME) : '';
  if (file) {
    try {
      if (statSync(file).size > LOG_FILE_MAX_BYTES) renameSync(file, `${file}.1`);
    } catch {
      // no file yet
    }
    try {
      configure({ ...base, outputPaths: ['stderr', file] }, { scopes: ['cni-plugin'] });
      return;
    } catch {
      // the run dir is not there (yet): stderr alone
    }
  }
  configure({ ...base, outputPaths: ['stderr'] }, { scopes: ['cni-plugin'] });
}

interface PodRef {
  name: string;
  namespace: string;
}

/** The pod of a CNI call, or why the call has nothing to do. */
function podOf(cmd: CmdArgs, conf: PluginConfig): PodRef | string {
  const k8s = parseK8sArgs(cmd.args);
  if (k8s.podNamespace === '' || k8s.podName === '') return 'not an orchestrator pod (no K8S_POD_NAME/K8S_POD_NAMESPACE in CNI_ARGS)';
  if (conf.excludeNamespaces.includes(k8s.podNamespace)) return `pod namespace ${k8s.podNamespace} is excluded`;
  return { name: k8s.podName, namespace: k8s.podNamespace };
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function defaultOrchClient(kubeconfig: string): Promise<OrchClient> {
  const { createOrchClient } = await import('../../config/orch/client');
  // One pod read per call: the client-side rate limit has nothing to smooth.
  return createOrchClient({ orchconfig: kubeconfig, qps: -1, contentType: 'json' });
}

/**
 * Reads the pod, retrying while the API server cannot answer. Undefined means the pod is the installer's
 * own and the API is out of reach: it is let through (Istio's degraded-state rule).
 */
async function readPod(ref: PodRef, conf: PluginConfig, io: PluginIO): Promise<unknown | undefined> {
  const kubeconfig = path.join(conf.cniAgentRunDir, PLUGIN_KUBECONFIG_NAME);
  let client: OrchClient;
  try {
    client = await (io.orchClient ?? defaultOrchClient)(kubeconfig);
  } catch (e) {
    throw new CniError(CniErrorCode.Internal, `failed setting up the orchestrator client with ${kubeconfig}: ${(e as Error).message}`);
  }
  const sleep = io.sleep ?? defaultSleep;
  const p = `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/pods/${encodeURIComponent(ref.name)}`;
  let lastError: Error | undefined;
  try {
    for (let attempt = 1; attempt <= POD_RETRIEVAL_ATTEMPTS; attempt++) {
      try {
        return await client.getJson(p, undefined, AbortSignal.timeout(POD_REQUEST_TIMEOUT_MS));
      } catch (e) {
        lastError = e as Error;
        log.debug(`failed to get pod info (attempt ${attempt}/${POD_RETRIEVAL_ATTEMPTS}): ${lastError.message}`);
      }
      if (ref.name.startsWith(INSTALLER_POD_PREFIX) && ref.namespace === conf.podNamespace) {
        log.info(`in a degraded state and ${ref.name} looks like our own installer pod, skipping`);
        return undefined;
      }
      if (attempt < POD_RETRIEVAL_ATTEMPTS) await sleep(POD_RETRIEVAL_INTERVAL_MS);
    }
  } finally {
    client.close();
  }
  throw new CniError(
    CniErrorCode.Internal,
    `failed to get pod ${ref.namespace}/${ref.name} from the orchestrator (${POD_RETRIEVAL_ATTEMPTS} attempts): ${lastError?.message ?? 'unknown error'}`,
  );
}

/** The capture flags for the call's pod, or undefined when its traffic is left alone. */
async function captureFor(cmd: CmdArgs, conf: PluginConfig, io: PluginIO, dryRun: boolean) {
  const ref = podOf(cmd, conf);
  if (typeof ref === 'string') {
    log.debug(ref);
    return undefined;
  }
  const plog = log.withLabels('pod', `${ref.namespace}/${ref.name}`);
  if (conf.ambientEnabled) {
    plog.warn('ambient_enabled is set, but this build has no ambient node agent: only sidecar capture is done');
  }
  const pod = await readPod(ref, conf, io);
  if (pod === undefined) return undefined;
  const pi = extractPodInfo(pod);
  const reason = skipReason(pi);
  if (reason) {
    plog.info(`excluded: ${reason}`);
    return undefined;
  }
  let redirect;
  try {
    redirect = newRedirect(pi);
  } catch (e) {
    if (e instanceof AnnotationError) throw new CniError(CniErrorCode.Internal, `redirect failed due to bad params: ${e.message}`);
    throw e;
  }
  for (const w of redirect.warnings) plog.warn(w);
  return { ref, plog, flags: iptablesFlags(redirect, cmd.netns, dryRun) };
}

async function add(cmd: CmdArgs, conf: PluginConfig, io: PluginIO): Promise<void> {
  const dryRun = (io.env.DRY_RUN_FILE_PATH ?? '') !== '';
  const target = await captureFor(cmd, conf, io, dryRun);
  if (!target) return;
  if (!dryRun) checkPodNetns(cmd.netns);
  target.plog.info(`setting up the sidecar capture rules in ${cmd.netns}`);
  try {
    await programCapture(
      { flags: target.flags, env: io.env, netns: cmd.netns, podAddresses: prevResultAddresses(conf.prevResult), log: (l) => target.plog.info(l) },
      io.capture,
    );
  } catch (e) {
    if (e instanceof CniError) throw e;
    throw new CniError(
      CniErrorCode.Internal,
      `programming the capture rules of pod ${target.ref.namespace}/${target.ref.name} failed: ${(e as Error).message}`,
    );
  }
}

async function check(cmd: CmdArgs, conf: PluginConfig, io: PluginIO): Promise<void> {
  const target = await captureFor(cmd, conf, io, false);
  if (!target) return;
  checkPodNetns(cmd.netns);
  const problems = await checkCapture(
    { flags: target.flags, env: io.env, netns: cmd.netns, podAddresses: prevResultAddresses(conf.prevResult) },
    io.capture,
  );
  if (problems.length > 0) {
    throw new CniError(
      CniErrorCode.Internal,
      `the capture rules of pod ${target.ref.namespace}/${target.ref.name} are not in place in ${cmd.netns}`,
      problems.join('; '),
    );
  }
}

/**
 * Removes the capture rules while the namespace still exists. Needs no orchestrator: a DEL must succeed
 * when the API server is away, and rules of a pod that had none are simply not found.
 */
async function del(cmd: CmdArgs, conf: PluginConfig, io: PluginIO): Promise<void> {
  if (cmd.netns === '') return;
  const ref = podOf(cmd, conf);
  if (typeof ref === 'string' && ref.includes('excluded')) return;
  try {
    statSync(cmd.netns);
  } catch {
    return; // already gone with the pod
  }
  checkPodNetns(cmd.netns);
  try {
    await removeCapture(cmd.netns, io.env, (l) => log.debug(l), io.capture);
  } catch (e) {
    throw new CniError(CniErrorCode.Internal, `removing the capture rules from ${cmd.netns} failed: ${(e as Error).message}`);
  }
}
