// Which proxies the ADS server serves over VHDS (src/lib/xds/vhds.ts: the names and the client feature): the
// server marks a proxy when its delta stream advertises the feature, the route generators ask.
import type { Proxy } from '../discovery/model';

const vhdsProxies = new WeakSet<Proxy>();

/** The ADS server marks proxies served over VHDS (delta stream and the client feature). */
export function markVhds(proxy: Proxy): void {
  vhdsProxies.add(proxy);
}

export function usesVhds(proxy: Proxy): boolean {
  return vhdsProxies.has(proxy);
}
