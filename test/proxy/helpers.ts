// Fixtures for the proxy engine tests: a real ADS server (src/xds/server) serving resources built with
// the generated schemas, HTTP backends on 127.0.0.1:0, bootstraps, and the engine started in-process.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import pathMod from 'node:path';
import { create, fromJson, type DescMessage, type JsonObject, type MessageShape } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import type { Proxy } from '../../src/discovery/model';
import { ClusterSchema, type Cluster } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import type { Node } from '../../src/gen/envoy/config/core/v3/base_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema, type Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../src/gen/envoy/config/route/v3/route_pb';
import { SecretSchema, type Secret } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { MemorySink, setSinks } from '../../src/lib/log/index';
import { parseBootstrap } from '../../src/proxy/bootstrap';
import { startEngine, type Engine, type EngineOptions } from '../../src/proxy/engine';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { LoggerRegistry } from '../../src/proxy/log';
import { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { AdsServer, newPushRequest, type AdsSettings } from '../../src/xds/server/index';
import type { Generator, Resource, WatchedResource } from '../../src/xds/types';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import { EC_P256_KEY } from '../helpers/openssl';

setSinks([new MemorySink()]);

export function pb<D extends DescMessage>(schema: D, json: JsonObject): MessageShape<D> {
  return fromJson(schema, json, { registry: proxyTypeRegistry() });
}

export const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
export const ROUTER = {
  name: 'envoy.filters.http.router',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
};

export interface World {
  version: string;
  clusters: Cluster[];
  endpoints: ClusterLoadAssignment[];
  listeners: Listener[];
  routes: RouteConfiguration[];
  secrets?: Secret[];
}

function gen<T>(list: (w: World) => T[], nameOf: (t: T) => string, schema: DescMessage): Generator<World> {
  return {
    generate(_p: Proxy, watched: WatchedResource, req) {
      const all: Resource[] = list(req.push).map((t) => ({ name: nameOf(t), resource: anyPack(schema, t as MessageShape<typeof schema>) }));
      return { resources: watched.wildcard ? all : all.filter((r) => watched.resourceNames.has(r.name)) };
    },
  };
}

function parseNode(node: Node): Proxy {
  const [type, ip, id, domain] = node.id.split('~') as [string, string, string, string];
  const ns = id?.split('.')[1] ?? '';
  return {
    nodeId: node.id,
    type: type === 'router' ? 'router' : 'sidecar',
    ipAddresses: [ip ?? '127.0.0.1'],
    id: id ?? 'x',
    namespace: ns,
    dnsDomain: domain ?? '',
    metadata: { labels: {}, namespace: ns, raw: (node.metadata ?? {}) as JsonObject },
    labels: {},
    proxyless: false,
  } as Proxy;
}

export interface TestAds {
  ads: AdsServer<World>;
  address: string;
  port: number;
  world(): World;
  /** Replaces the world and pushes it to every connected proxy. */
  update(w: Partial<World>): void;
  /** The last NACK message the server recorded for a type, if any. */
  lastNack(typeUrl: string): string | undefined;
  ackedVersion(typeUrl: string): string | undefined;
  close(): Promise<void>;
}

let versionSeq = 0;

export async function startAds(initial: Omit<World, 'version'>, port = 0, settings: Partial<AdsSettings> = {}): Promise<TestAds> {
  let current: World = { version: `v${++versionSeq}`, ...initial };
  const ads = new AdsServer<World>({
    generators: {
      [TYPE_URL.cluster]: gen(
        (w) => w.clusters,
        (c) => c.name,
        ClusterSchema,
      ),
      [TYPE_URL.endpoint]: gen(
        (w) => w.endpoints,
        (c) => c.clusterName,
        ClusterLoadAssignmentSchema,
      ),
      [TYPE_URL.listener]: gen(
        (w) => w.listeners,
        (l) => l.name,
        ListenerSchema,
      ),
      [TYPE_URL.route]: gen(
        (w) => w.routes,
        (r) => r.name,
        RouteConfigurationSchema,
      ),
      [TYPE_URL.secret]: gen(
        (w) => w.secrets ?? [],
        (s) => s.name,
        SecretSchema,
      ),
    },
    parseNode,
    pushContext: () => current,
    settings: { debounceAfterMs: 1, debounceMaxMs: 50, ...settings },
    versionFor: (p) => p.version,
  });
  const server = new grpc.Server();
  ads.attach(server);
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const watch = (typeUrl: string) => ads.connections()[0]?.watches.find((w) => w.typeUrl === typeUrl);
  return {
    ads,
    address: `127.0.0.1:${bound}`,
    port: bound,
    world: () => current,
    update: (w) => {
      current = { ...current, ...w, version: `v${++versionSeq}` };
      ads.pushAll(newPushRequest(current), { immediate: true });
    },
    lastNack: (t) => watch(t)?.lastNack?.message,
    ackedVersion: (t) => watch(t)?.versionAcked,
    close: async () => {
      await ads.stop(0);
      server.forceShutdown();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// resources

export function sock(address: string, port: number): JsonObject {
  return { socket_address: { address, port_value: port } };
}

/** A tcp_proxy network filter to `cluster`, its stats under `statPrefix`. */
export function tcpProxy(statPrefix: string, cluster: string): JsonObject {
  return {
    name: 'envoy.filters.network.tcp_proxy',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: statPrefix, cluster },
  };
}

/**
 * Istio's virtualOutbound listener on 127.0.0.1:`port` (the sidecar's 15001): connections handed off by their
 * original destination, a connection to the listener itself black-holed, anything else passed through.
 */
export function virtualOutbound(port: number): JsonObject {
  return {
    name: 'virtualOutbound',
    address: sock('127.0.0.1', port),
    use_original_dst: true,
    traffic_direction: 'OUTBOUND',
    filter_chains: [
      {
        name: 'virtualOutbound-blackhole',
        filter_chain_match: { destination_port: port },
        filters: [tcpProxy('BlackHoleCluster', 'BlackHoleCluster')],
      },
      { name: 'virtualOutbound-catchall-tcp', filters: [tcpProxy('PassthroughCluster', 'PassthroughCluster')] },
    ],
  };
}

/** The original_dst listener filter: the connection's destination read back from the redirect (SO_ORIGINAL_DST). */
export const ORIGINAL_DST: JsonObject = {
  name: 'envoy.filters.listener.original_dst',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst' },
};

/**
 * Istio's virtualInbound listener on 127.0.0.1:`port` (the sidecar's 15006): original_dst and http_inspector
 * listener filters, a connection to the listener itself black-holed, then `chains`; `extra` adds listener fields.
 */
export function virtualInbound(port: number, chains: JsonObject[], extra: JsonObject = {}): JsonObject {
  return {
    name: 'virtualInbound',
    address: sock('127.0.0.1', port),
    traffic_direction: 'INBOUND',
    listener_filters: [
      ORIGINAL_DST,
      {
        name: 'envoy.filters.listener.http_inspector',
        typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector' },
      },
    ],
    ...extra,
    filter_chains: [
      {
        name: 'virtualInbound-blackhole',
        filter_chain_match: { destination_port: port },
        filters: [tcpProxy('BlackHoleCluster', 'BlackHoleCluster')],
      },
      ...chains,
    ],
  };
}

export function edsCluster(name: string, extra: JsonObject = {}): Cluster {
  return pb(ClusterSchema, {
    name,
    type: 'EDS',
    connect_timeout: '1s',
    eds_cluster_config: { eds_config: { ads: {}, initial_fetch_timeout: '0s' }, service_name: name },
    ...extra,
  });
}

/** A STATIC cluster of `ports` on 127.0.0.1 as bootstrap JSON (static_resources), with a short connect timeout. */
export function staticClusterJson(name: string, ports: number[], extra: JsonObject = {}): JsonObject {
  return {
    name,
    type: 'STATIC',
    connect_timeout: '0.5s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: ports.map((p) => ({ endpoint: { address: sock('127.0.0.1', p) } })) }] },
    ...extra,
  };
}

/** The same cluster as a Cluster message for the ADS server, with a 1s connect timeout. */
export function staticCluster(name: string, ports: number[], extra: JsonObject = {}): Cluster {
  return pb(ClusterSchema, staticClusterJson(name, ports, { connect_timeout: '1s', ...extra }));
}

export interface Ep {
  port: number;
  address?: string;
  health?: string;
  weight?: number;
  priority?: number;
}

export function cla(name: string, eps: Ep[]): ClusterLoadAssignment {
  const byP = new Map<number, Ep[]>();
  for (const e of eps) byP.set(e.priority ?? 0, [...(byP.get(e.priority ?? 0) ?? []), e]);
  return pb(ClusterLoadAssignmentSchema, {
    cluster_name: name,
    endpoints: [...byP.entries()].map(([priority, list]) => ({
      priority,
      lb_endpoints: list.map((e) => ({
        endpoint: { address: sock(e.address ?? '127.0.0.1', e.port) },
        ...(e.health ? { health_status: e.health } : {}),
        ...(e.weight ? { load_balancing_weight: e.weight } : {}),
      })),
    })),
  });
}

export function hcm(opts: {
  statPrefix?: string;
  rds?: string;
  routeConfig?: JsonObject;
  httpFilters?: JsonObject[];
  extra?: JsonObject;
}): JsonObject {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': HCM_TYPE,
      stat_prefix: opts.statPrefix ?? 'ingress',
      ...(opts.rds ? { rds: { config_source: { ads: {}, initial_fetch_timeout: '0s' }, route_config_name: opts.rds } } : {}),
      ...(opts.routeConfig ? { route_config: opts.routeConfig } : {}),
      http_filters: [...(opts.httpFilters ?? []), ROUTER],
      ...(opts.extra ?? {}),
    },
  };
}

/** A bootstrap of static `listeners` and `clusters` for `node`, its admin on 127.0.0.1:`adminPort` (0: any). */
export function staticBootstrap(node: JsonObject, listeners: JsonObject[], clusters: JsonObject[], adminPort = 0): JsonObject {
  return { node, admin: { address: sock('127.0.0.1', adminPort) }, static_resources: { listeners, clusters } };
}

/** A listener on 127.0.0.1:`port` with one filter chain of the network filter `h`, as bootstrap JSON. */
export function listenerJson(name: string, port: number, h: JsonObject, extra: JsonObject = {}): JsonObject {
  return { name, address: sock('127.0.0.1', port), filter_chains: [{ filters: [h] }], ...extra };
}

/** Route config `r` of one virtual host `v` for every domain, with `routes`, as JSON (an HCM's inline route_config). */
export function anyHost(routes: JsonObject[]): JsonObject {
  return { name: 'r', virtual_hosts: [{ name: 'v', domains: ['*'], routes }] };
}

export function httpListener(name: string, port: number, h: JsonObject, extra: JsonObject = {}): Listener {
  return pb(ListenerSchema, listenerJson(name, port, h, extra));
}

export function routeConfig(name: string, vhosts: JsonObject[], extra: JsonObject = {}): RouteConfiguration {
  return pb(RouteConfigurationSchema, { name, virtual_hosts: vhosts, ...extra });
}

// ---------------------------------------------------------------------------------------------
// processes and sockets

/** A TCP server on 127.0.0.1 that hands each connection to `onConnection`; close() ends open connections too. */
export async function tcpServer(onConnection: (c: net.Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
  const conns = new Set<net.Socket>();
  const s = net.createServer((c) => {
    conns.add(c);
    c.on('close', () => conns.delete(c));
    onConnection(c);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    port: (s.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        for (const c of conns) c.destroy();
        s.close(() => r());
      }),
  };
}

export interface Backend {
  name: string;
  port: number;
  server: http.Server;
  /** Requests seen: method, url, headers. */
  seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/** An HTTP/1.1 backend answering `<name> <path>` with x-backend: <name>. */
export async function backend(name: string, handler?: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Backend> {
  const seen: Backend['seen'] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    if (handler) return handler(req, res);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('x-backend', name);
      res.end(`${name} ${req.url}${chunks.length ? ` body=${Buffer.concat(chunks).toString()}` : ''}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    name,
    port: (server.address() as net.AddressInfo).port,
    server,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export function adsBootstrap(adsAddress: string, extra: JsonObject = {}): JsonObject {
  const [host, port] = adsAddress.split(':');
  return {
    node: { id: 'router~127.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local', cluster: 'gw', metadata: { NAMESPACE: 'mesh-system' } },
    admin: { address: sock('127.0.0.1', 0) },
    dynamic_resources: {
      ads_config: {
        api_type: 'GRPC',
        transport_api_version: 'V3',
        set_node_on_first_message_only: true,
        grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }],
      },
      cds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
      lds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
    },
    static_resources: {
      clusters: [
        {
          name: 'xds-grpc',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock(host!, Number(port)) } }] }] },
          typed_extension_protocol_options: {
            'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
              '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
        },
      ],
    },
    ...extra,
  };
}

export interface RunningEngine {
  engine: Engine;
  admin: string;
  logs: string[];
  close(): Promise<void>;
}

export async function startProxy(bootstrap: JsonObject, opts: EngineOptions = {}): Promise<RunningEngine> {
  const logs: string[] = [];
  const engine = await startEngine(parseBootstrap(bootstrap, 'test-bootstrap'), {
    logWriter: (l) => logs.push(l),
    xdsBackoff: { baseMs: 100, maxMs: 1000 },
    ...opts,
  });
  const a = engine.adminAddress!;
  return { engine, admin: `http://${a.host}:${a.port}`, logs, close: () => engine.close() };
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP/1.1 request without connection reuse (so each request is a fresh connection). */
export function request(
  port: number,
  path: string,
  opts: { host?: string; method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: opts.method ?? 'GET',
        headers: { ...(opts.host ? { host: opts.host } : {}), ...(opts.headers ?? {}) },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.setTimeout(opts.timeoutMs ?? 10_000, () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end(opts.body);
  });
}

export async function adminGet(r: RunningEngine, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${r.admin}${path}`);
  return { status: res.status, body: await res.text() };
}

export async function adminPost(r: RunningEngine, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${r.admin}${path}`, { method: 'POST' });
  return { status: res.status, body: await res.text() };
}

export function statValue(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

// ---------------------------------------------------------------------------------------------
// certificates (openssl, as users make them)

export interface TestCert {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export interface TestPki {
  dir: string;
  ca: TestCert;
  /** A leaf signed by the CA for the given DNS/URI SANs. */
  leaf(name: string, sans: string[]): TestCert;
  cleanup(): void;
}

export function makePki(): TestPki {
  const dir = mkdtempSync(pathMod.join(tmpdir(), 'mesh-proxy-pki-'));
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const caKey = pathMod.join(dir, 'ca.key');
  const caCert = pathMod.join(dir, 'ca.crt');
  run(['req', '-x509', ...EC_P256_KEY, '-keyout', caKey, '-out', caCert, '-days', '2', '-subj', '/CN=mesh test CA']);
  const read = (certFile: string, keyFile: string): TestCert => ({
    certFile,
    keyFile,
    cert: readFileSync(certFile, 'utf8'),
    key: readFileSync(keyFile, 'utf8'),
  });
  return {
    dir,
    ca: read(caCert, caKey),
    leaf(name, sans) {
      const key = pathMod.join(dir, `${name}.key`);
      const csr = pathMod.join(dir, `${name}.csr`);
      const crt = pathMod.join(dir, `${name}.crt`);
      const ext = pathMod.join(dir, `${name}.ext`);
      execFileSync('sh', ['-c', `printf 'subjectAltName=${sans.join(',')}\\n' > '${ext}'`]);
      run(['req', ...EC_P256_KEY, '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
      run(['x509', '-req', '-in', csr, '-CA', caCert, '-CAkey', caKey, '-CAcreateserial', '-out', crt, '-days', '2', '-extfile', ext]);
      return read(crt, key);
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * An ADS server holding EDS clusters `a` (endpoint port 1001) and `b` (2001), and muxes to it as an engine makes
 * them: the main thread's (`relay: false`, to the server) and a worker's relay mux (`relay: true`, fed by the
 * main thread's onRelay), all for the node `nodeId`, closed at teardown.
 */
export async function relayRig(
  t: { teardown(fn: () => unknown): void },
  nodeId: string,
  a: string,
  b: string,
): Promise<{ ads: TestAds; loggers: LoggerRegistry; mux(o: { relay: boolean; delta?: boolean }): GrpcMux }> {
  const ads = await startAds({
    clusters: [edsCluster(a), edsCluster(b)],
    endpoints: [cla(a, [{ port: 1001 }]), cla(b, [{ port: 2001 }])],
    listeners: [],
    routes: [],
  });
  t.teardown(() => ads.close());
  const loggers = new LoggerRegistry('warning', () => undefined);
  const mux = (o: { relay: boolean; delta?: boolean }) => {
    const m = new GrpcMux({
      node: create(NodeSchema, { id: nodeId }),
      setNodeOnFirstMessageOnly: true,
      log: loggers.get('config'),
      typeRegistry: proxyTypeRegistry(),
      target: o.relay ? 'unused:1' : ads.address,
      credentials: grpc.credentials.createInsecure(),
      service: 'ads',
      ...(o.relay ? { relay: true } : { delta: o.delta ?? false }),
    });
    t.teardown(() => m.close());
    return m;
  };
  return { ads, loggers, mux };
}
