// Simulated Envoy proxies for the xDS scale benchmark, run as their own process (forked by
// ../xds-scale.mjs with `--import tsx` so the project's generated protos load from src/gen):
//   node --import tsx scripts/bench/xds-scale/clients.mjs   (IPC channel required)
//
// Each client opens one StreamAggregatedResources stream (state of the world) and behaves like Envoy:
// CDS wildcard first, EDS for the EDS clusters it received, then LDS wildcard and RDS for the route names
// in the received listeners' HttpConnectionManagers, ACKing every response with its version and nonce.
// Clients share grpc channels, `perChannel` streams on each, every channel its own HTTP/2 connection.
//
// With `vhds` the clients use DeltaAggregatedResources instead and ask for VHDS (DeltaAdsClient).
//
// IPC protocol (driver → clients): {cmd:'start', address, clients, perChannel, services, routerEvery, ramp, vhds,
// routerLabels?}
// and {cmd:'stop'}. Clients → driver: {kind:'events', events:[[client, type, version, bytes, resources,
// ackAt], …]} batched, {kind:'initial', client, at}, {kind:'streamError', client, message} and
// {kind:'started', at}. Times are ms since the epoch with sub-ms precision (performance.timeOrigin-based),
// comparable across processes on one machine.
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary } from '@bufbuild/protobuf';
import { AggregatedDiscoveryService } from '../../../src/gen/envoy/service/discovery/v3/ads_pb.ts';
import {
  DeltaDiscoveryRequestSchema,
  DeltaDiscoveryResponseSchema,
  DiscoveryRequestSchema,
  DiscoveryResponseSchema,
} from '../../../src/gen/envoy/service/discovery/v3/discovery_pb.ts';
import { ClusterSchema, Cluster_EdsClusterConfigSchema, Cluster_DiscoveryType } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb.ts';
import { ListenerSchema } from '../../../src/gen/envoy/config/listener/v3/listener_pb.ts';
import { FilterChainSchema, FilterSchema } from '../../../src/gen/envoy/config/listener/v3/listener_components_pb.ts';
import {
  HttpConnectionManagerSchema,
  RdsSchema,
} from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.ts';
import { ClusterLoadAssignmentSchema } from '../../../src/gen/envoy/config/endpoint/v3/endpoint_pb.ts';
import { RouteConfigurationSchema } from '../../../src/gen/envoy/config/route/v3/route_pb.ts';
import { AnySchema } from '@bufbuild/protobuf/wkt';
import { NodeSchema } from '../../../src/gen/envoy/config/core/v3/base_pb.ts';
import { grpcServiceDefinition } from '../../../src/lib/xds/grpc.ts';
import { nodeFor } from './nodes.mjs';

const TYPE = {
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  endpoint: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  virtualHost: 'type.googleapis.com/envoy.config.route.v3.VirtualHost',
};
/** Short type codes in events: 0 CDS, 1 EDS, 2 LDS, 3 RDS, 4 VHDS. */
const TYPE_CODE = new Map([TYPE.cluster, TYPE.endpoint, TYPE.listener, TYPE.route, TYPE.virtualHost].map((t, i) => [t, i]));
/** node.client_features entry asking the server for VHDS (src/lib/xds/vhds.ts). */
const VHDS_FEATURE = 'mesh.io/vhds';
const HCM_TYPE = `type.googleapis.com/${HttpConnectionManagerSchema.typeName}`;

const now = () => performance.timeOrigin + performance.now();

// ---- minimal protobuf wire reading --------------------------------------------------------------
// Every client decodes every cluster and listener it receives; a full fromBinary of ~2 500 clusters per
// proxy would cost this process more CPU than the daemon spends. Only a few fields are needed, so they
// are read straight off the wire; their numbers come from the generated descriptors, not from here.

