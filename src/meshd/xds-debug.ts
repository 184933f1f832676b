// Debug over the ADS stream (Istio's StatusGen and DebugGen): what `istioctl proxy-status`, `x version`
// and `x internal-debug` ask the daemon for when they talk xDS to it instead of going through the
// orchestrator API. Three type URLs:
//   istio.io/debug/syncz        one envoy.service.status.v3.ClientConfig per connected proxy: its ID,
//                               CLUSTER_ID/NAMESPACE/version metadata and the sync state of each watched type
//   istio.io/debug/config_dump  the admin ConfigDump sections of the one proxy named by the request
//   istio.io/debug              any /debug/<name> page, its body carried as the Any value
// Who gets them (debugAccessDenied): a caller whose TCP peer is loopback (meshctl beside the daemon, no cluster
// needed), or one the authenticator chain named with an identity of the system namespace (a client certificate
// on the TLS port). Istio's DebugGen asks for an authenticated identity (and lets other namespaces read a few
// pages filtered to their own proxies); its StatusGen (syncz, config_dump) does not check the caller in the
// sources we read. Here every debug type needs one of the two, on both ports: an unauthenticated client of the
// plaintext port reads no proxy's config. Other namespaces get nothing (no per-namespace filtering here).
import { create, fromJson, type JsonObject, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { anyPack, timestampFromMs, type Any } from '@bufbuild/protobuf/wkt';
import { ConfigDumpSchema } from '../gen/envoy/admin/v3/config_dump_pb';
import { ClientConfigSchema, ClientConfig_GenericXdsConfigSchema, ConfigStatus } from '../gen/envoy/service/status/v3/csds_pb';
import { buildInfo } from '../lib/buildinfo';
import type { Proxy } from '../discovery/model';
import type { GenerateResult, Generator, Resource, WatchedResource } from '../xds/types';
import { envoyTypeRegistry } from '../lib/xds/registry';
import type { XdsConnectionInfo } from './providers';
import { status } from '@grpc/grpc-js';
import { hostOf } from '../ca/authn/xfcc';
import { parseSpiffeIdentity } from '../lib/spiffe';
import type { XdsAuthDenied } from '../xds/server/auth';
import type { RequestCaller } from '../xds/server/options';
import { isLoopbackAddress } from '../serve/address';

export const DEBUG_TYPE = 'istio.io/debug';
export const TYPE_DEBUG_SYNCZ = `${DEBUG_TYPE}/syncz`;
export const TYPE_DEBUG_CONFIG_DUMP = `${DEBUG_TYPE}/config_dump`;

export function isDebugType(typeUrl: string): boolean {
  return typeUrl === DEBUG_TYPE || typeUrl.startsWith(`${DEBUG_TYPE}/`);
}

/**
 * Whether a stream may have a debug type: undefined when it may (or the type is not a debug type). The peer
 * address is the TCP connection's, so a remote client of a daemon listening on 0.0.0.0 is not loopback; a
 * forwarder on the daemon's host (a port-forward, a local proxy) does make its callers loopback, as for
 * Istio's HTTP debug endpoints.
 */
export function debugAccessDenied(c: RequestCaller, typeUrl: string, systemNamespace: string): XdsAuthDenied | undefined {
  if (!isDebugType(typeUrl)) return undefined;
  if (isLoopbackAddress(hostOf(c.peer))) return undefined;
  if (!c.identities || c.identities.length === 0) {
    return {
      ok: false,
      code: status.UNAUTHENTICATED,
      message: `authentication required: ${typeUrl} is served to loopback callers and to callers authenticated as an identity of namespace ${systemNamespace} (a client certificate on the TLS xDS port)`,
    };
  }
  for (const raw of c.identities) {
    const id = parseSpiffeIdentity(raw);
    if (!(id instanceof Error) && id.namespace === systemNamespace) return undefined;
  }
  return {
    ok: false,
    code: status.PERMISSION_DENIED,
    message: `the debug info is not available for identity [${c.identities.join(' ')}]: ${typeUrl} needs an identity of namespace ${systemNamespace}`,
  };
}

/** Istio's IstioControlPlaneInstance as the control_plane.identifier of every response. */
export function controlPlaneIdentifier(id: string): string {
  // Istio uses POD_NAME (empty outside a pod); the host name tells daemons apart without one.
  return JSON.stringify({ Component: 'meshd', ID: id, Info: buildInfo() });
}

/** A connection is a proxy (not a CLI asking questions) when it sent a ProxyConfig (Istio's isProxy). */
export function isProxyConnection(c: XdsConnectionInfo): boolean {
  return c.proxy.metadata.raw['PROXY_CONFIG'] !== undefined;
}

function syncStatus(w: XdsConnectionInfo['watched'][number]): ConfigStatus {
  if (w.lastError) return ConfigStatus.ERROR;
  if (!w.nonceSent) return ConfigStatus.NOT_SENT;
  if (w.nonceAcked === w.nonceSent) return ConfigStatus.SYNCED;
  return ConfigStatus.STALE;
}

/** The syncz resources: one ClientConfig per proxy connection. */
export function synczResources(conns: readonly XdsConnectionInfo[]): Resource[] {
  const out: Resource[] = [];
  for (const c of [...conns].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    if (!isProxyConnection(c)) continue;
    const md = c.proxy.metadata;
    const metadata: JsonObject = {};
    if (md.clusterId) metadata['CLUSTER_ID'] = md.clusterId;
    if (md.namespace ?? c.proxy.namespace) metadata['NAMESPACE'] = md.namespace ?? c.proxy.namespace;
    if (md.meshVersion) {
      metadata['MESH_VERSION'] = md.meshVersion;
      metadata['ISTIO_VERSION'] = md.meshVersion;
    }
    const configs: MessageInitShape<typeof ClientConfig_GenericXdsConfigSchema>[] = [...c.watched]
      .sort((a, b) => (a.typeUrl < b.typeUrl ? -1 : a.typeUrl > b.typeUrl ? 1 : 0))
      .filter((w) => !isDebugType(w.typeUrl))
      .map((w) => ({
        typeUrl: w.typeUrl,
        configStatus: syncStatus(w),
        lastUpdated: timestampFromMs(w.lastSendTime ?? 0),
        ...(w.lastError ? { errorState: { lastUpdateAttempt: timestampFromMs(w.lastSendTime ?? 0), details: w.lastError } } : {}),
      }));
    const cc = create(ClientConfigSchema, { node: { id: c.proxy.id, metadata }, genericXdsConfigs: configs });
    out.push({ name: c.proxy.id, resource: anyPack(ClientConfigSchema, cc) });
  }
  return out;
}

/** Istio's getProxyConnection: the first connection whose ID contains `proxyID`. */
function findConnection(conns: readonly XdsConnectionInfo[], proxyID: string): XdsConnectionInfo | undefined {
  return [...conns].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).find((c) => c.id.includes(proxyID));
}

