// The xDS cache (Istio's XdsCache, pilot/pkg/model/xds_cache.go — the model layer, like PushContext): the one
// place generated xDS is reused, both between proxies of one push and across pushes. Every entry is keyed by
// what it is built from, so an entry can never be stale; nothing is invalidated by config names:
//  - content entries (`get`): the key spells out every input (a service, its DestinationRule, the options…),
//    so they stay valid across push contexts — an edit elsewhere rebuilds nothing here;
//  - push entries (`forPush`): output for one push context, shared by every proxy with the same
//    PushContext.sharedKey. Per type, they are kept for the newest two push contexts that produced that type
//    (connections still finishing the previous push share its entries; endpoint-only push contexts, which
//    produce only EDS, leave the other types' entries alone) and cleared when a third one appears (Istio's
//    "clear" evictions).
// PILOT_ENABLE_XDS_CACHE=false turns every lookup into a build; PILOT_ENABLE_CDS_CACHE / _RDS_CACHE do so for
// clusters / routes (virtual hosts included). At most PILOT_XDS_CACHE_SIZE entries are kept, least recently
// used evicted first ("size" evictions). With PILOT_XDS_CACHE_STATS, Istio's cache-efficiency metrics.
import type { Counter, Gauge } from 'prom-client';
import { defineCounter, defineGauge } from '../../lib/metrics';

/** What an entry holds, for the per-type switches and debug output. */
export type XdsCacheType = 'cds' | 'eds' | 'lds' | 'rds' | 'nds';

export interface XdsCacheSettings {
  /** PILOT_ENABLE_XDS_CACHE */
  enabled: boolean;
  /** PILOT_XDS_CACHE_SIZE: entries. */
  size: number;
  /** PILOT_ENABLE_CDS_CACHE (only with enabled). */
  cds: boolean;
  /** PILOT_ENABLE_RDS_CACHE (only with enabled). */
  rds: boolean;
  /** PILOT_XDS_CACHE_STATS */
  stats: boolean;
}

export const DEFAULT_XDS_CACHE_SETTINGS: Readonly<XdsCacheSettings> = { enabled: true, size: 60_000, cds: true, rds: true, stats: false };

export interface XdsCacheStats {
  size: number;
  hits: number;
  misses: number;
  /** Evictions because a push context was superseded. */
  evictedOnClear: number;
  /** Evictions beyond PILOT_XDS_CACHE_SIZE. */
  evictedOnSize: number;
}

interface Entry {
  type: XdsCacheType;
  value: unknown;
  /** pushVersion of a push entry; CONTENT for content entries. */
  version: number;
  /** Read since it was inserted or last passed over by eviction (the CLOCK approximation of LRU). */
  used: boolean;
}

const CONTENT = -1;
const SIZE_WHEN_UNSET = 20_000;

export class XdsCache {
  readonly settings: Readonly<XdsCacheSettings>;
  /** Map order is insertion order; with `used` it approximates recency (see evictLeastRecent). */
  private readonly entries = new Map<string, Entry>();
  private readonly on: Readonly<Record<XdsCacheType, boolean>>;
  /** Per type: the push versions whose entries are kept. */
  private readonly windows: Record<XdsCacheType, { newest: number; previous: number }> = {
    cds: { newest: CONTENT, previous: CONTENT },
    eds: { newest: CONTENT, previous: CONTENT },
    lds: { newest: CONTENT, previous: CONTENT },
    rds: { newest: CONTENT, previous: CONTENT },
    nds: { newest: CONTENT, previous: CONTENT },
  };
  private hits = 0;
  private misses = 0;
  private evictedOnClear = 0;
  private evictedOnSize = 0;

  constructor(settings: Partial<XdsCacheSettings> = {}) {
    const s = { ...DEFAULT_XDS_CACHE_SETTINGS, ...settings };
    // Istio newLru: a PILOT_XDS_CACHE_SIZE of 0 or less means 20000
    if (!(s.size > 0)) s.size = SIZE_WHEN_UNSET;
    this.settings = s;
    const all = s.enabled;
    this.on = { cds: all && s.cds, eds: all, lds: all, rds: all && s.rds, nds: all };
    if (s.stats) exposeStats(this);
  }

  /** Whether entries of this type are cached at all. */
  enabled(type: XdsCacheType): boolean {
    return this.on[type];
  }

