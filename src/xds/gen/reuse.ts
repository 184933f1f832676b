// Content keys for the xDS cache (src/discovery/push/xds-cache.ts): most pushes (a VirtualService edit, an
// endpoint change elsewhere) leave almost every cluster and virtual host as it was, and serialising them is
// the bulk of generation, so each piece is cached under a key that spells out everything it is built from
// and only changed pieces are built and serialised again (Istio's xDS cache keys clusters and routes the
// same way).
import type { Service } from '../../discovery/model';
import type { MergedDestinationRule } from '../../discovery/push/destinationrule';

const serviceKeys = new WeakMap<Service, string>();
const ruleKeys = new WeakMap<MergedDestinationRule, string>();
const optionKeys = new WeakMap<object, string>();

/**
 * Content keys are long JSON; keys made of them would be hashed in full on every lookup. Equal content gets
 * one short id instead. Ids are never reused, so forgetting the table (when it grows past a bound, as config
 * churns) only costs cache misses, never a wrong hit.
 */
const contentIds = new Map<string, string>();
let nextContentId = 0;
const MAX_CONTENT_IDS = 200_000;
export function internKey(content: string): string {
  let id = contentIds.get(content);
  if (id === undefined) {
    if (contentIds.size >= MAX_CONTENT_IDS) contentIds.clear();
    contentIds.set(content, (id = `#${(nextContentId++).toString(36)}`));
  }
  return id;
}

function serviceKey(s: Service): string {
  let k = serviceKeys.get(s);
  if (k === undefined) serviceKeys.set(s, (k = internKey(JSON.stringify(s))));
  return k;
}

function ruleKey(r: MergedDestinationRule | undefined): string {
  if (!r) return '';
  let k = ruleKeys.get(r);
  if (k === undefined) {
    const from = r.from.map((c) => `${c.apiVersion}/${c.meta.namespace}/${c.meta.name}`);
    k = internKey(JSON.stringify([r.host, r.namespace, r.trafficPolicy ?? null, r.subsets, from]));
    ruleKeys.set(r, k);
  }
  return k;
}

export function optionsKey(o: object): string {
  let k = optionKeys.get(o);
  if (k === undefined) optionKeys.set(o, (k = internKey(JSON.stringify(o))));
  return k;
}

/**
 * An outbound cluster is a function of its service, port, the DestinationRule that applies, the daemon's
 * options, whether it is for a gateway and — for DNS-resolved services, whose endpoints are inlined — the
 * endpoints.
 */
export function outboundClusterKey(
  service: Service,
  port: number,
  rule: MergedDestinationRule | undefined,
  options: object,
  gateway: boolean,
  endpoints: () => unknown,
): string {
  const dns = service.resolution === 'DNS' || service.resolution === 'DNSRoundRobin';
  return `${gateway ? 'g' : 's'}|${port}|${serviceKey(service)}|${ruleKey(rule)}|${optionsKey(options)}|${dns ? internKey(JSON.stringify(endpoints())) : ''}`;
}

/** JSON of generator init objects, which may hold 64-bit integers as bigint. */
export function initKey(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));
}
