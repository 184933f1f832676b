// The built `pilot-discovery discovery --configDir` with Istio's xDS cache switches: the cache-efficiency
// metrics of PILOT_XDS_CACHE_STATS (Istio 1.26 pilot/pkg/model/typed_xds_cache.go: xds_cache_reads and
// xds_cache_evictions counters labelled `type` = hit|miss and clear|size, the xds_cache_size gauge) scraped from
// the daemon's /metrics, their absence by default, and the same clusters and routes with the cache off.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { toBinary } from '@bufbuild/protobuf';
import { ClusterSchema } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { RouteConfigurationSchema } from '../../src/gen/envoy/config/route/v3/route_pb';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { parseExposition, sampleSum, type Exposition } from '../helpers/metrics-spec';
import { CDS, RDS, sidecarNode, XdsWatch } from '../helpers/xds';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'shop';

function serviceEntry(name: string, i: number): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${NS}}
spec:
  hosts: [${name}.${NS}.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}]
  endpoints: [{address: 10.30.0.${i}}]
`;
}

const virtualService = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ${NS}}
spec:
  hosts: [web.${NS}.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /v2}}]
    route: [{destination: {host: api.${NS}.svc.cluster.local}}]
  - route: [{destination: {host: web.${NS}.svc.cluster.local}}]
`;

interface Run {
  daemon: RunningDaemon;
  dir: string;
  watches: Array<XdsWatch<typeof CDS> | XdsWatch<typeof RDS>>;
}

