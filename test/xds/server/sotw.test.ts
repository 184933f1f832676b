// State-of-the-world ADS over a real grpc-js server and client with the generated Envoy protos. Expected
// behaviour is Envoy's xDS protocol (version/nonce/ACK/NACK, wildcard and by-name types) and Istio's
// DiscoveryServer (push order, NACK metrics, no resend on ACK or NACK, stale nonces ignored).
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { StatusSchema } from '../../../src/gen/google/rpc/status_pb';
import {
  captureLogs,
  CDS,
  CLUSTER_A,
  CLUSTER_B,
  claIps,
  EDS,
  HOST_A,
  LDS,
  metricValue,
  names,
  node,
  pushReq,
  RDS,
  SotwStream,
  startServer,
  world,
  serverWithStream,
} from './helpers';
import { waitFor } from '../../helpers/wait';

const W1 = world('2026-11-22T04:00:00Z', { [CLUSTER_A]: ['10.1.0.1'], [CLUSTER_B]: ['10.2.0.1'] });

/** Subscribes to CDS, EDS, LDS, RDS the way Envoy does at start-up and ACKs each answer. */
async function bootstrap(s: SotwStream, nodeId?: string) {
  s.send({ node: node(nodeId), typeUrl: CDS });
  const cds = await s.expect(CDS);
  s.ack(cds);
  s.send({ typeUrl: EDS, resourceNames: names(cds) });
  const eds = await s.expect(EDS);
  s.ack(eds, names(cds));
  s.send({ typeUrl: LDS });
  const lds = await s.expect(LDS);
  s.ack(lds);
  s.send({ typeUrl: RDS, resourceNames: ['80'] });
  const rds = await s.expect(RDS);
  s.ack(rds, ['80']);
  return { cds, eds, lds, rds };
}

/** A request that always gets an answer; the next response must be its answer if nothing else was sent. */
async function sentinel(s: SotwStream): Promise<void> {
  s.send({ typeUrl: 'type.googleapis.com/envoy.config.listener.v3.Listener', versionInfo: '', responseNonce: '' });
  await s.expect(LDS);
}

t.test('initial CDS, EDS, LDS, RDS carry the push version and unique nonces', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  const { cds, eds, lds, rds } = await bootstrap(s);
  t.same(names(cds), [CLUSTER_A, CLUSTER_B].sort());
  t.same(names(eds), [CLUSTER_A, CLUSTER_B].sort());
  t.same(eds.resources.map((r) => claIps(r)).sort(), [['10.1.0.1'], ['10.2.0.1']]);
  t.same(names(lds), ['0.0.0.0_80']);
  t.same(names(rds), ['80']);
  for (const r of [cds, eds, lds, rds]) {
    t.match(r.versionInfo, /^2026-11-22T04:00:00Z\/\d+$/, `${r.typeUrl} version is the push context version plus a counter`);
    t.ok(r.nonce.length > 0, 'nonce set');
  }
  t.equal(new Set([cds, eds, lds, rds].map((r) => r.nonce)).size, 4, 'every response has its own nonce');
  t.equal(new Set([cds, eds, lds, rds].map((r) => r.versionInfo)).size, 1, 'initial state is one version');

  await waitFor('all ACKs processed', () => srv.ads.connections()[0]?.watches.every((w) => w.nonceAcked === w.nonceSent) ?? false, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  const [con] = srv.ads.connections();
  t.match(con!.conId, /^app-1\.default-\d+$/, 'conID is <proxy id>-<counter>');
  t.same(
    con!.watches.map((w) => w.typeUrl),
    [CDS, EDS, LDS, RDS],
    'watches listed in push order',
  );
  for (const w of con!.watches) t.equal(w.versionAcked, cds.versionInfo);
  t.equal(con!.id, con!.conId);
  t.equal(con!.proxy.nodeId, 'sidecar~10.0.0.1~app-1.default~default.svc.cluster.local');

  const now = srv.ads.resourcesFor(con!.conId, EDS)!;
  t.same(now.resources.map((r) => r.name).sort(), [CLUSTER_A, CLUSTER_B].sort(), 'resourcesFor uses the watch');
  t.equal(now.version, cds.versionInfo);
  t.equal(srv.ads.resourcesFor('nope-9', CDS), undefined);
});

t.test('an ACK (version and nonce echoed) is not answered', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  s.send({ node: node(), typeUrl: CDS });
  const cds = await s.expect(CDS);
  const before = srv.gens.calls[CDS];
  s.ack(cds);
  s.ack(cds); // duplicate ACK: still nothing to say
  await sentinel(s);
  t.equal(srv.gens.calls[CDS], before, 'no regeneration for an ACK');
  t.equal(s.inbox.pending(), 0);
  const w = srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!;
  t.equal(w.nonceAcked, cds.nonce);
  t.equal(w.versionAcked, cds.versionInfo);
});

