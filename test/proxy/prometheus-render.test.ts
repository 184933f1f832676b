// The streamed /stats/prometheus (src/proxy/stats/render.ts prometheusChunks over prom-index.ts) against the
// rendering it replaced (kept below as the oracle: families in Envoy's order — counters, gauges, histograms, each
// by name, series by stat name — built as one string per scrape). Stores with many series, Istio's tagged ones
// and Envoy's extracted ones, label values that need escaping, stats added and removed between scrapes.
import t from 'tap';
import { prometheusChunks, renderPrometheus, type StatsQuery } from '../../src/proxy/stats/render';
import { DEFAULT_BUCKETS, StatsStore, type Counter, type Gauge, type Histogram } from '../../src/proxy/stats/store';
import { sanitizePromName, TagProducer } from '../../src/proxy/stats/tags';
import { PEER_LABELS } from '../../src/proxy/istio/labels';

// ---- the oracle: the rendering before streaming (one string, sorted on every call) ----
function selected<T extends { name: string; used: boolean }>(xs: T[], q: StatsQuery): T[] {
  return xs
    .filter((x) => (!q.usedOnly || x.used) && (!q.filter || q.filter(x.name)))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
function fmt(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return String(Math.round(n * 1000) / 1000);
}
function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}
function labelText(tags: ReadonlyArray<readonly [string, string]>): string {
  let s = '';
  for (const [k, v] of tags) s += `${s ? ',' : ''}${sanitizePromName(k)}="${labelValue(v)}"`;
  return s;
}
const braces = (l: string) => (l ? `{${l}}` : '');
function oracle(store: StatsStore, tags: TagProducer, q: StatsQuery): string {
  type Family = { type: string; lines: string[] };
  const families = new Map<string, Family>();
  const add = (name: string, type: string, line: string) => {
    let f = families.get(name);
    if (!f) families.set(name, (f = { type, lines: [] }));
    f.lines.push(line);
  };
  const nameOf = (flat: string) => {
    const tg = store.tagged.get(flat);
    if (tg) return { n: sanitizePromName(tg.name), labels: labelText(tg.tags) };
    const e = tags.extract(flat);
    return { n: `envoy_${sanitizePromName(e.name)}`, labels: labelText(e.tags) };
  };
  const scalar = (s: Counter | Gauge, type: string) => {
    const e = nameOf(s.name);
    add(e.n, type, `${e.n}${braces(e.labels)} ${s.value}`);
  };
  for (const c of selected(store.allCounters(), q)) scalar(c, 'counter');
  for (const g of selected(store.allGauges(), q)) scalar(g, 'gauge');
  for (const h of selected(store.allHistograms(), q)) {
    const e = nameOf(h.name);
    const n = e.n;
    const sep = e.labels ? `${e.labels},` : '';
    const le = h.bounds.map((b) => `le="${fmt(b)}"`);
    const cum = h.cumulative();
    for (let i = 0; i < le.length; i++) add(n, 'histogram', `${n}_bucket{${sep}${le[i]}} ${cum[i]}`);
    add(n, 'histogram', `${n}_bucket{${sep}le="+Inf"} ${h.count}`);
    add(n, 'histogram', `${n}_sum${braces(e.labels)} ${fmt(h.sum)}`);
    add(n, 'histogram', `${n}_count${braces(e.labels)} ${h.count}`);
  }
  const order = { counter: 0, gauge: 1, histogram: 2 } as Record<string, number>;
  const names = [...families.keys()].sort((a, b) => order[families.get(a)!.type]! - order[families.get(b)!.type]! || (a < b ? -1 : a > b ? 1 : 0));
  const parts: string[] = [];
  for (const n of names) {
    const f = families.get(n)!;
    parts.push(`# TYPE ${n} ${f.type}\n`, f.lines.join('\n'), '\n');
  }
  return parts.join('');
}