async function start(t: Test, env: Record<string, string>): Promise<Run> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-xds-cache-'));
  writeFileSync(path.join(dir, 'services.yaml'), [serviceEntry('web', 1), serviceEntry('api', 2)].join('---\n'));
  writeFileSync(path.join(dir, 'vs.yaml'), virtualService);
  const daemon = await startDaemon(['--configDir', dir], { XDS_AUTH: 'false', ...env });
  const run: Run = { daemon, dir, watches: [] };
  t.teardown(async () => {
    for (const w of run.watches) w.close();
    await daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return run;
}

/** Two sidecars of one namespace (one shared key), each watching clusters and the 8080 routes. */
function connect(run: Run): { cds: Array<XdsWatch<typeof CDS>>; rds: Array<XdsWatch<typeof RDS>> } {
  const cds = [1, 2].map((i) => new XdsWatch(run.daemon.grpc, sidecarNode(NS, `10.40.0.${i}`, `client-${i}`), CDS));
  const rds = [1, 2].map((i) => new XdsWatch(run.daemon.grpc, sidecarNode(NS, `10.40.0.${i}`, `client-${i}`), RDS, ['8080']));
  run.watches.push(...cds, ...rds);
  return { cds, rds };
}

const hasCluster = (host: string) => (w: XdsWatch<typeof CDS>) => w.resources.has(`outbound|8080||${host}.${NS}.svc.cluster.local`);

/** A new ServiceEntry file; resolves when every watch has its cluster (a new push context each time). */
async function addService(run: Run, cds: Array<XdsWatch<typeof CDS>>, name: string, i: number): Promise<void> {
  writeFileSync(path.join(run.dir, `${name}.yaml`), serviceEntry(name, i));
  for (const w of cds) await w.until(hasCluster(name), `cluster of ${name}`);
}

async function scrape(run: Run): Promise<Exposition> {
  const r = await fetch(`http://${run.daemon.monitoring}/metrics`);
  return parseExposition(await r.text());
}

/** What the proxies were sent, as bytes: clusters and route configurations by name. */
function sent(w: { cds: Array<XdsWatch<typeof CDS>>; rds: Array<XdsWatch<typeof RDS>> }): string[] {
  const out: string[] = [];
  for (const c of w.cds)
    for (const [n, r] of [...c.resources].sort()) out.push(`cds ${n} ${Buffer.from(toBinary(ClusterSchema, r)).toString('hex')}`);
  for (const c of w.rds)
    for (const [n, r] of [...c.resources].sort()) out.push(`rds ${n} ${Buffer.from(toBinary(RouteConfigurationSchema, r)).toString('hex')}`);
  return out;
}

const CACHE_METRICS = ['xds_cache_reads', 'xds_cache_evictions', 'xds_cache_size'];

t.test('PILOT_XDS_CACHE_STATS=true: hits, misses, clear evictions and the size on /metrics', async (t) => {
  const run = await start(t, { PILOT_XDS_CACHE_STATS: 'true' });
  const w = connect(run);
  for (const c of w.cds) await c.until(hasCluster('api'), 'initial clusters');
  for (const r of w.rds) await r.until((x) => x.resources.has('8080'), 'routes 8080');
  let m = await scrape(run);
  t.equal(m.types.get('xds_cache_reads'), 'counter');
  t.equal(m.types.get('xds_cache_evictions'), 'counter');
  t.equal(m.types.get('xds_cache_size'), 'gauge');
  t.same([...new Set((m.samples.get('xds_cache_reads') ?? []).map((s) => s.labels['type']))].sort(), ['hit', 'miss'], 'reads by type hit|miss');
  t.same(
    [...new Set((m.samples.get('xds_cache_evictions') ?? []).map((s) => s.labels['type']))].sort(),
    ['clear', 'size'],
    'evictions by type clear|size',
  );
  t.same(
    (m.samples.get('xds_cache_size') ?? []).map((s) => s.labels),
    [{}],
    'one unlabelled size, as Istio records it',
  );
  t.ok(sampleSum(m, 'xds_cache_reads', { type: 'miss' }) > 0, 'the first sidecar missed');
  t.ok(sampleSum(m, 'xds_cache_reads', { type: 'hit' }) > 0, 'the second sidecar (same namespace) was served from the cache');
  t.ok(sampleSum(m, 'xds_cache_size') > 0, 'entries are held');
  t.equal(sampleSum(m, 'xds_cache_evictions', { type: 'clear' }), 0, 'nothing cleared before a config change');
  // two more push contexts: the first one's entries are cleared once a third exists
  await addService(run, w.cds, 'cart', 3);
  await addService(run, w.cds, 'pay', 4);
  m = await scrape(run);
  t.ok(
    sampleSum(m, 'xds_cache_evictions', { type: 'clear' }) > 0,
    `entries of a superseded push context are cleared (${sampleSum(m, 'xds_cache_evictions', { type: 'clear' })})`,
  );
  t.equal(sampleSum(m, 'xds_cache_evictions', { type: 'size' }), 0, 'nothing evicted for size under PILOT_XDS_CACHE_SIZE=60000');
});

t.test('PILOT_XDS_CACHE_SIZE bounds the cache: size evictions, at most that many entries', async (t) => {
  const run = await start(t, { PILOT_XDS_CACHE_STATS: 'true', PILOT_XDS_CACHE_SIZE: '3' });
  const w = connect(run);
  for (const c of w.cds) await c.until(hasCluster('api'), 'initial clusters');
  const m = await scrape(run);
  t.ok(sampleSum(m, 'xds_cache_evictions', { type: 'size' }) > 0, 'least recently used entries evicted');
  t.ok(sampleSum(m, 'xds_cache_size') <= 3, `size ${sampleSum(m, 'xds_cache_size')} <= 3`);
});

t.test('without PILOT_XDS_CACHE_STATS the cache metrics are not exported (Istio registers them disabled)', async (t) => {
  const run = await start(t, {});
  const w = connect(run);
  for (const c of w.cds) await c.until(hasCluster('api'), 'initial clusters');
  const m = await scrape(run);
  t.ok(m.types.has('pilot_xds'), 'the other metrics are there');
  for (const name of CACHE_METRICS) t.notOk(m.types.has(name), `${name} absent`);
});

t.test('PILOT_ENABLE_XDS_CACHE=false: never consulted, and proxies get the same bytes as with the cache', async (t) => {
  const on = await start(t, { PILOT_XDS_CACHE_STATS: 'true' });
  const off = await start(t, { PILOT_XDS_CACHE_STATS: 'true', PILOT_ENABLE_XDS_CACHE: 'false' });
  const got: string[][] = [];
  for (const run of [on, off]) {
    const w = connect(run);
    for (const c of w.cds) await c.until(hasCluster('api'), 'initial clusters');
    for (const r of w.rds) await r.until((x) => x.resources.has('8080'), 'routes 8080');
    await addService(run, w.cds, 'cart', 3);
    // the routes follow the new service (a virtual host for cart on 8080)
    for (const r of w.rds) await r.until((x) => x.resources.get('8080')?.virtualHosts.some((v) => v.name.startsWith('cart.')), 'cart routes');
    got.push(sent(w));
  }
  t.ok(got[0]!.length >= 8, 'clusters and routes of two sidecars');
  t.same(got[1], got[0], 'byte-identical with and without the cache');
  const m = await scrape(off);
  t.equal(sampleSum(m, 'xds_cache_reads'), 0, 'no reads with the cache off');
  t.equal(sampleSum(m, 'xds_cache_size'), 0);
});
