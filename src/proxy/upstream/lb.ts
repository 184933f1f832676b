// Load balancing with Envoy's rules: priority levels get load by their health (overprovisioning factor
// 1.4), a priority whose healthy share is under the panic threshold balances over all its hosts, and
// inside the chosen set ROUND_ROBIN (smooth weighted when weights differ), LEAST_REQUEST (power of two
// choices), RANDOM, or a consistent hash when the route gives one. Pure apart from the random source
// and the round-robin cursors, so tests can drive it.
import type { Host } from './host';

export type LbPolicy = 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM' | 'RING_HASH' | 'MAGLEV' | 'CLUSTER_PROVIDED';

export interface PriorityState {
  priority: number;
  readonly hosts: readonly Host[];
  readonly healthy: readonly Host[];
  readonly degraded: readonly Host[];
}

export interface LbContext {
  /** Hash from the route's hash policy (ring hash / maglev). */
  hash?: number;
  /** Hosts to avoid (retry host predicate previous_hosts). */
  avoid?: ReadonlySet<Host>;
}

export interface LbOptions {
  policy: LbPolicy;
  /** Percent, Envoy default 50; 0 disables panic mode. */
  panicThreshold: number;
  /** Envoy default 140 (percent). */
  overprovisioningFactor: number;
  /** LEAST_REQUEST choice count, default 2. */
  choiceCount: number;
  random: () => number;
}

const NO_HOSTS: readonly Host[] = [];

/**
 * Groups hosts by priority and health. The lists are read, never changed; where one equals another (one
 * priority, every host healthy: the usual case) it is the same array, not a copy, so a sidecar's thousands of
 * clusters do not each hold three lists of the same hosts with room for seventeen.
 */
export function priorityStates(hosts: readonly Host[]): PriorityState[] {
  const byP = new Map<number, { priority: number; hosts: Host[]; healthy: Host[]; degraded: Host[] }>();
  for (const h of hosts) {
    let s = byP.get(h.priority);
    if (!s) byP.set(h.priority, (s = { priority: h.priority, hosts: [], healthy: [], degraded: [] }));
    s.hosts.push(h);
    if (h.healthyForLb) s.healthy.push(h);
    else if (h.degraded) s.degraded.push(h);
  }
  const grouped = [...byP.values()].sort((a, b) => a.priority - b.priority);
  return grouped.map((g) => {
    const all = grouped.length === 1 ? hosts : g.hosts;
    return {
      priority: g.priority,
      hosts: all,
      healthy: g.healthy.length === all.length ? all : g.healthy,
      degraded: g.degraded.length === 0 ? NO_HOSTS : g.degraded,
    };
  });
}

/** The loads of a single priority (shared: loads are never changed). */
const ALL_TO_ONE: readonly number[] = [100];

/** Envoy's per-priority load (percent, summing to 100) from each priority's healthy share. */
export function priorityLoads(states: readonly PriorityState[], overprovisioningFactor = 140): readonly number[] {
  const health = states.map((s) =>
    s.hosts.length === 0 ? 0 : Math.min(100, Math.floor((overprovisioningFactor * (s.healthy.length + s.degraded.length)) / s.hosts.length)),
  );
  const total = Math.min(
    100,
    health.reduce((a, b) => a + b, 0),
  );
  if (total === 0) return states.map((_, i) => (i === 0 ? 100 : 0));
  if (states.length === 1) return ALL_TO_ONE;
  const loads: number[] = [];
  let remaining = 100;
  for (let i = 0; i < health.length; i++) {
    const l = Math.min(remaining, Math.round((health[i]! * 100) / total));
    loads.push(l);
    remaining -= l;
  }
  // rounding leftovers go to the first priority with any health, as Envoy's normalisation does
  if (remaining > 0) {
    const i = health.findIndex((h) => h > 0);
    loads[i >= 0 ? i : 0]! += remaining;
  }
  return loads;
}

export class LoadBalancer {
  private rr = 0;
  /** Smooth weighted round robin state, per host list identity. */
  private swrr: { list: readonly Host[]; current: Map<Host, number> } | undefined;
  private states: PriorityState[] = [];
  private loads: readonly number[] = [];
  /** Envoy's lb_healthy_panic counter. */
  panicCount = 0;