t.test('a stale nonce is ignored and counted', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  s.send({ node: node(), typeUrl: CDS });
  const first = await s.expect(CDS);
  s.ack(first);
  await waitFor('first ACK processed', () => srv.ads.connections()[0]?.watches[0]?.nonceAcked === first.nonce, { timeoutMs: 5_000, intervalMs: 5 });
  const W2 = world('2026-11-22T04:01:00Z', { [CLUSTER_A]: ['10.1.0.1'] });
  srv.ads.pushAll(pushReq(W2), { immediate: true });
  const second = await s.expect(CDS);
  const expiredBefore = await metricValue('pilot_xds_expired_nonce', { type: 'cds' });
  // A request still carrying the first nonce, with a different name list, must not count as anything.
  s.send({ typeUrl: CDS, versionInfo: first.versionInfo, responseNonce: first.nonce, resourceNames: ['x'] });
  await sentinel(s);
  t.equal(await metricValue('pilot_xds_expired_nonce', { type: 'cds' }), expiredBefore + 1);
  const w = srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!;
  t.equal(w.nonceSent, second.nonce);
  t.equal(w.nonceAcked, first.nonce, 'stale request is not an ACK');
  t.equal(w.wildcard, true, 'stale request did not change the subscription');
});

t.test('a NACK is logged, counted, not answered, and the next push still goes out', async (t) => {
  const sink = captureLogs(t);
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  s.send({ node: node(), typeUrl: CDS });
  const cds = await s.expect(CDS);
  const totalBefore = await metricValue('pilot_total_xds_rejects', { type: 'cds' });
  const gaugeBefore = await metricValue('pilot_xds_cds_reject', { node: 'app-1.default', err: 'Internal' });
  // Envoy NACK: the previous good version (none yet), the rejected nonce, and error_detail.
  s.send({
    typeUrl: CDS,
    versionInfo: '',
    responseNonce: cds.nonce,
    errorDetail: create(StatusSchema, { code: grpc.status.INTERNAL, message: 'cluster outbound|80||a: bad connect_timeout' }),
  });
  await sentinel(s);
  t.equal(s.inbox.pending(), 0, 'the NACK caused no resend');
  t.equal(await metricValue('pilot_total_xds_rejects', { type: 'cds' }), totalBefore + 1);
  t.equal(await metricValue('pilot_xds_cds_reject', { node: 'app-1.default', err: 'Internal' }), gaugeBefore + 1);
  const line = sink.lines().find((l) => l.includes('ACK ERROR'));
  t.ok(line, 'NACK logged');
  t.match(line!, /\twarn\tads\t/);
  t.match(line!, /ADS:CDS: ACK ERROR app-1\.default-\d+ Internal:cluster outbound\|80\|\|a: bad connect_timeout/);
  const w = srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!;
  t.equal(w.lastNack?.message, 'cluster outbound|80||a: bad connect_timeout');
  t.equal(w.lastNack?.nonce, cds.nonce);

  // The same content pushed again is not resent (it is what was rejected): no loop.
  srv.ads.pushAll(pushReq(world('same-config', W1.clusters)), { immediate: true });
  await waitFor('push drained', () => srv.ads.stats().inFlightPushes === 0 && srv.ads.stats().pendingPushes === 0, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  await sentinel(s);
  t.equal(s.inbox.pending(), 0, 'unchanged config after a NACK is not pushed again');

  // A fixed config goes out.
  const W2 = world('fixed', { [CLUSTER_A]: ['10.1.0.1'] });
  srv.ads.pushAll(pushReq(W2), { immediate: true });
  const next = await s.expect(CDS);
  t.match(next.versionInfo, /^fixed\//);
  t.same(names(next), [CLUSTER_A]);
  s.ack(next);
  await waitFor('ACK seen', () => srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!.nonceAcked === next.nonce, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  t.equal(srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!.lastNack, undefined, 'an ACK clears the NACK');
});

t.test('a changed resource list under the same nonce is a new subscription', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  s.send({ node: node(), typeUrl: CDS });
  s.ack(await s.expect(CDS));
  s.send({ typeUrl: EDS, resourceNames: [CLUSTER_A] });
  const eds = await s.expect(EDS);
  t.same(names(eds), [CLUSTER_A]);
  // Envoy adds a cluster: same version and nonce, one more name. Only the new one needs sending.
  s.send({ typeUrl: EDS, versionInfo: eds.versionInfo, responseNonce: eds.nonce, resourceNames: [CLUSTER_A, CLUSTER_B] });
  const more = await s.expect(EDS);
  t.same(names(more), [CLUSTER_B]);
  // Dropping a name needs no answer.
  s.send({ typeUrl: EDS, versionInfo: more.versionInfo, responseNonce: more.nonce, resourceNames: [CLUSTER_B] });
  await sentinel(s);
  t.same(srv.ads.connections()[0]!.watches.find((w) => w.typeUrl === EDS)!.resourceNames, [CLUSTER_B]);
  // An empty list for a by-name type ends the watch.
  s.send({ typeUrl: EDS, versionInfo: more.versionInfo, responseNonce: more.nonce, resourceNames: [] });
  await sentinel(s);
  t.notOk(
    srv.ads.connections()[0]!.watches.some((w) => w.typeUrl === EDS),
    'EDS unsubscribed',
  );
});

t.test('a reconnecting client gets the full state on its new stream', async (t) => {
  const srv = await startServer(W1);
  t.teardown(srv.close);
  const s1 = new SotwStream(srv.address);
  const first = await bootstrap(s1);
  const id1 = srv.ads.connections()[0]!.conId;
  s1.close();
  await waitFor('old connection released', () => srv.ads.connections().length === 0, { timeoutMs: 5_000, intervalMs: 5 });

  const s2 = new SotwStream(srv.address);
  t.teardown(() => s2.close());
  // Envoy reconnecting sends what it runs and the last nonce it saw; this server never sent that nonce on
  // this stream, so it answers with everything.
  s2.send({ node: node(), typeUrl: CDS, versionInfo: first.cds.versionInfo, responseNonce: first.cds.nonce });
  const cds = await s2.expect(CDS);
  t.same(names(cds), [CLUSTER_A, CLUSTER_B].sort());
  t.not(cds.nonce, first.cds.nonce);
  s2.send({ typeUrl: EDS, versionInfo: first.eds.versionInfo, responseNonce: first.eds.nonce, resourceNames: names(cds) });
  t.same(names(await s2.expect(EDS)), [CLUSTER_A, CLUSTER_B].sort());
  const id2 = srv.ads.connections()[0]!.conId;
  t.not(id2, id1, 'a new connection ID');
  t.equal(await metricValue('pilot_xds', { version: '1.26.0' }), 1, 'pilot_xds counts the live connection only');
});

t.test('a config change reaches the client with a new version, clusters first, unchanged types skipped', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  const { cds } = await bootstrap(s);
  const pushesBefore = await metricValue('pilot_xds_pushes', { type: 'lds' });
  const series = [
    ['pilot_proxy_convergence_time', {}],
    ['pilot_proxy_queue_time', {}],
    ['pilot_xds_send_time', {}],
    ['pilot_xds_config_size_bytes', { type: CDS }],
    ['pilot_xds_pushes', { type: 'cds' }],
    ['pilot_push_triggers', { type: 'config' }],
  ] as const;
  const before = await Promise.all(series.map(([n, l]) => metricValue(n, l)));
  const W2 = world('2026-11-22T04:05:00Z', { ...W1.clusters, 'outbound|80||c.default.svc.cluster.local': ['10.3.0.1'] });
  srv.setWorld(W2);
  srv.ads.pushAll(pushReq(W2, { configsUpdated: new Set(['ServiceEntry/default/c']) }));
  const cds2 = await s.expect(CDS);
  t.match(cds2.versionInfo, /^2026-11-22T04:05:00Z\/\d+$/);
  t.not(cds2.versionInfo, cds.versionInfo);
  t.equal(cds2.resources.length, 3, 'clusters are sent complete');
  // Warming: endpoints of every watched cluster follow right after the clusters, unchanged or not.
  const eds2 = await s.expect(EDS);
  t.same(names(eds2), [CLUSTER_A, CLUSTER_B].sort());
  t.equal(eds2.versionInfo, cds2.versionInfo);
  s.ack(cds2);
  await sentinel(s);
  t.equal(await metricValue('pilot_xds_pushes', { type: 'lds' }), pushesBefore + 1, 'unchanged listeners were not pushed (only the sentinel answer)');
  const after = await Promise.all(series.map(([n, l]) => metricValue(n, l)));
  series.forEach(([n], i) => t.ok(after[i]! > before[i]!, `${n} recorded the push`));
});

t.test("a full push that changes every type arrives in Istio's order CDS, EDS, LDS, RDS", async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  // Subscribe in the reverse order to show that the order comes from the server.
  s.send({ node: node(), typeUrl: RDS, resourceNames: ['80'] });
  s.ack(await s.expect(RDS), ['80']);
  s.send({ typeUrl: LDS });
  s.ack(await s.expect(LDS));
  s.send({ typeUrl: EDS, resourceNames: [CLUSTER_A] });
  s.ack(await s.expect(EDS), [CLUSTER_A]);
  s.send({ typeUrl: CDS });
  s.ack(await s.expect(CDS));
  const W2 = world(
    'all-new',
    { [CLUSTER_A]: ['10.1.0.9'], [CLUSTER_B]: ['10.2.0.1'], 'outbound|81||c.default.svc.cluster.local': [] },
    ['0.0.0.0_80', '0.0.0.0_81'],
    { '80': 'vh2' },
  );
  srv.ads.pushAll(pushReq(W2), { immediate: true });
  const order: string[] = [];
  for (let i = 0; i < 4; i++) order.push((await s.next('push')).typeUrl);
  t.same(order, [CDS, EDS, LDS, RDS]);
});

