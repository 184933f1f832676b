// DestinationRule and the traffic policy pieces Sidecar shares (connection pools).
import type { Config, ConnectionPoolSettings, LoadBalancerSettings, OutlierDetection, TrafficPolicy } from '../types';
import { checkDuration, checkExportTo, checkLabels, checkWorkloadSelector } from './common';
import { isValidIP, validateFQDN, validatePort, validateWildcardDomain } from './names';
import { at, dot, type Report } from './report';
import { checkClientTLS } from './tls';
import { subsetNameError } from './virtualservice';

export function validateDestinationRule(c: Config<'DestinationRule'>, r: Report): void {
  const dr = c.spec;
  r.error('spec.host', validateWildcardDomain(dr.host ?? ''));
  checkTrafficPolicy(dr.trafficPolicy, 'spec.trafficPolicy', r);
  const names = new Set<string>();
  (dr.subsets ?? []).forEach((s, i) => {
    const p = at('spec.subsets', i);
    if (names.has(s.name ?? '')) r.error(dot(p, 'name'), `duplicate subset names: ${s.name ?? ''}`);
    names.add(s.name ?? '');
    r.error(dot(p, 'name'), subsetNameError(s.name ?? ''));
    checkLabels(s.labels, dot(p, 'labels'), r);
    checkTrafficPolicy(s.trafficPolicy, dot(p, 'trafficPolicy'), r);
  });
  checkExportTo(c.meta.namespace, dr.exportTo, false, dr.workloadSelector !== undefined, 'spec.exportTo', r);
  checkWorkloadSelector(dr.workloadSelector, 'spec.workloadSelector', r);
}

type FullTrafficPolicy = TrafficPolicy & {
  tunnel?: { protocol?: string; targetHost?: string; targetPort?: number };
  proxyProtocol?: { version?: string };
};

function checkTrafficPolicy(tp: FullTrafficPolicy | undefined, path: string, r: Report): void {
  if (!tp) return;
  if (!tp.outlierDetection && !tp.connectionPool && !tp.loadBalancer && !tp.tls && !tp.portLevelSettings && !tp.tunnel && !tp.proxyProtocol) {
    r.error(path, 'traffic policy must have at least one field');
    return;
  }
  if (tp.tunnel && tp.proxyProtocol) {
    r.error(path, 'tunnel and proxyProtocol must not be set together');
    return;
  }
  checkOutlierDetection(tp.outlierDetection, dot(path, 'outlierDetection'), r);
  checkConnectionPool(tp.connectionPool, dot(path, 'connectionPool'), r);
  checkLoadBalancer(tp.loadBalancer, tp.outlierDetection, dot(path, 'loadBalancer'), r);
  checkClientTLS(tp.tls, dot(path, 'tls'), r);
  (tp.portLevelSettings ?? []).forEach((pl, i) => {
    const p = at(dot(path, 'portLevelSettings'), i);
    if (!pl.port) r.error(dot(p, 'port'), 'portTrafficPolicy must have valid port');
    if (!pl.outlierDetection && !pl.connectionPool && !pl.loadBalancer && !pl.tls) {
      r.error(p, 'port traffic policy must have at least one field');
      return;
    }
    checkOutlierDetection(pl.outlierDetection, dot(p, 'outlierDetection'), r);
    checkConnectionPool(pl.connectionPool, dot(p, 'connectionPool'), r);
    checkLoadBalancer(pl.loadBalancer, pl.outlierDetection, dot(p, 'loadBalancer'), r);
    checkClientTLS(pl.tls, dot(p, 'tls'), r);
  });
  if (tp.tunnel) {
    const t = tp.tunnel;
    const p = dot(path, 'tunnel');
    if (t.protocol && t.protocol !== 'CONNECT' && t.protocol !== 'POST') r.error(dot(p, 'protocol'), 'tunnel protocol must be "CONNECT" or "POST"');
    const host = t.targetHost ?? '';
    const fqdnErr = validateFQDN(host);
    if (fqdnErr && !isValidIP(host))
      r.error(dot(p, 'targetHost'), `tunnel target host must be valid FQDN or IP address: ${fqdnErr}; ${host} is not a valid IP`);
    const portErr = validatePort(t.targetPort ?? 0);
    if (portErr) r.error(dot(p, 'targetPort'), `tunnel target port is invalid: ${portErr}`);
  }
}

function checkOutlierDetection(o: OutlierDetection | undefined, path: string, r: Report): void {
  if (!o) return;
  checkDuration(o.baseEjectionTime, dot(path, 'baseEjectionTime'), r);
  if ((o.consecutiveErrors ?? 0) !== 0)
    r.warn(
      dot(path, 'consecutiveErrors'),
      'outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead',
    );
  if (!o.splitExternalLocalOriginErrors && (o.consecutiveLocalOriginFailures ?? 0) > 0)
    r.error(
      dot(path, 'consecutiveLocalOriginFailures'),
      'outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false',
    );
  checkDuration(o.interval, dot(path, 'interval'), r);
  for (const f of ['maxEjectionPercent', 'minHealthPercent'] as const) {
    const v = o[f] ?? 0;
    if (v < 0 || v > 100) r.error(dot(path, f), `percentage ${v} is not in range 0..100`);
  }
}

