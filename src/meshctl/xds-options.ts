// Where meshctl finds the control plane, without loading the gRPC transport (xds.ts): the XDS flag group's values
// from the flags, their MESHCTL_* variables, then $MESHCONFIG (default $HOME/.meshctl/config.yaml), as istioctl
// reads ~/.istioctl/config.yaml. Kept apart so that a command that finds no address (`meshctl version` with no
// daemon configured) answers without compiling grpc-js and the xDS messages.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CommandError, type RunContext } from '../cli/context';

export interface XdsOptions {
  address: string;
  plaintext: boolean;
  insecure: boolean;
  certDir: string;
  authority: string;
  timeoutMs: number;
  xdsLabel: string;
  xdsPort: number;
  /** The system namespace (--meshNamespace), for the node we present. */
  meshNamespace: string;
}

const FILE_KEYS: Readonly<Record<string, string>> = {
  'xds-address': 'xds-address',
  'cert-dir': 'cert-dir',
  authority: 'authority',
  insecure: 'insecure',
  plaintext: 'plaintext',
  'xds-port': 'xds-port',
  meshnamespace: 'meshNamespace',
  istionamespace: 'meshNamespace',
};

/** The defaults file ($MESHCONFIG, default $HOME/.meshctl/config.yaml): flag name → value. Missing file: empty. */
export function readDefaultsFile(env: NodeJS.ProcessEnv): Map<string, unknown> {
  const home = env['HOME'] ?? os.homedir();
  const file = (env['MESHCONFIG'] || path.join(home, '.meshctl', 'config.yaml')).replace(/^\$HOME(?=\/|$)/, home);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw new CommandError(`open ${file}: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new CommandError(`${file}: ${(e as Error).message.split('\n')[0]}`);
  }
  const out = new Map<string, unknown>();
  if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
    for (const [k, v] of Object.entries(doc)) {
      const flag = FILE_KEYS[k.toLowerCase()];
      if (flag) out.set(flag, v);
    }
  }
  return out;
}

function envSet(ctx: RunContext, name: string): boolean {
  const v = ctx.env[name];
  return v !== undefined && v !== '';
}

/**
 * The XDS flag group's values: command line, then MESHCTL_* env, then the defaults file, then the table's
 * default. Commands that do not declare the flags (proxy-config, proxy-stats) still find the daemon this way.
 */
export function xdsOptions(ctx: RunContext): XdsOptions {
  const file = readDefaultsFile(ctx.env);
  const pick = <T>(flag: string, envName: string, conv: (v: unknown) => T, def: T): T => {
    if (flag in ctx.flags) {
      if (ctx.changed.has(flag) || envSet(ctx, envName) || !file.has(flag)) return ctx.flags[flag] as T;
    } else if (envSet(ctx, envName)) return conv(ctx.env[envName]);
    return file.has(flag) ? conv(file.get(flag)) : def;
  };
  const str = (v: unknown) => (v === null || v === undefined ? '' : String(v));
  const bool = (v: unknown) => v === true || /^(1|t|T|true|TRUE|True)$/.test(String(v));
  return {
    address: pick('xds-address', 'MESHCTL_XDS_ADDRESS', str, ''),
    plaintext: pick('plaintext', 'MESHCTL_PLAINTEXT', bool, false),
    insecure: pick('insecure', 'MESHCTL_INSECURE', bool, false),
    certDir: pick('cert-dir', 'MESHCTL_CERT_DIR', str, ''),
    authority: pick('authority', 'MESHCTL_AUTHORITY', str, ''),
    timeoutMs: (ctx.flags['timeout'] as number | undefined) ?? 30_000,
    xdsLabel: (ctx.flags['xds-label'] as string | undefined) ?? '',
    xdsPort: pick('xds-port', 'MESHCTL_XDS_PORT', (v) => Number(v), 15012),
    meshNamespace: pick('meshNamespace', 'MESHCTL_MESHNAMESPACE', str, 'mesh-system'),
  };
}

/** Istio's ValidateControlPlaneFlags plus what a cluster-less meshctl needs to know where the daemon is. */
export function validateXdsOptions(o: XdsOptions): void {
  if (o.address && o.xdsLabel) throw new CommandError('either --xds-address or --xds-label, not both');
  if (o.plaintext && o.certDir) throw new CommandError('either --plaintext or --cert-dir, not both');
  if (!o.address) {
    throw new CommandError(
      'no control plane address: give --xds-address <host:port>, set MESHCTL_XDS_ADDRESS, or put xds-address in ' +
        '$HOME/.meshctl/config.yaml; finding meshd pods by --xds-label needs the orchestrator API, which this command does not use yet',
    );
  }
}
