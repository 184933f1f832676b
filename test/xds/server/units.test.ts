// Pure parts of the ADS server: request merging (Istio's PushRequest.Merge), the push queue (Istio's
// PushQueue), debouncing, throttle sizing, gRPC server options from the keepalive flags, env settings, and
// the grpc-js adapter for generated services.
import t from 'tap';
import { AggregatedDiscoveryService } from '../../../src/gen/envoy/service/discovery/v3/ads_pb';
import {
  DeltaDiscoveryResponseSchema,
  DiscoveryRequestSchema,
  DiscoveryResponseSchema,
  ResourceSchema,
} from '../../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { create, toBinary } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { ClusterSchema } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { ControlPlaneSchema } from '../../../src/gen/envoy/config/core/v3/base_pb';
import { encodeDeltaDiscoveryResponse, encodeDiscoveryResponse } from '../../../src/xds/server/encode';
import { hashResource } from '../../../src/xds/server/resources';
import { grpcMethodPath, grpcServiceDefinition } from '../../../src/lib/xds/grpc';
import { parseDurationMs } from '../../../src/lib/duration';
import { Debouncer, type DebouncedPush } from '../../../src/xds/server/debounce';
import { PushQueue } from '../../../src/xds/server/push-queue';
import {
  adsSettingsFromEnv,
  xdsCacheSettingsFromEnv,
  clusterHostname,
  grpcServerOptions,
  mergePushRequests,
  newPushRequest,
  orderTypes,
  resolvePushThrottle,
} from '../../../src/xds/server/index';
import type { PushRequest } from '../../../src/xds/types';
import { sotwOnRequest } from '../../../src/xds/server/sotw';
import { deltaDiff, deltaOnRequest, deltaPushDiff, deltaRecordSent } from '../../../src/xds/server/delta';
import { SendBudget } from '../../../src/xds/server/connection';
import { newWatch, type WatchState } from '../../../src/xds/server/watch';
import { CDS, EDS, LDS, RDS } from './helpers';
import { waitFor } from '../../helpers/wait';

type P = { version: string };
const p1: P = { version: 'v1' };
const p2: P = { version: 'v2' };

t.test('mergePushRequests: full wins, later push, earliest start, reasons add, empty means all', async (t) => {
  const a = newPushRequest(p1, { full: false, edsUpdates: ['a.ns'], configsUpdated: ['ServiceEntry/ns/a'], reasons: { endpoint: 1 }, start: 100 });
  const b = newPushRequest(p2, {
    full: false,
    edsUpdates: ['b.ns'],
    configsUpdated: ['ServiceEntry/ns/b'],
    reasons: { endpoint: 2, config: 1 },
    start: 50,
  });
  const m = mergePushRequests(a, b);
  t.equal(m.full, false);
  t.same([...m.edsUpdates].sort(), ['a.ns', 'b.ns']);
  t.same([...m.configsUpdated].sort(), ['ServiceEntry/ns/a', 'ServiceEntry/ns/b']);
  t.same(Object.fromEntries(m.reasons), { endpoint: 3, config: 1 });
  t.equal(m.push, p2);
  t.equal(m.start, 50);

  const full = newPushRequest(p2, { full: true, start: 200 });
  const mf = mergePushRequests(a, full);
  t.equal(mf.full, true);
  t.equal(mf.configsUpdated.size, 0, 'an unspecific request makes the merge unspecific');
  const allEds = newPushRequest(p1, { full: false, start: 10 });
  t.equal(mergePushRequests(a, allEds).edsUpdates.size, 0, 'incremental for all hosts absorbs a host list');
  t.same([...a.edsUpdates], ['a.ns'], 'inputs untouched');
});

t.test('mergePushRequests: types left unchanged are those both requests leave unchanged', async (t) => {
  const cds = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
  const lds = 'type.googleapis.com/envoy.config.listener.v3.Listener';
  const a = newPushRequest(p1, { configsUpdated: ['VirtualService/ns/a'], unchangedTypes: [cds, lds] });
  const b = newPushRequest(p2, { configsUpdated: ['VirtualService/ns/b'], unchangedTypes: [cds] });
  t.same([...(mergePushRequests(a, b).unchangedTypes ?? [])], [cds], 'the intersection');
  t.same([...(mergePushRequests(b, a).unchangedTypes ?? [])], [cds], 'either order');
  const other = newPushRequest(p2, { configsUpdated: ['DestinationRule/ns/a'] });
  t.equal(mergePushRequests(a, other).unchangedTypes, undefined, 'a request that says nothing: nothing is known unchanged');
  t.equal(mergePushRequests(other, a).unchangedTypes, undefined, 'also when it came first');
  const eds = newPushRequest(p2, { full: false, edsUpdates: ['h'] });
  t.equal(mergePushRequests(a, eds).unchangedTypes, undefined, 'an endpoint push merged in');
  const rds = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
  t.equal(mergePushRequests(a, newPushRequest(p2, { unchangedTypes: [rds] })).unchangedTypes, undefined, 'no common type');
});

