// A minimal container runtime for CNI chains (what libcni does for containerd/CRI-O): each plugin of a
// .conflist is executed from CNI_PATH with the CNI_* variables, its configuration gets the list's name and
// cniVersion and the previous plugin's result; DEL runs the list in reverse with the cached ADD result.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Where Debian's containernetworking-plugins puts bridge, host-local, loopback… */
export const DEBIAN_CNI_DIR = '/usr/lib/cni';

/** Installs Debian's reference plugins when they are missing (CI runs as root); a reason when impossible. */
export function ensureReferencePlugins(): string | false {
  if (existsSync(path.join(DEBIAN_CNI_DIR, 'bridge')) && existsSync(path.join(DEBIAN_CNI_DIR, 'host-local'))) return false;
  if (process.getuid?.() !== 0) return 'containernetworking-plugins is not installed and installing it needs root';
  const r = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'containernetworking-plugins'], {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 300_000,
  });
  if (r.status !== 0 || !existsSync(path.join(DEBIAN_CNI_DIR, 'bridge'))) {
    return `apt-get install containernetworking-plugins failed: ${(r.stderr || r.stdout || '').slice(-500)}`;
  }
  return false;
}

export interface PluginRun {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

export interface ChainArgs {
  containerID: string;
  netns: string;
  ifName: string;
  /** CNI_ARGS */
  args: string;
  /** Directories searched for plugin binaries (CNI_PATH). */
  cniPath: readonly string[];
  env?: NodeJS.ProcessEnv;
}

/** Runs one plugin binary with a command and its configuration (a string is sent as it is). */
export function execPlugin(type: string, command: string, conf: unknown, a: ChainArgs): Promise<PluginRun> {
  const dir = a.cniPath.find((d) => existsSync(path.join(d, type)));
  if (!dir) return Promise.reject(new Error(`CNI plugin ${type} not found in ${a.cniPath.join(':')}`));
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(dir, type), [], {
      env: {
        PATH: process.env.PATH,
        ...a.env,
        CNI_COMMAND: command,
        CNI_CONTAINERID: a.containerID,
        CNI_NETNS: a.netns,
        CNI_IFNAME: a.ifName,
        CNI_ARGS: a.args,
        CNI_PATH: a.cniPath.join(':'),
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      let json: any;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    child.stdin.end(typeof conf === 'string' ? conf : JSON.stringify(conf));
  });
}

export class ChainError extends Error {
  constructor(
    readonly plugin: string,
    readonly run: PluginRun,
  ) {
    super(`CNI plugin ${plugin} failed (exit ${run.code}): ${run.stdout.trim()} ${run.stderr.trim().slice(-1500)}`);
  }
}

export interface Conflist {
  cniVersion: string;
  name: string;
  plugins: Array<Record<string, unknown> & { type: string }>;
}

/** The configuration a plugin of the list receives. */
function pluginConf(list: Conflist, plugin: Record<string, unknown>, prevResult: unknown): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin, name: list.name, cniVersion: list.cniVersion };
  if (prevResult !== undefined) conf.prevResult = prevResult;
  return conf;
}

/** ADD through the whole list; returns the final result (what the runtime caches). */
export async function chainAdd(list: Conflist, a: ChainArgs): Promise<unknown> {
  let prev: unknown;
  for (const p of list.plugins) {
    const r = await execPlugin(p.type, 'ADD', pluginConf(list, p, prev), a);
    if (r.code !== 0) throw new ChainError(p.type, r);
    prev = r.json;
  }
  return prev;
}

/** CHECK through the list with the cached result. */
export async function chainCheck(list: Conflist, cached: unknown, a: ChainArgs): Promise<void> {
  for (const p of list.plugins) {
    const r = await execPlugin(p.type, 'CHECK', pluginConf(list, p, cached), a);
    if (r.code !== 0) throw new ChainError(p.type, r);
  }
}

/** DEL in reverse order; `after` runs after each plugin (to look at the state between them). */
export async function chainDel(list: Conflist, cached: unknown, a: ChainArgs, after?: (type: string) => Promise<void>): Promise<void> {
  for (const p of [...list.plugins].reverse()) {
    const r = await execPlugin(p.type, 'DEL', pluginConf(list, p, cached), a);
    if (r.code !== 0) throw new ChainError(p.type, r);
    await after?.(p.type);
  }
}
