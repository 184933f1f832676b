// EnvoyFilter (Istio's envoyfilter.ValidateEnvoyFilter, same messages): applyTo, match and patch
// must line up, and a patch value must decode as the Envoy message its applyTo names. Decoding is
// lenient first (unknown fields allowed: an error here rejects) and strict second (a warning: the
// value may be newer than our protos). A `@type` of a package Istio resolves but this build has no
// schema for is accepted without looking inside; one of no package Envoy or Istio defines is rejected.
import { create, createFileRegistry, type DescMessage, fromJson, type JsonValue, type Registry } from '@bufbuild/protobuf';
import { reflect, type ReflectMessage } from '@bufbuild/protobuf/reflect';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { DurationError, parseDurationNs } from '../../lib/duration';
import { re2SyntaxError } from '../../lib/re2';
import type { Config, EnvoyFilterApplyTo, EnvoyFilterConfigPatch } from '../types';
import { isObject } from '../values';
import { checkAlphaWorkloadSelector } from './common';
import { ALWAYS_LINKED_PREFIXES, ENVOY_PACKAGES } from './envoy-packages';
import { at, dot, type Report } from './report';

const HCM = 'envoy.filters.network.http_connection_manager';

let envoyTypes: Registry | undefined;

/**
 * Loads the Envoy message types patch values are checked against. They are a hundred generated
 * files whose descriptors take most of a second to build, so programs load them only when they may
 * meet an EnvoyFilter (the daemon at start, meshctl when its input has one) and before validating it.
 */
export async function loadEnvoyFilterTypes(): Promise<void> {
  envoyTypes ??= (await import('./envoy-types')).envoyValidationRegistry();
}

function envoyRegistry(): Registry {
  if (!envoyTypes) throw new Error('EnvoyFilter validation needs loadEnvoyFilterTypes() to have completed first');
  return envoyTypes;
}

/** The Envoy message each applyTo patches (Istio's BuildXDSObjectFromStruct). */
const PATCH_TYPES: Readonly<Partial<Record<EnvoyFilterApplyTo, string>>> = {
  CLUSTER: 'envoy.config.cluster.v3.Cluster',
  LISTENER: 'envoy.config.listener.v3.Listener',
  ROUTE_CONFIGURATION: 'envoy.config.route.v3.RouteConfiguration',
  FILTER_CHAIN: 'envoy.config.listener.v3.FilterChain',
  HTTP_FILTER: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter',
  NETWORK_FILTER: 'envoy.config.listener.v3.Filter',
  VIRTUAL_HOST: 'envoy.config.route.v3.VirtualHost',
  HTTP_ROUTE: 'envoy.config.route.v3.Route',
  EXTENSION_CONFIG: 'envoy.config.core.v3.TypedExtensionConfig',
  BOOTSTRAP: 'envoy.config.bootstrap.v3.Bootstrap',
  LISTENER_FILTER: 'envoy.config.listener.v3.ListenerFilter',
};

/** Istio's xds.DeprecatedFilterNames, reversed: old name → the canonical one. */
const DEPRECATED_FILTER_NAMES: Readonly<Record<string, string>> = {
  'envoy.buffer': 'envoy.filters.http.buffer',
  'envoy.cors': 'envoy.filters.http.cors',
  'envoy.csrf': 'envoy.filters.http.csrf',
  'envoy.http_dynamo_filter': 'envoy.filters.http.dynamo',
  'envoy.fault': 'envoy.filters.http.fault',
  'envoy.grpc_http1_bridge': 'envoy.filters.http.grpc_http1_bridge',
  'envoy.grpc_json_transcoder': 'envoy.filters.http.grpc_json_transcoder',
  'envoy.grpc_web': 'envoy.filters.http.grpc_web',
  'envoy.gzip': 'envoy.filters.http.gzip',
  'envoy.health_check': 'envoy.filters.http.health_check',
  'envoy.ip_tagging': 'envoy.filters.http.ip_tagging',
  'envoy.lua': 'envoy.filters.http.lua',
  'envoy.rate_limit': 'envoy.filters.http.ratelimit',
  'envoy.router': 'envoy.filters.http.router',
  'envoy.squash': 'envoy.filters.http.squash',
  'envoy.listener.http_inspector': 'envoy.filters.listener.http_inspector',
  'envoy.listener.original_dst': 'envoy.filters.listener.original_dst',
  'envoy.listener.original_src': 'envoy.filters.listener.original_src',
  'envoy.listener.proxy_protocol': 'envoy.filters.listener.proxy_protocol',
  'envoy.listener.tls_inspector': 'envoy.filters.listener.tls_inspector',
  'envoy.client_ssl_auth': 'envoy.filters.network.client_ssl_auth',
  // Both ext_authz filters shared one old name; the map's last entry (the network filter) wins in Istio.
  'envoy.ext_authz': 'envoy.filters.network.ext_authz',
  'envoy.http_connection_manager': HCM,
  'envoy.mongo_proxy': 'envoy.filters.network.mongo_proxy',
  'envoy.ratelimit': 'envoy.filters.network.ratelimit',
  'envoy.redis_proxy': 'envoy.filters.network.redis_proxy',
  'envoy.tcp_proxy': 'envoy.filters.network.tcp_proxy',
};

