// The CNI network configuration install-cni writes (Istio's cni/pkg/install/cniconfig.go): the plugin's
// entry, standalone as its own file or chained into the node's primary network configuration, the
// kubelet rule that decides which file is primary, and the checks that the installed entry is intact.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { registerScope } from '../../lib/log';
import { PLUGIN_TYPE } from '../plugin/config';
import { atomicWrite, ChangeWatcher, goJson } from './files';

const log = registerScope('cni-agent', 'CNI agent');

/** Default name of a standalone configuration: sorts after the node's own network files. */
export const STANDALONE_CONF_NAME = 'YYY-mesh-cni.conf';
/** Name given to the list a single .conf is turned into. */
export const CONVERTED_LIST_NAME = 'k8s-pod-network';
/** Mode of CNI configuration files (as Istio writes them). */
export const CNI_CONFIG_MODE = 0o644;

export interface CniConfigSettings {
  mountedCNINetDir: string;
  cniConfName: string;
  chainedCNIPlugin: boolean;
  pluginLogLevel: string;
  cniAgentRunDir: string;
  ambientEnabled: boolean;
  /** Comma-separated, split as Go's strings.Split: "" gives [""]. */
  excludeNamespaces: string;
  podNamespace: string;
}

/** A CNI configuration that cannot be used; the message names the file. */
export class CniConfigError extends Error {
  override name = 'CniConfigError';
}

/** The plugin entry, field order of Istio's plugin.Config (types.NetConf first), newline-terminated. */
export function pluginConfigJson(s: CniConfigSettings): string {
  return goJson(
    {
      cniVersion: '0.3.1',
      name: PLUGIN_TYPE,
      type: PLUGIN_TYPE,
      ipam: {},
      dns: {},
      plugin_log_level: s.pluginLogLevel,
      cni_agent_run_dir: s.cniAgentRunDir,
      ambient_enabled: s.ambientEnabled,
      exclude_namespaces: s.excludeNamespaces.split(','),
      pod_namespace: s.podNamespace,
    },
    false,
  );
}

type JsonMap = Record<string, unknown>;

function parseMap(text: string, what: string): JsonMap {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new CniConfigError(`error loading ${what} (JSON error): ${(e as Error).message}`);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) {
    throw new CniConfigError(`error loading ${what} (JSON error): expected a JSON object, got ${Array.isArray(v) ? 'an array' : JSON.stringify(v)}`);
  }
  return v as JsonMap;
}

function pluginsOf(conf: JsonMap, what: string): JsonMap[] {
  const plugins = conf.plugins;
  if (!Array.isArray(plugins)) throw new CniConfigError(`${what}: error reading plugin list from CNI config`);
  for (const p of plugins) {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw new CniConfigError(`${what}: error reading plugin from CNI config plugin list`);
  }
  return plugins as JsonMap[];
}

/**
 * Puts the plugin entry into an existing configuration: a single .conf becomes a list holding it and
 * the entry; a list loses any previous entry of ours and gets the new one last. Keys come out sorted
 * (Go re-marshals generic maps).
 */
export function insertCNIConfig(newConfig: string, existingConfig: string): string {
  const mesh = parseMap(newConfig, 'mesh CNI config');
  const existing = parseMap(existingConfig, 'existing CNI config');
  delete mesh.cniVersion;
  let out: JsonMap;
  if ('type' in existing) {
    delete existing.cniVersion;
    out = { name: CONVERTED_LIST_NAME, cniVersion: '0.3.1', plugins: [existing, mesh] };
  } else {
    const plugins = pluginsOf(existing, 'existing CNI config');
    const i = plugins.findIndex((p) => p.type === PLUGIN_TYPE);
    if (i >= 0) plugins.splice(i, 1);
    out = { ...existing, plugins: [...plugins, mesh] };
  }
  return goJson(out, true);
}

/** Removes our entry from a list (uninstall); keys sorted as any re-marshalled map. */
export function removeCNIConfig(existingConfig: string, file: string): string {
  const conf = parseMap(existingConfig, `CNI config file ${file}`);
  const plugins = pluginsOf(conf, file);
  const i = plugins.findIndex((p) => p.type === PLUGIN_TYPE);
  if (i >= 0) plugins.splice(i, 1);
  return goJson({ ...conf, plugins }, true);
}

/**
 * The file kubelet uses as the node's network: .conf/.conflist files sorted by name, the first that
 * parses and has a type (.conf) or a non-empty plugin list (.conflist). Base name, or an error.
 */
export function getDefaultCNINetwork(confDir: string): string {
  let names: string[];
  try {
    names = readdirSync(confDir, { withFileTypes: true })
      .filter((d) => !d.isDirectory() && (d.name.endsWith('.conf') || d.name.endsWith('.conflist')))
      .map((d) => d.name);
  } catch (e) {
    throw new CniConfigError(`cannot read CNI network directory ${confDir}: ${(e as Error).message}`);
  }
  if (names.length === 0) throw new CniConfigError(`no networks found in ${confDir}`);
  names.sort();
  for (const name of names) {
    const file = path.join(confDir, name);
    let conf: JsonMap;
    try {
      conf = parseMap(readFileSync(file, 'utf8'), `CNI config file ${file}`);
    } catch (e) {
      log.warn(`Error loading CNI config file ${file}: ${(e as Error).message}`);
      continue;
    }
    if (name.endsWith('.conflist')) {
      if (!Array.isArray(conf.plugins) || conf.plugins.length === 0) {
        log.warn(`CNI config list ${file} has no networks, skipping`);
        continue;
      }
    } else if (typeof conf.type !== 'string' || conf.type === '') {
      log.warn(`Error loading CNI config file ${file}: no 'type'; perhaps this is a .conflist?`);
      continue;
    }
    return name;
  }
  throw new CniConfigError(`no valid networks found in ${confDir}`);
}

