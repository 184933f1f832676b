// Engine workers' config path (src/proxy/xds/grpc-mux.ts): the main thread's mux relays every response
// it accepts, encoded, and a worker's relay mux applies them with the same decoding; a worker that starts
// late gets what the main thread holds (snapshot) and then the live responses. Against the real ADS server,
// over state of the world and delta, with one stream to the server whatever the number of relays.
import t from 'tap';
import type { Message } from '@bufbuild/protobuf';
import { ClusterSchema } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import type { GrpcMux, RelayedResponse } from '../../src/proxy/xds/grpc-mux';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import { cla, edsCluster, relayRig } from './helpers';
import { waitForValue } from '../helpers/wait';

const A = 'outbound|80||a.demo.svc.cluster.local';
const B = 'outbound|80||b.demo.svc.cluster.local';

interface Seen {
  clusters: string[];
  /** endpoint cluster name → ports */
  endpoints: Map<string, number[]>;
}

function watch(mux: GrpcMux): Seen {
  const seen: Seen = { clusters: [], endpoints: new Map() };
  mux.subscribe(TYPE_URL.cluster, ClusterSchema, undefined, { onUpdate: (r) => void (seen.clusters = r.map((x) => x.name).sort()) });
  const ports = (m: Message) =>
    (m as ClusterLoadAssignment).endpoints.flatMap((e) =>
      e.lbEndpoints.map((l) =>
        l.hostIdentifier.case === 'endpoint' &&
        l.hostIdentifier.value.address?.address.case === 'socketAddress' &&
        l.hostIdentifier.value.address.address.value.portSpecifier.case === 'portValue'
          ? l.hostIdentifier.value.address.address.value.portSpecifier.value
          : 0,
      ),
    );
  mux.subscribe(TYPE_URL.endpoint, ClusterLoadAssignmentSchema, [A, B], {
    onUpdate: (r) => {
      for (const x of r) seen.endpoints.set(x.name, ports(x.message));
    },
  });
  return seen;
}

for (const delta of [false, true]) {
  t.test(`${delta ? 'delta' : 'state of the world'}: relays see what the main thread applied, late or live`, async (t) => {
    const { ads, mux } = await relayRig(t, 'router~127.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', A, B);
    const main = mux({ relay: false, delta });
    const relayed: RelayedResponse[] = [];
    main.onRelay = (r) => relayed.push(r);
    const mainSeen = watch(main);
    main.start();
    await waitForValue('the main mux applied CDS and EDS', () => mainSeen.endpoints.size === 2, { timeoutMs: 10_000, intervalMs: 20 });
    t.ok(relayed.length >= 2, 'accepted responses were relayed');
    t.equal(
      relayed.every((r) => r.delta === delta),
      true,
      'relayed as the wire protocol in use',
    );

    // a worker that starts now: the snapshot, then whatever comes next
    const late = mux({ relay: true });
    // responses may arrive before the worker subscribes (RDS after LDS): they wait for the subscription
    for (const r of main.snapshot()) late.receive(r);
    const lateSeen = watch(late);
    late.start();
    await waitForValue('the late relay applied the snapshot', () => lateSeen.endpoints.size === 2, { timeoutMs: 10_000, intervalMs: 20 });
    t.same(lateSeen.clusters, [A, B]);
    t.same(lateSeen.endpoints.get(A), [1001]);
    const live = relayed.length;
    main.onRelay = (r) => {
      relayed.push(r);
      late.receive(r);
    };

    ads.update({ endpoints: [cla(A, [{ port: 1002 }, { port: 1003 }]), cla(B, [{ port: 2001 }])] });
    await waitForValue('the main mux applied the endpoint update', () => mainSeen.endpoints.get(A)?.length === 2, {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    await waitForValue('the relay applied the live update', () => lateSeen.endpoints.get(A)?.length === 2, { timeoutMs: 10_000, intervalMs: 20 });
    t.same(lateSeen.endpoints.get(A)?.sort(), [1002, 1003]);
    t.ok(relayed.length > live);

    ads.update({ clusters: [edsCluster(A)], endpoints: [cla(A, [{ port: 1002 }, { port: 1003 }])] });
    await waitForValue('the relay saw the cluster removal', () => lateSeen.clusters.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
    t.same(lateSeen.clusters, [A]);
    t.equal(ads.ads.connections().length, 1, 'one stream to the server: relays have none');
  });
}
