// The table and dump writers of proxy-config, nodeproxy-config and proxy-status against istioctl 1.26.8's
// own writer tests (fixtures/istio-1.26.8, copied from Istio; each row names the Go test it comes from),
// plus Go behaviour the writers rest on: text/tabwriter, k8s HumanDuration, encoding/json of Go structs.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { ClientConfigSchema, ConfigStatus } from '../../src/gen/envoy/service/status/v3/csds_pb';
import { TabWriter } from '../../src/lib/tabwriter';
import { REPO } from '../helpers/spec';
import { goDecode, goMarshalIndent, T } from '../../src/lib/gojson';
import { humanDuration, syncRows, syncTable } from '../../src/meshctl/status';
import {
  bootstrapDumpOutput,
  bootstrapSummary,
  ConfigDump,
  ecdsDumpOutput,
  ecdsSummary,
  edsDumpOutput,
  edsSummary,
  fullSummary,
  routeSummary,
  secretSummary,
  type EndpointFilter,
} from '../../src/meshctl/proxyconfig/writers';
import {
  certificateSummary,
  connectionsSummary,
  fullSummary as nodeFullSummary,
  NodeProxyDump,
  policyDump,
  policySummary,
  serviceSummary,
  workloadDump,
  workloadSummary,
} from '../../src/meshctl/nodeproxy/writers';
import { relabel } from './helpers';

const FIX = path.join(REPO, 'test/meshctl/fixtures/istio-1.26.8');
const read = (p: string) => readFileSync(path.join(FIX, p), 'utf8');
const dumpOf = (p: string) => ConfigDump.parse(read(p));

/** Istio's util.Compare trims surrounding whitespace. */
const same = (t: Test, got: string, want: string, msg = 'equal after trimming') => t.equal(got.trim(), want.trim(), msg);

t.test('proxy-config writers: istioctl/pkg/writer/envoy/configdump tests', async (t) => {
  await t.test('TestPrintRoutesSummary (RouteFilter{Verbose: true})', async (t) => {
    for (const d of ['empty-gateway', 'istio-gateway-http-route-prefix', 'k8s-gateway-http-route-path-prefix']) {
      t.equal(
        routeSummary(dumpOf(`envoy/routes/${d}/configdump.json`), { name: '', verbose: true }).trim(),
        read(`envoy/routes/${d}/output.txt`).trim(),
        d,
      );
    }
  });
  await t.test('TestPrintEndpointsSummary / TestPrintEndpoints', async (t) => {
    const d = dumpOf('envoy/endpoint/configdump.json');
    const none: EndpointFilter = { address: '', port: 0, cluster: '', status: '' };
    for (const [name, f] of [
      ['emptyfilter', none],
      ['portfilter', { ...none, port: 8080 }],
    ] as const) {
      t.equal(edsSummary(d, f).trim(), read(`envoy/endpoint/${name}_output.txt`).trim(), `${name} txt`);
      t.equal(edsDumpOutput(d, f, 'json').trim(), read(`envoy/endpoint/${name}_output.json`).trim(), `${name} json`);
      t.equal(edsDumpOutput(d, f, 'yaml').trim(), read(`envoy/endpoint/${name}_output.yaml`).trim(), `${name} yaml`);
    }
  });
  await t.test('TestPrintSecretSummary', async (t) => {
    // the certificates' validity is judged now; these fixtures' answers hold until 2033
    for (const sds of ['istio', 'spire'])
      t.equal(secretSummary(dumpOf(`envoy/secret/${sds}/config_dump.json`)).trim(), read(`envoy/secret/${sds}/output`).trim(), sds);
  });
  await t.test('TestPrintEcdsSummary / Yaml / JSON', async (t) => {
    const d = dumpOf('envoy/ecds/configdump.json');
    t.equal(ecdsSummary(d).trim(), read('envoy/ecds/output.txt').trim(), 'txt');
    t.equal(ecdsDumpOutput(d, 'yaml').trim(), read('envoy/ecds/output.yaml').trim(), 'yaml');
    t.equal(ecdsDumpOutput(d, 'json').trim(), read('envoy/ecds/output.json').trim(), 'json');
  });
  await t.test('TestConfigWriter_PrintBootstrapDump / PrintVersionSummary', async (t) => {
    const d = dumpOf('envoy/configdump.json');
    same(t, bootstrapDumpOutput(d, 'json'), read('envoy/bootstrapdump.json'));
    same(t, bootstrapSummary(d), relabel(read('envoy/versionsummary.txt')));
    t.match(bootstrapSummary(d), /^Mesh Version:\s+1\.10\.0$/m);
  });
  await t.test('TestPrintProxyConfigSummary (proxy-config all -f config_dump.json)', async (t) => {
    const d = dumpOf('proxyconfig/config_dump.json');
    const got = fullSummary(
      d,
      { fqdn: '', port: 0, subset: '', direction: '' },
      { address: '', port: 0, type: '', verbose: true },
      { name: '', verbose: true },
      { address: '', port: 0, cluster: '', status: '' },
    );
    t.equal(got, relabel(read('proxyconfig/config_dump_summary.txt')));
  });
});

