// A plain ADS client for tests that read what the daemon serves: one SotW stream per type, resources
// decoded with the generated Envoy protos, every response ACKed (as Envoy does), the latest state kept
// so a test waits for a condition instead of sleeping.
import { create, type JsonObject } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { ClusterSchema, type Cluster } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema, type Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../src/gen/envoy/config/route/v3/route_pb';
import { AggregatedDiscoveryService } from '../../src/gen/envoy/service/discovery/v3/ads_pb';
import { DiscoveryRequestSchema, type DiscoveryRequest, type DiscoveryResponse } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { grpcClientConstructor } from '../../src/lib/xds/grpc';
import { TYPE_URL } from '../../src/lib/xds/type-urls';

const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);

export const CDS = TYPE_URL.cluster;
export const EDS = TYPE_URL.endpoint;
export const LDS = TYPE_URL.listener;
export const RDS = TYPE_URL.route;

type Decoded = { [CDS]: Cluster; [EDS]: ClusterLoadAssignment; [LDS]: Listener; [RDS]: RouteConfiguration };

const SCHEMA = { [CDS]: ClusterSchema, [EDS]: ClusterLoadAssignmentSchema, [LDS]: ListenerSchema, [RDS]: RouteConfigurationSchema } as const;

/** A sidecar node in `namespace` (Istio's node ID form, metadata as the agent sends it). */
export function sidecarNode(namespace: string, ip = '10.200.0.9', name = 'client'): { id: string; metadata: JsonObject } {
  return {
    id: `sidecar~${ip}~${name}.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, MESH_VERSION: '1.26.0', INSTANCE_IPS: ip, LABELS: { app: name }, CLUSTER_ID: 'Orchestrator' },
  };
}

export type XdsType = keyof Decoded;

/** One SotW subscription: latest resources by name, every response ACKed (or NACKed, when asked), waiters woken on change. */
export class XdsWatch<T extends XdsType> {
  private readonly client: InstanceType<typeof AdsClient>;
  private readonly call: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  /** Latest resources, by name. */
  resources = new Map<string, Decoded[T]>();
  /** Responses received so far, and when the last one was ACKed (ms since epoch). */
  responses = 0;
  lastAckAt = 0;
  ended: grpc.StatusObject | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    address: string,
    node: { id: string; metadata: JsonObject },
    readonly typeUrl: T,
    names: string[] = [],
    /** Answers a response with a NACK of this message instead of an ACK, when it returns one. */
    nack?: (r: DiscoveryResponse) => string | undefined,
  ) {
    this.client = new AdsClient(address, grpc.credentials.createInsecure());
    this.call = this.client.streamAggregatedResources();
    this.call.on('data', (r: DiscoveryResponse) => {
      const next = new Map<string, Decoded[T]>();
      for (const any of r.resources) {
        const m = anyUnpack(any, SCHEMA[typeUrl] as never) as Decoded[T];
        next.set(resourceName(typeUrl, m), m);
      }
      // SotW: CDS/LDS answers hold the whole set; EDS/RDS answers hold what changed of what was asked.
      if (typeUrl === CDS || typeUrl === LDS) this.resources = next;
      else for (const [k, v] of next) this.resources.set(k, v);
      this.responses++;
      const rejected = nack?.(r);
      if (rejected !== undefined)
        this.send({ typeUrl, responseNonce: r.nonce, resourceNames: names, errorDetail: { code: 3, message: rejected } as never });
      else this.send({ typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce, resourceNames: names });
      this.lastAckAt = Date.now();
      this.wake();
    });
    this.call.on('status', (s: grpc.StatusObject) => {
      this.ended = s;
      this.wake();
    });
    this.call.on('error', () => undefined);
    this.send({ node: create(NodeSchema, { id: node.id, metadata: node.metadata }), typeUrl, resourceNames: names });
  }

  private send(init: Partial<Omit<DiscoveryRequest, '$typeName'>>): void {
    this.call.write(create(DiscoveryRequestSchema, init as never));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Resolves with the check's value once it is truthy; rejects after `timeoutMs` with `what` and the last state. */
  async until<R>(check: (w: this) => R | undefined | false, what: string, timeoutMs = 15_000): Promise<R> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = check(this);
      if (v) return v;
      if (this.ended) throw new Error(`ADS stream ended (${this.ended.code} ${this.ended.details}) while waiting for ${what}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; have ${[...this.resources.keys()].join(', ') || 'nothing'}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

function resourceName(typeUrl: XdsType, m: Decoded[XdsType]): string {
  if (typeUrl === EDS) return (m as ClusterLoadAssignment).clusterName;
  return (m as Cluster | Listener | RouteConfiguration).name;
}

export interface EdsEndpoint {
  address: string;
  port: number;
  health: number;
  locality: string;
}

/** Endpoints of an assignment, sorted by address and port. */
export function endpointsOf(cla: ClusterLoadAssignment | undefined): EdsEndpoint[] {
  if (!cla) return [];
  const out: EdsEndpoint[] = [];
  for (const l of cla.endpoints) {
    const locality = l.locality ? `${l.locality.region}/${l.locality.zone}/${l.locality.subZone}` : '//';
    for (const e of l.lbEndpoints) {
      const ep = e.hostIdentifier.case === 'endpoint' ? e.hostIdentifier.value : undefined;
      const a = ep?.address?.address;
      if (a?.case !== 'socketAddress') continue;
      const port = a.value.portSpecifier.case === 'portValue' ? a.value.portSpecifier.value : 0;
      out.push({ address: a.value.address, port, health: e.healthStatus, locality });
    }
  }
  return out.sort((x, y) => (x.address === y.address ? x.port - y.port : x.address < y.address ? -1 : 1));
}

/** `ip:port` of each endpoint, sorted. */
export function addressesOf(cla: ClusterLoadAssignment | undefined): string[] {
  return endpointsOf(cla).map((e) => `${e.address}:${e.port}`);
}