const LISTENER_CLASS = new Set<EnvoyFilterApplyTo>(['LISTENER', 'FILTER_CHAIN', 'NETWORK_FILTER', 'HTTP_FILTER']);
const ROUTE_CLASS = new Set<EnvoyFilterApplyTo>(['ROUTE_CONFIGURATION', 'VIRTUAL_HOST', 'HTTP_ROUTE']);

export function validateEnvoyFilter(c: Config<'EnvoyFilter'>, r: Report): void {
  r.warn(
    'spec',
    'EnvoyFilter exposes internal implementation details that may change at any time. ' +
      'Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.',
  );
  const s = c.spec;
  const mark = r.errors.length;
  const { empty } = checkAlphaWorkloadSelector(s.workloadSelector, 'spec.workloadSelector', r);
  if (r.errorsSince(mark) > 0) return; // Istio returns at a bad selector
  if (empty)
    r.warn('spec.workloadSelector', 'Envoy filter: workload selector specified without labels, will be applied to all services in namespace');
  (s.configPatches ?? []).forEach((cp, i) => checkPatch(cp, at('spec.configPatches', i), r));
}

function checkPatch(cp: EnvoyFilterConfigPatch, path: string, r: Report): void {
  const applyTo = cp.applyTo ?? 'INVALID';
  if (applyTo === 'INVALID') return r.error(dot(path, 'applyTo'), 'Envoy filter: missing applyTo');
  if (!cp.patch) return r.error(dot(path, 'patch'), 'Envoy filter: missing patch');
  const operation = cp.patch.operation ?? 'INVALID';
  if (operation === 'INVALID') return r.error(dot(path, 'patch.operation'), 'Envoy filter: missing patch operation');
  if (operation !== 'REMOVE' && cp.patch.value === undefined)
    return r.error(dot(path, 'patch.value'), 'Envoy filter: missing patch value for non-remove operation');
  const proxyVersion = cp.match?.proxy?.proxyVersion;
  if (proxyVersion) {
    const err = re2SyntaxError(proxyVersion);
    if (err) return r.error(dot(path, 'match.proxy.proxyVersion'), `Envoy filter: invalid regex for proxy version, [${err}]`);
  }
  const m = cp.match;
  const objectTypes = m?.listener ?? m?.routeConfiguration ?? m?.cluster;
  if (LISTENER_CLASS.has(applyTo) && objectTypes) {
    if (!m!.listener) return r.error(dot(path, 'match'), 'Envoy filter: applyTo for listener class objects cannot have non listener match');
    const filter = m!.listener.filterChain?.filter;
    if (filter) {
      const fp = dot(path, 'match.listener.filterChain.filter');
      if (applyTo === 'LISTENER' || applyTo === 'FILTER_CHAIN') r.warn(fp, `Envoy filter: filter match has no effect when used with ${applyTo}`);
      if (!filter.name) return r.error(dot(fp, 'name'), 'Envoy filter: filter match has no name to match on');
      if (filter.subFilter) {
        if (applyTo !== 'HTTP_FILTER')
          return r.error(dot(fp, 'subFilter'), 'Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only');
        if (filter.name !== HCM && filter.name !== 'envoy.http_connection_manager')
          return r.error(dot(fp, 'name'), `Envoy filter: subfilter match requires filter match with ${HCM}`);
        if (!filter.subFilter.name) return r.error(dot(fp, 'subFilter.name'), 'Envoy filter: subfilter match has no name to match on');
      }
      deprecatedName(filter.name, dot(fp, 'name'), r);
      deprecatedName(filter.subFilter?.name, dot(fp, 'subFilter.name'), r);
    }
  } else if (ROUTE_CLASS.has(applyTo) && objectTypes && !m!.routeConfiguration) {
    r.error(dot(path, 'match'), 'Envoy filter: applyTo for http route class objects cannot have non route configuration match');
  } else if (applyTo === 'CLUSTER' && objectTypes && !m!.cluster) {
    r.error(dot(path, 'match'), 'Envoy filter: applyTo for cluster class objects cannot have non cluster match');
  }
  if (cp.patch.value !== undefined) checkPatchValue(applyTo, cp.patch.value, dot(path, 'patch.value'), r);
}

