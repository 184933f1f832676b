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
import { AggregatedDiscoveryService } from '../gen/envoy/service/discovery/v3/ads_pb';
import { DiscoveryRequestSchema, type DiscoveryResponse } from '../gen/envoy/service/discovery/v3/discovery_pb';
import { CommandError, type RunContext } from '../cli/context';
import { grpcClientConstructor } from '../lib/xds/grpc';
import { validateXdsOptions, type XdsOptions } from './xds-options';
import { describeDialFailure, silenceIpServerNameWarning } from './orch-errors';

export { readDefaultsFile, validateXdsOptions, xdsOptions, type XdsOptions } from './xds-options';

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
