// One simulated Envoy for the orchestrator scale benchmark, run as its own process (forked by
// ../orch-scale.mjs with `--import tsx` so the project's generated protos load from src/gen):
// CDS wildcard, then EDS for every EDS cluster received, every response ACKed as Envoy does. It reports
// to the driver over IPC: {kind:'initial', at, clusters} once EDS holds every cluster CDS named, then
// {kind:'eds', ackAt, clusters:[[name, 'ip:port,…'], …]} for each later EDS response (the clusters it
// carried). Times are ms since the epoch with sub-ms precision, comparable across processes.
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary } from '@bufbuild/protobuf';
import { AggregatedDiscoveryService } from '../../../src/gen/envoy/service/discovery/v3/ads_pb.ts';
import { DiscoveryRequestSchema, DiscoveryResponseSchema } from '../../../src/gen/envoy/service/discovery/v3/discovery_pb.ts';
import { ClusterSchema, Cluster_DiscoveryType } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb.ts';
import { ClusterLoadAssignmentSchema } from '../../../src/gen/envoy/config/endpoint/v3/endpoint_pb.ts';
import { grpcServiceDefinition } from '../../../src/lib/xds/grpc.ts';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const now = () => performance.timeOrigin + performance.now();

function clientConstructor() {
  const def = grpcServiceDefinition(AggregatedDiscoveryService);
  const m = def.streamAggregatedResources;
  return grpc.makeGenericClientConstructor(
    { streamAggregatedResources: { ...m, responseDeserialize: (b) => fromBinary(DiscoveryResponseSchema, b) } },
    AggregatedDiscoveryService.typeName,
  );
}

function addresses(cla) {
  const out = [];
  for (const l of cla.endpoints) {
    for (const e of l.lbEndpoints) {
      const a = e.hostIdentifier.case === 'endpoint' ? e.hostIdentifier.value.address?.address : undefined;
      if (a?.case === 'socketAddress') out.push(`${a.value.address}:${a.value.portSpecifier.value}`);
    }
  }
  return out.sort().join(',');
}

process.on('message', (msg) => {
  if (msg.cmd !== 'start') return;
  const Client = clientConstructor();
  const client = new Client(msg.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
  const stream = client.streamAggregatedResources();
  const state = { [CDS]: { version: '', nonce: '', names: [] }, [EDS]: { version: '', nonce: '', names: [] } };
  const have = new Set();
  let initial = false;
  let sentNode = false;
  const send = (typeUrl) => {
    const s = state[typeUrl];
    stream.write(
      create(DiscoveryRequestSchema, {
        typeUrl,
        versionInfo: s.version,
        responseNonce: s.nonce,
        resourceNames: s.names,
        ...(sentNode ? {} : { node: msg.node }),
      }),
    );
    sentNode = true;
  };
  stream.on('data', (res) => {
    const s = state[res.typeUrl];
    if (!s) return;
    s.version = res.versionInfo;
    s.nonce = res.nonce;
    if (res.typeUrl === CDS) {
      const eds = [];
      for (const r of res.resources) {
        const c = fromBinary(ClusterSchema, r.value);
        if (c.clusterDiscoveryType.case === 'type' && c.clusterDiscoveryType.value === Cluster_DiscoveryType.EDS)
          eds.push(c.edsClusterConfig?.serviceName || c.name);
      }
      send(CDS);
      const names = eds.sort();
      if (names.join() !== state[EDS].names.join()) {
        state[EDS].names = names;
        send(EDS);
      }
      return;
    }
    const clusters = res.resources.map((r) => {
      const cla = fromBinary(ClusterLoadAssignmentSchema, r.value);
      return [cla.clusterName, addresses(cla)];
    });
    send(EDS);
    const ackAt = now();
    for (const [n] of clusters) have.add(n);
    if (!initial) {
      if (state[EDS].names.length > 0 && state[EDS].names.every((n) => have.has(n))) {
        initial = true;
        process.send({ kind: 'initial', at: ackAt, clusters: state[EDS].names.length });
      }
      return;
    }
    process.send({ kind: 'eds', ackAt, clusters });
  });
  stream.on('error', (e) => process.send({ kind: 'error', message: `${e.code ?? ''} ${e.details ?? e.message}` }));
  send(CDS);
});