  /** A content entry: `key` must spell out everything the value is built from. */
  get<T>(type: XdsCacheType, key: string, build: () => T): T {
    if (!this.on[type]) return build();
    return this.lookup(type, `${type}\u0000${key}`, CONTENT, build);
  }

  /** A push entry: the value for push context `pushVersion` (PushContext.pushVersion) and `key`. */
  forPush<T>(type: XdsCacheType, pushVersion: number, key: string, build: () => T): T {
    if (!this.on[type]) return build();
    const w = this.windows[type];
    if (pushVersion > w.newest) this.supersede(type, pushVersion);
    else if (pushVersion !== w.newest && pushVersion !== w.previous) {
      // an older push context than the two kept: its entries were cleared, and storing would resurrect them
      this.misses++;
      return build();
    }
    return this.lookup(type, `${type}\u0000${pushVersion}\u0000${key}`, pushVersion, build);
  }

  stats(): XdsCacheStats {
    return { size: this.entries.size, hits: this.hits, misses: this.misses, evictedOnClear: this.evictedOnClear, evictedOnSize: this.evictedOnSize };
  }

  private lookup<T>(type: XdsCacheType, key: string, version: number, build: () => T): T {
    const e = this.entries.get(key);
    if (e) {
      this.hits++;
      e.used = true;
      return e.value as T;
    }
    this.misses++;
    const value = build();
    this.entries.set(key, { type, value, version, used: false });
    if (this.entries.size > this.settings.size) this.evictLeastRecent();
    return value;
  }

  /**
   * Evicts from the oldest insertions, giving entries read since a second chance (moved to the end, flag
   * cleared): the CLOCK approximation of least-recently-used, which keeps reads — hundreds of thousands a
   * push — to one map lookup and a flag, where a strict LRU would move the entry on every read.
   */
  private evictLeastRecent(): void {
    for (const [key, e] of this.entries) {
      if (this.entries.size <= this.settings.size) return;
      this.entries.delete(key);
      if (e.used) {
        e.used = false;
        this.entries.set(key, e);
      } else {
        this.evictedOnSize++;
      }
    }
  }

  /** A newer push context for a type: keep its entries and the previous one's, clear older ones. */
  private supersede(type: XdsCacheType, pushVersion: number): void {
    const w = this.windows[type];
    w.previous = w.newest;
    w.newest = pushVersion;
    for (const [key, e] of this.entries) {
      if (e.type === type && e.version !== CONTENT && e.version < w.previous) {
        this.entries.delete(key);
        this.evictedOnClear++;
      }
    }
  }
}

/**
 * The cache push contexts use when none is given (tests, benches, tools generating config): Istio's defaults.
 * The daemon makes its own from its environment.
 */
export const defaultXdsCache = new XdsCache();

// ---------------------------------------------------------------------------------------------
// metrics (Istio pilot/pkg/model/typed_xds_cache.go, registered only with PILOT_XDS_CACHE_STATS)

const exposed = new Set<XdsCache>();
let metrics: { reads: Counter<'type'>; evictions: Counter<'type'>; size: Gauge } | undefined;

function sum(f: (s: XdsCacheStats) => number): number {
  let n = 0;
  for (const c of exposed) n += f(c.stats());
  return n;
}

/** Counters are read from the caches at scrape time: the hot path only bumps plain numbers. */
function exposeStats(cache: XdsCache): void {
  exposed.add(cache);
  metrics ??= {
    reads: defineCounter<'type'>({
      name: 'xds_cache_reads',
      help: 'Total number of xds cache xdsCacheReads.',
      labelNames: ['type'],
      collect() {
        this.reset();
        this.inc(
          { type: 'hit' },
          sum((s) => s.hits),
        );
        this.inc(
          { type: 'miss' },
          sum((s) => s.misses),
        );
      },
    }),
    evictions: defineCounter<'type'>({
      name: 'xds_cache_evictions',
      help: 'Total number of xds cache evictions.',
      labelNames: ['type'],
      collect() {
        this.reset();
        this.inc(
          { type: 'clear' },
          sum((s) => s.evictedOnClear),
        );
        this.inc(
          { type: 'size' },
          sum((s) => s.evictedOnSize),
        );
      },
    }),
    size: defineGauge({
      name: 'xds_cache_size',
      help: 'Current size of xds cache',
      collect() {
        this.set(sum((s) => s.size));
      },
    }),
  };
}
