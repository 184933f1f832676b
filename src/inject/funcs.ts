// The functions injection templates call beyond Go's builtins and sprig (Istio's InjectionFuncmap), with
// Istio's semantics: `annotation` falls back to fmt.Sprint of the default, `indent` leaves the first line
// alone, `toYaml` is sigs.k8s.io/yaml, `protoToJSON` writes the cleaned ProxyConfig.
import { GoMap, goSprint, goJsonMarshal, SPRIG, type FuncMap, strval } from '../lib/gotemplate';
import { jsonToGoYaml } from '../lib/goyaml';
import { viewJson } from '../orch/goview';
import { goJsonText, type Json } from '../orch/typed';
import { cleanProxyConfig, proxyConfigJson } from './mesh';
import { PROXY_CONFIG_JSON, type ProxyConfigView } from './views';

function asStringMap(v: unknown): Map<string, string> {
  if (v instanceof Map) return v as Map<string, string>;
  if (v && typeof v === 'object') return new Map(Object.entries(v as Record<string, string>));
  return new Map();
}

export function excludeInboundPort(port: unknown, excluded: unknown): string {
  const portStr = goSprint(port).trim();
  const excludedStr = strval(excluded);
  if (portStr.length === 0 || portStr === '0') return excludedStr;
  const out: string[] = [];
  for (const p of excludedStr.split(',')) {
    if (p === portStr) return excludedStr;
    const t = p.trim();
    if (t.length > 0) out.push(t);
  }
  out.push(portStr);
  return out.join(',');
}

/** Go's time.Duration String of a protojson duration ("90s" → "1m30s"). */
function formatDuration(d: unknown): string {
  const text = typeof d === 'string' ? d : '0s';
  let ns = BigInt(Math.round(Number(text.replace(/s$/, '')) * 1e9));
  if (ns === 0n) return '0s';
  const neg = ns < 0n;
  if (neg) ns = -ns;
  let out: string;
  if (ns < 1_000_000_000n) {
    const units: Array<[bigint, string]> = [
      [1_000_000n, 'ms'],
      [1_000n, 'µs'],
      [1n, 'ns'],
    ];
    const [u, name] = units.find(([u]) => ns >= u)!;
    out = trimFraction(ns, u) + name;
  } else {
    const h = ns / 3_600_000_000_000n;
    const m = (ns / 60_000_000_000n) % 60n;
    const s = ns % 60_000_000_000n;
    out = (h ? `${h}h` : '') + (h || m ? `${m}m` : '') + trimFraction(s, 1_000_000_000n) + 's';
  }
  return neg ? `-${out}` : out;
}

function trimFraction(v: bigint, unit: bigint): string {
  const whole = v / unit;
  const frac = v % unit;
  if (frac === 0n) return whole.toString();
  const digits = unit.toString().length - 1;
  return `${whole}.${frac.toString().padStart(digits, '0').replace(/0+$/, '')}`;
}

function appendMultusNetwork(existing: unknown, network: unknown): string {
  const existingValue = strval(existing);
  const net = strval(network);
  if (existingValue === '') return net;
  const i = existingValue.lastIndexOf(']');
  if (i !== -1) {
    let networks: Array<Record<string, unknown>>;
    try {
      networks = JSON.parse(existingValue) as Array<Record<string, unknown>>;
      if (!Array.isArray(networks)) return existingValue;
    } catch {
      return existingValue;
    }
    const slash = net.indexOf('/');
    const ns = slash >= 0 ? net.slice(0, slash) : '';
    const name = slash >= 0 ? net.slice(slash + 1) : net;
    for (const n of networks) {
      if (n.name === name && (n.namespace ?? '') === ns) return existingValue;
    }
    const add = ns === '' ? `, {"name": "${name}"}` : `, {"name": "${name}", "namespace": "${ns}"}`;
    return existingValue.slice(0, i) + add + existingValue.slice(i);
  }
  for (const n of existingValue.split(',')) if (n.trim() === net) return existingValue;
  return `${existingValue}, ${net}`;
}

