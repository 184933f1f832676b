// The built meshctl on config dump files: proxy-config and nodeproxy-config with --file (and "-" for stdin)
// against istioctl 1.26.8's goldens (fixtures/istio-1.26.8), and what bad input does: one line naming the
// problem, exit 1, nothing on stdout.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { built, DIST, exec } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { tempDir } from '../helpers/temp';
import { relabel } from './helpers';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const FIX = path.join(REPO, 'test/meshctl/fixtures/istio-1.26.8');
const MESHCTL = path.join(DIST, 'meshctl');
const read = (p: string) => fs.readFileSync(path.join(FIX, p), 'utf8');
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir() };
const meshctl = (args: readonly string[], o: { input?: string; env?: NodeJS.ProcessEnv } = {}) =>
  exec(MESHCTL, args, { cwd: FIX, env: { ...env, ...o.env }, input: o.input });

t.test('proxy-config --file: istioctl goldens', async (t) => {
  // [args, golden, compare exactly (TestPrintProxyConfigSummary) or trimmed (util.Compare)]
  const rows: Array<[string[], string, 'exact' | 'trimmed']> = [
    [['proxy-config', 'all', '-f', 'proxyconfig/config_dump.json'], relabel(read('proxyconfig/config_dump_summary.txt')), 'exact'],
    [['proxy-config', 'route', '-f', 'envoy/routes/empty-gateway/configdump.json'], read('envoy/routes/empty-gateway/output.txt'), 'trimmed'],
    [
      ['pc', 'routes', '-f', 'envoy/routes/istio-gateway-http-route-prefix/configdump.json'],
      read('envoy/routes/istio-gateway-http-route-prefix/output.txt'),
      'trimmed',
    ],
    [
      ['pc', 'route', '-f', 'envoy/routes/k8s-gateway-http-route-path-prefix/configdump.json'],
      read('envoy/routes/k8s-gateway-http-route-path-prefix/output.txt'),
      'trimmed',
    ],
    [['pc', 'secret', '-f', 'envoy/secret/istio/config_dump.json'], read('envoy/secret/istio/output'), 'trimmed'],
    [['pc', 'secret', '-f', 'envoy/secret/spire/config_dump.json'], read('envoy/secret/spire/output'), 'trimmed'],
    [['pc', 'ecds', '-f', 'envoy/ecds/configdump.json'], read('envoy/ecds/output.txt'), 'trimmed'],
    [['pc', 'ecds', '-f', 'envoy/ecds/configdump.json', '-o', 'yaml'], read('envoy/ecds/output.yaml'), 'trimmed'],
    [['pc', 'ecds', '-f', 'envoy/ecds/configdump.json', '-o', 'json'], read('envoy/ecds/output.json'), 'trimmed'],
    [['pc', 'bootstrap', '-f', 'envoy/configdump.json', '-o', 'json'], read('envoy/bootstrapdump.json'), 'trimmed'],
    [['pc', 'bootstrap', '-f', 'envoy/configdump.json', '-o', 'short'], relabel(read('envoy/versionsummary.txt')), 'trimmed'],
  ];
  for (const [args, want, how] of rows) {
    const r = await meshctl(args);
    t.equal(r.code, 0, `${args.join(' ')} exits 0`);
    t.equal(r.stderr, '', 'nothing on stderr');
    if (how === 'exact') t.equal(r.stdout, want, args.join(' '));
    else t.equal(r.stdout.trim(), want.trim(), args.join(' '));
  }
});

t.test('proxy-config --file: filters and formats', async (t) => {
  const dump = 'proxyconfig/config_dump.json';
  const cluster = await meshctl(['pc', 'cluster', '-f', dump, '--fqdn', 'httpbin.default.svc.cluster.local']);
  t.equal(cluster.code, 0);
  t.same(
    cluster.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/\s+/)[0]),
    ['SERVICE', 'httpbin.default.svc.cluster.local'],
    '--fqdn keeps that service',
  );
  const direction = await meshctl(['pc', 'cluster', '-f', dump, '--direction', 'inbound-vip', '--port', '8000', '--subset', 'http', '-o', 'json']);
  t.same(
    (JSON.parse(direction.stdout) as Array<{ name: string }>).map((c) => c.name),
    ['inbound-vip|8000|http|httpbin.default.svc.cluster.local'],
    '--direction --port --subset',
  );
  const listener = await meshctl(['pc', 'listener', '-f', dump, '--port', '15021']);
  t.equal(listener.stdout, 'ADDRESSES PORT  MATCH DESTINATION\n0.0.0.0   15021 ALL   Inline Route: /healthz/ready*\n', '--port');
  const waypoint = await meshctl(['pc', 'listener', '-f', dump, '--waypoint']);
  t.same(
    [waypoint.code, waypoint.stdout, waypoint.stderr.trim()],
    [1, '', 'Error: --waypoint (the waypoint listener view) needs ambient mode, which mesh does not have: no proxy serves waypoint listeners'],
    '--waypoint is refused with one line and exit 1 (mesh has no waypoint data plane)',
  );
  const brief = await meshctl(['pc', 'listener', '-f', dump, '--type', 'HTTP', '--address', '0.0.0.0', '--verbose=false']);
  t.equal(brief.code, 0, '--type --address --verbose=false');
  t.match(brief.stdout, /^ADDRESSES\s+PORT\s+TYPE$/m, 'the short listener table');
  const route = await meshctl(['pc', 'route', '-f', dump, '--name', 'inbound-vip|8000|http|httpbin.default.svc.cluster.local', '-o', 'yaml']);
  t.match(route.stdout, /^- name: inbound-vip\|8000\|http\|httpbin\.default\.svc\.cluster\.local$/m, '--name -o yaml');
  const byDefault = await meshctl(['pc', 'bootstrap', '-f', 'envoy/configdump.json']);
  t.equal(byDefault.stdout.trim(), read('envoy/bootstrapdump.json').trim(), 'bootstrap prints JSON by default, as istioctl does');
  const yaml = await meshctl(['pc', 'bootstrap', '-f', 'envoy/configdump.json', '-o', 'yaml']);
  t.match(yaml.stdout, /^bootstrap:\n {2}node:\n {4}metadata:\n {6}ISTIO_PROXY_SHA: /, 'yaml of the jsonpb text');

  const stdin = await meshctl(['pc', 'route', '-f', '-'], { input: read('envoy/routes/empty-gateway/configdump.json') });
  t.equal(stdin.stdout.trim(), read('envoy/routes/empty-gateway/output.txt').trim(), '"-" reads stdin');
});