function deprecatedName(name: string | undefined, path: string, r: Report): void {
  const canonical = name ? DEPRECATED_FILTER_NAMES[name] : undefined;
  if (canonical) r.warn(path, `using deprecated filter name ${JSON.stringify(name)}; use ${JSON.stringify(canonical)} instead`);
}

// ---------------------------------------------------------------------------------------------
// Patch values

function packageOf(typeName: string): string {
  return typeName.slice(0, Math.max(0, typeName.lastIndexOf('.')));
}

function knownToIstio(typeName: string): boolean {
  return ENVOY_PACKAGES.has(packageOf(typeName)) || ALWAYS_LINKED_PREFIXES.some((p) => typeName.startsWith(p));
}

const synthetic = new Map<string, DescMessage>();

/** An empty message standing in for a type Istio knows and this build has no schema for. */
function syntheticMessage(typeName: string): DescMessage | undefined {
  let d = synthetic.get(typeName);
  if (d) return d;
  const file = create(FileDescriptorProtoSchema, {
    name: `mesh-unchecked/${typeName}.proto`,
    package: packageOf(typeName),
    messageType: [{ name: typeName.slice(typeName.lastIndexOf('.') + 1) }],
    syntax: 'proto3',
  });
  d = createFileRegistry(file, () => undefined).getMessage(typeName);
  if (d) synthetic.set(typeName, d);
  return d;
}

/** The registry for one decode: records the Any types it was asked for that it could not check. */
function trackingRegistry(base: Registry, unchecked: Set<string>, unknown: Set<string>): Registry {
  const resolve = (n: string): DescMessage | undefined => {
    const real = base.getMessage(n);
    if (real) return real;
    if (knownToIstio(n)) unchecked.add(n);
    else unknown.add(n);
    return syntheticMessage(n);
  };
  return {
    kind: 'registry',
    [Symbol.iterator]: () => base[Symbol.iterator](),
    get: (n) => base.get(n) ?? resolve(n),
    getMessage: resolve,
    getEnum: (n) => base.getEnum(n),
    getExtension: (n) => base.getExtension(n),
    getExtensionFor: (e, no) => base.getExtensionFor(e, no),
    getService: (n) => base.getService(n),
  };
}

/** A copy of `v` where every object typed as one of `types` keeps only its `@type`. */
function hollowOut(v: unknown, types: ReadonlySet<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => hollowOut(x, types));
  if (!isObject(v)) return v;
  const t = v['@type'];
  if (typeof t === 'string' && types.has(t.slice(t.lastIndexOf('/') + 1))) return { '@type': t };
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, hollowOut(x, types)]));
}

/** A Go duration (`500ms`, `1h`) as protobuf JSON writes it (`0.500s`); other text unchanged. */
function protoDuration(text: string): string {
  if (/^-?[0-9]+(\.[0-9]+)?s$/.test(text)) return text;
  try {
    const ns = parseDurationNs(text);
    const neg = ns < 0n;
    const abs = neg ? -ns : ns;
    return `${neg ? '-' : ''}${abs / 1_000_000_000n}.${(abs % 1_000_000_000n).toString().padStart(9, '0')}s`;
  } catch (e) {
    if (e instanceof DurationError) return text;
    throw e;
  }
}