// ---- stores ----
/** A sidecar's Istio series for `services` services (made in a shuffled order), and Envoy cluster stats. */
function sidecar(services: number, store = new StatsStore(), from = 0): StatsStore {
  const order = Array.from({ length: services }, (_, i) => from + ((i * 7919) % services));
  for (const i of order) {
    const host = `svc-${i}.bench.svc.cluster.local`;
    const l: Array<[string, string]> = [
      ['reporter', 'source'],
      ...PEER_LABELS.map((p): [string, string] => [p, p.startsWith('source') ? 'productpage-v1' : host]),
      ['request_protocol', 'http'],
      ['response_code', String(200 + (i % 3) * 100)],
      ['grpc_response_status', ''],
      ['response_flags', i % 5 === 0 ? 'UF,URX' : '-'],
      ['connection_security_policy', i % 11 === 0 ? 'odd "quoted" \\ value\nline' : 'unknown'],
    ];
    const flat = (m: string) => `istiocustom.istio_${m}${l.map(([k, v]) => `.${k}.${v}`).join('')}`;
    store.taggedCounter(flat('requests_total'), { name: 'istio_requests_total', tags: l }).inc(i + 1);
    for (const m of ['request_duration_milliseconds', 'request_bytes', 'response_bytes']) {
      const h = store.taggedHistogram(flat(m), { name: `istio_${m}`, tags: l }, DEFAULT_BUCKETS);
      for (let k = 0; k < i % 4; k++) h.record(((i * 37 + k * 1013) % 70000) / 7);
    }
    const c = `cluster.outbound|80||${host}.`;
    store.counter(`${c}upstream_rq_total`).inc(i);
    store.counter(`${c}upstream_rq_${200 + (i % 2) * 300}`).inc();
    if (i % 3 === 0) store.counter(`${c}upstream_rq_2xx`);
    store.gauge(`${c}membership_healthy`).set(i % 2);
    store.histogram(`${c}upstream_rq_time`).record(i % 17);
  }
  for (const n of ['server.live', 'listener_manager.lds.update_success', 'cluster_manager.cds.update_success']) store.counter(n).inc();
  store.gauge('server.uptime').set(2 ** 40 + 3);
  store.gauge('server.memory_allocated').set(-5);
  store.gauge('server.hot_restart_epoch').set(0.5);
  store.histogram('server.initialization_time_ms').record(12.3456);
  store.histogram('http.inbound_0.0.0.0_15006.downstream_rq_time').record(3);
  // a counter and a gauge that land in one family
  store.counter('listener.0.0.0.0_15006.downstream_cx_total').inc(3);
  store.gauge('listener.10.0.0.1_15006.downstream_cx_total').set(9);
  return store;
}

const QUERIES: Array<[string, StatsQuery]> = [
  ['everything', { usedOnly: false, filter: undefined }],
  ['usedonly', { usedOnly: true, filter: undefined }],
  ['filter', { usedOnly: false, filter: (n) => /svc-1\d|server|downstream_cx/.test(n) }],
  ['usedonly and filter', { usedOnly: true, filter: (n) => n.includes('svc-2') || n.startsWith('listener') }],
  ['filter matching nothing', { usedOnly: false, filter: () => false }],
];

t.test('streamed exposition equals the one-string rendering, for every query', async (t) => {
  const store = sidecar(300);
  const tags = new TagProducer();
  for (const [name, q] of QUERIES) t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), name);
  t.equal(renderPrometheus(new StatsStore(), tags, QUERIES[0]![1]), '', 'an empty store');
});

t.test('stats made, changed and removed between scrapes: the kept index stays equal to a fresh rendering', async (t) => {
  const store = sidecar(200);
  const tags = new TagProducer();
  const q = QUERIES[0]![1];
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'first scrape (index made)');
  sidecar(150, store, 180); // new series, some existing ones again
  store.counter('cluster.aaa.upstream_rq_total').inc();
  store.removePrefix('cluster.outbound|80||svc-7.');
  store.removePrefix('cluster.outbound|80||svc-19');
  store.delete(2, 'server.initialization_time_ms');
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'after adds and removals');
  for (const [name, q2] of QUERIES) t.equal(renderPrometheus(store, tags, q2), oracle(store, tags, q2), `again: ${name}`);
  store.removePrefix('cluster.');
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'whole families removed');
});

t.test('values changed between scrapes: kept lines of unchanged series, new lines for changed ones', async (t) => {
  const store = sidecar(120);
  const tags = new TagProducer();
  const q = QUERIES[0]![1];
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'first scrape');
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'nothing changed');
  const counters = store.allCounters();
  const histograms = store.allHistograms();
  counters[3]!.inc();
  counters[40]!.inc(0.25);
  store.allGauges()[7]!.set(-2);
  store.allGauges()[8]!.set(Number.NaN);
  histograms[5]!.record(7);
  histograms[6]!.record(0); // the count changes, the sum does not
  histograms[9]!.sum += 1.5; // the sum changes, the count does not
  for (const [name, q2] of QUERIES) t.equal(renderPrometheus(store, tags, q2), oracle(store, tags, q2), `after changes: ${name}`);
  counters[3]!.value = 0; // a reset counter
  t.equal(renderPrometheus(store, tags, q), oracle(store, tags, q), 'after a reset');
});

t.test('custom stats_tags and no default tags', async (t) => {
  const store = sidecar(50);
  const tags = new TagProducer([{ name: 'cluster_name', regex: '^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)' }], false);
  t.equal(renderPrometheus(store, tags, QUERIES[0]![1]), oracle(store, tags, QUERIES[0]![1]));
});

t.test('chunks are bounded and many: a big exposition is never one piece', async (t) => {
  const store = sidecar(400);
  const tags = new TagProducer();
  const chunks = [...prometheusChunks(store, tags, QUERIES[0]![1])];
  t.ok(chunks.length > 10, `${chunks.length} chunks`);
  t.ok(
    chunks.every((c) => c.length <= 128 * 1024),
    'each at most 128 KiB',
  );
  t.equal(Buffer.concat(chunks).toString(), oracle(store, tags, QUERIES[0]![1]));
});