t.test('proxy-status: istioctl/pkg/writer/pilot TestXdsStatusWriter_PrintAll', async (t) => {
  const TYPES = [
    'cluster.v3.Cluster',
    'listener.v3.Listener',
    'route.v3.RouteConfiguration',
    'endpoint.v3.ClusterLoadAssignment',
    'core.v3.TypedExtensionConfig',
  ].map((s) => `type.googleapis.com/envoy.config.${s}`);
  const S = ConfigStatus;
  // [proxy, cluster, version, cds, lds, rds, eds, ecds] as the Go test's clientConfigInput
  type Input = [string, string, string, ConfigStatus, ConfigStatus, ConfigStatus, ConfigStatus, ConfigStatus];
  const cc = ([id, cluster, version, cds, lds, rds, eds, ecds]: Input) =>
    create(ClientConfigSchema, {
      node: { id, metadata: { CLUSTER_ID: cluster, ISTIO_VERSION: version } },
      genericXdsConfigs: [cds, lds, rds, eds, ecds].map((configStatus, i) => ({ typeUrl: TYPES[i]!, configStatus })),
    });
  const header = (text: string) => text.replace(/^(NAME.*)ISTIOD {5}/, '$1MESHD      ');
  const multi = syncRows(
    [
      { meshd: 'istiod1', configs: [cc(['proxy1', 'cluster1', '1.20', S.STALE, S.SYNCED, S.NOT_SENT, S.SYNCED, S.SYNCED])] },
      { meshd: 'istiod2', configs: [cc(['proxy2', 'cluster2', '1.19', S.STALE, S.SYNCED, S.SYNCED, S.STALE, S.STALE])] },
      { meshd: 'istiod3', configs: [cc(['proxy3', 'cluster3', '1.20', S.NOT_SENT, S.ERROR, S.NOT_SENT, S.STALE, S.NOT_SENT])] },
      { meshd: 'istiod4', configs: [cc(['proxy4', 'cluster4', '1.20', S.UNKNOWN, S.UNKNOWN, S.UNKNOWN, S.UNKNOWN, S.UNKNOWN])] },
    ].reverse(),
    '',
    Date.now(),
  );
  same(t, syncTable(multi), header(read('pilot/multiXdsStatusMultiPilot.txt')));
  const single = syncRows(
    [
      {
        meshd: 'istiod1',
        configs: [
          cc(['proxy2', 'cluster2', '1.20', S.STALE, S.SYNCED, S.SYNCED, S.STALE, S.NOT_SENT]),
          cc(['proxy1', 'cluster1', '1.20', S.STALE, S.SYNCED, S.NOT_SENT, S.SYNCED, S.NOT_SENT]),
        ],
      },
    ],
    '',
    Date.now(),
  );
  same(t, syncTable(single), header(read('pilot/multiXdsStatusSinglePilot.txt')));

  // the age Istio appends to a state whose last update is known
  const aged = create(ClientConfigSchema, {
    node: { id: 'gw-0.mesh-system', metadata: { NAMESPACE: 'mesh-system', MESH_VERSION: '1.26.0' } },
    genericXdsConfigs: [{ typeUrl: TYPES[0]!, configStatus: S.SYNCED, lastUpdated: { seconds: 1000n, nanos: 0 } }],
  });
  const rows = syncRows([{ meshd: 'meshd-0', configs: [aged] }], 'mesh-system', 1_190_000);
  t.equal(rows[0]!.cds, 'SYNCED (3m10s)');
  t.equal(rows[0]!.lds, 'IGNORED', 'a type the proxy does not watch');
  t.same(syncRows([{ meshd: 'meshd-0', configs: [aged] }], 'default', 0), [], '-n keeps that namespace only');
});

