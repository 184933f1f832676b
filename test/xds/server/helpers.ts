// Test fixtures for the ADS server: a tiny push context, fake generators that count their calls, a node
// parser, a real grpc-js server on 127.0.0.1:0, and raw SotW/delta ADS clients built with the adapter and
// the generated Envoy protos.
import { create, type JsonObject } from '@bufbuild/protobuf';
import { anyPack, anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import type { Proxy } from '../../../src/discovery/model';
import { ClusterSchema, type Cluster } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { NodeSchema, type Node } from '../../../src/gen/envoy/config/core/v3/base_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema } from '../../../src/gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../../../src/gen/envoy/config/route/v3/route_pb';
import { AggregatedDiscoveryService } from '../../../src/gen/envoy/service/discovery/v3/ads_pb';
import {
  DeltaDiscoveryRequestSchema,
  DiscoveryRequestSchema,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from '../../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { MemorySink, setSinks } from '../../../src/lib/log/index';
import { registry } from '../../../src/lib/metrics';
import { grpcClientConstructor } from '../../../src/lib/xds/grpc';
import { AdsServer, type AdsServerOptions } from '../../../src/xds/server/index';
import type { Generator, PushRequest } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import type { AdsSettings } from '../../../src/xds/server/settings';

/** Server logs go here unless a test captures them itself (then it restores this sink). */
export const quietSink = new MemorySink();
setSinks([quietSink]);

/** Captures log output for one test. */
export function captureLogs(t: { teardown(fn: () => void): void }): MemorySink {
  const sink = new MemorySink();
  setSinks([sink]);
  t.teardown(() => setSinks([quietSink]));
  return sink;
}

export const CDS = TYPE_URL.cluster;
export const EDS = TYPE_URL.endpoint;
export const LDS = TYPE_URL.listener;
export const RDS = TYPE_URL.route;

/** A push context small enough to write inline: cluster → endpoint IPs, listener names, route → vhost. */
export interface World {
  version: string;
  clusters: Record<string, string[]>;
  listeners: string[];
  routes: Record<string, string>;
}

export function world(
  version: string,
  clusters: Record<string, string[]>,
  listeners = ['0.0.0.0_80'],
  routes: Record<string, string> = { '80': 'vh' },
): World {
  return { version, clusters, listeners, routes };
}

export const HOST_A = 'a.default.svc.cluster.local';
export const HOST_B = 'b.default.svc.cluster.local';
export const CLUSTER_A = `outbound|80||${HOST_A}`;
export const CLUSTER_B = `outbound|80||${HOST_B}`;

export class FakeGenerators {
  calls: Record<string, number> = { [CDS]: 0, [EDS]: 0, [LDS]: 0, [RDS]: 0 };
  /** Names asked of EDS per call, to see what an incremental push regenerated. */
  edsAsked: string[][] = [];
  throwFor = new Set<string>();

  table(): Record<string, Generator<World>> {
    const count = (t: string) => {
      this.calls[t] = (this.calls[t] ?? 0) + 1;
      if (this.throwFor.has(t)) throw new Error(`boom generating ${t}`);
    };
    return {
      [CDS]: {
        generate: (_p, _w, req: PushRequest<World>) => {
          count(CDS);
          return {
            resources: Object.keys(req.push.clusters).map((name) => ({
              name,
              resource: anyPack(ClusterSchema, create(ClusterSchema, { name, connectTimeout: { seconds: 1n } })),
            })),
          };
        },
      },
      [EDS]: {
        generate: (_p, w, req: PushRequest<World>) => {
          count(EDS);
          this.edsAsked.push([...w.resourceNames].sort());
          const names = w.wildcard ? Object.keys(req.push.clusters) : [...w.resourceNames];
          return {
            resources: names
              .filter((n) => req.push.clusters[n] !== undefined)
              .map((name) => ({ name, resource: anyPack(ClusterLoadAssignmentSchema, cla(name, req.push.clusters[name] ?? [])) })),
          };
        },
      },
      [LDS]: {
        generate: (_p, _w, req: PushRequest<World>) => {
          count(LDS);
          return { resources: req.push.listeners.map((name) => ({ name, resource: anyPack(ListenerSchema, create(ListenerSchema, { name })) })) };
        },
      },
      [RDS]: {
        generate: (_p, w, req: PushRequest<World>) => {
          count(RDS);
          return {
            resources: [...w.resourceNames]
              .filter((n) => req.push.routes[n] !== undefined)
              .map((name) => ({
                name,
                resource: anyPack(
                  RouteConfigurationSchema,
                  create(RouteConfigurationSchema, { name, virtualHosts: [{ name: req.push.routes[name], domains: ['*'] }] }),
                ),
              })),
          };
        },
      },
    };
  }
}

function cla(name: string, ips: string[]): ClusterLoadAssignment {
  return create(ClusterLoadAssignmentSchema, {
    clusterName: name,
    endpoints: [
      {
        lbEndpoints: ips.map((ip) => ({
          hostIdentifier: {
            case: 'endpoint' as const,
            value: {
              address: {
                address: { case: 'socketAddress' as const, value: { address: ip, portSpecifier: { case: 'portValue' as const, value: 8080 } } },
              },
            },
          },
        })),
      },
    ],
  });
}

/** IPs of an unpacked ClusterLoadAssignment. */
export function claIps(any: Any): string[] {
  const c = anyUnpack(any, ClusterLoadAssignmentSchema) as ClusterLoadAssignment;
  return c.endpoints.flatMap((e) =>
    e.lbEndpoints.map((l) => {
      const ep = l.hostIdentifier.case === 'endpoint' ? l.hostIdentifier.value : undefined;
      const a = ep?.address?.address;
      return a?.case === 'socketAddress' ? a.value.address : '?';
    }),
  );
}

/** Resource names of a SotW response. */
export function names(res: DiscoveryResponse): string[] {
  return res.resources
    .map((a) => {
      if (a.typeUrl === CDS) return (anyUnpack(a, ClusterSchema) as Cluster).name;
      if (a.typeUrl === EDS) return (anyUnpack(a, ClusterLoadAssignmentSchema) as ClusterLoadAssignment).clusterName;
      if (a.typeUrl === LDS) return anyUnpack(a, ListenerSchema)?.name ?? '?';
      if (a.typeUrl === RDS) return anyUnpack(a, RouteConfigurationSchema)?.name ?? '?';
      return '?';
    })
    .sort();
}

/** Test stand-in for the push-context helper's node parser: `type~ip~pod.ns~ns.svc.cluster.local`. */
export function parseNode(node: Node): Proxy {
  const parts = node.id.split('~');
  if (parts.length !== 4) throw new Error(`node ID ${node.id} does not have four ~-separated parts`);
  const [type, ip, id, domain] = parts as [string, string, string, string];
  if (type !== 'sidecar' && type !== 'router') throw new Error(`invalid node type ${type} in the node ID`);
  const meta = (node.metadata ?? {}) as JsonObject;
  const ns = id.split('.')[1] ?? '';
  return {
    nodeId: node.id,
    type,
    ipAddresses: [ip],
    id,
    namespace: ns,
    dnsDomain: domain,
    metadata: {
      labels: {},
      namespace: ns,
      meshVersion: typeof meta.ISTIO_VERSION === 'string' ? meta.ISTIO_VERSION : undefined,
      serviceAccount: typeof meta.SERVICE_ACCOUNT === 'string' ? meta.SERVICE_ACCOUNT : undefined,
      raw: meta,
    },
    labels: {},
    proxyless: false,
  };
}

export function node(id = 'sidecar~10.0.0.1~app-1.default~default.svc.cluster.local', metadata: JsonObject = { ISTIO_VERSION: '1.26.0' }): Node {
  return create(NodeSchema, { id, metadata });
}

export interface TestServer {
  ads: AdsServer<World>;
  gens: FakeGenerators;
  address: string;
  grpcServer: grpc.Server;
  setWorld(w: World): void;
  close(): Promise<void>;
}

export async function startServer(
  initial: World,
  settings: Partial<AdsSettings> = {},
  extra: Partial<AdsServerOptions<World>> = {},
  credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure(),
  listener: 'plaintext' | 'tls' = 'plaintext',
): Promise<TestServer> {
  let current = initial;
  const gens = new FakeGenerators();
  const ads = new AdsServer<World>({
    generators: gens.table(),
    parseNode,
    pushContext: () => current,
    settings: { debounceAfterMs: 5, debounceMaxMs: 1000, ...settings },
    ...extra,
  });
  const grpcServer = new grpc.Server();
  ads.attach(grpcServer, { listener });
  const port = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    ads,
    gens,
    address: `127.0.0.1:${port}`,
    grpcServer,
    setWorld: (w) => {
      current = w;
    },
    close: async () => {
      await ads.stop(0);
      grpcServer.forceShutdown();
    },
  };
}

export const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);

