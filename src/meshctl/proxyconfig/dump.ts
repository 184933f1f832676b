// A proxy's /config_dump (envoy.admin.v3.ConfigDump) read as istioctl reads it: decoded into typed messages,
// with Any values of types this build does not know kept as they are instead of failing (Envoy's dumps carry
// extensions mesh never configures), and re-encoded as istioctl prints dumps: protobuf JSON with camelCase
// names, four-space indentation and Go's HTML-safe escaping.
import { createRegistry, fromJson, ScalarType, toJson, type DescMessage, type JsonValue, type Message, type Registry } from '@bufbuild/protobuf';
import {
  anyUnpack,
  AnySchema,
  ListValueSchema,
  StructSchema,
  ValueSchema,
  file_google_protobuf_empty,
  file_google_protobuf_struct,
  file_google_protobuf_wrappers,
  type Any,
} from '@bufbuild/protobuf/wkt';
import {
  BootstrapConfigDumpSchema,
  ConfigDumpSchema,
  SecretsConfigDumpSchema,
  type BootstrapConfigDump,
  type SecretsConfigDump,
} from '../../gen/envoy/admin/v3/config_dump_pb';
import {
  ClustersConfigDumpSchema,
  EcdsConfigDumpSchema,
  EndpointsConfigDumpSchema,
  ListenersConfigDumpSchema,
  RoutesConfigDumpSchema,
  type ClustersConfigDump,
  type EcdsConfigDump,
  type EndpointsConfigDump,
  type ListenersConfigDump,
  type RoutesConfigDump,
} from '../../gen/envoy/admin/v3/config_dump_shared_pb';
import { file_envoy_admin_v3_clusters } from '../../gen/envoy/admin/v3/clusters_pb';
import { ClusterSchema, type Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { file_envoy_config_core_v3_extension } from '../../gen/envoy/config/core/v3/extension_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema, type Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import { file_envoy_service_status_v3_csds } from '../../gen/envoy/service/status/v3/csds_pb';
import { envoyTypeRegistry } from '../../lib/xds/registry';

export class ConfigDumpError extends Error {}

const UNKNOWN = '@unknownType';
const STRUCT_URL = 'type.googleapis.com/google.protobuf.Struct';

let registry: Registry | undefined;

/** Every type a dump may be decoded into. */
export function dumpRegistry(): Registry {
  registry ??= createRegistry(
    envoyTypeRegistry(),
    file_google_protobuf_struct,
    file_google_protobuf_empty,
    file_google_protobuf_wrappers,
    file_envoy_config_core_v3_extension,
    file_envoy_admin_v3_clusters,
    file_envoy_service_status_v3_csds,
  );
  return registry;
}

function typeName(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1);
}

/** Wraps Any values of unknown types as Struct values so the typed decode keeps them. */
function protect(v: unknown, reg: Registry): unknown {
  if (Array.isArray(v)) return v.map((x) => protect(x, reg));
  if (v === null || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  const t = o['@type'];
  if (typeof t === 'string' && !reg.getMessage(typeName(t))) {
    const rest: Record<string, unknown> = { [UNKNOWN]: t };
    for (const [k, x] of Object.entries(o)) if (k !== '@type') rest[k] = x;
    return { '@type': STRUCT_URL, value: rest };
  }
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(o)) out[k] = protect(x, reg);
  return out;
}

/** Undoes protect() in JSON output, putting `@type` first as Go's protojson does. */
function restore(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(restore);
  if (v === null || typeof v !== 'object') return v;
  if (v['@type'] === STRUCT_URL && v.value && typeof v.value === 'object' && !Array.isArray(v.value) && UNKNOWN in v.value) {
    const inner = v.value as Record<string, JsonValue>;
    const out: Record<string, JsonValue> = { '@type': inner[UNKNOWN]! };
    for (const [k, x] of Object.entries(inner)) if (k !== UNKNOWN) out[k] = x;
    return out;
  }
  const out: Record<string, JsonValue> = {};
  if ('@type' in v) out['@type'] = v['@type']!;
  for (const [k, x] of Object.entries(v)) if (k !== '@type') out[k] = restore(x);
  return out;
}