t.test('nodeproxy-config --file: istioctl goldens and the other views', async (t) => {
  const dump = 'ztunnel/dump.json';
  for (const [args, golden] of [
    [['nodeproxy-config', 'certificate', '-f', dump], 'ztunnel/secretsummary.txt'],
    [['nodeproxy-config', 'workload', '-f', dump], 'ztunnel/workloadsummary.txt'],
    [['nodeproxy-config', 'workloads', '-f', dump, '--workload-namespace', 'default'], 'ztunnel/workloadsummary_default.txt'],
    [['nodeproxy-config', 'policy', '-f', dump], 'ztunnel/policies.txt'],
  ] as const) {
    const r = await meshctl(args);
    t.equal(r.code, 0, `${args.join(' ')} exits 0`);
    t.equal(r.stdout, read(golden), args.join(' '));
  }
  const all = await meshctl(['nodeproxy-config', 'all', '-f', dump]);
  t.ok(all.stdout.startsWith('\nNAMESPACE '), 'all: workloads first, after a blank line');
  t.match(all.stdout, /\nNAMESPACE\s+SERVICE NAME\s+SERVICE VIP\s+WAYPOINT\s+ENDPOINTS\n/);
  t.match(all.stdout, /\nCERTIFICATE NAME\s+TYPE\s+STATUS/);
  const raw = await meshctl(['nodeproxy-config', 'all', '-f', dump, '-o', 'json']);
  t.equal(raw.stdout, read(dump) + '\n', 'all -o json prints the dump as it is');
  const svc = await meshctl(['nodeproxy-config', 'svc', '-f', dump, '--service-namespace', 'kube-system', '-o', 'json']);
  t.same(
    (JSON.parse(svc.stdout) as Array<{ name: string }>).map((s) => s.name),
    ['kube-dns'],
    '--service-namespace -o json',
  );
  const cons = await meshctl(['nodeproxy-config', 'connections', '-f', dump]);
  t.equal(cons.stdout, 'WORKLOAD DIRECTION LOCAL REMOTE REMOTE TARGET PROTOCOL\n', 'a dump without workload state: the header');
});

t.test('bad input: one line, exit 1, nothing on stdout', async (t) => {
  const dir = tempDir(t, 'meshctl-bad-');
  fs.writeFileSync(path.join(dir, 'broken.json'), '{"configs": [');
  fs.writeFileSync(path.join(dir, 'list.json'), '[1, 2]');
  for (const [args, line, xdsEnv] of [
    [['pc', 'route', '-f', 'missing.json'], /^Error: open missing\.json: no such file or directory\n$/],
    [['pc', 'cluster', '-f', path.join(dir, 'broken.json')], /^Error: error unmarshalling config dump response from Envoy: .+\n$/],
    [['pc', 'route', 'pod-0.default', '-f', 'envoy/configdump.json'], /^Error: route requires pod name or --file parameter\n$/],
    [['pc', 'route'], /^Error: route requires pod name or --file parameter\n$/],
    [
      ['pc', 'secret', '-f', 'envoy/routes/empty-gateway/configdump.json'],
      /^Error: config dump has no configuration type type\.googleapis\.com\/envoy\.admin\.v3\.SecretsConfigDump\n$/,
    ],
    [['pc', 'secret', '-f', 'envoy/routes/empty-gateway/configdump.json', '-o', 'json'], /^Error: sidecar doesn't support secrets: .+\n$/],
    [['nodeproxy-config', 'workload', '-f', 'missing.json'], /^Error: open missing\.json: no such file or directory\n$/],
    [
      ['nodeproxy-config', 'workload', '-f', path.join(dir, 'list.json')],
      /^Error: error unmarshalling config dump response from node proxy: json: cannot unmarshal array into Go value of type configdump\.rawDump\n$/,
    ],
    [
      ['nodeproxy-config', 'workload', 'ztunnel-0', '-f', 'ztunnel/dump.json'],
      /^Error: at most one of --file, --node, or pod name must be passed\n$/,
    ],
    [['nodeproxy-config', 'workload', '--node', 'worker-1'], /^Error: --node needs the orchestrator API .+\n$/],
    [['nodeproxy-config', 'workload', 'ztunnel-0.mesh-system'], /^Error: could not dial 127\.0\.0\.1:1: .+\n$/, true],
    [['nodeproxy-config', 'log', '-f', 'ztunnel/dump.json'], /^Error: log needs a live node proxy: --file does not apply\n$/],
  ] as const) {
    const r = await meshctl(args, xdsEnv ? { env: { MESHCTL_XDS_ADDRESS: '127.0.0.1:1', MESHCTL_PLAINTEXT: 'true' } } : {});
    t.equal(r.code, 1, `${args.join(' ')} exits 1`);
    t.equal(r.stdout, '', 'nothing on stdout');
    t.match(r.stderr, line, r.stderr.trim());
  }
});
