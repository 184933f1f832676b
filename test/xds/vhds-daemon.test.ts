// VHDS with the built daemon: a delta client that advertises `mesh.io/vhds` gets route configurations that
// name a DELTA_GRPC vhds source and the virtual hosts as VirtualHost resources `<route config>/<vhost>`
// (Envoy's VHDS naming); an edit of one VirtualService sends that one virtual host, a deleted one is
// listed in removed_resources. Clients without the feature (a real Envoy) and SotW streams keep full RDS.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { VirtualHostSchema } from '../../src/gen/envoy/config/route/v3/route_components_pb';
import { RouteConfigurationSchema } from '../../src/gen/envoy/config/route/v3/route_pb';
import { ApiConfigSource_ApiType } from '../../src/gen/envoy/config/core/v3/config_source_pb';
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import type { DeltaDiscoveryResponse } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { built } from '../helpers/binary';
import { startDiscovery } from '../helpers/daemon';
import { tempDir } from '../helpers/temp';
import { DeltaStream, RDS, SotwStream } from './server/helpers';
import { gatewayDoc, routeTo, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../helpers/mesh-yaml';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const VHDS = 'type.googleapis.com/envoy.config.route.v3.VirtualHost';

const vs = (name: string, host: string, timeout: string) =>
  virtualServiceDoc(name, { hosts: host, http: `  - ${routeTo()}\n    timeout: ${timeout}\n` });
const base = yamlDocs(gatewayDoc(80, { selector: 'istio: ingressgateway' }), serviceEntryDoc('backend'));

const gatewayNode = (features: string[]) =>
  create(NodeSchema, {
    id: 'router~10.0.0.9~gw-1.mesh-system~mesh-system.svc.cluster.local',
    metadata: { NAMESPACE: 'mesh-system', LABELS: { istio: 'ingressgateway' }, ISTIO_VERSION: '1.26.0' },
    clientFeatures: features,
  });

async function daemon(t: Test) {
  const dir = tempDir(t, 'mesh-vhds-');
  fs.writeFileSync(path.join(dir, 'base.yaml'), base);
  fs.writeFileSync(path.join(dir, 'a.yaml'), vs('a', 'a.example.com', '3s'));
  fs.writeFileSync(path.join(dir, 'b.yaml'), vs('b', 'b.example.com', '3s'));
  const d = await startDiscovery({ configDir: dir });
  t.teardown(() => d.stop());
  return { d, dir };
}

const names = (r: DeltaDiscoveryResponse) => r.resources.map((x) => x.name).sort();
const timeoutOf = (r: DeltaDiscoveryResponse, i = 0) => {
  const vh = anyUnpack(r.resources[i]!.resource!, VirtualHostSchema)!;
  const a = vh.routes[0]!.action;
  return a.case === 'route' ? a.value.timeout?.seconds : undefined;
};

t.test('a delta client with the VHDS feature gets virtual hosts one by one, and an edit sends only the one changed', async (t) => {
  const { d, dir } = await daemon(t);
  const s = new DeltaStream(d.grpc);
  t.teardown(() => s.close());
  s.send({ node: gatewayNode(['mesh.io/vhds']), typeUrl: RDS, resourceNamesSubscribe: ['http.80'] });
  const rds = await s.expect(RDS, 15_000);
  const rc = anyUnpack(rds.resources[0]!.resource!, RouteConfigurationSchema)!;
  t.same(rc.virtualHosts, [], 'no inline virtual hosts');
  const src = rc.vhds?.configSource?.configSourceSpecifier;
  t.equal(src?.case === 'apiConfigSource' && src.value.apiType, ApiConfigSource_ApiType.DELTA_GRPC);
  s.ack(rds);
  // Envoy's VHDS subscription: VirtualHost with no names (wildcard)
  s.send({ typeUrl: VHDS });
  const first = await s.expect(VHDS);
  t.same(names(first), ['http.80/a.example.com:80', 'http.80/b.example.com:80']);
  for (const r of first.resources) t.equal(anyUnpack(r.resource!, VirtualHostSchema)!.name, r.name, 'the VirtualHost carries its resource name');
  s.ack(first);

  fs.writeFileSync(path.join(dir, 'a.yaml'), vs('a', 'a.example.com', '7s'));
  const edit = await s.expect(VHDS, 15_000);
  t.same(names(edit), ['http.80/a.example.com:80'], 'only the edited virtual host is sent (the route configuration is unchanged, so no RDS)');
  t.equal(timeoutOf(edit), 7n);
  s.ack(edit);

  fs.rmSync(path.join(dir, 'b.yaml'));
  const removal = await s.expect(VHDS, 15_000);
  t.same(removal.removedResources, ['http.80/b.example.com:80']);
  t.same(names(removal), []);
});

t.test('clients without VHDS keep full RDS: a delta client without the feature, and a SotW stream with it', async (t) => {
  const { d } = await daemon(t);
  const s = new DeltaStream(d.grpc);
  t.teardown(() => s.close());
  s.send({ node: gatewayNode([]), typeUrl: RDS, resourceNamesSubscribe: ['http.80'] });
  const rc = anyUnpack((await s.expect(RDS, 15_000)).resources[0]!.resource!, RouteConfigurationSchema)!;
  t.equal(rc.vhds, undefined);
  t.same(rc.virtualHosts.map((v) => v.name).sort(), ['a.example.com:80', 'b.example.com:80']);

  const sotw = new SotwStream(d.grpc);
  t.teardown(() => sotw.close());
  sotw.send({ node: gatewayNode(['mesh.io/vhds']), typeUrl: RDS, resourceNames: ['http.80'] });
  const r = await sotw.expect(RDS, 15_000);
  const full = anyUnpack(r.resources[0]!, RouteConfigurationSchema)!;
  t.equal(full.vhds, undefined, 'VHDS needs delta xDS');
  t.same(full.virtualHosts.map((v) => v.name).sort(), ['a.example.com:80', 'b.example.com:80']);
});

// Delta streams share what clients hold and the diffs of a push when their configuration is the same: proxies
// in different namespaces get different virtual hosts under the same names (a service's short name is a
// domain only in its own namespace), and none may get another's.
const sidecarNode = (id: string, ns: string) =>
  create(NodeSchema, {
    id: `sidecar~10.1.0.${id.length}~${id}.${ns}~${ns}.svc.cluster.local`,
    metadata: { NAMESPACE: ns, ISTIO_VERSION: '1.26.0' },
    clientFeatures: ['mesh.io/vhds'],
  });
const service = (name: string, ns: string, vip: string) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${ns}}
spec:
  hosts: [${name}.${ns}.svc.cluster.local]
  addresses: [${vip}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 127.0.0.1}]
