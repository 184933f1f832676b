// Envoy's admin renderings of the stats store: `/stats` text (`name: value`), `?format=json`, and
// `/stats/prometheus` with tag extraction (`envoy_cluster_upstream_rq_total{envoy_cluster_name="x"}`), the last
// written as byte chunks from what prom-index.ts keeps per stat (Envoy's source/server/admin/prometheus_stats.cc
// and stats_request.cc stream in chunks too). With a thousand services' Istio series a scrape is tens of MiB:
// no scrape builds it as one string, sorts it again, or renders a label set again; and a series whose value has
// not changed since the last scrape is not rendered again either: its lines are kept as bytes (Series.lines) and
// handed to the socket as they are. On purpose unlike Envoy, which renders every scrape: the kept bytes cost
// about one exposition of memory per store that is scraped, and save most of a scrape's CPU (most series of a
// sidecar with many services do not change between two scrapes).
import { promIndexOf, type Family, type Series } from './prom-index';
import type { Counter, Gauge, Histogram, StatsStore } from './store';
import type { TagProducer } from './tags';

export const QUANTILES = [0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1];

export interface StatsQuery {
  usedOnly: boolean;
  /** RE2 partial match on the stat name (`?filter=`). */
  filter: ((name: string) => boolean) | undefined;
}

