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

t.test('a kept merger: values start again each round, gone stats go, tagged names travel once', async (t) => {
  const { StatsMerger } = await import('../../src/proxy/engine/worker/merge');
  const { renderPrometheus } = await import('../../src/proxy/stats/render');
  const { TagProducer } = await import('../../src/proxy/stats/tags');
  const main = new StatsStore();
  const w1 = new StatsStore();
  const tags: Array<[string, string]> = [['reporter', 'source']];
  for (const s of [main, w1]) s.taggedCounter('istiocustom.istio_requests_total.reporter.source', { name: 'istio_requests_total', tags }).inc(2);
  w1.counter('cluster.x.upstream_rq_total').inc(1);
  const sent = new WeakSet<import('../../src/proxy/stats/store').TaggedName>();
  const merger = new StatsMerger();
  const first = merger.merge(main, [snapshotOf(w1, sent)]);
  const prom = (s: StatsStore) => renderPrometheus(s, new TagProducer(), { usedOnly: false, filter: undefined });
  t.match(prom(first), /^istio_requests_total\{reporter="source"\} 4$/m);
  w1.counter('cluster.x.upstream_rq_total').inc(1);
  const again = snapshotOf(w1, sent);
  t.same(again.tagged, [], 'names and tags are not sent again');
  const second = merger.merge(main, [again]);
  t.equal(second, first, 'the same merged store');
  t.equal(second.value('istiocustom.istio_requests_total.reporter.source'), 4, 'not added to the last round');
  t.equal(second.value('cluster.x.upstream_rq_total'), 2);
  t.match(prom(second), /^istio_requests_total\{reporter="source"\} 4$/m, 'still rendered with its labels');
  w1.removePrefix('cluster.x.');
  t.equal(merger.merge(main, [undefined]).value('cluster.x.upstream_rq_total'), 0, 'a worker that did not answer: kept at 0');
  t.equal(merger.merge(main, [snapshotOf(w1, sent)]).value('cluster.x.upstream_rq_total'), undefined, 'gone from every thread: dropped');
  t.notMatch(prom(second), /upstream_rq_total/);
});