t.test('a push that leaves clusters and listeners unchanged neither generates nor sends them', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  const { rds } = await bootstrap(s);
  const calls = { ...srv.gens.calls };
  const W2 = world('routes-only', W1.clusters, undefined, { '80': 'vh2' });
  srv.setWorld(W2);
  srv.ads.pushAll(pushReq(W2, { configsUpdated: new Set(['VirtualService/default/r']), unchangedTypes: new Set([CDS, LDS]) }), { immediate: true });
  const next = await s.next('push');
  t.equal(next.typeUrl, RDS, 'the route configuration comes first: no clusters, endpoints or listeners before it');
  t.not(next.versionInfo, rds.versionInfo);
  t.equal(srv.gens.calls[CDS], calls[CDS], 'clusters not generated');
  t.equal(srv.gens.calls[LDS], calls[LDS], 'listeners not generated');
  // Without the claim the same push regenerates clusters and listeners (Istio's skip lists keep them for a VirtualService).
  s.ack(next, ['80']);
  srv.ads.pushAll(pushReq(W2, { configsUpdated: new Set(['VirtualService/default/r']) }), { immediate: true });
  await sentinel(s);
  t.equal(srv.gens.calls[CDS], calls[CDS]! + 1, 'clusters generated');
  t.ok(srv.gens.calls[LDS]! >= calls[LDS]! + 2, 'listeners generated (and the sentinel answered)');
});