function selected<T extends { name: string; used: boolean }>(xs: T[], q: StatsQuery): T[] {
  return xs
    .filter((x) => (!q.usedOnly || x.used) && (!q.filter || q.filter(x.name)))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function fmt(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return String(Math.round(n * 1000) / 1000);
}

function quantileText(h: Histogram): string {
  if (h.count === 0) return 'No recorded values';
  return QUANTILES.map((q) => {
    const v = h.quantile(q);
    const s = v === undefined ? 'nan' : fmt(v);
    return `P${fmt(q * 100)}(${s},${s})`;
  }).join(' ');
}

export function renderStatsText(store: StatsStore, q: StatsQuery): string {
  const scalars: Array<Counter | Gauge> = selected([...store.allCounters(), ...store.allGauges()], q);
  let out = '';
  for (const s of scalars) out += `${s.name}: ${s.value}\n`;
  for (const h of selected(store.allHistograms(), q)) out += `${h.name}: ${quantileText(h)}\n`;
  return out;
}

export function renderStatsJson(store: StatsStore, q: StatsQuery): string {
  const stats: unknown[] = selected([...store.allCounters(), ...store.allGauges()], q).map((s) => ({ name: s.name, value: s.value }));
  const hs = selected(store.allHistograms(), q);
  if (hs.length > 0) {
    stats.push({
      histograms: {
        supported_quantiles: QUANTILES.map((x) => x * 100),
        computed_quantiles: hs.map((h) => ({
          name: h.name,
          values: QUANTILES.map((x) => {
            const v = h.quantile(x);
            return { interval: v ?? null, cumulative: v ?? null };
          }),
        })),
      },
    });
  }
  return `${JSON.stringify({ stats }, null, 2)}\n`;
}

const TYPES = ['counter', 'gauge', 'histogram'] as const;
/** The size of the pieces an exposition is handed out in (the admin server writes each as it comes). */
const CHUNK = 128 * 1024;
/**
 * Kept lines at least this long are handed out without copying them into a chunk. Shorter ones (a series'
 * histogram is some 15 KiB) are copied: one copy costs less than one more write on the socket.
 */
const KEEP_WHOLE = 64 * 1024;

/** Exposition bytes into fixed-size chunks: label text is copied as bytes, numbers written digit by digit. */
class ChunkWriter {
  /** `views`: a series' kept lines are views of the chunk they were written to (chunks are never written again). */
  constructor(private readonly views = false) {}
  private buf = Buffer.allocUnsafe(CHUNK);
  private off = 0;
  private readonly ready: Buffer[] = [];

  get hasReady(): boolean {
    return this.ready.length > 0;
  }
  flush(): void {
    if (this.off === 0) return;
    this.ready.push(this.buf.subarray(0, this.off));
    this.buf = Buffer.allocUnsafe(CHUNK);
    this.off = 0;
  }
  *take(): Generator<Buffer> {
    while (this.ready.length > 0) yield this.ready.shift()!;
  }
  /** Bytes never written to again (kept lines): a large piece goes out as it is, without a copy. */
  kept(b: Buffer): void {
    if (b.length < KEEP_WHOLE) {
      this.put(b);
      return;
    }
    this.flush();
    // as views of at most a chunk each: the socket still gets the answer piece by piece
    for (let i = 0; i < b.length; i += CHUNK) this.ready.push(b.subarray(i, i + CHUNK));
  }
  /** The bytes written since `from` (an offset of the current chunk) as a buffer of their own. */
  since(from: number): Buffer {
    if (this.views) return this.buf.subarray(from, this.off);
    const b = Buffer.allocUnsafeSlow(this.off - from);
    this.buf.copy(b, 0, from, this.off);
    return b;
  }
  /** Room for `n` more bytes in the current chunk (a series rendered in one piece, then kept). */
  reserve(n: number): number {
    if (this.off + n > this.buf.length) this.flush();
    return this.off;
  }
  put(b: Buffer): void {
    if (this.off + b.length > this.buf.length) {
      this.flush();
      // a piece larger than a chunk (a very long label text) goes out on its own; cached pieces are never written to
      if (b.length > CHUNK) {
        this.ready.push(b);
        return;
      }
    }
    this.buf.set(b, this.off);
    this.off += b.length;
  }
  /** ASCII text (TYPE lines, formatted numbers). */
  ascii(s: string): void {
    if (this.off + s.length > this.buf.length) this.flush();
    if (s.length > CHUNK) {
      this.ready.push(Buffer.from(s, 'latin1'));
      return;
    }
    this.off += this.buf.write(s, this.off, 'latin1');
  }
  /** A value as JavaScript prints it (`${v}`), then a newline. */
  num(v: number): void {
    if (this.off + 32 > this.buf.length) this.flush();
    const b = this.buf;
    let o = this.off;
    if (v >= 0 && Number.isSafeInteger(v)) {
      if (v < 10) b[o++] = 48 + v;
      else {
        let d = 1;
        while (d * 10 <= v) d *= 10;
        for (; d >= 1; d /= 10) {
          const q = Math.floor(v / d);
          b[o++] = 48 + q;
          v -= q * d;
        }
      }
    } else o += b.write(String(v), o, 'latin1');
    b[o++] = 10;
    this.off = o;
  }
}

const B = (s: string) => Buffer.from(s);
const CLOSE = B('} ');
const NL = B('\n');
const INF = B('le="+Inf"} ');
const INF_AFTER_LABELS = B(',le="+Inf"} ');

/** `le="<bound>"} ` per bucket bound, alone and after labels; one set per bounds list. */
const leBytes = new WeakMap<readonly number[], { alone: Buffer[]; after: Buffer[] }>();
function lesOf(bounds: readonly number[]): { alone: Buffer[]; after: Buffer[] } {
  let le = leBytes.get(bounds);
  if (!le) leBytes.set(bounds, (le = { alone: bounds.map((b) => B(`le="${fmt(b)}"} `)), after: bounds.map((b) => B(`,le="${fmt(b)}"} `)) }));
  return le;
}

function scalarLine(w: ChunkWriter, f: Family, s: Series): void {
  const v = (s.stat as Counter | Gauge).value;
  if (s.lines && s.value === v) {
    w.kept(s.lines);
    return;
  }
  // the line's length at most: the name's opening, the labels, the closing bytes and a number (32)
  if (renderKept(w, s, f.bytes.open.length + s.labels.length + CLOSE.length + 32, () => scalarText(w, f, s, v))) s.value = v;
}

/**
 * Renders a series' lines, kept for the next scrape (`s.lines`) when at most `size` bytes fit in one chunk; a longer
 * one (a very long label text) is rendered every time. Whether the lines were kept.
 */
function renderKept(w: ChunkWriter, s: Series, size: number, render: () => void): boolean {
  if (size > CHUNK) {
    render();
    return false;
  }
  const from = w.reserve(size);
  render();
  s.lines = w.since(from);
  return true;
}

function scalarText(w: ChunkWriter, f: Family, s: Series, v: number): void {
  if (s.labels.length === 0) w.put(f.bytes.plain);
  else {
    w.put(f.bytes.open);
    w.put(s.labels);
    w.put(CLOSE);
  }
  w.num(v);
}

function histogramLines(w: ChunkWriter, f: Family, s: Series): void {
  const h = s.stat as Histogram;
  if (s.lines && s.value === h.count && s.sum === h.sum && s.bounds === h.bounds) {
    w.kept(s.lines);
    return;
  }
  // every line: the longest opening, the labels, `,le="<bound>"} ` (at most 64) and a number (32)
  const line = f.bytes.bucket.length + s.labels.length + 96;
  if (!renderKept(w, s, line * (h.bounds.length + 3), () => histogramText(w, f, s, h))) return;
  s.value = h.count;
  s.sum = h.sum;
  s.bounds = h.bounds;
}

function histogramText(w: ChunkWriter, f: Family, s: Series, h: Histogram): void {
  const labelled = s.labels.length > 0;
  const le = lesOf(h.bounds);
  const les = labelled ? le.after : le.alone;
  let acc = 0;
  for (let i = 0; i < les.length; i++) {
    acc += h.counts[i]!;
    w.put(f.bytes.bucket);
    if (labelled) w.put(s.labels);
    w.put(les[i]!);
    w.num(acc);
  }
  w.put(f.bytes.bucket);
  if (labelled) w.put(s.labels);
  w.put(labelled ? INF_AFTER_LABELS : INF);
  w.num(h.count);
  if (labelled) {
    w.put(f.bytes.sumOpen);
    w.put(s.labels);
    w.put(CLOSE);
  } else w.put(f.bytes.sum);
  w.ascii(fmt(h.sum));
  w.put(NL);
  if (labelled) {
    w.put(f.bytes.countOpen);
    w.put(s.labels);
    w.put(CLOSE);
  } else w.put(f.bytes.count);
  w.num(h.count);
}

/** Whether a series' kept lines are still its lines. */
function unchanged(s: Series, k: number): boolean {
  if (!s.lines) return false;
  if (k !== 2) return s.value === (s.stat as Counter | Gauge).value;
  const h = s.stat as Histogram;
  return s.value === h.count && s.sum === h.sum && s.bounds === h.bounds;
}

/**
 * Every series of one kind of a family, when all are shown: the family's kept lines as they are when no series
 * changed (a scrape of a sidecar with many services whose traffic stopped sends tens of MiB without rendering or
 * copying them); else rendered again (unchanged series copy their lines) into one new piece, which the series'
 * kept lines then point into, so the text is kept once.
 */
function familyLines(w: ChunkWriter, f: Family, k: 0 | 1 | 2): void {
  const list = f.series[k];
  const kept = f.kept[k];
  if (kept && kept.list === list && kept.length === list.length && list.every((s) => unchanged(s, k))) {
    w.kept(kept.bytes);
    return;
  }
  const fw = new ChunkWriter(true);
  for (const s of list) {
    if (k === 2) histogramLines(fw, f, s);
    else scalarLine(fw, f, s);
  }
  fw.flush();
  const bytes = Buffer.concat([...fw.take()]);
  let size = 0;
  for (const s of list) size += s.lines?.length ?? Number.NaN;
  if (size === bytes.length) {
    let off = 0;
    for (const s of list) s.lines = bytes.subarray(off, (off += s.lines!.length));
    f.kept[k] = { bytes, list, length: list.length };
  } else f.kept[k] = undefined; // a series too long to keep (rendered every time)
  w.kept(bytes);
}

/**
 * `/stats/prometheus` as a sequence of byte chunks, for the admin server to write one at a time (Envoy's admin
 * streams its stats in chunks too). Families as Envoy groups them: counters, gauges, then histograms, each
 * family by name with its series by stat name; a family's `# TYPE` is the kind of its first shown stat.
 */
export function* prometheusChunks(store: StatsStore, tags: TagProducer, q: StatsQuery): Generator<Buffer> {
  const families = promIndexOf(store, tags).inOrder();
  const all = !q.usedOnly && !q.filter;
  const shown = (s: Series) => all || ((!q.usedOnly || s.stat.used) && (!q.filter || q.filter(s.stat.name)));
  const kinds = families.map((f) => f.series.findIndex((l) => l.some(shown)));
  const w = new ChunkWriter();
  for (let phase = 0; phase < 3; phase++) {
    for (let i = 0; i < families.length; i++) {
      if (kinds[i] !== phase) continue;
      const f = families[i]!;
      w.ascii(`# TYPE ${f.name} ${TYPES[phase]}\n`);
      for (let k = phase; k < 3; k++) {
        if (all) {
          familyLines(w, f, k as 0 | 1 | 2);
          if (w.hasReady) yield* w.take();
          continue;
        }
        for (const s of f.series[k as 0 | 1 | 2]) {
          if (!shown(s)) continue;
          if (k === 2) histogramLines(w, f, s);
          else scalarLine(w, f, s);
          if (w.hasReady) yield* w.take();
        }
      }
    }
  }
  w.flush();
  yield* w.take();
}

/** The whole exposition as one string (tests; the admin server streams prometheusChunks). */
export function renderPrometheus(store: StatsStore, tags: TagProducer, q: StatsQuery): string {
  return Buffer.concat([...prometheusChunks(store, tags, q)]).toString();
}