function qp(push: P, version: string, init: Partial<PushRequest<P>> = {}) {
  return { req: { ...newPushRequest(push, { full: false, edsUpdates: ['h'] }), ...init }, version, enqueuedAt: Date.now() };
}

t.test('PushQueue merges waiting pushes and never hands out a connection twice at once', async (t) => {
  const q = new PushQueue<string, P>();
  q.enqueue('c1', qp(p1, 'v1/1'));
  q.enqueue('c2', qp(p1, 'v1/1'));
  q.enqueue('c1', qp(p2, 'v2/2', { full: true }));
  t.equal(q.pending(), 2, 'c1 waits once');
  const first = q.dequeue()!;
  t.equal(first.con, 'c1');
  t.equal(first.push.req.full, true, 'merged: full wins');
  t.equal(first.push.version, 'v2/2', 'merged: later version');
  // c1 changes again while being pushed: parked, not handed out.
  q.enqueue('c1', qp(p2, 'v2/3'));
  const second = q.dequeue()!;
  t.equal(second.con, 'c2');
  t.equal(q.dequeue(), undefined, 'c1 is not dequeued while in progress');
  q.markDone('c1');
  const third = q.dequeue()!;
  t.equal(third.con, 'c1', 'parked push re-queued on done');
  t.equal(third.push.version, 'v2/3');
  q.markDone('c1');
  q.markDone('c2');
  t.equal(q.dequeue(), undefined);
  q.enqueue('c3', qp(p1, 'x'));
  q.remove('c3');
  t.equal(q.dequeue(), undefined, 'removed connections are skipped');
});

t.test('Debouncer merges a burst, honours the cap, and lets EDS through when told', async (t) => {
  const out: Array<{ req: PushRequest<P>; info: DebouncedPush }> = [];
  const d = new Debouncer<P>({ afterMs: 30, maxMs: 10_000, enableEds: true }, (req, info) => out.push({ req, info }));
  t.teardown(() => d.stop());
  for (let i = 0; i < 20; i++)
    d.submit(newPushRequest({ version: `v${i}` }, { configsUpdated: [`VirtualService/ns/r${i}`], reasons: { config: 1 } }));
  t.equal(d.pendingEvents(), 20);
  await waitFor('debounced push', () => out.length === 1, { timeoutMs: 5_000, intervalMs: 5 });
  t.equal(out[0]!.info.events, 20);
  t.equal(out[0]!.req.push.version, 'v19');
  t.equal(out[0]!.req.configsUpdated.size, 20);
  t.equal(out[0]!.req.reasons.get('config'), 20);
  t.ok(out[0]!.info.waitedMs >= 30);

  // Changes that never pause are still pushed once the cap passes.
  const capped: DebouncedPush[] = [];
  const d2 = new Debouncer<P>({ afterMs: 40, maxMs: 100, enableEds: true }, (_r, info) => capped.push(info));
  t.teardown(() => d2.stop());
  const timer = setInterval(() => d2.submit(newPushRequest(p1)), 10);
  t.teardown(() => clearInterval(timer));
  await waitFor('capped push', () => capped.length >= 1, { timeoutMs: 3000, intervalMs: 5 });
  clearInterval(timer);
  t.ok(capped[0]!.waitedMs >= 100 && capped[0]!.events >= 2, `pushed at the cap after ${capped[0]!.waitedMs}ms`);

  const direct: DebouncedPush[] = [];
  const d3 = new Debouncer<P>({ afterMs: 10_000, maxMs: 10_000, enableEds: false }, (_r, info) => direct.push(info));
  t.teardown(() => d3.stop());
  d3.submit(newPushRequest(p1, { full: false, edsUpdates: ['h'] }));
  t.same(direct, [{ events: 1, waitedMs: 0, debounced: false }], 'EDS bypasses debouncing when PILOT_ENABLE_EDS_DEBOUNCE=false');
  d3.submit(newPushRequest(p1, { full: true }));
  t.equal(direct.length, 1, 'full pushes are still debounced');
});