function containerPorts(containers: unknown, include: (name: string) => boolean): string {
  const parts: string[] = [];
  for (const c of (Array.isArray(containers) ? containers : []) as Array<Record<string, unknown>>) {
    if (!include(String(c.Name))) continue;
    for (const p of (c.Ports ?? []) as Array<Record<string, unknown>>) {
      if (p.Protocol === 'UDP' || p.Protocol === 'SCTP') continue;
      parts.push(String(p.ContainerPort));
    }
  }
  return parts.join(',');
}

function toGoJsonValue(v: unknown): unknown {
  const j = viewJson(v);
  if (j !== undefined) return j;
  return v;
}

export function structToJSON(v: unknown): string {
  if (v === null || v === undefined) return '{}';
  const j = viewJson(v);
  if (j !== undefined) return goJsonText(j as Json);
  return goJsonMarshal(toGoJsonValue(v));
}

function mergeMaps(...maps: unknown[]): GoMap<string> | null {
  if (maps.length === 0) return null;
  const out = new GoMap<string>(null, '');
  for (const m of maps) for (const [k, v] of asStringMap(m)) out.set(k, v);
  return out;
}

/** Injection template functions; `env` reads `environment` (the injector's process environment). */
export function injectionFuncs(environment: Readonly<Record<string, string | undefined>>): FuncMap {
  return {
    ...SPRIG,
    formatDuration,
    isset: (m, key) => asStringMap(m).has(strval(key)),
    excludeInboundPort,
    includeInboundPorts: (containers) => containerPorts(containers, () => true),
    applicationPorts: (containers) => containerPorts(containers, (n) => n !== 'mesh-proxy'),
    kubevirtInterfaces: (s) => strval(s),
    excludeInterfaces: (s) => strval(s),
    annotation: (meta, name, def) => {
      const annos = asStringMap((meta as { Annotations?: unknown } | null)?.Annotations);
      const key = strval(name);
      return annos.has(key) ? annos.get(key)! : goSprint(def);
    },
    valueOrDefault: (value, def) => (value === '' || value === null || value === undefined ? def : value),
    toJSON: (m) => (m === null || m === undefined ? '{}' : goJsonMarshal(Object.fromEntries(asStringMap(m)))),
    fromJSON: (j) => {
      try {
        return JSON.parse(strval(j));
      } catch {
        return '{}';
      }
    },
    structToJSON,
    protoToJSON: (v) => {
      const pc = (v as ProxyConfigView | null)?.[PROXY_CONFIG_JSON];
      if (!pc) return '{}';
      return proxyConfigJson(cleanProxyConfig(pc));
    },
    toYaml: (v) => jsonToGoYaml(JSON.parse(goJsonMarshal(toGoJsonValue(v)))),
    indent: (spaces, source) => {
      const n = Number(spaces);
      const lines = strval(source).split('\n');
      return lines.map((l, i) => (i > 0 ? ' '.repeat(n) + l : l)).join('\n');
    },
    directory: (p) => {
      const s = strval(p);
      return s.slice(0, s.lastIndexOf('/') + 1);
    },
    contains: (needle, haystack) => strval(haystack).includes(strval(needle)),
    toLower: (s) => strval(s).toLowerCase(),
    appendMultusNetwork,
    env: (key, def) => {
      const v = environment[strval(key)];
      return v === undefined || v === '' ? strval(def) : v;
    },
    omit: (dict, ...keys) => {
      const drop = new Set(keys.map(strval));
      return new GoMap<string>(
        [...asStringMap(dict)].filter(([k]) => !drop.has(k)),
        '',
      );
    },
    strdict: (...kv) => {
      const out = new GoMap<string>(null, '');
      for (let i = 0; i < kv.length; i += 2) out.set(strval(kv[i]), i + 1 < kv.length ? strval(kv[i + 1]) : '');
      return out;
    },
    toJsonMap: (...maps) => {
      const m = mergeMaps(...maps);
      return m === null ? 'null' : goJsonMarshal(Object.fromEntries(m));
    },
    mergeMaps,
  };
}