/** Waits for items pushed by a stream, with a deadline instead of sleeps. */
class Inbox<T> {
  private readonly items: T[] = [];
  private waiters: Array<() => void> = [];
  ended: grpc.StatusObject | undefined;

  push(item: T): void {
    this.items.push(item);
    this.wake();
  }
  end(status: grpc.StatusObject): void {
    this.ended ??= status;
    this.wake();
  }
  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  async next(what: string, timeoutMs = 5000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) return item;
      if (this.ended) throw new Error(`stream ended (${this.ended.code} ${this.ended.details}) while waiting for ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
  async status(timeoutMs = 5000): Promise<grpc.StatusObject> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for the stream to end');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.ended;
  }
  pending(): number {
    return this.items.length;
  }
}

export interface ClientOptions {
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
}

function makeClient(address: string, o: ClientOptions): InstanceType<typeof AdsClient> {
  return new AdsClient(address, o.credentials ?? grpc.credentials.createInsecure(), o.channelOptions);
}

/** A test server on `initial` (see startServer) and one stream to it, both closed when the test ends. */
export async function serverWithStream<S extends { close(): void }>(
  t: { teardown(f: () => unknown): void },
  Stream: new (address: string) => S,
  initial: World,
  settings: Partial<AdsSettings> = {},
): Promise<{ srv: TestServer; s: S }> {
  const srv = await startServer(initial, settings);
  t.teardown(srv.close);
  const s = new Stream(srv.address);
  t.teardown(() => s.close());
  return { srv, s };
}

/** A raw SotW ADS stream. */
export class SotwStream {
  readonly client: InstanceType<typeof AdsClient>;
  readonly call: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  readonly inbox = new Inbox<DiscoveryResponse>();

  constructor(address: string, o: ClientOptions = {}) {
    this.client = makeClient(address, o);
    this.call = this.client.streamAggregatedResources();
    this.call.on('data', (r: DiscoveryResponse) => this.inbox.push(r));
    this.call.on('status', (s: grpc.StatusObject) => this.inbox.end(s));
    this.call.on('error', () => undefined);
  }

  send(init: Partial<Omit<DiscoveryRequest, '$typeName'>>): void {
    this.call.write(create(DiscoveryRequestSchema, init as never));
  }

  next(what = 'a response', timeoutMs?: number): Promise<DiscoveryResponse> {
    return this.inbox.next(what, timeoutMs);
  }

  /** Next response, which must be of this type. */
  async expect(typeUrl: string, timeoutMs?: number): Promise<DiscoveryResponse> {
    const r = await this.next(`a ${typeUrl} response`, timeoutMs);
    if (r.typeUrl !== typeUrl) throw new Error(`expected a ${typeUrl} response, got ${r.typeUrl} (${names(r).join(',')})`);
    return r;
  }

  ack(r: DiscoveryResponse, resourceNames: string[] = []): void {
    this.send({ typeUrl: r.typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce, resourceNames });
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** A raw delta ADS stream. */
export class DeltaStream {
  readonly client: InstanceType<typeof AdsClient>;
  readonly call: grpc.ClientDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;
  readonly inbox = new Inbox<DeltaDiscoveryResponse>();

  constructor(address: string, o: ClientOptions = {}) {
    this.client = makeClient(address, o);
    this.call = this.client.deltaAggregatedResources();
    this.call.on('data', (r: DeltaDiscoveryResponse) => this.inbox.push(r));
    this.call.on('status', (s: grpc.StatusObject) => this.inbox.end(s));
    this.call.on('error', () => undefined);
  }

  send(init: Partial<Omit<DeltaDiscoveryRequest, '$typeName'>>): void {
    this.call.write(create(DeltaDiscoveryRequestSchema, init as never));
  }

  async expect(typeUrl: string, timeoutMs?: number): Promise<DeltaDiscoveryResponse> {
    const r = await this.inbox.next(`a delta ${typeUrl} response`, timeoutMs);
    if (r.typeUrl !== typeUrl) throw new Error(`expected a delta ${typeUrl} response, got ${r.typeUrl}`);
    return r;
  }

  ack(r: DeltaDiscoveryResponse, more: Partial<Omit<DeltaDiscoveryRequest, '$typeName'>> = {}): void {
    this.send({ typeUrl: r.typeUrl, responseNonce: r.nonce, ...more });
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** Current value of a metric series (counter/gauge value, histogram count). */
export async function metricValue(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = registry.getSingleMetric(name);
  if (!m) return 0;
  const data = await m.get();
  let total = 0;
  for (const v of data.values) {
    const vl = v.labels as Record<string, string | number>;
    if (Object.entries(labels).every(([k, val]) => String(vl[k]) === val)) {
      if (String(data.type) === 'histogram') {
        if ((v as { metricName?: string }).metricName === `${name}_count`) total += v.value;
      } else {
        total += v.value;
      }
    }
  }
  return total;
}

export function pushReq(push: World, init: Partial<PushRequest<World>> = {}): PushRequest<World> {
  return {
    full: true,
    configsUpdated: new Set(),
    edsUpdates: new Set(),
    reasons: new Map([['config', 1]]),
    push,
    start: Date.now(),
    ...init,
  };
}