/** Decodes JSON (proto or JSON field names) into a message of `schema`, tolerating unknown types and fields. */
export function decodeMessage<T extends DescMessage>(schema: T, json: unknown): ReturnType<typeof fromJson<T>> {
  const reg = dumpRegistry();
  return fromJson(schema, protect(json, reg) as JsonValue, { registry: reg, ignoreUnknownFields: true });
}

/** Go's json.MarshalIndent(…, "", "    ") of protobuf JSON: HTML-safe escapes. */
export function indentJson(v: JsonValue): string {
  return JSON.stringify(v, null, 4).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** A message as istioctl's protomarshal writes it (camelCase names, defaults left out, map keys sorted). */
export function messageJson(schema: DescMessage, m: Message): JsonValue {
  return restore(sortMaps(toJson(schema, m as never, { registry: dumpRegistry() }), schema));
}

function sortedObject(o: Record<string, JsonValue>, value: (v: JsonValue) => JsonValue): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const k of Object.keys(o).sort()) out[k] = value(o[k]!);
  return out;
}

/** Go's protojson writes map entries and struct fields in key order; protobuf-es keeps insertion order. */
function sortMaps(v: JsonValue, desc: DescMessage | undefined): JsonValue {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || !desc) return v;
  switch (desc.typeName) {
    case 'google.protobuf.Struct':
      return sortedObject(v, sortJsonValue);
    case 'google.protobuf.Value':
      return sortJsonValue(v);
    case 'google.protobuf.Any': {
      const t = v['@type'];
      const inner = typeof t === 'string' ? dumpRegistry().getMessage(typeName(t)) : undefined;
      if (!inner) return v;
      if (inner.typeName === 'google.protobuf.Struct' && v.value && typeof v.value === 'object' && !Array.isArray(v.value) && UNKNOWN in v.value) {
        return { ...v, value: camelKeys(v.value) };
      }
      const out: Record<string, JsonValue> = {};
      for (const [k, x] of Object.entries(v)) out[k] = k === '@type' ? x : k === 'value' && isWkt(inner) ? sortMaps(x, inner) : x;
      return isWkt(inner) ? out : { ...(sortMaps(stripType(v), inner) as Record<string, JsonValue>), '@type': t! };
    }
  }
  const out: Record<string, JsonValue> = {};
  for (const [k, x] of Object.entries(v)) {
    const f = desc.fields.find((fd) => fd.jsonName === k);
    if (!f) {
      out[k] = x;
      continue;
    }
    if (f.fieldKind === 'map') {
      const valueDesc = f.mapKind === 'message' ? f.message : undefined;
      out[k] = x && typeof x === 'object' && !Array.isArray(x) ? sortedObject(x, (e) => sortMaps(e, valueDesc)) : x;
    } else if (f.fieldKind === 'message') out[k] = sortMaps(x, f.message);
    else if (f.fieldKind === 'list' && f.listKind === 'message' && Array.isArray(x)) out[k] = x.map((e) => sortMaps(e, f.message));
    else out[k] = x;
  }
  return out;
}

function isWkt(d: DescMessage): boolean {
  return d.typeName.startsWith('google.protobuf.');
}

function stripType(v: Record<string, JsonValue>): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [k, x] of Object.entries(v)) if (k !== '@type') out[k] = x;
  return out;
}

function sortJsonValue(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(sortJsonValue);
  if (v && typeof v === 'object') return sortedObject(v, sortJsonValue);
  return v;
}

/**
 * Field names of a message this build has no type for: Envoy dumps use proto names (vm_config), istioctl prints
 * JSON names (vmConfig). Only plain snake_case identifiers change, so map keys (which carry dots or dashes) stay.
 */
function camelKeys(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(camelKeys);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, JsonValue> = {};
  for (const [k, x] of Object.entries(v)) {
    const key = /^[a-z][a-z0-9]*(_[a-z0-9]+)+$/.test(k) ? k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()) : k;
    out[key] = camelKeys(x);
  }
  return out;
}