/** validateConnectionPool (also Sidecar ingress and inboundConnectionPool). */
export function checkConnectionPool(cp: ConnectionPoolSettings | undefined, path: string, r: Report): void {
  if (!cp) return;
  if (!cp.http && !cp.tcp) {
    r.error(path, 'connection pool must have at least one field');
    return;
  }
  const h = cp.http;
  if (h) {
    const p = dot(path, 'http');
    if ((h.http1MaxPendingRequests ?? 0) < 0) r.error(dot(p, 'http1MaxPendingRequests'), 'http1 max pending requests must be non-negative');
    if ((h.http2MaxRequests ?? 0) < 0) r.error(dot(p, 'http2MaxRequests'), 'http2 max requests must be non-negative');
    if ((h.maxRequestsPerConnection ?? 0) < 0) r.error(dot(p, 'maxRequestsPerConnection'), 'max requests per connection must be non-negative');
    if ((h.maxRetries ?? 0) < 0) r.error(dot(p, 'maxRetries'), 'max retries must be non-negative');
    checkDuration(h.idleTimeout, dot(p, 'idleTimeout'), r);
    if (h.h2UpgradePolicy === 'UPGRADE' && h.useClientProtocol)
      r.error(dot(p, 'useClientProtocol'), 'use client protocol must not be true when H2UpgradePolicy is UPGRADE');
    if ((h.maxConcurrentStreams ?? 0) < 0) r.error(dot(p, 'maxConcurrentStreams'), 'max concurrent streams must be non-negative');
  }
  const t = cp.tcp;
  if (t) {
    const p = dot(path, 'tcp');
    if ((t.maxConnections ?? 0) < 0) r.error(dot(p, 'maxConnections'), 'max connections must be non-negative');
    checkDuration(t.connectTimeout, dot(p, 'connectTimeout'), r);
    checkDuration(t.maxConnectionDuration, dot(p, 'maxConnectionDuration'), r);
    checkDuration(t.idleTimeout, dot(p, 'idleTimeout'), r);
    checkDuration(t.tcpKeepalive?.time, dot(p, 'tcpKeepalive.time'), r);
    checkDuration(t.tcpKeepalive?.interval, dot(p, 'tcpKeepalive.interval'), r);
  }
}

/** Envoy's primality test for Maglev table sizes. */
function isPrime(x: number): boolean {
  if (x !== 0 && x < 4) return true;
  if ((x & 1) === 0) return false;
  const limit = Math.floor(Math.sqrt(x));
  for (let f = 3; f <= limit; f += 2) if (x % f === 0) return false;
  return true;
}

interface LocalityLbSetting {
  distribute?: Array<{ from?: string; to?: Record<string, number> }>;
  failover?: Array<{ from?: string; to?: string }>;
  failoverPriority?: string[];
  enabled?: boolean;
}

function checkLoadBalancer(lb: LoadBalancerSettings | undefined, outlier: OutlierDetection | undefined, path: string, r: Report): void {
  if (!lb) return;
  const ch = lb.consistentHash;
  if (ch) {
    const p = dot(path, 'consistentHash');
    if (ch.httpCookie && !ch.httpCookie.name) r.error(dot(p, 'httpCookie.name'), 'name required for HttpCookie');
    if ((ch.minimumRingSize ?? 0) !== 0) {
      r.warn(dot(p, 'minimumRingSize'), "consistent hash MinimumRingSize is deprecated, use ConsistentHashLB's RingHash configuration instead");
      if (ch.ringHash || ch.maglev) r.error(p, 'only one of MinimumRingSize or Maglev/Ringhash can be specified');
    }
    if (ch.maglev) {
      const size = ch.maglev.tableSize ?? 0;
      const mp = dot(p, 'maglev.tableSize');
      if (size === 0) r.error(mp, 'tableSize must be set for maglev');
      if (size >= 5000011) r.error(mp, 'tableSize must be less than 5000011 for maglev');
      if (!isPrime(size)) r.error(mp, 'tableSize must be a prime number for maglev');
    }
  }
  checkLocalityLbSetting(lb.localityLbSetting as LocalityLbSetting | undefined, outlier, dot(path, 'localityLbSetting'), r);
  checkDuration(lb.warmupDurationSecs, dot(path, 'warmupDurationSecs'), r);
  const warm = (lb as { warmup?: { duration?: string; minimumPercent?: number; aggression?: number } }).warmup;
  if (warm) {
    const wp = dot(path, 'warmup');
    if (warm.duration === undefined) r.error(dot(wp, 'duration'), 'duration is required');
    else checkDuration(warm.duration, dot(wp, 'duration'), r);
    if ((warm.minimumPercent ?? 0) > 100) r.error(dot(wp, 'minimumPercent'), 'minimumPercent value should be less than or equal to 100');
    if (warm.aggression !== undefined && warm.aggression < 1) r.error(dot(wp, 'aggression'), 'aggression should be greater than or equal to 1');
  }
}