t.test('with a push throttle of 1 every connection is still pushed', async (t) => {
  const srv = await startServer(W1, { pushThrottle: 1 });
  t.teardown(srv.close);
  t.equal(srv.ads.pushThrottle, 1);
  const clients = [1, 2, 3].map(() => new SotwStream(srv.address));
  t.teardown(() => clients.forEach((c) => c.close()));
  for (const [i, c] of clients.entries()) {
    c.send({ node: node(`sidecar~10.0.0.${i + 1}~app-${i}.default~default.svc.cluster.local`), typeUrl: CDS });
    c.ack(await c.expect(CDS));
  }
  const W2 = world('throttled', { [CLUSTER_A]: ['10.1.0.1'] });
  srv.ads.pushAll(pushReq(W2), { immediate: true });
  for (const c of clients) t.match((await c.expect(CDS)).versionInfo, /^throttled\//);
});

t.test('an endpoints-only change pushes only the changed EDS resources', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  await bootstrap(s);
  const calls = { ...srv.gens.calls };
  srv.gens.edsAsked = [];
  const W2 = world(W1.version, { [CLUSTER_A]: ['10.1.0.1', '10.1.0.2'], [CLUSTER_B]: ['10.2.0.1'] });
  srv.ads.pushAll(pushReq(W2, { full: false, edsUpdates: new Set([HOST_A]), reasons: new Map([['endpoint', 1]]) }));
  const eds = await s.expect(EDS);
  t.same(names(eds), [CLUSTER_A], 'only the changed host');
  t.same(claIps(eds.resources[0]!), ['10.1.0.1', '10.1.0.2']);
  t.same(srv.gens.edsAsked, [[CLUSTER_A]], 'EDS generated for the changed host only');
  t.equal(srv.gens.calls[CDS], calls[CDS], 'no CDS generation');
  t.equal(srv.gens.calls[LDS], calls[LDS], 'no LDS generation');
  t.equal(srv.gens.calls[RDS], calls[RDS], 'no RDS generation');
  await sentinel(s);
  t.equal(s.inbox.pending(), 0);
});