const fieldNo = (schema, name) => {
  const f = schema.fields.find((x) => x.name === name);
  if (!f) throw new Error(`${schema.typeName} has no field ${name}`);
  return f.number;
};
const F = {
  clusterName: fieldNo(ClusterSchema, 'name'),
  clusterType: fieldNo(ClusterSchema, 'type'),
  clusterEds: fieldNo(ClusterSchema, 'eds_cluster_config'),
  edsServiceName: fieldNo(Cluster_EdsClusterConfigSchema, 'service_name'),
  listenerChains: fieldNo(ListenerSchema, 'filter_chains'),
  listenerDefaultChain: fieldNo(ListenerSchema, 'default_filter_chain'),
  chainFilters: fieldNo(FilterChainSchema, 'filters'),
  filterTypedConfig: fieldNo(FilterSchema, 'typed_config'),
  anyTypeUrl: fieldNo(AnySchema, 'type_url'),
  anyValue: fieldNo(AnySchema, 'value'),
  hcmRds: fieldNo(HttpConnectionManagerSchema, 'rds'),
  rdsRouteName: fieldNo(RdsSchema, 'route_config_name'),
  claName: fieldNo(ClusterLoadAssignmentSchema, 'cluster_name'),
  routeName: fieldNo(RouteConfigurationSchema, 'name'),
  routeVhds: fieldNo(RouteConfigurationSchema, 'vhds'),
};
const utf8 = new TextDecoder();