t.test("push throttle: a configured value, else Istio's min(15 + 5 × cores, 100)", async (t) => {
  t.equal(resolvePushThrottle(7, 2), 7);
  t.equal(resolvePushThrottle(0, 1), 20);
  t.equal(resolvePushThrottle(0, 2), 25);
  t.equal(resolvePushThrottle(0, 4), 35);
  t.equal(resolvePushThrottle(0, 32), 100);
});

t.test('grpcServerOptions maps the keepalive flags and gRPC env limits', async (t) => {
  const defaults = grpcServerOptions({
    keepaliveIntervalMs: parseDurationMs('30s'),
    keepaliveTimeoutMs: parseDurationMs('10s'),
    maxConnectionAgeMs: parseDurationMs('2562047h47m16.854775807s'),
    maxConnectionAgeGraceMs: 10_000,
    maxRecvMsgSize: 4194304,
    maxConcurrentStreams: 100000,
  });
  t.same(
    defaults,
    {
      'grpc.max_receive_message_length': 4194304,
      'grpc.max_concurrent_streams': 100000,
      'grpc.keepalive_time_ms': 30000,
      'grpc.keepalive_timeout_ms': 10000,
    },
    "Go's maximum duration means no connection age limit",
  );
  const aged = grpcServerOptions({
    keepaliveIntervalMs: 5000,
    keepaliveTimeoutMs: 1000,
    maxConnectionAgeMs: parseDurationMs('30m'),
    maxConnectionAgeGraceMs: 10_000,
    maxRecvMsgSize: 1024,
    maxConcurrentStreams: 10,
  });
  t.equal(aged['grpc.max_connection_age_ms'], 1_800_000);
  t.equal(aged['grpc.max_connection_age_grace_ms'], 10_000);
  t.equal(aged['grpc.keepalive_time_ms'], 5000);
});

t.test("adsSettingsFromEnv reads Istio's variables with their defaults", async (t) => {
  const d = adsSettingsFromEnv({});
  t.match(d, {
    debounceAfterMs: 100,
    debounceMaxMs: 10_000,
    enableEdsDebounce: true,
    pushThrottle: 0,
    deltaXds: true,
    identityCheck: true,
  });
  const s = adsSettingsFromEnv({
    PILOT_DEBOUNCE_AFTER: '250ms',
    PILOT_DEBOUNCE_MAX: '2s',
    PILOT_ENABLE_EDS_DEBOUNCE: 'false',
    PILOT_PUSH_THROTTLE: '3',
    MESH_DELTA_XDS: 'false',
    PILOT_ENABLE_XDS_IDENTITY_CHECK: 'false',
  });
  t.match(s, { debounceAfterMs: 250, debounceMaxMs: 2000, enableEdsDebounce: false, pushThrottle: 3, deltaXds: false, identityCheck: false });
});

t.test("xdsCacheSettingsFromEnv: Istio's cache switches and their defaults", async (t) => {
  // Istio 1.26 pilot/pkg/features: PILOT_ENABLE_XDS_CACHE, _CDS_CACHE, _RDS_CACHE true; PILOT_XDS_CACHE_SIZE 60000; PILOT_XDS_CACHE_STATS false
  t.same(xdsCacheSettingsFromEnv({}), { enabled: true, size: 60000, cds: true, rds: true, stats: false });
  const s = xdsCacheSettingsFromEnv({
    PILOT_ENABLE_XDS_CACHE: 'false',
    PILOT_XDS_CACHE_SIZE: '10',
    PILOT_ENABLE_CDS_CACHE: 'false',
    PILOT_ENABLE_RDS_CACHE: 'false',
    PILOT_XDS_CACHE_STATS: 'true',
  });
  t.same(s, { enabled: false, size: 10, cds: false, rds: false, stats: true });
});

t.test('type helpers: push order and EDS hostnames', async (t) => {
  t.same(orderTypes([RDS, 'type.googleapis.com/x.Y', LDS, EDS, CDS]), [CDS, EDS, LDS, RDS, 'type.googleapis.com/x.Y']);
  t.equal(clusterHostname('outbound|9080|v1|reviews.default.svc.cluster.local'), 'reviews.default.svc.cluster.local');
  t.equal(clusterHostname('outbound|80||a.ns.svc.cluster.local'), 'a.ns.svc.cluster.local');
  t.equal(clusterHostname('plain-name'), 'plain-name');
});

