// Loading envoy.config.bootstrap.v3.Bootstrap like Envoy: -c <file> (JSON or YAML) merged with
// --config-yaml, unknown fields rejected unless --allow-unknown-static-fields, every typed Any decoded
// with the type registry. Errors name the file and the field path (`static_resources.clusters[0].foo`).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { create, fromJson, type DescMessage, type JsonObject, type JsonValue, type Registry } from '@bufbuild/protobuf';
import { parse as parseYaml } from 'yaml';
import { BootstrapSchema, type Bootstrap } from '../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { ApiConfigSource_ApiType } from '../gen/envoy/config/core/v3/config_source_pb';
import { NodeSchema } from '../gen/envoy/config/core/v3/base_pb';
import { proxyTypeRegistry } from './registry';

export class BootstrapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BootstrapError';
  }
}

/** Well-known types whose JSON is not an object of fields. */
const SPECIAL_JSON = new Set([
  'google.protobuf.Duration',
  'google.protobuf.Timestamp',
  'google.protobuf.Struct',
  'google.protobuf.Value',
  'google.protobuf.ListValue',
  'google.protobuf.FieldMask',
  'google.protobuf.Empty',
  'google.protobuf.BoolValue',
  'google.protobuf.UInt32Value',
  'google.protobuf.Int32Value',
  'google.protobuf.UInt64Value',
  'google.protobuf.Int64Value',
  'google.protobuf.DoubleValue',
  'google.protobuf.FloatValue',
  'google.protobuf.StringValue',
  'google.protobuf.BytesValue',
  'google.protobuf.NullValue',
]);

function isObject(v: JsonValue | undefined): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Walks JSON against the descriptors to report unknown fields and unknown Any types with their path
 * (protobuf-es's own errors name only the message type).
 */
export function checkJsonFields(json: JsonValue, desc: DescMessage, where: string, registry: Registry, allowUnknown: boolean): void {
  if (desc.typeName === 'google.protobuf.Any') {
    if (!isObject(json)) return;
    const t = json['@type'];
    if (typeof t !== 'string' || t === '') throw new BootstrapError(`${where}: a typed config (Any) needs '@type'`);
    const name = t.slice(t.lastIndexOf('/') + 1);
    const inner = registry.getMessage(name);
    if (!inner) throw new BootstrapError(`${where}: Didn't find a registered implementation for type: '${name}'`);
    if (SPECIAL_JSON.has(inner.typeName)) return;
    const { '@type': _t, ...rest } = json;
    checkJsonFields(rest, inner, where, registry, allowUnknown);
    return;
  }
  if (SPECIAL_JSON.has(desc.typeName) || !isObject(json)) return;
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    const p = where ? `${where}.${key}` : key;
    if (!field) {
      if (allowUnknown) continue;
      throw new BootstrapError(`${p}: unknown field in ${desc.typeName}`);
    }
    if (value === null) continue;
    if (field.fieldKind === 'message') checkJsonFields(value, field.message, p, registry, allowUnknown);
    else if (field.fieldKind === 'list' && field.listKind === 'message' && Array.isArray(value)) {
      value.forEach((v, i) => checkJsonFields(v, field.message, `${p}[${i}]`, registry, allowUnknown));
    } else if (field.fieldKind === 'map' && field.mapKind === 'message' && isObject(value)) {
      for (const [k, v] of Object.entries(value)) checkJsonFields(v, field.message, `${p}['${k}']`, registry, allowUnknown);
    }
  }
}

/** Protobuf MergeFrom on JSON: objects merge, repeated fields append, scalars are replaced. */
export function mergeJson(base: JsonValue, over: JsonValue): JsonValue {
  if (isObject(base) && isObject(over)) {
    const out: JsonObject = { ...base };
    for (const [k, v] of Object.entries(over)) out[k] = k in out ? mergeJson(out[k]!, v) : v;
    return out;
  }
  if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over];
  return over;
}

function parseText(text: string, source: string): JsonValue {
  const ext = path.extname(source).toLowerCase();
  if (ext === '.json') {
    try {
      return JSON.parse(text) as JsonValue;
    } catch (e) {
      throw new BootstrapError(`${source}: invalid JSON: ${(e as Error).message}`);
    }
  }
  try {
    return (parseYaml(text) ?? {}) as JsonValue;
  } catch (e) {
    throw new BootstrapError(`${source}: invalid YAML: ${(e as Error).message}`);
  }
}

export interface BootstrapInput {
  configPath?: string;
  configYaml?: string;
  allowUnknownFields?: boolean;
  serviceCluster?: string;
  serviceNode?: string;
}

export interface LoadedBootstrap {
  bootstrap: Bootstrap;
  /** Where it came from, for messages. */
  source: string;
  /** Unsupported optional sections that were dropped (log them). */
  warnings: string[];
}

/**
 * Bootstrap sections the engine does not act on (tracing, overload manager, stats sinks…). When one
 * names an extension type this build has no schema for, the section is dropped with a warning instead
 * of failing the start: nothing here changes how traffic is served.
 */