/**
 * Istio decodes patches with golang/protobuf's jsonpb, which reads a Duration with time.ParseDuration:
 * rewrite such values, following the schema (and Any types the registry knows), before decoding.
 */
function goDurations(desc: DescMessage, v: unknown, reg: Registry): unknown {
  if (desc.typeName === 'google.protobuf.Duration') return typeof v === 'string' ? protoDuration(v) : v;
  if (!isObject(v)) return v;
  if (desc.typeName === 'google.protobuf.Any') {
    const t = v['@type'];
    const inner = typeof t === 'string' ? reg.getMessage(t.slice(t.lastIndexOf('/') + 1)) : undefined;
    if (!inner) return v;
    if (inner.typeName.startsWith('google.protobuf.')) return { ...v, value: goDurations(inner, v.value, reg) };
    return { ...(goDurations(inner, v, reg) as Record<string, unknown>), '@type': t };
  }
  if (desc.typeName.startsWith('google.protobuf.')) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    const f = desc.fields.find((fd) => fd.jsonName === k || fd.name === k);
    if (!f || x === null) out[k] = x;
    else if (f.fieldKind === 'message') out[k] = goDurations(f.message, x, reg);
    else if (f.fieldKind === 'list' && f.listKind === 'message' && Array.isArray(x)) out[k] = x.map((e) => goDurations(f.message, e, reg));
    else if (f.fieldKind === 'map' && f.mapKind === 'message' && isObject(x))
      out[k] = Object.fromEntries(Object.entries(x).map(([mk, mv]) => [mk, goDurations(f.message, mv, reg)]));
    else out[k] = x;
  }
  return out;
}

function decodeMessage(e: unknown): string {
  return (e as Error).message.replace(/^\[[a-z_]+\] /, '');
}

function checkPatchValue(applyTo: EnvoyFilterApplyTo, value: Record<string, unknown>, path: string, r: Report): void {
  const typeName = PATCH_TYPES[applyTo];
  if (!typeName) return r.error(path, `Envoy filter: unknown object type for applyTo ${applyTo}`);
  const base = envoyRegistry();
  const schema = base.getMessage(typeName)!;
  const unchecked = new Set<string>();
  const unknown = new Set<string>();
  value = goDurations(schema, value, base) as Record<string, unknown>;
  let decoded;
  try {
    decoded = fromJson(schema, value as JsonValue, { ignoreUnknownFields: true, registry: trackingRegistry(base, unchecked, unknown) });
  } catch (e) {
    return r.error(path, `Envoy filter: ${decodeMessage(e)}`);
  }
  if (unknown.size > 0) {
    for (const t of unknown) {
      const detail = `Envoy filter: could not resolve Any message type: type.googleapis.com/${t}`;
      r.error(
        path,
        t.includes('.v2.') ? `referenced type unknown (hint: try using the v3 XDS API): ${detail}` : `referenced type unknown: ${detail}`,
      );
    }
    return;
  }
  try {
    fromJson(schema, hollowOut(value, unchecked) as JsonValue, { registry: trackingRegistry(base, new Set(), new Set()) });
  } catch (e) {
    r.warn(path, `Envoy filter: ${decodeMessage(e)}`);
  }
  const missing = missingTypedConfig(reflect(schema, decoded));
  if (missing.length > 0) r.warn(path, `using deprecated types by name without typed_config; ${missing.join(', ')}`);
}

/**
 * Istio's recurseMissingTypedConfig: messages with a typedConfig field that set neither it nor
 * configDiscovery, named by their `name`. Like Istio, only singular message fields are descended into.
 */
function missingTypedConfig(m: ReflectMessage): string[] {
  let name = '';
  let requires = false;
  let has = false;
  const out: string[] = [];
  for (const f of m.fields) {
    if (f.jsonName === 'name' && f.fieldKind === 'scalar') name = String(m.get(f));
  }
  for (const f of m.fields) {
    const set = m.isSet(f);
    if (f.jsonName === 'typedConfig') {
      requires = true;
      if (set) has = true;
    }
    if (f.jsonName === 'configDiscovery' && set) has = true;
    if (set && f.fieldKind === 'message') out.push(...missingTypedConfig(m.get(f) as ReflectMessage));
  }
  if (requires && !has) out.push(name);
  return out;
}