export interface DebugSources {
  connections(): readonly XdsConnectionInfo[];
  /** ConfigDump JSON of a connection (undefined: gone). */
  configDump(connectionId: string): unknown;
  /** Runs `/debug/<name>` and returns what it wrote; undefined until the daemon's debug pages exist. */
  debugPage?(name: string): { status: number; body: string } | undefined;
}

function names(w: WatchedResource): string[] {
  return [...w.resourceNames];
}

class SynczGen implements Generator<unknown> {
  constructor(private readonly src: DebugSources) {}
  generate(): GenerateResult {
    return { resources: synczResources(this.src.connections()) };
  }
}

class ConfigDumpGen implements Generator<unknown> {
  constructor(private readonly src: DebugSources) {}
  generate(_proxy: Proxy, w: WatchedResource): GenerateResult {
    const n = names(w);
    if (n.length !== 1) return { resources: [] };
    const con = findConnection(this.src.connections(), n[0]!);
    if (!con) return { resources: [] };
    const dump = this.src.configDump(con.id);
    if (dump === undefined) return { resources: [] };
    const cd = fromJson(ConfigDumpSchema, dump as JsonValue, { registry: envoyTypeRegistry(), ignoreUnknownFields: true });
    // Istio sends the sections unnamed; naming them after the request keeps them through the watch's name filter.
    return { resources: cd.configs.map((a: Any) => ({ name: n[0]!, resource: a })) };
  }
}

class DebugPageGen implements Generator<unknown> {
  constructor(private readonly src: DebugSources) {}
  generate(_proxy: Proxy, w: WatchedResource): GenerateResult {
    const n = names(w);
    if (n.length !== 1) throw new Error('exactly one debug request is required');
    const page = this.src.debugPage?.(n[0]!) ?? { status: 404, body: '404 page not found\n' };
    return {
      resources: [
        { name: n[0]!, resource: { $typeName: 'google.protobuf.Any', typeUrl: DEBUG_TYPE, value: new Uint8Array(Buffer.from(page.body)) } as Any },
      ],
    };
  }
}

/** The generators of the debug types, by type URL. */
export function debugGenerators<P>(src: DebugSources): Record<string, Generator<P>> {
  return {
    [TYPE_DEBUG_SYNCZ]: new SynczGen(src) as Generator<P>,
    [TYPE_DEBUG_CONFIG_DUMP]: new ConfigDumpGen(src) as Generator<P>,
    [DEBUG_TYPE]: new DebugPageGen(src) as Generator<P>,
  };
}