const SECTION = {
  bootstrap: 'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump',
  listeners: 'type.googleapis.com/envoy.admin.v3.ListenersConfigDump',
  endpoints: 'type.googleapis.com/envoy.admin.v3.EndpointsConfigDump',
  clusters: 'type.googleapis.com/envoy.admin.v3.ClustersConfigDump',
  routes: 'type.googleapis.com/envoy.admin.v3.RoutesConfigDump',
  secrets: 'type.googleapis.com/envoy.admin.v3.SecretsConfigDump',
  ecds: 'type.googleapis.com/envoy.admin.v3.EcdsConfigDump',
} as const;

/** istioctl's configdump.Wrapper. */
export class ConfigDump {
  private constructor(readonly configs: Any[]) {}

  /** Parses a dump; fails like istioctl ("error unmarshalling config dump response from Envoy: …"). */
  static parse(text: string): ConfigDump {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new ConfigDumpError(`error unmarshalling config dump response from Envoy: ${(e as Error).message}`);
    }
    try {
      const cd = decodeMessage(ConfigDumpSchema, json);
      return new ConfigDump(cd.configs);
    } catch (e) {
      throw new ConfigDumpError(`error unmarshalling config dump response from Envoy: ${(e as Error).message}`);
    }
  }

  /** A dump from its sections (the daemon's config_dump answer over ADS carries them as resources). */
  static fromConfigs(configs: readonly Any[]): ConfigDump {
    return new ConfigDump([...configs]);
  }

  private section<T extends DescMessage>(url: string, schema: T): ReturnType<typeof fromJson<T>> {
    let found: Any | undefined;
    for (const c of this.configs) if (c.typeUrl === url) found = c;
    if (!found) throw new ConfigDumpError(`config dump has no configuration type ${url}`);
    return anyUnpack(found, schema) as ReturnType<typeof fromJson<T>>;
  }

  bootstrap(): BootstrapConfigDump {
    return this.section(SECTION.bootstrap, BootstrapConfigDumpSchema);
  }
  clusterDump(): ClustersConfigDump {
    return this.section(SECTION.clusters, ClustersConfigDumpSchema);
  }
  listenerDump(): ListenersConfigDump {
    return this.section(SECTION.listeners, ListenersConfigDumpSchema);
  }
  routeDump(): RoutesConfigDump {
    return this.section(SECTION.routes, RoutesConfigDumpSchema);
  }
  secretDump(): SecretsConfigDump {
    return this.section(SECTION.secrets, SecretsConfigDumpSchema);
  }
  /** undefined when the dump has no endpoints section (istioctl treats that as empty). */
  endpointDump(): EndpointsConfigDump | undefined {
    try {
      return this.section(SECTION.endpoints, EndpointsConfigDumpSchema);
    } catch (e) {
      if (e instanceof ConfigDumpError) return undefined;
      throw e;
    }
  }
  ecdsDump(): EcdsConfigDump {
    const sections = this.configs.filter((c) => c.typeUrl === SECTION.ecds);
    if (!sections.length) throw new ConfigDumpError(`config dump has no configuration type ${SECTION.ecds}`);
    const filters = sections.flatMap((s) => (anyUnpack(s, EcdsConfigDumpSchema) as EcdsConfigDump).ecdsFilters);
    return { ...(anyUnpack(sections[0]!, EcdsConfigDumpSchema) as EcdsConfigDump), ecdsFilters: filters };
  }

  /** Dynamic active then static clusters. */
  clusters(): Cluster[] {
    const d = this.clusterDump();
    const out: Cluster[] = [];
    for (const c of d.dynamicActiveClusters) if (c.cluster) out.push(unpackAs(c.cluster, ClusterSchema) as Cluster);
    for (const c of d.staticClusters) if (c.cluster) out.push(unpackAs(c.cluster, ClusterSchema) as Cluster);
    return out;
  }

  /** Dynamic listeners in their active state, then static listeners. */
  listeners(): Listener[] {
    const d = this.listenerDump();
    const out: Listener[] = [];
    for (const l of d.dynamicListeners) if (l.activeState?.listener) out.push(unpackAs(l.activeState.listener, ListenerSchema) as Listener);
    for (const l of d.staticListeners) if (l.listener) out.push(unpackAs(l.listener, ListenerSchema) as Listener);
    return out;
  }

  routes(): RouteConfiguration[] {
    const d = this.routeDump();
    const out: RouteConfiguration[] = [];
    for (const r of d.dynamicRouteConfigs) if (r.routeConfig) out.push(unpackAs(r.routeConfig, RouteConfigurationSchema) as RouteConfiguration);
    for (const r of d.staticRouteConfigs) if (r.routeConfig) out.push(unpackAs(r.routeConfig, RouteConfigurationSchema) as RouteConfiguration);
    return out;
  }

  /** Dynamic then static endpoint configs. */
  endpointConfigs(): ClusterLoadAssignment[] {
    const d = this.endpointDump();
    if (!d) return [];
    const out: ClusterLoadAssignment[] = [];
    for (const e of [...d.dynamicEndpointConfigs, ...d.staticEndpointConfigs]) {
      if (!e.endpointConfig) continue;
      try {
        out.push(unpackAs(e.endpointConfig, ClusterLoadAssignmentSchema) as ClusterLoadAssignment);
      } catch {
        // istioctl skips endpoint configs it cannot read
      }
    }
    return out;
  }
}

