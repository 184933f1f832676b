// Addresses for ServiceEntries that give none (Istio 1.26 pilot/pkg/serviceregistry/serviceentry/
// auto_allocation.go, the in-discovery allocator): a stable IPv4 from the Class E 240.240.0.0/16 range and
// an IPv6 from the benchmarking range 2001:2::/48, chosen by an FNV-1a hash of `namespace/hostname` with
// double hashing on collisions, so every daemon gives a host the same address. A proxy that captures DNS
// (and asks for auto allocation, or the daemon allocates for everyone) is told these addresses in its name
// table, and its TCP listeners for the service bind them, so a TCP ServiceEntry without an address works.
import type { Proxy, Service } from './model';

const PRIME = 65011; // secondary hash
const MAX_IPS = 256 * 254;

/** FNV-1a, 32 bits, over the UTF-8 bytes (Go's hash/fnv New32a). */
export function fnv32a(s: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * Istio's condition: no address of its own (Istio's DefaultAddress 0.0.0.0), not a wildcard host, and not
 * resolution NONE (the original destination would be lost).
 */
export function needsAutoAllocation(s: Service): boolean {
  return s.registry === 'External' && s.addresses.every((a) => a === '0.0.0.0') && !s.hostname.startsWith('*') && s.resolution !== 'Passthrough';
}

function addresses(third: number, fourth: number): { v4: string; v6: string } {
  return {
    v4: `240.240.${third}.${fourth}`,
    v6: third === 0 ? `2001:2::f0f0:${fourth.toString(16)}` : `2001:2::f0f0:${third.toString(16)}${fourth.toString(16)}`,
  };
}

/**
 * Istio autoAllocateIPs: the services with auto-allocated addresses filled in (copies; the others as given),
 * in input order. Order matters only on collisions: callers pass services oldest first.
 */
export function autoAllocateIPs(services: readonly Service[]): Service[] {
  const out = [...services];
  const slots: Array<number | undefined> = new Array(MAX_IPS);
  let allocated = 0;
  out.forEach((svc, idx) => {
    if (!needsAutoAllocation(svc)) return;
    if (allocated >= MAX_IPS) return;
    const s = fnv32a(`${svc.namespace}/${svc.hostname}`);
    const first = s % MAX_IPS;
    if (slots[first] === undefined) {
      slots[first] = idx;
    } else {
      const second = PRIME - (s % PRIME);
      for (let i = 1; ; i++) {
        // Go's uint32 arithmetic wraps
        const nh = ((s + (Math.imul(i, second) >>> 0)) >>> 0) % (MAX_IPS - 1);
        if (slots[nh] === undefined) {
          slots[nh] = idx;
          break;
        }
      }
    }
    allocated++;
  });
  // Addresses by slot order, skipping x.y.z.0 and x.y.z.255 as Istio does; one host/namespace key, one address.
  let x = 0;
  const byKey = new Map<string, { v4: string; v6: string }>();
  for (const idx of slots) {
    x++;
    if (idx === undefined) continue;
    if (x % 255 === 0) x++;
    const svc = out[idx]!;
    const key = `${svc.namespace}/${svc.hostname}`;
    let a = byKey.get(key);
    if (!a) byKey.set(key, (a = addresses(Math.floor(x / 255), x % 255)));
    out[idx] = { ...svc, autoAllocatedIPv4Address: a.v4, autoAllocatedIPv6Address: a.v6 };
  }
  return out;
}

/** autoAllocateIPs over the services oldest first (then by namespace/host), returned in their given order. */
export function withAutoAllocatedIPs(services: readonly Service[]): Service[] {
  if (!services.some(needsAutoAllocation)) return [...services];
  const key = (s: Service) => `${s.namespace}/${s.hostname}`;
  const order = services
    .map((_, i) => i)
    .sort((a, b) => services[a]!.creationTime - services[b]!.creationTime || key(services[a]!).localeCompare(key(services[b]!)));
  const allocated = autoAllocateIPs(order.map((i) => services[i]!));
  const out = [...services];
  order.forEach((i, k) => (out[i] = allocated[k]!));
  return out;
}

/**
 * Istio nodeUsesAutoallocatedIPs: the proxy captures DNS (its agent answers with these addresses), and auto
 * allocation is on, for everyone (PILOT_ENABLE_IP_AUTOALLOCATE) or at this proxy's request (DNS_AUTO_ALLOCATE).
 */
export function usesAutoAllocatedIPs(proxy: Proxy, allocateForAll: boolean): boolean {
  return (proxy.metadata.dnsAutoAllocate === true || allocateForAll) && proxy.metadata.dnsCapture === true;
}

/** The service's auto-allocated addresses this proxy may use (none when it has its own or the proxy does not). */
export function autoAddressesFor(s: Service, proxy: Proxy, allocateForAll: boolean): string[] {
  if (!usesAutoAllocatedIPs(proxy, allocateForAll) || !s.autoAllocatedIPv4Address) return [];
  return [s.autoAllocatedIPv4Address, ...(s.autoAllocatedIPv6Address ? [s.autoAllocatedIPv6Address] : [])];
}

/** Istio GetAddressForProxy's auto-allocated part: the IPv4 one for a proxy with IPv4 (or no address), else the IPv6 one. */
export function autoAddressForProxy(s: Service, proxy: Proxy, allocateForAll: boolean): string | undefined {
  if (!usesAutoAllocatedIPs(proxy, allocateForAll)) return undefined;
  const v4 = proxy.ipAddresses.length === 0 || proxy.ipAddresses.some((a) => !a.includes(':'));
  return v4 ? s.autoAllocatedIPv4Address : s.autoAllocatedIPv6Address;
}
