// The xDS cache (PILOT_ENABLE_XDS_CACHE, PILOT_XDS_CACHE_SIZE): generated resources keyed by type, the key a
// caller derives from the proxy (the `cacheKey` option: proxies with equal keys get equal output), the push
// context version, and the resource name (or `*…` for a whole wildcard set). Entries live in groups per
// (type, proxy key, version); groups are evicted least recently used first until at most `capacity`
// entries remain. Endpoint entries remember the hostname generation they were made at: an incremental EDS
// push bumps the generation of its hosts, so changed endpoints miss even when the push context is reused.
import type { HashedResource } from './resources';

/** One cached answer: the resources for a name (zero or one) or for a whole wildcard set. */
export type CachedResources = readonly HashedResource[];

interface Entry {
  value: CachedResources;
  /** Endpoint host of the entry, for generation checks. */
  host?: string;
  gen: number;
}

export interface XdsCacheStats {
  size: number;
  hits: number;
  misses: number;
  evictions: number;
}

/** The entries of one (type, proxy key, push version). */
export class CacheGroup {
  readonly entries = new Map<string, Entry>();
  constructor(private readonly cache: XdsCache) {}

  get(name: string): CachedResources | undefined {
    const e = this.entries.get(name);
    if (e && (e.host === undefined || e.gen === this.cache.generation(e.host))) {
      this.cache.hits++;
      return e.value;
    }
    this.cache.misses++;
    return undefined;
  }

  /** `host`: the endpoint hostname an EDS entry depends on. */
  set(name: string, value: CachedResources, host?: string): void {
    const had = this.entries.has(name);
    this.entries.set(name, { value, host, gen: host === undefined ? 0 : this.cache.generation(host) });
    if (!had) this.cache.grew(1);
  }
}

export class XdsCache {
  private readonly groups = new Map<string, CacheGroup>();
  private readonly hostGeneration = new Map<string, number>();
  private allEndpointsGeneration = 0;
  private size = 0;
  hits = 0;
  misses = 0;
  private evictions = 0;

  constructor(private readonly capacity: number) {}

  /** The group for a type, proxy key and push version, marked most recently used. */
  group(typeUrl: string, proxyKey: string, pushVersion: string): CacheGroup {
    const key = `${typeUrl}\u0000${proxyKey}\u0000${pushVersion}`;
    let g = this.groups.get(key);
    if (g) {
      this.groups.delete(key);
    } else {
      g = new CacheGroup(this);
    }
    this.groups.set(key, g);
    return g;
  }

  generation(host: string): number {
    return this.allEndpointsGeneration * 2 ** 26 + (this.hostGeneration.get(host) ?? 0);
  }

  /** Endpoints of these hosts changed; an empty list means all endpoints. */
  invalidateEndpoints(hosts: ReadonlySet<string>): void {
    if (hosts.size === 0) {
      this.allEndpointsGeneration++;
      this.hostGeneration.clear();
      return;
    }
    for (const h of hosts) this.hostGeneration.set(h, (this.hostGeneration.get(h) ?? 0) + 1);
  }

  /** A new push context: entries of older versions can never hit again, so free them. */
  clear(): void {
    this.groups.clear();
    this.size = 0;
  }

  /** Called by groups when entries were added; evicts the least recently used groups beyond capacity. */
  grew(n: number): void {
    this.size += n;
    if (this.size <= this.capacity) return;
    for (const [key, g] of this.groups) {
      if (this.size <= this.capacity) break;
      // Never evict the group being filled (the most recently used one).
      if (this.groups.size === 1) {
        const excess = this.size - this.capacity;
        let dropped = 0;
        for (const name of g.entries.keys()) {
          if (dropped >= excess) break;
          g.entries.delete(name);
          dropped++;
        }
        this.size -= dropped;
        this.evictions += dropped;
        break;
      }
      this.groups.delete(key);
      this.size -= g.entries.size;
      this.evictions += g.entries.size;
    }
  }

  stats(): XdsCacheStats {
    return { size: this.size, hits: this.hits, misses: this.misses, evictions: this.evictions };
  }
}