const IGNORED_SECTIONS = [
  'tracing',
  'overload_manager',
  'stats_sinks',
  'watchdog',
  'watchdogs',
  'fatal_actions',
  'bootstrap_extensions',
  'layered_runtime',
  'hds_config',
  'typed_dns_resolver_config',
  'default_regex_engine',
  'xds_delegate_extension',
  'xds_config_tracker_extension',
  'listener_manager',
  'application_log_config',
  'certificate_provider_instances',
  'memory_allocator_manager',
  'grpc_async_client_manager_config',
];
const camel = (s: string) => s.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/** Parses bootstrap JSON/YAML text (one source). `warnings` receives the sections that were dropped. */
export function parseBootstrap(value: JsonValue, source: string, allowUnknown = false, warnings: string[] = []): Bootstrap {
  const reg = proxyTypeRegistry();
  if (!isObject(value)) throw new BootstrapError(`${source}: the bootstrap must be an object`);
  value = { ...value };
  for (const sec of IGNORED_SECTIONS) {
    for (const key of [sec, camel(sec)]) {
      if (!(key in value)) continue;
      try {
        const field = BootstrapSchema.fields.find((f) => f.name === sec)!;
        if (field.fieldKind === 'message') checkJsonFields(value[key]!, field.message, key, reg, allowUnknown);
        else if (field.fieldKind === 'list' && field.listKind === 'message' && Array.isArray(value[key]))
          (value[key] as JsonValue[]).forEach((v, i) => checkJsonFields(v, field.message, `${key}[${i}]`, reg, allowUnknown));
      } catch (e) {
        warnings.push(`${source}: ${key} is not supported by this proxy and was ignored (${(e as Error).message})`);
        delete value[key];
      }
    }
  }
  try {
    checkJsonFields(value, BootstrapSchema, '', reg, allowUnknown);
  } catch (e) {
    throw new BootstrapError(`${source}: ${(e as Error).message}`);
  }
  let b: Bootstrap;
  try {
    b = fromJson(BootstrapSchema, value, { registry: reg, ignoreUnknownFields: allowUnknown });
  } catch (e) {
    throw new BootstrapError(`${source}: ${(e as Error).message}`);
  }
  validateBootstrap(b, source);
  return b;
}

export function loadBootstrap(input: BootstrapInput): LoadedBootstrap {
  if (!input.configPath && !input.configYaml)
    throw new BootstrapError('At least one of --config-path or --config-yaml or Options::configProto() should be non-empty');
  let json: JsonValue = {};
  let source = '--config-yaml';
  if (input.configPath) {
    source = input.configPath;
    let text: string;
    try {
      text = readFileSync(input.configPath, 'utf8');
    } catch (e) {
      throw new BootstrapError(`unable to read file: ${input.configPath}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    json = parseText(text, input.configPath);
  }
  if (input.configYaml) {
    const over = parseText(input.configYaml, '--config-yaml');
    json = mergeJson(json, over);
  }
  const warnings: string[] = [];
  const bootstrap = parseBootstrap(json, source, input.allowUnknownFields ?? false, warnings);
  if (input.serviceCluster) (bootstrap.node ??= create(NodeSchema, {})).cluster = input.serviceCluster;
  if (input.serviceNode) (bootstrap.node ??= create(NodeSchema, {})).id = input.serviceNode;
  return { bootstrap, source, warnings };
}

/** The checks Envoy makes when it starts (config sources need a static cluster, ADS needs ads_config). */
export function validateBootstrap(b: Bootstrap, source: string): void {
  const fail = (m: string) => {
    throw new BootstrapError(`${source}: ${m}`);
  };
  const statics = new Map((b.staticResources?.clusters ?? []).map((c) => [c.name, c]));
  const dr = b.dynamicResources;
  const ads = dr?.adsConfig;
  if (ads) {
    if (
      ads.apiType !== ApiConfigSource_ApiType.GRPC &&
      ads.apiType !== ApiConfigSource_ApiType.DELTA_GRPC &&
      ads.apiType !== ApiConfigSource_ApiType.AGGREGATED_GRPC
    ) {
      fail('dynamic_resources.ads_config.api_type: ADS must be GRPC or DELTA_GRPC');
    }
    if (ads.grpcServices.length !== 1) fail('dynamic_resources.ads_config.grpc_services: API configs must have a single gRPC service');
    const t = ads.grpcServices[0]!.targetSpecifier;
    if (t.case === 'envoyGrpc') {
      const c = statics.get(t.value.clusterName);
      if (!c) {
        fail(
          `dynamic_resources.ads_config.grpc_services[0].envoy_grpc.cluster_name: envoy.config.core.v3.ApiConfigSource must have a statically defined non-EDS cluster: '${t.value.clusterName}' does not exist, was added via api, or is an EDS cluster`,
        );
      }
    } else if (t.case === 'googleGrpc') {
      if (!t.value.targetUri) fail('dynamic_resources.ads_config.grpc_services[0].google_grpc.target_uri: must not be empty');
    } else fail('dynamic_resources.ads_config.grpc_services[0]: envoy_grpc or google_grpc is required');
  }
  for (const [name, cs] of [
    ['lds_config', dr?.ldsConfig],
    ['cds_config', dr?.cdsConfig],
  ] as const) {
    if (!cs) continue;
    const k = cs.configSourceSpecifier.case;
    if (k === 'ads') {
      if (!ads) fail(`dynamic_resources.${name}: ads config source used but dynamic_resources.ads_config is not set`);
    } else fail(`dynamic_resources.${name}: only ADS config sources ('ads: {}') are supported by this proxy (got ${k ?? 'nothing'})`);
  }
  const admin = b.admin?.address?.address;
  if (b.admin?.address && admin?.case !== 'socketAddress' && admin?.case !== 'pipe') fail('admin.address: a socket_address or pipe is required');
}
