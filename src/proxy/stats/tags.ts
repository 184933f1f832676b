// Envoy's tag extraction (TagProducerImpl): regexes applied to the full stat name; the first capture
// group is cut out of the name, the second (or first) is the tag value. Defaults are Envoy's
// well-known extractors; bootstrap `stats_config.stats_tags` add or replace them (Istio's bootstrap
// replaces cluster_name etc. because its cluster names contain dots).
import { compileRe2, searchGroups, type Re2 } from '../../lib/re2';

export interface TagSpec {
  name: string;
  regex?: string;
  fixedValue?: string;
}

interface Extractor {
  name: string;
  re?: Re2;
  fixedValue?: string;
  /** Quick pre-filter like Envoy's substr. */
  substr?: string;
}

const WORD = '[^.]+';
const ADDRESS = '(?:\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}_\\d+|\\[[_aAbBcCdDeEfF0-9:]+\\]_\\d+)';

/** Envoy's default extractors that can match stats this engine produces, in Envoy's order. */
export const DEFAULT_TAG_SPECS: ReadonlyArray<TagSpec & { substr?: string }> = [
  { name: 'envoy.response_code', regex: '_rq(_(\\d{3}))$', substr: '_rq_' },
  { name: 'envoy.response_code_class', regex: '_rq_((\\d))xx$', substr: '_rq_' },
  { name: 'envoy.fault_downstream_cluster', regex: `^http\\.${WORD}\\.fault\\.((${WORD})\\.)`, substr: '.fault.' },
  { name: 'envoy.ssl_cipher', regex: `^listener\\..*?\\.ssl\\.cipher(\\.([0-9A-Za-z_-]+))$` },
  { name: 'envoy.ssl_cipher_suite', regex: `^cluster\\.${WORD}\\.ssl\\.ciphers(\\.([0-9A-Za-z_-]+))$`, substr: '.ssl.ciphers.' },
  { name: 'envoy.tcp_prefix', regex: `^tcp\\.((${WORD})\\.)` },
  { name: 'envoy.cluster_name', regex: `^cluster\\.((${WORD})\\.)` },
  { name: 'envoy.http_conn_manager_prefix', regex: `^listener\\..*?\\.http\\.((${WORD})\\.)`, substr: '.http.' },
  { name: 'envoy.http_conn_manager_prefix', regex: `^http\\.((${WORD})\\.)` },
  { name: 'envoy.listener_address', regex: `^listener\\.((${ADDRESS})\\.)` },
  { name: 'envoy.virtual_host', regex: `^vhost\\.((${WORD})\\.)` },
  { name: 'envoy.rds_route_config', regex: `^http\\.${WORD}\\.rds\\.(([\\w.-]+)\\.)\\w+?$`, substr: '.rds.' },
  { name: 'envoy.worker_id', regex: '^listener_manager\\.((worker_\\d+)\\.)', substr: 'listener_manager.worker_' },
];

export interface ExtractedName {
  /** The name with tag values cut out (`cluster.upstream_rq_total`). */
  name: string;
  tags: Array<[string, string]>;
}

export class TagProducer {
  private readonly extractors: Extractor[];
  private readonly cache = new Map<string, ExtractedName>();

  /** Throws naming the bad tag when a custom regex is invalid. */
  constructor(custom: readonly TagSpec[] = [], useAllDefaultTags = true) {
    const customNames = new Set(custom.map((c) => c.name));
    const out: Extractor[] = [];
    for (const c of custom) {
      if (c.regex === undefined || c.regex === '') {
        if (c.fixedValue === undefined) throw new Error(`stats_tags: tag '${c.name}' needs a regex or a fixed_value`);
        out.push({ name: c.name, fixedValue: c.fixedValue });
        continue;
      }
      out.push({ name: c.name, re: compile(c.regex, c.name) });
    }
    if (useAllDefaultTags) {
      for (const d of DEFAULT_TAG_SPECS) {
        if (customNames.has(d.name)) continue;
        out.push({ name: d.name, re: compile(d.regex!, d.name), ...(d.substr ? { substr: d.substr } : {}) });
      }
    }
    this.extractors = out;
  }

  extract(statName: string): ExtractedName {
    const hit = this.cache.get(statName);
    if (hit) return hit;
    const tags: Array<[string, string]> = [];
    const cut: Array<[number, number]> = [];
    for (const e of this.extractors) {
      if (e.fixedValue !== undefined) {
        tags.push([e.name, e.fixedValue]);
        continue;
      }
      if (e.substr && !statName.includes(e.substr)) continue;
      const m = searchGroups(e.re!, statName);
      const remove = m?.span(1);
      if (!m || !remove) continue;
      const value = (m.groupCount >= 2 ? m.group(2) : undefined) ?? m.group(1)!;
      tags.push([e.name, value]);
      cut.push(remove);
    }
    let name = statName;
    if (cut.length > 0) {
      cut.sort((a, b) => a[0] - b[0]);
      let out = '';
      let pos = 0;
      for (const [s, e] of cut) {
        if (s > pos) out += statName.slice(pos, s);
        pos = Math.max(pos, e);
      }
      name = out + statName.slice(pos);
    }
    const r = { name, tags };
    this.cache.set(statName, r);
    return r;
  }

  forget(prefix: string): void {
    for (const k of [...this.cache.keys()]) if (k.startsWith(prefix)) this.cache.delete(k);
  }
}

/**
 * Envoy's own extractors are RE2; custom stats_tags (Istio's bootstrap) are held to RE2 too so that no
 * configured pattern can backtrack (Istio's tags need nothing RE2 lacks).
 */
function compile(regex: string, tag: string): Re2 {
  try {
    return compileRe2(regex);
  } catch (e) {
    throw new Error(`stats_tags: invalid regex for tag '${tag}': ${(e as Error).message}`);
  }
}

/** Prometheus-safe metric or label name (Envoy replaces every other character by `_`). */
export function sanitizePromName(s: string): string {
  return s.replace(/[^a-zA-Z0-9_]/g, '_');
}