/**
 * The file to write. Standalone: the configured name (or YYY-mesh-cni.conf) at once. Chained: waits
 * (watching the directory) until the primary configuration, or the named one, exists; a missing .conf
 * whose .conflist exists (or the reverse) resolves to the existing one.
 */
export async function getCNIConfigFilepath(
  s: Pick<CniConfigSettings, 'cniConfName' | 'mountedCNINetDir' | 'chainedCNIPlugin'>,
  signal?: AbortSignal,
): Promise<string> {
  const dir = s.mountedCNINetDir;
  if (!s.chainedCNIPlugin) return path.join(dir, s.cniConfName || STANDALONE_CONF_NAME);

  const watcher = new ChangeWatcher([dir]);
  try {
    let name = s.cniConfName;
    while (name === '') {
      try {
        name = getDefaultCNINetwork(dir);
        break;
      } catch (e) {
        log.warn(`mesh CNI is configured as chained plugin, but cannot find existing CNI network config: ${(e as Error).message}`);
        log.info(`Waiting for CNI network config file to be written in ${dir}...`);
        await watcher.wait(signal);
      }
    }
    let file = path.join(dir, name);
    while (!existsSync(file)) {
      if (file.endsWith('.conf') && existsSync(`${file}list`)) {
        log.info(`${file} doesn't exist, but ${file}list does; Using it as the CNI config file instead.`);
        file = `${file}list`;
      } else if (file.endsWith('.conflist') && existsSync(file.slice(0, -4))) {
        log.info(`${file} doesn't exist, but ${file.slice(0, -4)} does; Using it as the CNI config file instead.`);
        file = file.slice(0, -4);
      } else {
        log.info(`CNI config file ${file} does not exist. Waiting for file to be written...`);
        await watcher.wait(signal);
      }
    }
    log.debug(`CNI config file ${file} exists, proceeding`);
    return file;
  } finally {
    watcher.close();
  }
}

/** Writes the configuration and returns the path it ended up at (a chained .conf becomes .conflist). */
export async function createCNIConfigFile(s: CniConfigSettings, signal?: AbortSignal): Promise<string> {
  let content = pluginConfigJson(s);
  let file = await getCNIConfigFilepath(s, signal);
  if (s.chainedCNIPlugin) {
    let existing: string;
    try {
      existing = await readFile(file, 'utf8');
    } catch {
      throw new CniConfigError(`CNI config file ${file} removed during configuration`);
    }
    try {
      content = insertCNIConfig(content, existing);
    } catch (e) {
      throw new CniConfigError(`${file}: ${(e as Error).message}`);
    }
  }
  await atomicWrite(file, content, CNI_CONFIG_MODE);
  if (s.chainedCNIPlugin && file.endsWith('.conf')) {
    log.info(`Renaming ${file} extension to .conflist`);
    await rename(file, `${file}list`);
    file = `${file}list`;
  }
  log.info(`created CNI config ${file}`);
  log.debug(`CNI config: ${content}`);
  return file;
}

/**
 * Why the installed configuration is no longer what we wrote, or undefined when it is intact: another
 * file took over as the node's network (chained, no fixed name), the file is gone, or our entry is.
 */
export function checkValidCNIConfig(
  s: Pick<CniConfigSettings, 'mountedCNINetDir' | 'cniConfName' | 'chainedCNIPlugin'>,
  file: string,
): string | undefined {
  let primary: string;
  try {
    primary = path.join(s.mountedCNINetDir, getDefaultCNINetwork(s.mountedCNINetDir));
  } catch (e) {
    return (e as Error).message;
  }
  if (primary !== file) {
    if (s.cniConfName !== '' || !s.chainedCNIPlugin) log.warn(`CNI config file "${file}" preempted by "${primary}"`);
    else return `CNI config file "${file}" preempted by "${primary}"`;
  }
  if (!existsSync(file)) return `CNI config file removed: ${file}`;
  let conf: JsonMap;
  try {
    conf = parseMap(readFileSync(file, 'utf8'), `CNI config file ${file}`);
  } catch (e) {
    return (e as Error).message;
  }
  if (s.chainedCNIPlugin) {
    let plugins: JsonMap[];
    try {
      plugins = pluginsOf(conf, file);
    } catch (e) {
      return (e as Error).message;
    }
    if (plugins.some((p) => p.type === PLUGIN_TYPE)) return undefined;
    return `mesh-cni CNI config removed from CNI config file: ${file}`;
  }
  if (conf.type !== PLUGIN_TYPE) return `mesh-cni CNI config file modified: ${file}`;
  return undefined;
}

/** Uninstall of the configuration: our entry out of the list, or the standalone file removed. */
export async function removeCNIConfigFile(chained: boolean, file: string): Promise<void> {
  if (!existsSync(file)) return;
  if (chained) {
    log.info(`removing mesh CNI config from CNI config file: ${file}`);
    const text = removeCNIConfig(await readFile(file, 'utf8'), file);
    await atomicWrite(file, text, CNI_CONFIG_MODE);
  } else {
    log.info(`removing mesh CNI config file: ${file}`);
    await rm(file);
  }
}