t.test('a burst of pushAll calls is debounced into one or two pushes', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1, { debounceAfterMs: 20, debounceMaxMs: 5000 });
  const { cds } = await bootstrap(s);
  const dispatchedBefore = srv.ads.stats().pushesDispatched;
  const debounceBefore = await metricValue('pilot_debounce_time');
  for (let i = 1; i <= 20; i++) {
    const w = world(`burst-${i}`, { ...W1.clusters, [`outbound|80||n${i}.default.svc.cluster.local`]: ['10.9.0.1'] });
    srv.setWorld(w);
    srv.ads.pushAll(pushReq(w, { configsUpdated: new Set([`ServiceEntry/default/n${i}`]) }));
  }
  const seen: string[] = [];
  for (;;) {
    const r = await s.next('the debounced push');
    if (r.typeUrl === CDS) {
      seen.push(r.versionInfo);
      s.ack(r);
      if (r.versionInfo.startsWith('burst-20/')) break;
    }
  }
  t.ok(seen.length >= 1 && seen.length <= 2, `CDS pushes for 20 changes: ${seen.length}`);
  const dispatched = srv.ads.stats().pushesDispatched - dispatchedBefore;
  t.ok(dispatched >= 1 && dispatched <= 2, `merged pushes dispatched: ${dispatched}`);
  t.equal((await metricValue('pilot_debounce_time')) - debounceBefore, dispatched, 'pilot_debounce_time observed per merged push');
  t.not(seen[seen.length - 1], cds.versionInfo);
});

t.test('a missing node or an unparsable node ID rejects the stream with INVALID_ARGUMENT', async (t) => {
  const { srv, s } = await serverWithStream(t, SotwStream, W1);
  s.send({ typeUrl: CDS });
  const st = await s.inbox.status();
  t.equal(st.code, grpc.status.INVALID_ARGUMENT);
  t.match(st.details, /missing node information/);

  const s2 = new SotwStream(srv.address);
  t.teardown(() => s2.close());
  s2.send({ node: node('not-a-node-id'), typeUrl: CDS });
  const st2 = await s2.inbox.status();
  t.equal(st2.code, grpc.status.INVALID_ARGUMENT);
  t.match(st2.details, /invalid node "not-a-node-id": node ID not-a-node-id does not have four/);
  t.equal(srv.ads.connections().length, 0);
});

t.test('a throwing generator is counted and logged; nothing is sent and the stream stays', async (t) => {
  const sink = captureLogs(t);
  const srv = await startServer(W1);
  t.teardown(srv.close);
  srv.gens.throwFor.add(CDS);
  const s = new SotwStream(srv.address);
  t.teardown(() => s.close());
  const before = await metricValue('pilot_total_xds_internal_errors');
  s.send({ node: node(), typeUrl: CDS });
  s.send({ typeUrl: LDS });
  const lds = await s.expect(LDS);
  t.same(names(lds), ['0.0.0.0_80'], 'the next request is answered: the stream survived');
  t.equal(await metricValue('pilot_total_xds_internal_errors'), before + 1);
  t.match(sink.text, /ADS:CDS: generation failed for node:app-1\.default-\d+: boom generating/);
});

t.test('forceDisconnect ends one stream; stop() ends all and refuses new ones', async (t) => {
  const srv = await startServer(W1);
  t.teardown(srv.close);
  const s1 = new SotwStream(srv.address);
  const s2 = new SotwStream(srv.address);
  t.teardown(() => {
    s1.close();
    s2.close();
  });
  s1.send({ node: node('sidecar~10.0.0.1~app-1.default~default.svc.cluster.local'), typeUrl: CDS });
  await s1.expect(CDS);
  s2.send({ node: node('router~10.0.0.9~gw-0.mesh-system~mesh-system.svc.cluster.local'), typeUrl: CDS });
  await s2.expect(CDS);
  const ids = srv.ads.connections().map((c) => c.conId);
  t.equal(ids.length, 2);
  const gw = ids.find((i) => i.startsWith('gw-0.mesh-system-'))!;
  t.equal(srv.ads.forceDisconnect(gw), true);
  t.equal(srv.ads.forceDisconnect('nope-1'), false);
  const st = await s2.inbox.status();
  t.equal(st.code, grpc.status.UNAVAILABLE);
  t.equal(srv.ads.connections().length, 1);

  await srv.ads.stop(1000);
  const st1 = await s1.inbox.status();
  t.equal(st1.code, grpc.status.UNAVAILABLE);
  t.match(st1.details, /shutting down/);
  const s3 = new SotwStream(srv.address);
  t.teardown(() => s3.close());
  const st3 = await s3.inbox.status();
  t.equal(st3.code, grpc.status.UNAVAILABLE, 'new streams are refused while stopping');
});