/** The type URL an Any had in the dump (Any values of unknown types are carried as structs). */
export function originalTypeUrl(a: Any | undefined): string {
  if (!a) return '';
  if (a.typeUrl !== STRUCT_URL) return a.typeUrl;
  const v = messageJson(AnySchema, a) as Record<string, JsonValue>;
  return typeof v['@type'] === 'string' ? v['@type'] : a.typeUrl;
}

/** Unpacks an Any as `schema` whatever its type URL says (istioctl sets the URL before unmarshalling). */
export function unpackAs<T extends DescMessage>(a: Any, schema: T): Message {
  const m = anyUnpack({ ...a, typeUrl: `type.googleapis.com/${schema.typeName}` }, schema);
  if (!m) throw new ConfigDumpError(`cannot unpack ${a.typeUrl} as ${schema.typeName}`);
  return m;
}

// ---- the legacy jsonpb writer (github.com/golang/protobuf/jsonpb with Indent) ----
// istioctl prints bootstrap and secret dumps with protomarshal.ToJSONWithIndent, the legacy jsonpb encoder. Its
// layout differs from json.MarshalIndent where a google.protobuf.Struct, ListValue or Value sits: their maps and
// lists are written one indentation level deeper than the key that holds them (and deeper still when nested),
// and a message with no fields is written "{", blank line, "}". This renders the protobuf JSON of a message
// with those rules, walking it together with the schema.

const I = '    ';

function goString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** json.Marshal of a float32: the shortest decimal that reads back as the same float32. */
function float32Text(x: number): string {
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === Math.fround(x)) return String(y);
  }
  return String(x);
}

function scalarText(v: JsonValue, float32: boolean): string {
  if (typeof v === 'string') return goString(v);
  if (typeof v === 'number') return float32 ? float32Text(v) : String(v);
  return JSON.stringify(v);
}

/** marshalMessage(m, indent, typeURL) for a message given as protobuf JSON. */
function jsonpbMessage(desc: DescMessage | undefined, v: JsonValue, indent: string, typeURL = ''): string {
  if (desc?.typeName.startsWith('google.protobuf.')) {
    switch (desc.typeName) {
      case 'google.protobuf.Any':
        return jsonpbAny(v as Record<string, JsonValue>, indent);
      case 'google.protobuf.Struct':
        return jsonpbMap(v as Record<string, JsonValue>, indent, (x, ind) => jsonpbSingular(VALUE, x, ind));
      case 'google.protobuf.ListValue':
        return jsonpbList(v as JsonValue[], indent, (x, ind) => jsonpbSingular(VALUE, x, ind));
      case 'google.protobuf.Value':
        // struct_value / list_value are message fields: marshalSingularValue adds a level
        if (v !== null && typeof v === 'object') return jsonpbMessage(Array.isArray(v) ? LIST_VALUE : STRUCT, v, indent + I);
        return scalarText(v, false);
      case 'google.protobuf.Empty':
        break;
      default:
        // wrappers, Duration, Timestamp, FieldMask: their JSON is a scalar
        if (v === null || typeof v !== 'object') return scalarText(v, desc.typeName === 'google.protobuf.FloatValue');
    }
  }
  const obj = (v ?? {}) as Record<string, JsonValue>;
  const parts: string[] = [];
  if (typeURL) parts.push(`${indent}${I}"@type": ${goString(typeURL)}`);
  if (desc) {
    // declaration order, a oneof's field where the oneof is declared
    for (const f of desc.fields) {
      if (!(f.jsonName in obj)) continue;
      parts.push(`${indent}${I}"${f.jsonName}": ${jsonpbValue(f, obj[f.jsonName]!, indent)}`);
    }
  } else {
    for (const [k, x] of Object.entries(obj)) {
      if (k === '@type') continue;
      parts.push(`${indent}${I}${goString(k)}: ${jsonpbUntyped(x, indent)}`);
    }
  }
  return `{\n${parts.join(',\n')}\n${indent}}`;
}