t.test('grpc adapter: paths, stream flags and a binary round trip', async (t) => {
  const def = grpcServiceDefinition(AggregatedDiscoveryService);
  t.equal(def.streamAggregatedResources.path, '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources');
  t.equal(def.deltaAggregatedResources.path, '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources');
  t.equal(def.streamAggregatedResources.requestStream, true);
  t.equal(def.streamAggregatedResources.responseStream, true);
  t.equal(def.streamAggregatedResources.originalName, 'StreamAggregatedResources');
  t.equal(grpcMethodPath(AggregatedDiscoveryService, AggregatedDiscoveryService.method.deltaAggregatedResources), def.deltaAggregatedResources.path);
  const req = create(DiscoveryRequestSchema, { typeUrl: CDS, resourceNames: ['a', 'b'], responseNonce: 'n1' });
  const bytes = def.streamAggregatedResources.requestSerialize(req);
  t.ok(Buffer.isBuffer(bytes), 'serializes to a Buffer');
  const back = def.streamAggregatedResources.requestDeserialize(bytes);
  t.same(back.resourceNames, ['a', 'b']);
  t.equal(back.responseNonce, 'n1');
});

t.test('SotW rules: warming after a CDS reconnect answers the next EDS request even if it looks like an ACK', async (t) => {
  const watches = new Map<string, WatchState>();
  t.match(sotwOnRequest(watches, { typeUrl: EDS, resourceNames: ['c1'], responseNonce: '', versionInfo: '' }, 1), { kind: 'respond', why: 'init' });
  watches.get(EDS)!.nonceSent = 'e1';
  t.match(sotwOnRequest(watches, { typeUrl: CDS, resourceNames: [], responseNonce: 'old-server-nonce', versionInfo: 'v0' }, 2), {
    kind: 'respond',
    why: 'init',
  });
  t.equal(watches.get(CDS)!.wildcard, true);
  t.match(sotwOnRequest(watches, { typeUrl: EDS, resourceNames: ['c1'], responseNonce: 'e1', versionInfo: 'v1' }, 3), {
    kind: 'respond',
    why: 'warming',
  });
  t.match(sotwOnRequest(watches, { typeUrl: EDS, resourceNames: ['c1'], responseNonce: 'e1', versionInfo: 'v1' }, 4), { kind: 'ack' }, 'only once');
  t.match(sotwOnRequest(watches, { typeUrl: LDS, resourceNames: ['*', 'l1'], responseNonce: '', versionInfo: '' }, 5), { kind: 'respond' });
  t.equal(watches.get(LDS)!.wildcard, true, 'explicit * is wildcard');
  t.same([...watches.get(LDS)!.names], ['l1']);
});

t.test('delta rules: legacy wildcard ends with the first explicit name; * can be added and dropped', async (t) => {
  const watches = new Map<string, WatchState>();
  const base = {
    typeUrl: CDS,
    resourceNamesSubscribe: [] as string[],
    resourceNamesUnsubscribe: [] as string[],
    initialResourceVersions: {},
    responseNonce: '',
  };
  t.match(deltaOnRequest(watches, base, 1), { respond: true, required: true, init: true });
  const w = watches.get(CDS)!;
  t.equal(w.wildcard, true, 'nothing named yet: legacy wildcard');
  w.held = w.held.with([
    ['a', 'h1'],
    ['b', 'h2'],
  ]);
  t.match(deltaOnRequest(watches, { ...base, resourceNamesSubscribe: ['a'] }, 2), { respond: true, required: true });
  t.equal(w.wildcard, false, 'an explicit name ends the legacy wildcard');
  t.same([...w.held.keys()], ['a'], 'the client keeps only what it named');
  t.match(deltaOnRequest(watches, { ...base, resourceNamesSubscribe: ['*'] }, 3), { respond: true, required: true });
  t.equal(w.wildcard, true);
  t.match(deltaOnRequest(watches, { ...base, resourceNamesUnsubscribe: ['a'] }, 4), { respond: true, required: false }, 'still covered by *: resent');
  t.equal(w.held.has('a'), false);
  const diff = deltaDiff(
    new Map([
      ['x', '1'],
      ['y', '2'],
    ]),
    [
      { name: 'x', hash: '1', h1: 0, h2: 1, size: 1, resource: undefined as never },
      { name: 'z', hash: '3', h1: 0, h2: 3, size: 1, resource: undefined as never },
    ],
    new Set(['q']),
  );
  t.same(
    diff.send.map((r) => r.name),
    ['z'],
  );
  t.same(diff.removed, ['q', 'y'], 'gone and non-existent subscribed names are removed');
});