t.test('nodeproxy-config writers: istioctl/pkg/writer/ztunnel/configdump tests', async (t) => {
  const d = NodeProxyDump.parse(read('ztunnel/dump.json'));
  t.equal(d.workloads.length, 27, 'TestConfigWriter_Prime: 27 workloads from a map-shaped dump');
  t.equal(certificateSummary(d), read('ztunnel/secretsummary.txt'), 'secret');
  t.equal(workloadSummary(d, { address: '', node: '', namespace: '' }), read('ztunnel/workloadsummary.txt'), 'workload');
  t.equal(workloadSummary(d, { address: '', node: '', namespace: 'default' }), read('ztunnel/workloadsummary_default.txt'), 'filtered workload');
  t.equal(policySummary(d, ''), read('ztunnel/policies.txt'), 'policies');

  // not in Istio's tests: the rest of the writers on the same dump
  const svc = serviceSummary(d, 'bookinfo');
  t.match(svc, /^NAMESPACE SERVICE NAME\s+SERVICE VIP\s+WAYPOINT ENDPOINTS$/m);
  t.match(svc, /^bookinfo\s+reviews\s+10\.96\.74\.131\s+None\s+3\/3$/m, 'healthy endpoints over all');
  t.notMatch(svc, /^default/m, '--service-namespace filters');
  const all = nodeFullSummary(d);
  t.ok(all.startsWith('\nNAMESPACE '), 'all starts with a blank line, then the workloads');
  t.equal(all.split('\n\n').length, 4, 'workloads, services, policies, certificates');
  const one = JSON.parse(workloadDump(d, { address: '10.244.2.54', node: '', namespace: '' }, 'json')) as Array<Record<string, unknown>>;
  t.equal(one.length, 1, '--address filters');
  t.same(Object.keys(one[0]!).slice(0, 4), ['uid', 'workloadIps', 'waypoint', 'protocol'], "Go's field order, not the dump's");
  t.same(one[0]!['locality'], {}, 'a struct is never omitted');
  t.notOk('nativeTunnel' in one[0]!, 'fields istioctl does not know are dropped');
  t.match(policyDump(d, 'default', 'yaml'), /^- action: Allow\n/, 'yaml keys sorted as yaml.v2 does');

  const conns = NodeProxyDump.parse(
    JSON.stringify({
      workloads: [{ uid: 'w1', workloadIps: ['10.0.0.1'], name: 'a-0', namespace: 'ns1' }],
      services: [{ name: 'b', namespace: 'ns1', hostname: 'b.ns1.svc', vips: ['net/10.96.0.2'] }],
      workloadState: {
        w1: {
          info: { name: 'a-0', namespace: 'ns1' },
          connections: {
            inbound: [{ src: '10.0.0.9:5000', originalDst: 'a-0', actualDst: '10.0.0.1:15008', protocol: 'HBONE' }],
            outbound: [{ src: '10.0.0.1:4000', originalDst: '10.96.0.2:80', actualDst: '10.0.0.7:15008', protocol: 'TCP' }],
          },
        },
      },
    }),
  );
  t.equal(
    connectionsSummary(conns, { namespace: '', direction: '', raw: false }),
    'WORKLOAD DIRECTION LOCAL         REMOTE         REMOTE TARGET PROTOCOL\n' +
      'a-0.ns1  Inbound   a-0.ns1:15008 10.0.0.9:5000  a-0           HBONE\n' +
      'a-0.ns1  Outbound  a-0.ns1:4000  10.0.0.7:15008 b.ns1.svc:80  TCP\n',
  );
  t.notMatch(connectionsSummary(conns, { namespace: '', direction: 'inbound', raw: true }), /Outbound/);
  t.match(connectionsSummary(conns, { namespace: '', direction: 'inbound', raw: true }), /10\.0\.0\.1:15008/, '--raw keeps addresses');

  t.throws(() => NodeProxyDump.parse('[1]'), {
    message: 'error unmarshalling config dump response from node proxy: json: cannot unmarshal array into Go value of type configdump.rawDump',
  });
  t.throws(() => NodeProxyDump.parse('{"workloads": [{"workloadIps": "x"}]}'), {
    message: 'json: cannot unmarshal string into Go struct field ZtunnelWorkload.workloadIps of type []string',
  });
  t.throws(() => NodeProxyDump.parse('{'), /^error unmarshalling config dump response from node proxy: /);
});