type Field = DescMessage['fields'][number];

function jsonpbValue(f: Field, v: JsonValue, indent: string): string {
  if (f.fieldKind === 'list') {
    const elem = f.listKind === 'message' ? f.message : undefined;
    const float32 = f.listKind === 'scalar' && f.scalar === ScalarType.FLOAT;
    return jsonpbList(v as JsonValue[], indent, (x, ind) => (elem ? jsonpbMessage(elem, x, ind + I) : scalarText(x, float32)));
  }
  if (f.fieldKind === 'map') {
    const val = f.mapKind === 'message' ? f.message : undefined;
    const float32 = f.mapKind === 'scalar' && f.scalar === ScalarType.FLOAT;
    return jsonpbMap(v as Record<string, JsonValue>, indent, (x, ind) => (val ? jsonpbMessage(val, x, ind + I) : scalarText(x, float32)));
  }
  if (f.fieldKind === 'message') return jsonpbMessage(f.message, v, indent + I);
  return scalarText(v, f.fieldKind === 'scalar' && f.scalar === ScalarType.FLOAT);
}

/** marshalSingularValue of a google.protobuf.Value element. */
function jsonpbSingular(desc: DescMessage, v: JsonValue, indent: string): string {
  return jsonpbMessage(desc, v, indent + I);
}

function jsonpbList(items: readonly JsonValue[], indent: string, elem: (x: JsonValue, indent: string) => string): string {
  const parts = items.map((x) => `\n${indent}${I}${I}${elem(x, indent + I)}`);
  return `[${parts.join(',')}\n${indent}${I}]`;
}

function jsonpbMap(o: Record<string, JsonValue>, indent: string, value: (x: JsonValue, indent: string) => string): string {
  const keys = Object.keys(o).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const parts = keys.map((k) => `\n${indent}${I}${I}${goString(k)}: ${value(o[k]!, indent + I)}`);
  return `{${parts.join(',')}\n${indent}${I}}`;
}

function jsonpbAny(v: Record<string, JsonValue>, indent: string): string {
  const url = typeof v['@type'] === 'string' ? v['@type'] : '';
  const inner = dumpRegistry().getMessage(typeName(url));
  if (!inner || !isWkt(inner)) {
    const rest: Record<string, JsonValue> = {};
    for (const [k, x] of Object.entries(v)) if (k !== '@type') rest[k] = x;
    return jsonpbMessage(inner, rest, indent, url);
  }
  return `{\n${indent}${I}"@type": ${goString(url)},\n${indent}${I}"value": ${jsonpbMessage(inner, v['value'] ?? null, indent + I)}\n${indent}}`;
}

/** JSON of a type this build does not know: objects laid out as messages. */
function jsonpbUntyped(v: JsonValue, indent: string): string {
  if (Array.isArray(v)) return jsonpbList(v, indent, (x, ind) => jsonpbUntyped(x, ind + I));
  if (v !== null && typeof v === 'object') return jsonpbMessage(undefined, v, indent + I, typeof v['@type'] === 'string' ? v['@type'] : '');
  return scalarText(v, false);
}

const STRUCT = StructSchema;
const LIST_VALUE = ListValueSchema;
const VALUE = ValueSchema;

/** protomarshal.ToJSONWithIndent(m, "    "): the legacy jsonpb layout of a message. */
export function jsonpbIndent(schema: DescMessage, m: Message): string {
  return jsonpbMessage(schema, messageJson(schema, m), '');
}