/** Calls fn(fieldNumber, value) for each field: varints as numbers, length-delimited as subarrays. */
function eachField(buf, fn) {
  let pos = 0;
  const varint = () => {
    let x = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      const b = buf[pos++];
      if (b === undefined) throw new Error('truncated varint');
      x += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) return x;
      mul *= 128;
    }
    throw new Error('varint too long');
  };
  while (pos < buf.length) {
    const tag = varint();
    const no = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0:
        fn(no, varint());
        break;
      case 1:
        pos += 8;
        break;
      case 2: {
        const len = varint();
        if (pos + len > buf.length) throw new Error('truncated field');
        fn(no, buf.subarray(pos, pos + len));
        pos += len;
        break;
      }
      case 5:
        pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${tag & 7}`);
    }
  }
}

/** The EDS resource name of a cluster, or undefined when it is not an EDS cluster. */
function edsName(clusterBytes) {
  let name = '';
  let type = 0;
  let service = '';
  eachField(clusterBytes, (no, v) => {
    if (no === F.clusterName) name = utf8.decode(v);
    else if (no === F.clusterType) type = v;
    else if (no === F.clusterEds) eachField(v, (n2, v2) => n2 === F.edsServiceName && (service = utf8.decode(v2)));
  });
  return type === Cluster_DiscoveryType.EDS ? service || name : undefined;
}

/** Route names the HttpConnectionManagers of a listener fetch over RDS. */
function routeNames(listenerBytes, out) {
  const chain = (c) =>
    eachField(c, (no, f) => {
      if (no !== F.chainFilters) return;
      eachField(f, (n2, any) => {
        if (n2 !== F.filterTypedConfig) return;
        let typeUrl = '';
        let value;
        eachField(any, (n3, v3) => {
          if (n3 === F.anyTypeUrl) typeUrl = utf8.decode(v3);
          else if (n3 === F.anyValue) value = v3;
        });
        if (typeUrl !== HCM_TYPE || !value) return;
        eachField(value, (n4, rds) => n4 === F.hcmRds && eachField(rds, (n5, name) => n5 === F.rdsRouteName && out.add(utf8.decode(name))));
      });
    });
  eachField(listenerBytes, (no, v) => (no === F.listenerChains || no === F.listenerDefaultChain) && chain(v));
}

// ---- the ADS client ------------------------------------------------------------------------------

/** ADS method definitions from the generated service; responses also report their wire size. */
function adsClientConstructor() {
  const def = grpcServiceDefinition(AggregatedDiscoveryService);
  const m = def.streamAggregatedResources;
  const method = { ...m, responseDeserialize: (bytes) => ({ bytes: bytes.length, res: fromBinary(DiscoveryResponseSchema, bytes) }) };
  const d = def.deltaAggregatedResources;
  const delta = { ...d, responseDeserialize: (bytes) => ({ bytes: bytes.length, res: fromBinary(DeltaDiscoveryResponseSchema, bytes) }) };
  return grpc.makeGenericClientConstructor(
    { streamAggregatedResources: method, deltaAggregatedResources: delta },
    AggregatedDiscoveryService.typeName,
  );
}

const sameSet = (a, b) => a.size === b.size && [...a].every((x) => b.has(x));

class AdsClient {
  constructor(index, node, channel, report) {
    this.index = index;
    this.node = node;
    this.report = report;
    this.state = new Map(); // typeUrl → {version, nonce, names:Set, received:Set, requested:boolean, acked:boolean}
    this.initial = false;
    this.closed = false;
    this.stream = channel.streamAggregatedResources();
    this.sentNode = false;
    this.stream.on('data', (msg) => this.onResponse(msg));
    this.stream.on('error', (err) => {
      if (!this.closed) report.error(index, `${err.code ?? ''} ${err.details ?? err.message}`);
      this.closed = true;
    });
    this.stream.on('end', () => {
      if (!this.closed) report.error(index, 'stream ended by the server');
      this.closed = true;
    });
  }

  typeState(typeUrl) {
    let s = this.state.get(typeUrl);
    if (!s) this.state.set(typeUrl, (s = { version: '', nonce: '', names: new Set(), received: new Set(), requested: false, acked: false }));
    return s;
  }

  request(typeUrl) {
    const s = this.typeState(typeUrl);
    s.requested = true;
    const req = create(DiscoveryRequestSchema, {
      versionInfo: s.version,
      responseNonce: s.nonce,
      typeUrl,
      resourceNames: [...s.names],
      ...(this.sentNode ? {} : { node: this.node }),
    });
    this.sentNode = true;
    this.stream.write(req);
  }

  start() {
    this.request(TYPE.cluster);
  }

  /** A by-name type follows a new name set: subscribe when it changed (Envoy sends it with the last nonce). */
  follow(typeUrl, names) {
    const s = this.typeState(typeUrl);
    if (s.requested ? sameSet(s.names, names) : names.size === 0) return;
    s.names = names;
    for (const n of [...s.received]) if (!names.has(n)) s.received.delete(n);
    this.request(typeUrl);
  }

  onResponse({ bytes, res }) {
    if (this.closed) return;
    const typeUrl = res.typeUrl;
    const s = this.typeState(typeUrl);
    s.version = res.versionInfo;
    s.nonce = res.nonce;
    let follow;
    if (typeUrl === TYPE.cluster) {
      const eds = new Set();
      for (const r of res.resources) {
        const n = edsName(r.value);
        if (n !== undefined) eds.add(n);
      }
      follow = [TYPE.endpoint, eds];
    } else if (typeUrl === TYPE.listener) {
      const routes = new Set();
      for (const r of res.resources) routeNames(r.value, routes);
      follow = [TYPE.route, routes];
    } else {
      // By-name types may answer with just the changed resources: keep what was received.
      for (const r of res.resources) {
        const n = nameOf(typeUrl, r.value);
        if (n !== undefined) s.received.add(n);
      }
    }
    // ACK: same names, the response's version and nonce.
    this.request(typeUrl);
    s.acked = true;
    const ackAt = now();
    if (follow) this.follow(...follow);
    if (typeUrl === TYPE.cluster && !this.typeState(TYPE.listener).requested) this.request(TYPE.listener);
    this.report.event(this.index, TYPE_CODE.get(typeUrl) ?? -1, res.versionInfo, bytes, res.resources.length, ackAt);
    if (!this.initial && this.complete()) {
      this.initial = true;
      this.report.initial(this.index, ackAt);
    }
  }

  /** Initial config: CDS and LDS acknowledged, and every EDS and RDS name subscribed has arrived. */
  complete() {
    for (const t of [TYPE.cluster, TYPE.listener]) if (!this.state.get(t)?.acked) return false;
    for (const t of [TYPE.endpoint, TYPE.route]) {
      const s = this.state.get(t);
      if (!s) return false;
      for (const n of s.names) if (!s.received.has(n)) return false;
    }
    return true;
  }

  close() {
    this.closed = true;
    try {
      this.stream.cancel();
    } catch {
      // already gone
    }
  }
}

/**
 * The same proxy over DeltaAggregatedResources, as Envoy with VHDS: CDS and LDS legacy wildcard, EDS and
 * RDS subscribed by name as clusters and listeners name them, and — when a route configuration names a
 * `vhds` source — VirtualHost wildcard. Every response is ACKed with its nonce.
 */
class DeltaAdsClient {
  constructor(index, node, channel, report) {
    this.index = index;
    this.node = create(NodeSchema, { ...node, clientFeatures: [...node.clientFeatures, VHDS_FEATURE] });
    this.report = report;
    this.state = new Map(); // typeUrl → {names:Set subscribed, held:Map name → derived info, requested, acked}
    this.initial = false;
    this.closed = false;
    this.sentNode = false;
    this.stream = channel.deltaAggregatedResources();
    this.stream.on('data', (msg) => this.onResponse(msg));
    this.stream.on('error', (err) => {
      if (!this.closed) report.error(index, `${err.code ?? ''} ${err.details ?? err.message}`);
      this.closed = true;
    });
    this.stream.on('end', () => {
      if (!this.closed) report.error(index, 'stream ended by the server');
      this.closed = true;
    });
  }

  typeState(typeUrl) {
    let s = this.state.get(typeUrl);
    if (!s) this.state.set(typeUrl, (s = { names: new Set(), held: new Map(), requested: false, acked: false }));
    return s;
  }

  write(fields) {
    const req = create(DeltaDiscoveryRequestSchema, { ...fields, ...(this.sentNode ? {} : { node: this.node }) });
    this.sentNode = true;
    this.stream.write(req);
  }

  start() {
    this.typeState(TYPE.cluster).requested = true;
    this.write({ typeUrl: TYPE.cluster });
  }

  /** A by-name type follows a new name set: subscribe to what is new, unsubscribe from what went away. */
  follow(typeUrl, names) {
    const s = this.typeState(typeUrl);
    if (!s.requested && names.size === 0) return;
    const sub = [...names].filter((n) => !s.names.has(n));
    const unsub = [...s.names].filter((n) => !names.has(n));
    if (s.requested && sub.length === 0 && unsub.length === 0) return;
    s.requested = true;
    s.names = names;
    for (const n of unsub) s.held.delete(n);
    this.write({ typeUrl, resourceNamesSubscribe: sub, resourceNamesUnsubscribe: unsub });
  }

  onResponse({ bytes, res }) {
    if (this.closed) return;
    const typeUrl = res.typeUrl;
    const s = this.typeState(typeUrl);
    for (const n of res.removedResources) s.held.delete(n);
    for (const r of res.resources) {
      const value = r.resource?.value;
      if (typeUrl === TYPE.cluster) s.held.set(r.name, value ? edsName(value) : undefined);
      else if (typeUrl === TYPE.listener) {
        const routes = new Set();
        if (value) routeNames(value, routes);
        s.held.set(r.name, routes);
      } else if (typeUrl === TYPE.route) s.held.set(r.name, value ? hasVhds(value) : false);
      else s.held.set(r.name, true);
    }
    this.write({ typeUrl, responseNonce: res.nonce });
    s.acked = true;
    const ackAt = now();
    if (typeUrl === TYPE.cluster) {
      this.follow(TYPE.endpoint, new Set([...s.held.values()].filter((n) => n !== undefined)));
      if (!this.typeState(TYPE.listener).requested) {
        this.typeState(TYPE.listener).requested = true;
        this.write({ typeUrl: TYPE.listener });
      }
    } else if (typeUrl === TYPE.listener) {
      const routes = new Set();
      for (const rs of s.held.values()) for (const n of rs) routes.add(n);
      this.follow(TYPE.route, routes);
    } else if (typeUrl === TYPE.route && !this.typeState(TYPE.virtualHost).requested && [...s.held.values()].some(Boolean)) {
      this.typeState(TYPE.virtualHost).requested = true;
      this.write({ typeUrl: TYPE.virtualHost });
    }
    this.report.event(this.index, TYPE_CODE.get(typeUrl) ?? -1, res.systemVersionInfo, bytes, res.resources.length, ackAt);
    if (!this.initial && this.complete()) {
      this.initial = true;
      this.report.initial(this.index, ackAt);
    }
  }

  complete() {
    for (const t of [TYPE.cluster, TYPE.listener]) if (!this.state.get(t)?.acked) return false;
    for (const t of [TYPE.endpoint, TYPE.route]) {
      const s = this.state.get(t);
      if (!s) return false;
      for (const n of s.names) if (!s.held.has(n)) return false;
    }
    const vh = this.state.get(TYPE.virtualHost);
    return !vh?.requested || vh.acked;
  }

  close() {
    this.closed = true;
    try {
      this.stream.cancel();
    } catch {
      // already gone
    }
  }
}

/** Whether a RouteConfiguration names a vhds source. */
function hasVhds(bytes) {
  let found = false;
  eachField(bytes, (no) => {
    if (no === F.routeVhds) found = true;
  });
  return found;
}

/** Name of an EDS or RDS resource. */
function nameOf(typeUrl, bytes) {
  const field = typeUrl === TYPE.endpoint ? F.claName : F.routeName;
  let name;
  eachField(bytes, (no, v) => {
    if (no === field && name === undefined && typeof v !== 'number') name = utf8.decode(v);
  });
  return name;
}

// ---- process -------------------------------------------------------------------------------------

function main() {
  if (!process.send) {
    console.error('clients.mjs is started by scripts/bench/xds-scale.mjs over an IPC channel');
    process.exit(2);
  }
  const clients = [];
  const channels = [];
  let batch = [];
  const flush = () => {
    if (batch.length === 0) return;
    process.send({ kind: 'events', events: batch });
    batch = [];
  };
  const flushTimer = setInterval(flush, 50);
  const report = {
    event: (c, type, version, bytes, resources, ackAt) => {
      batch.push([c, type, version, bytes, resources, ackAt]);
      if (batch.length >= 1000) flush();
    },
    initial: (c, at) => {
      flush();
      process.send({ kind: 'initial', client: c, at });
    },
    error: (c, message) => {
      flush();
      process.send({ kind: 'streamError', client: c, message });
    },
  };
  const stop = () => {
    flush();
    clearInterval(flushTimer);
    for (const c of clients) c.close();
    for (const ch of channels) ch.close();
    // Give grpc-js a moment to send the cancels, then leave regardless.
    setTimeout(() => process.exit(0), 200).unref();
  };
  process.on('message', (m) => {
    if (m.cmd === 'start') {
      const Ads = adsClientConstructor();
      const options = {
        // Without a local pool, grpc-js would share one HTTP/2 connection between all channels.
        'grpc.use_local_subchannel_pool': 1,
        'grpc.max_receive_message_length': 256 * 1024 * 1024,
      };
      const startedAt = now();
      // All streams at once (a control plane restart), or `ramp` at a time, each batch once the previous
      // one holds its initial config (proxies starting gradually).
      const batch = m.ramp > 0 ? m.ramp : m.clients;
      const open = () => {
        const end = Math.min(m.clients, clients.length + batch);
        for (let c = clients.length; c < end; c++) {
          if (c % m.perChannel === 0) channels.push(new Ads(m.address, grpc.credentials.createInsecure(), options));
          const Client = m.vhds ? DeltaAdsClient : AdsClient;
          const client = new Client(c, nodeFor(c, m.services, m.routerEvery, m.routerLabels), channels[channels.length - 1], report);
          clients.push(client);
          client.start();
        }
      };
      const initial = report.initial;
      let done = 0;
      report.initial = (c, at) => {
        initial(c, at);
        done++;
        if (done === clients.length && clients.length < m.clients) open();
      };
      open();
      process.send({ kind: 'started', at: startedAt });
    } else if (m.cmd === 'stop') {
      stop();
    }
  });
  // The driver going away (crash, kill) must not leave this process behind.
  process.on('disconnect', () => {
    stop();
    setTimeout(() => process.exit(0), 500).unref();
  });
  process.send({ kind: 'ready' });
}

main();
