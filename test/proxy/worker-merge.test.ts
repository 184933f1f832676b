// How engine workers' stats become one /stats (src/proxy/engine/worker/merge.ts), as Envoy's shared stats read:
// traffic stats summed over threads, config stats (Envoy's NeverImport gauges, xDS update counters) once,
// a circuit breaker open when any thread's is, and Envoy's per-worker listener stats.
import t from 'tap';
import { mergeMode, mergeStats, snapshotOf } from '../../src/proxy/engine/worker/merge';
import { StatsStore } from '../../src/proxy/stats/store';

t.test('merge modes follow what each stat counts', async (t) => {
  const table: Array<[string, string]> = [
    ['http.ingress.downstream_rq_total', 'sum'],
    ['listener.0.0.0.0_8080.downstream_cx_active', 'sum'],
    ['cluster.outbound|80||a.b.svc.cluster.local.upstream_rq_200', 'sum'],
    ['cluster.outbound|80||a.b.svc.cluster.local.upstream_cx_active', 'sum'],
    ['server.total_connections', 'sum'],
    ['server.concurrency', 'main'],
    ['server.live', 'main'],
    ['listener_manager.lds.update_success', 'main'],
    ['listener_manager.total_listeners_active', 'main'],
    ['cluster_manager.cds.update_attempt', 'main'],
    ['control_plane.connected_state', 'main'],
    ['cluster.outbound|80||a.b.svc.cluster.local.membership_healthy', 'main'],
    ['cluster.outbound|80||a.b.svc.cluster.local.update_success', 'main'],
    ['http.ingress.rds.http.8080.config_reload', 'main'],
    ['cluster.x.circuit_breakers.default.rq_open', 'max'],
    ['cluster.x.circuit_breakers.default.remaining_rq', 'main'],
  ];
  for (const [name, mode] of table) t.equal(mergeMode(name), mode, name);
});

t.test('merged store: sums, main-only, max, per-worker listener stats, histograms', async (t) => {
  const main = new StatsStore();
  const w1 = new StatsStore();
  for (const [s, cx, active, lds, open] of [
    [main, 3, 1, 2, 0],
    [w1, 5, 2, 2, 1],
  ] as const) {
    s.counter('listener.0.0.0.0_8080.downstream_cx_total').inc(cx);
    s.gauge('listener.0.0.0.0_8080.downstream_cx_active').set(active);
    s.counter('listener_manager.lds.update_success').inc(lds);
    s.gauge('cluster.x.circuit_breakers.default.rq_open').set(open);
    s.histogram('http.ingress.downstream_rq_time').record(cx);
  }
  const out = mergeStats(main, [snapshotOf(w1)]);
  t.equal(out.value('listener.0.0.0.0_8080.downstream_cx_total'), 8);
  t.equal(out.value('listener.0.0.0.0_8080.downstream_cx_active'), 3);
  t.equal(out.value('listener.0.0.0.0_8080.worker_0.downstream_cx_total'), 3);
  t.equal(out.value('listener.0.0.0.0_8080.worker_1.downstream_cx_total'), 5);
  t.equal(out.value('listener.0.0.0.0_8080.worker_1.downstream_cx_active'), 2);
  t.equal(out.value('listener_manager.lds.update_success'), 2, 'one LDS update, not one per thread');
  t.equal(out.value('cluster.x.circuit_breakers.default.rq_open'), 1);
  const h = out.allHistograms().find((x) => x.name === 'http.ingress.downstream_rq_time')!;
  t.equal(h.count, 2);
  t.equal(h.sum, 8);
  t.equal(main.value('listener.0.0.0.0_8080.downstream_cx_total'), 3, "the main thread's own store is untouched");
});

t.test('a worker that did not answer in time is left out', async (t) => {
  const main = new StatsStore();
  main.counter('http.x.downstream_rq_total').inc(4);
  t.equal(mergeStats(main, [undefined]).value('http.x.downstream_rq_total'), 4);
});

t.test('a kept merger: workers send what changed, values start again each round, gone stats go', async (t) => {
  const { StatsMerger } = await import('../../src/proxy/engine/worker/merge');
  const { renderPrometheus } = await import('../../src/proxy/stats/render');
  const { TagProducer } = await import('../../src/proxy/stats/tags');
  const main = new StatsStore();
  const w1 = new StatsStore();
  const tags: Array<[string, string]> = [['reporter', 'source']];
  const ISTIO = 'istiocustom.istio_requests_total.reporter.source';
  for (const s of [main, w1]) s.taggedCounter(ISTIO, { name: 'istio_requests_total', tags }).inc(2);
  w1.counter('cluster.x.upstream_rq_total').inc(1);
  w1.histogram('cluster.x.upstream_rq_time').record(3);
  const sent = new WeakSet<import('../../src/proxy/stats/store').TaggedName>();
  const merger = new StatsMerger();
  const first = merger.merge(main, [snapshotOf(w1, sent)]);
  const prom = (s: StatsStore) => renderPrometheus(s, new TagProducer(), { usedOnly: false, filter: undefined });
  t.match(prom(first), /^istio_requests_total\{reporter="source"\} 4$/m);
  w1.counter('cluster.x.upstream_rq_total').inc(1);
  const again = snapshotOf(w1, sent);
  t.same(again.changes?.added, [], 'names, bounds and tags are not sent again');
  t.same(again.changes?.histograms, [], 'an unchanged histogram is not sent');
  t.equal(again.changes?.scalars.length, 3, 'only the changed counter: id, value, used');
  const second = merger.merge(main, [again]);
  t.equal(second, first, 'the same merged store');
  t.equal(second.value(ISTIO), 4, 'not added to the last round');
  t.equal(second.value('cluster.x.upstream_rq_total'), 2);
  t.equal(second.allHistograms().find((h) => h.name === 'cluster.x.upstream_rq_time')?.count, 1, 'an unchanged worker histogram still counts');
  main.counter(ISTIO).inc(5);
  t.equal(merger.merge(main, [snapshotOf(w1, sent)]).value(ISTIO), 9, "the main thread's values are read every round");
  t.match(prom(second), /^istio_requests_total\{reporter="source"\} 9$/m, 'still rendered with its labels');
  w1.removePrefix('cluster.x.');
  // a counter must not go back (Prometheus would read a reset): the worker's last values count until it answers
  t.equal(merger.merge(main, [undefined]).value('cluster.x.upstream_rq_total'), 2, 'a worker that did not answer: its last values');
  t.equal(merger.merge(main, [snapshotOf(w1, sent)]).value('cluster.x.upstream_rq_total'), undefined, 'gone from every thread: dropped');
  t.notMatch(prom(second), /upstream_rq_total/);
  // a new record on the worker's side (a restarted worker, or a lost answer) starts the merger's view of it again
  const restarted = new StatsStore();
  restarted.counter('cluster.y.upstream_rq_total').inc(7);
  const fresh = snapshotOf(restarted, new WeakSet());
  t.equal(fresh.changes?.reset, true);
  const third = merger.merge(main, [fresh]);
  t.equal(third.value('cluster.y.upstream_rq_total'), 7);
  t.equal(third.value(ISTIO), 7, "the old worker's series is gone with its record");
});