t.test('hand-encoded responses are byte-identical to protobuf-es toBinary', async (t) => {
  const resources = [
    hashResource({ name: 'c1', resource: anyPack(ClusterSchema, create(ClusterSchema, { name: 'c1', connectTimeout: { seconds: 1n } })) }),
    hashResource({ name: 'c2', resource: anyPack(ClusterSchema, create(ClusterSchema, { name: 'c2' })) }),
    hashResource({ name: 'empty', resource: anyPack(ClusterSchema, create(ClusterSchema, {})) }),
  ];
  const cp = create(ControlPlaneSchema, { identifier: '{"Component":"meshd"}' });
  for (const controlPlane of [undefined, cp]) {
    const sotw = encodeDiscoveryResponse({ versionInfo: 'v1/2', resources, typeUrl: CDS, nonce: 'n-1', controlPlane });
    const want = toBinary(
      DiscoveryResponseSchema,
      create(DiscoveryResponseSchema, { versionInfo: 'v1/2', resources: resources.map((r) => r.resource), typeUrl: CDS, nonce: 'n-1', controlPlane }),
    );
    t.same(Buffer.from(want), sotw, `SotW ${controlPlane ? 'with' : 'without'} control plane`);
    const delta = encodeDeltaDiscoveryResponse({
      systemVersionInfo: 'v1/2',
      resources,
      typeUrl: CDS,
      nonce: 'n-2',
      removedResources: ['gone', ''],
      controlPlane,
    });
    const wantDelta = toBinary(
      DeltaDiscoveryResponseSchema,
      create(DeltaDiscoveryResponseSchema, {
        systemVersionInfo: 'v1/2',
        resources: resources.map((r) => create(ResourceSchema, { name: r.name, version: r.hash, resource: r.resource })),
        typeUrl: CDS,
        removedResources: ['gone', ''],
        nonce: 'n-2',
        controlPlane,
      }),
    );
    t.same(Buffer.from(wantDelta), delta, `delta ${controlPlane ? 'with' : 'without'} control plane`);
  }
  t.same(encodeDiscoveryResponse({ versionInfo: '', resources: [], typeUrl: '', nonce: '' }), Buffer.alloc(0), 'all defaults: empty message');
  // the second round above encoded the same lists again (their blocks reused); another list is its own block
  const one = resources.slice(0, 1);
  t.same(
    encodeDiscoveryResponse({ versionInfo: 'v', resources: one, typeUrl: CDS, nonce: 'n' }),
    Buffer.from(
      toBinary(
        DiscoveryResponseSchema,
        create(DiscoveryResponseSchema, { versionInfo: 'v', resources: one.map((r) => r.resource), typeUrl: CDS, nonce: 'n' }),
      ),
    ),
    'a shorter list of the same resources',
  );
});

t.test('SendBudget: writes beyond the budget wait, in order, and a stuck write gives its share back', async (t) => {
  const budget = new SendBudget(100, 200);
  const order: string[] = [];
  const r1 = await budget.acquire(60);
  const w2 = budget.acquire(60).then((r) => (order.push('second'), r));
  const w3 = budget.acquire(10).then((r) => (order.push('third'), r));
  await new Promise((r) => setTimeout(r, 20));
  t.same(order, [], 'the second does not fit; the third waits behind it (first come, first served)');
  r1();
  const r2 = await w2;
  const r3 = await w3;
  t.same(order, ['second', 'third']);
  t.equal(budget.inUse(), 70);
  r2();
  r2();
  t.equal(budget.inUse(), 10, 'releasing twice counts once');
  r3();
  const big = await budget.acquire(300);
  t.equal(budget.inUse(), 300, 'a response larger than the whole budget goes when nothing else is written');
  // the budget's own timer does not keep a process alive (a server does)
  const alive = setTimeout(() => undefined, 5_000);
  const t0 = Date.now();
  const small = await budget.acquire(1);
  t.ok(Date.now() - t0 >= 150, 'a write holding its share past holdMs gives it back');
  t.equal(budget.inUse(), 1);
  small();
  const big2 = await budget.acquire(300);
  let late = false;
  const waiter = budget.acquire(1).then((r) => ((late = true), r));
  await new Promise((r) => setTimeout(r, 400));
  t.equal(late, false, 'but no more than a few budgets of stalled writes: then everyone waits');
  big();
  t.equal(late, false, 'the stalled write finishing frees stalled room, not the budget');
  big2();
  (await waiter)();
  clearTimeout(alive);
  t.equal(budget.inUse(), 0);
});