t.test("Go's text/tabwriter", async (t) => {
  const tw = (padding: number, text: string) => new TabWriter(0, padding).write(text).flush();
  t.equal(
    tw(1, 'a\tb\tc\naaa\tbbbbbb\n\nx\ty\n'),
    'a   b c\naaa bbbbbb\n\nx y\n',
    'columns end at a line without the cell; text after the last tab is free',
  );
  t.equal(tw(5, 'NAME\tTYPE\nx\ty\n'), 'NAME     TYPE\nx        y\n', 'padding');
  t.equal(tw(1, 'ä\tb\naa\tc\n'), 'ä  b\naa c\n', 'widths count characters');
  t.equal(tw(1, ''), '');
});

t.test('k8s HumanDuration (apimachinery duration_test)', async (t) => {
  const s = 1000;
  const h = 3600 * s;
  for (const [ms, want] of [
    [-2 * s, '<invalid>'],
    [-s / 2, '0s'],
    [s, '1s'],
    [70 * s, '70s'],
    [190 * s, '3m10s'],
    [70 * 60 * s, '70m'],
    [190 * 60 * s, '3h10m'],
    [47 * h, '47h'],
    [49 * h, '2d1h'],
    [(8 * 24 + 2) * h, '8d'],
    [367 * 24 * h, '367d'],
    [(365 * 2 * 24 + 25) * h, '2y1d'],
    [(365 * 8 * 24 + 2) * h, '8y'],
  ] as const) {
    t.equal(humanDuration(ms), want, `${ms}ms`);
  }
});

t.test("Go's encoding/json for istioctl's structs", async (t) => {
  const S = T.struct('S', [
    { json: 'name', type: T.string },
    { json: 'ports', type: T.map('uint16', T.uint16) },
    { json: 'tags', type: T.slice(T.string), omitempty: true },
    { json: 'ref', type: T.ptr(T.struct('R', [{ json: 'to', type: T.string }])), omitempty: true },
  ]);
  const v = goDecode({ NAME: 'a<b>', ports: { '9080': 1, '15008': 2 }, extra: true }, S);
  t.equal(
    goMarshalIndent(v, S),
    '{\n    "name": "a\\u003cb\\u003e",\n    "ports": {\n        "15008": 2,\n        "9080": 1\n    }\n}',
    'keys matched case-insensitively, unknown dropped, map keys sorted as strings, omitempty, HTML escaped',
  );
  t.equal(goMarshalIndent(goDecode({}, S), S), '{\n    "name": "",\n    "ports": null\n}', 'a nil map is null');
  t.throws(() => goDecode({ ports: { '9080': 70000 } }, S), {
    message: 'json: cannot unmarshal number 70000 into Go struct field S.ports.9080 of type uint16',
  });
  t.throws(() => goDecode({ ref: { to: 1 } }, S), { message: 'json: cannot unmarshal number into Go struct field R.ref.to of type string' });
});
