// meshctl's line to the control plane (Istio's istioctl/pkg/xds + multixds): one ADS stream to the daemon
// at --xds-address, one DiscoveryRequest of a debug type (syncz, config_dump, a debug page), the first
// response, then the stream is closed. Transport by the XDS flag group: --plaintext, --cert-dir (client
// certificate, trusted root), --authority, --insecure, --timeout. Defaults come from the flags, their
// MESHCTL_* variables, then $MESHCONFIG (default $HOME/.meshctl/config.yaml), as istioctl reads
// ~/.istioctl/config.yaml.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create, type JsonObject } from '@bufbuild/protobuf';
import { parse as parseYaml } from 'yaml';
import { AggregatedDiscoveryService } from '../gen/envoy/service/discovery/v3/ads_pb';
import { DiscoveryRequestSchema, type DiscoveryResponse } from '../gen/envoy/service/discovery/v3/discovery_pb';
import { CommandError, type RunContext } from '../cli/context';
import { grpcClientConstructor } from '../lib/xds/grpc';
import { describeDialFailure, silenceIpServerNameWarning } from './orch-errors';

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

const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);

function credentials(o: XdsOptions): { creds: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  const options: grpc.ChannelOptions = { 'grpc.max_receive_message_length': -1 };
  if (o.plaintext) return { creds: grpc.credentials.createInsecure(), options };
  silenceIpServerNameWarning();
  const host = o.address.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  const serverName = o.authority || host;
  let root: Buffer | null = null;
  let key: Buffer | null = null;
  let chain: Buffer | null = null;
  if (o.certDir) {
    const read = (f: string) => {
      const p = path.join(o.certDir, f);
      try {
        return readFileSync(p);
      } catch (e) {
        throw new CommandError(`open ${p}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or directory' : (e as Error).message}`);
      }
    };
    root = read('root-cert.pem');
    key = read('key.pem');
    chain = read('cert-chain.pem');
  }
  // Without --cert-dir istioctl authenticates with an orchestrator token over TLS it does not verify; with no
  // orchestrator there is no token, so only the (unverified) TLS channel remains.
  const skipVerify = o.insecure || !o.certDir;
  const creds = grpc.credentials.createSsl(root, key, chain, skipVerify ? { checkServerIdentity: () => undefined, rejectUnauthorized: false } : {});
  options['grpc.ssl_target_name_override'] = serverName;
  options['grpc.default_authority'] = serverName;
  return { creds, options };
}

/** The first private IPv4 address of this host (adsc's getPrivateIPIfAvailable), else loopback. */
function localIp(): string {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** Sends one request and returns the first response of its type (Istio's GetXdsResponse). */
export async function xdsRequest(o: XdsOptions, typeUrl: string, resourceNames: readonly string[] = []): Promise<DiscoveryResponse> {
  validateXdsOptions(o);
  const { creds, options } = credentials(o);
  const client = new AdsClient(o.address, creds, options);
  const ns = o.meshNamespace || 'mesh-system';
  const metadata: JsonObject = { GENERATOR: 'event', SERVICE_ACCOUNT: 'default', NAMESPACE: ns };
  const req = create(DiscoveryRequestSchema, {
    typeUrl,
    resourceNames: [...resourceNames],
    node: { id: `sidecar~${localIp()}~meshctl.${ns}~${ns}.svc.cluster.local`, metadata },
  });
  try {
    return await new Promise<DiscoveryResponse>((resolve, reject) => {
      const deadline = Date.now() + o.timeoutMs;
      const call = client.streamAggregatedResources(new grpc.Metadata(), { deadline });
      let done = false;
      const finish = (err: Error | undefined, res?: DiscoveryResponse) => {
        if (done) return;
        done = true;
        call.cancel();
        if (err) reject(err);
        else resolve(res!);
      };
      call.on('data', (res: DiscoveryResponse) => {
        if (res.typeUrl === typeUrl) finish(undefined, res);
      });
      call.on('error', (e: grpc.ServiceError) => {
        if (e.code === grpc.status.DEADLINE_EXCEEDED)
          finish(new CommandError(`timeout waiting for a response from ${o.address} after ${o.timeoutMs / 1000}s`));
        else if (e.code === grpc.status.UNAVAILABLE) finish(new CommandError(describeDialFailure(o.address, e.details, !o.plaintext)));
        else finish(new CommandError(`ADSC: ${o.address}: ${grpc.status[e.code] ?? e.code}: ${e.details}`));
      });
      call.on('end', () => finish(new CommandError(`${o.address} closed the stream without answering ${typeUrl}`)));
      call.write(req);
    });
  } finally {
    client.close();
  }
}

/** Istio's IstioControlPlaneInstance from a response's control_plane.identifier. */
export interface ControlPlaneInstance {
  Component: string;
  ID: string;
  Info: { version: string; revision?: string; golang_version?: string; status?: string; tag?: string };
}

export function controlPlaneInfo(res: DiscoveryResponse): ControlPlaneInstance {
  if (!res.controlPlane) return { Component: 'MISSING', ID: 'MISSING', Info: { version: 'MISSING CP ID' } };
  try {
    return JSON.parse(res.controlPlane.identifier) as ControlPlaneInstance;
  } catch {
    return { Component: 'INVALID', ID: 'INVALID', Info: { version: 'INVALID CP ID' } };
  }
}