const TOPOLOGY_LABELS = new Set(['topology.kubernetes.io/region', 'topology.kubernetes.io/zone', 'topology.istio.io/subzone']);

function checkLocalityLbSetting(lb: LocalityLbSetting | undefined, outlier: OutlierDetection | undefined, path: string, r: Report): void {
  if (!lb) return;
  const distribute = lb.distribute ?? [];
  const failover = lb.failover ?? [];
  const priority = lb.failoverPriority ?? [];
  if (distribute.length > 0 && failover.length > 0) {
    r.error(path, "can not simultaneously specify 'distribute' and 'failover'");
    return;
  }
  if (failover.length > 0 && priority.length > 0) {
    const bad = priority.find((l) => TOPOLOGY_LABELS.has(l));
    if (bad) {
      r.error(dot(path, 'failoverPriority'), `can not simultaneously set 'failover' and topology label '${bad}' in 'failover_priority'`);
      return;
    }
  }
  const srcLocalities: string[] = [];
  for (let i = 0; i < distribute.length; i++) {
    const d = distribute[i]!;
    const p = at(dot(path, 'distribute'), i);
    srcLocalities.push(d.from ?? '');
    let total = 0;
    const dest: string[] = [];
    for (const [loc, w] of Object.entries(d.to ?? {})) {
      dest.push(loc);
      if (w <= 0 || w > 100) {
        r.error(dot(p, 'to'), 'locality weight must be in range [1, 100]');
        return;
      }
      total += w;
    }
    if (total !== 100) {
      r.error(dot(p, 'to'), `total locality weight ${total} != 100`);
      return;
    }
    r.error(dot(p, 'to'), localitiesError(dest));
  }
  r.error(dot(path, 'distribute'), localitiesError(srcLocalities));
  if ((failover.length > 0 || priority.length > 0) && !outlier) r.warn(path, 'outlier detection policy must be provided for failover');
  failover.forEach((f, i) => {
    const p = at(dot(path, 'failover'), i);
    const from = f.from ?? '';
    const to = f.to ?? '';
    if (from === to) r.error(p, 'locality lb failover settings must specify different regions');
    if (from.includes('/') || to.includes('/')) r.error(p, 'locality lb failover only specify region');
    if (from.includes('*') || to.includes('*')) r.error(p, "locality lb failover region should not contain '*' wildcard");
  });
}

/** validateLocalities: wildcards only at the end, no overlapping region/zone/subzone. */
function localitiesError(localities: readonly string[]): string | undefined {
  const seen = new Map<string, Map<string, Set<string>>>();
  for (const loc of localities) {
    const stars = (loc.match(/\*/g) ?? []).length;
    if (stars > 0 && (stars > 1 || !loc.endsWith('*'))) return `locality ${loc} wildcard '*' number can not exceed 1 and must be in the end`;
    if (seen.has('*')) return `locality ${loc} overlap with previous specified ones`;
    const items = splitN(loc, '/', 3);
    if (items.some((x) => x === '')) return `locality ${loc} must not contain empty region/zone/subzone info`;
    const [region, zone, sub] = items as [string, string?, string?];
    const overlap = `locality ${loc} overlap with previous specified ones`;
    if (items.length === 1) {
      if (seen.has(region)) return overlap;
      seen.set(region, new Map([['*', new Set(['*'])]]));
    } else if (items.length === 2) {
      const zones = seen.get(region);
      if (zones) {
        if (zones.has('*') || zones.has(zone!)) return overlap;
        zones.set(zone!, new Set(['*']));
      } else seen.set(region, new Map([[zone!, new Set(['*'])]]));
    } else {
      const zones = seen.get(region);
      if (zones) {
        if (zones.has('*')) return overlap;
        const subs = zones.get(zone!);
        if (subs) {
          if (subs.has('*') || subs.has(sub!)) return overlap;
          subs.add(sub!);
        } else zones.set(zone!, new Set([sub!]));
      } else seen.set(region, new Map([[zone!, new Set([sub!])]]));
    }
  }
  return undefined;
}

function splitN(s: string, sep: string, n: number): string[] {
  const parts = s.split(sep);
  if (parts.length <= n) return parts;
  return [...parts.slice(0, n - 1), parts.slice(n - 1).join(sep)];
}