  constructor(readonly opts: LbOptions) {
    this.rr = Math.floor(opts.random() * 1000);
  }

  /** Recomputes priority groups after membership or health changes. */
  update(hosts: readonly Host[]): void {
    this.states = priorityStates(hosts);
    this.loads = priorityLoads(this.states, this.opts.overprovisioningFactor);
    this.swrr = undefined;
  }

  hostCount(): number {
    return this.states.reduce((a, s) => a + s.hosts.length, 0);
  }

  /** The hosts to balance over for one request (priority chosen by load; panic → all of them). */
  candidates(): readonly Host[] {
    const states = this.states;
    if (states.length === 0) return [];
    let idx = 0;
    if (states.length > 1) {
      const pick = this.opts.random() * 100;
      let acc = 0;
      idx = states.length - 1;
      for (let i = 0; i < this.loads.length; i++) {
        acc += this.loads[i]!;
        if (pick < acc) {
          idx = i;
          break;
        }
      }
    }
    const s = states[idx]!;
    if (s.hosts.length === 0) return [];
    const healthyPct = (100 * (s.healthy.length + s.degraded.length)) / s.hosts.length;
    if (this.opts.panicThreshold > 0 && healthyPct < this.opts.panicThreshold) {
      this.panicCount++;
      return s.hosts;
    }
    return s.healthy.length > 0 ? s.healthy : s.degraded;
  }

  choose(ctx: LbContext = {}): Host | undefined {
    let list = this.candidates();
    if (list.length === 0) return undefined;
    if (ctx.avoid && ctx.avoid.size > 0 && list.length > 1) {
      const rest = list.filter((h) => !ctx.avoid!.has(h));
      if (rest.length > 0) list = rest;
    }
    if (list.length === 1) return list[0];
    switch (this.opts.policy) {
      case 'RANDOM':
        return list[Math.floor(this.opts.random() * list.length)];
      case 'LEAST_REQUEST':
        return this.leastRequest(list);
      case 'RING_HASH':
      case 'MAGLEV':
        return ctx.hash === undefined ? list[Math.floor(this.opts.random() * list.length)] : rendezvous(list, ctx.hash);
      default:
        return this.roundRobin(list);
    }
  }

  private roundRobin(list: readonly Host[]): Host {
    const w0 = list[0]!.weight;
    if (list.every((h) => h.weight === w0)) return list[this.rr++ % list.length]!;
    // smooth weighted round robin: each pick adds weights and takes the largest, minus the total
    if (!this.swrr || this.swrr.list !== list) this.swrr = { list, current: new Map() };
    const cur = this.swrr.current;
    let total = 0;
    let best: Host | undefined;
    let bestV = -Infinity;
    for (const h of list) {
      const v = (cur.get(h) ?? 0) + h.weight;
      cur.set(h, v);
      total += h.weight;
      if (v > bestV) {
        bestV = v;
        best = h;
      }
    }
    cur.set(best!, bestV - total);
    return best!;
  }

  private leastRequest(list: readonly Host[]): Host {
    const w0 = list[0]!.weight;
    const equal = list.every((h) => h.weight === w0);
    let best: Host | undefined;
    let bestScore = Infinity;
    for (let i = 0; i < this.opts.choiceCount; i++) {
      const h = equal ? list[Math.floor(this.opts.random() * list.length)]! : weightedPick(list, this.opts.random());
      // Envoy's weighted least request divides the weight by active requests + 1
      const score = equal ? h.stats.rqActive : (h.stats.rqActive + 1) / h.weight;
      if (score < bestScore) {
        bestScore = score;
        best = h;
      }
    }
    return best!;
  }
}

function weightedPick(list: readonly Host[], r: number): Host {
  const total = list.reduce((a, h) => a + h.weight, 0);
  let x = r * total;
  for (const h of list) {
    x -= h.weight;
    if (x < 0) return h;
  }
  return list[list.length - 1]!;
}

/** 32-bit FNV-1a. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Highest-random-weight hashing: the same key keeps its host while the host stays in the set. */
function rendezvous(list: readonly Host[], key: number): Host {
  let best = list[0]!;
  let bestScore = -1;
  for (const h of list) {
    const s = hash32(`${key}:${h.key}`) * h.weight;
    if (s > bestScore) {
      bestScore = s;
      best = h;
    }
  }
  return best;
}