`;
const meshVs = (timeout: string) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: svc-a, namespace: team-a}
spec:
  hosts: [svc-a.team-a.svc.cluster.local]
  http:
  - route: [{destination: {host: svc-a.team-a.svc.cluster.local}}]
    timeout: ${timeout}
`;

t.test('proxies with different configurations on one daemon each get their own virtual hosts, before and after an edit', async (t) => {
  const dir = tempDir(t, 'mesh-vhds-share-');
  fs.writeFileSync(path.join(dir, 'services.yaml'), `${service('svc-a', 'team-a', '240.0.0.1')}---\n${service('svc-b', 'team-b', '240.0.0.2')}`);
  fs.writeFileSync(path.join(dir, 'vs.yaml'), meshVs('3s'));
  const d = await startDiscovery({ configDir: dir });
  t.teardown(() => d.stop());
  const A = 'svc-a.team-a.svc.cluster.local';
  const B = 'svc-b.team-b.svc.cluster.local';
  const connect = async (id: string, ns: string, initialResourceVersions: Record<string, string> = {}) => {
    const s = new DeltaStream(d.grpc);
    t.teardown(() => s.close());
    s.send({ node: sidecarNode(id, ns), typeUrl: RDS, resourceNamesSubscribe: ['80'] });
    s.ack(await s.expect(RDS, 15_000));
    s.send({ typeUrl: VHDS, initialResourceVersions });
    const first = await s.expect(VHDS, 15_000);
    s.ack(first);
    return { s, first };
  };
  const domains = (r: DeltaDiscoveryResponse, name: string) => {
    const x = r.resources.find((y) => y.name === name);
    return x ? anyUnpack(x.resource!, VirtualHostSchema)!.domains : undefined;
  };
  const versions = (r: DeltaDiscoveryResponse) => Object.fromEntries(r.resources.map((x) => [x.name, x.version]));

  const a1 = await connect('a1', 'team-a');
  const b1 = await connect('b1', 'team-b');
  const a2 = await connect('a2', 'team-a');
  const all = ['80/allow_any', `80/${A}:80`, `80/${B}:80`];
  for (const [who, c] of [
    ['a1', a1],
    ['b1', b1],
    ['a2', a2],
  ] as const)
    t.same(names(c.first), all, `${who}: every virtual host`);
  // Istio's generateVirtualHostDomains: the short name only within the service's namespace.
  t.ok(domains(a1.first, `80/${A}:80`)!.includes('svc-a'), 'team-a: svc-a by its short name');
  t.notOk(domains(a1.first, `80/${B}:80`)!.includes('svc-b'));
  t.ok(domains(b1.first, `80/${B}:80`)!.includes('svc-b'), 'team-b: svc-b by its short name');
  t.notOk(domains(b1.first, `80/${A}:80`)!.includes('svc-a'), "team-b does not get team-a's svc-a virtual host");
  t.same(versions(a2.first), versions(a1.first), 'same namespace, same virtual hosts');
  t.not(versions(b1.first)[`80/${A}:80`], versions(a1.first)[`80/${A}:80`], 'the same name has another version in team-b');

  // A reconnecting team-b proxy claiming to hold team-a's versions gets team-b's wherever they differ.
  const b2 = await connect('b2', 'team-b', versions(a1.first));
  t.same(names(b2.first), [`80/${A}:80`, `80/${B}:80`], 'what differs is sent, allow_any is not');
  t.same(versions(b2.first), { [`80/${A}:80`]: versions(b1.first)[`80/${A}:80`], [`80/${B}:80`]: versions(b1.first)[`80/${B}:80`] });

  fs.writeFileSync(path.join(dir, 'vs.yaml'), meshVs('7s'));
  for (const [who, c, own] of [
    ['a1', a1, true],
    ['b1', b1, false],
    ['a2', a2, true],
    ['b2', b2, false],
  ] as const) {
    const edit = await c.s.expect(VHDS, 15_000);
    t.same(names(edit), [`80/${A}:80`], `${who}: only the edited virtual host`);
    t.equal(timeoutOf(edit), 7n, `${who}: the edit`);
    t.equal(domains(edit, `80/${A}:80`)!.includes('svc-a'), own, `${who}: its own namespace's domains`);
    c.s.ack(edit);
  }
});