t.test('delta: streams holding the same resources share one table and one diff per push, and part when they differ', async (t) => {
  const res = (name: string, hash: string, n: number) => ({ name, hash, h1: n, h2: n * 7, size: 1, resource: undefined as never });
  const v1 = [res('a', 'a1', 1), res('b', 'b1', 2)];
  const watches = [newWatch(CDS), newWatch(CDS), newWatch(CDS)];
  const diffs = watches.map((w) => deltaPushDiff(w, [...v1], new Set()));
  t.equal(diffs[0], diffs[1], 'one diff for equal tables and equal resources (in different arrays)');
  for (let i = 0; i < 3; i++) deltaRecordSent(watches[i]!, diffs[i]!);
  t.equal(watches[0]!.held, watches[2]!.held, 'one table for what they hold');
  t.same(
    [...watches[0]!.held.entries()],
    [
      ['a', 'a1'],
      ['b', 'b1'],
    ],
  );
  // the third stream's proxy is due other resources: its diff and table part from the others'
  const other = deltaPushDiff(watches[2]!, [res('a', 'a2', 3), res('b', 'b1', 2)], new Set());
  t.same(
    other.send.map((r) => r.hash),
    ['a2'],
  );
  deltaRecordSent(watches[2]!, other);
  t.not(watches[2]!.held, watches[0]!.held);
  t.equal(watches[2]!.held.get('a'), 'a2');
  t.equal(watches[0]!.held.get('a'), 'a1', 'the others still hold theirs');
  const same = deltaPushDiff(watches[0]!, v1, new Set());
  t.same([same.send, same.removed], [[], []], 'nothing new for the others');
  // equal content reached by another path is the same table
  const w4 = newWatch(CDS);
  w4.held = w4.held.with([['b', 'b1']]).with([['a', 'a1']]);
  t.equal(w4.held, watches[0]!.held, 'interned by content');
  // forced names are per stream
  const forced = deltaPushDiff(watches[0]!, v1, new Set(['a']));
  t.not(forced, same);
  t.same(
    forced.send.map((r) => r.name),
    ['a'],
  );
});

t.test('delta: answers forcing equal names (proxies of one kind subscribing) share one diff and one table; other names their own', async (t) => {
  const res = (name: string, hash: string, n: number) => ({ name, hash, h1: n, h2: n * 7, size: 1, resource: undefined as never });
  const v1 = [res('a', 'a1', 1), res('b', 'b1', 2), res('c', 'c1', 3)];
  const [w1, w2, w3, w4] = [newWatch(EDS), newWatch(EDS), newWatch(EDS), newWatch(EDS)];
  // each stream's request decodes its own Set of the same names
  const d1 = deltaPushDiff(w1, [...v1], new Set(['a', 'b', 'gone']));
  const d2 = deltaPushDiff(w2, [...v1], new Set(['gone', 'b', 'a']));
  t.equal(d1, d2, 'one diff for equal forced names');
  t.same(
    d1.send.map((r) => r.name),
    ['a', 'b', 'c'],
    'everything it does not hold',
  );
  t.same(d1.removed, ['gone'], 'a forced name that does not exist is reported removed (the client stops waiting for it)');
  deltaRecordSent(w1, d1);
  deltaRecordSent(w2, d2);
  t.equal(w1.held, w2.held, 'one table after it');
  const d3 = deltaPushDiff(w3, [...v1], new Set(['c']));
  t.not(d3, d1, 'other forced names: another diff');
  t.same(d3.removed, [], 'nothing forced is missing');
  // a full re-send (EDS after CDS) is shared too
  deltaRecordSent(w3, d3);
  const all1 = deltaPushDiff(w3, [...v1], 'all');
  deltaRecordSent(w4, deltaPushDiff(w4, [...v1], new Set()));
  const all2 = deltaPushDiff(w4, [...v1], 'all');
  t.equal(w3.held, w4.held);
  t.equal(all1, all2, "'all' on equal tables: one diff");
  t.same(
    all1.send.map((r) => r.name),
    ['a', 'b', 'c'],
  );
  // a stream holding something else is not given another table's diff
  const after = deltaPushDiff(w1, [...v1], new Set(['a', 'b', 'gone']));
  t.not(after, d1, 'a different held table: its own diff');
  t.same(
    after.send.map((r) => r.name),
    ['a', 'b'],
    'forced names are sent even when held, the others not',
  );
});
