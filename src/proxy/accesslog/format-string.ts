// SubstitutionFormatString (envoy/config/core/v3/substitution_format_string.proto) for access logs, as
// source/common/formatter/substitution_format_string.cc builds it: text_format, text_format_source (Istio's
// choice), json_format, omit_empty_values, and the formatter extensions istiod names in `formatters`
// (envoy.formatter.req_without_query, envoy.formatter.metadata, envoy.formatter.cel). REQ_WITHOUT_QUERY, METADATA
// and CEL are understood with or without the extension listed: the engine is more lenient than Envoy there.
// JSON keys come out sorted whatever json_format_options says, and omit_empty_values leaves JSON alone, as Envoy 1.36
// writes them.
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { SubstitutionFormatString } from '../../gen/envoy/config/core/v3/substitution_format_string_pb';
import { compileCel, type CelContext } from '../cel/evaluator';
import { readDataSource } from '../common/data-source';
import { ConfigError } from '../common/config-error';
import { compileFormat, compileJsonFormat, formatLog, type CommandFn, type CommandHook, type FormatContext } from '../format/substitution';

export type LineFormatter = (c: CelContext) => string;

const FORMATTER_TYPES = new Set([
  'type.googleapis.com/envoy.extensions.formatter.req_without_query.v3.ReqWithoutQuery',
  'type.googleapis.com/envoy.extensions.formatter.metadata.v3.Metadata',
  'type.googleapis.com/envoy.extensions.formatter.cel.v3.Cel',
]);

const metadataText = (v: JsonValue | undefined): string | undefined =>
  v === undefined || v === null ? undefined : typeof v === 'string' ? v : JSON.stringify(v);

function walk(root: JsonValue | undefined, path: readonly string[]): JsonValue | undefined {
  let v = root;
  for (const k of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    v = (v as JsonObject)[k];
  }
  return v;
}

/** METADATA(TYPE:NAMESPACE:KEY…) of the metadata formatter: DYNAMIC from the stream, the others from `xds`. */
function metadataCommand(arg: string, where: string): CommandFn {
  const [type, ns, ...path] = arg.split(':');
  if (!ns) throw new ConfigError(`${where}: METADATA requires TYPE:NAMESPACE`);
  const from = (c: CelContext): JsonObject | undefined => {
    switch (type) {
      case 'DYNAMIC':
        return c.info.dynamicMetadata.get(ns);
      case 'CLUSTER':
        return c.xds?.clusterMetadata?.[ns] as JsonObject | undefined;
      case 'ROUTE':
        return c.xds?.routeMetadata?.[ns] as JsonObject | undefined;
      case 'UPSTREAM_HOST':
        return c.xds?.upstreamHostMetadata?.[ns] as JsonObject | undefined;
      case 'LISTENER':
        return c.xds?.listenerMetadata?.[ns] as JsonObject | undefined;
      case 'VIRTUAL_HOST':
        return c.xds?.virtualHostMetadata?.[ns] as JsonObject | undefined;
      default:
        return undefined;
    }
  };
  if (!['DYNAMIC', 'CLUSTER', 'ROUTE', 'UPSTREAM_HOST', 'LISTENER', 'VIRTUAL_HOST'].includes(type!))
    throw new ConfigError(`${where}: Unknown metadata type: ${type}`);
  return (c) => metadataText(walk(from(c as CelContext), path));
}

/** The commands of Envoy's formatter extensions. */
export const extensionCommands: CommandHook = (cmd, arg, where) => {
  if (cmd === 'CEL') {
    if (!arg) throw new ConfigError(`${where}: CEL requires an expression`);
    const p = compileCel(arg, where);
    return (c) => p.evaluateString(c as CelContext);
  }
  if (cmd === 'METADATA') {
    if (!arg) throw new ConfigError(`${where}: METADATA requires TYPE:NAMESPACE`);
    return metadataCommand(arg, where);
  }
  return undefined;
};

function text(format: string, where: string, omitEmpty: boolean): LineFormatter {
  const p = compileFormat(format, where, extensionCommands);
  const empty = omitEmpty ? '' : '-';
  return (c: FormatContext) => formatLog(p, c, empty);
}

/** Compiles a log_format; `fallback` is used when none is configured (Envoy's default format). */
export function compileLogFormat(f: SubstitutionFormatString | undefined, where: string, fallback: string): LineFormatter {
  if (!f) return text(fallback, where, false);
  f.formatters.forEach((x, i) => {
    const url = x.typedConfig?.typeUrl ?? '';
    if (!FORMATTER_TYPES.has(url))
      throw new ConfigError(`${where}.formatters[${i}]: Didn't find a registered implementation for '${x.name}' with type URL: '${url}'`);
  });
  const omitEmpty = f.omitEmptyValues;
  switch (f.format.case) {
    case 'textFormat':
      return text(f.format.value, `${where}.text_format`, omitEmpty);
    case 'textFormatSource':
      return text(readDataSource(f.format.value, `${where}.text_format_source`)?.toString() ?? '', `${where}.text_format_source`, omitEmpty);
    case 'jsonFormat':
      return compileJsonFormat(f.format.value as JsonObject, `${where}.json_format`, { hook: extensionCommands });
    default:
      throw new ConfigError(`${where}: format is required`);
  }
}

/** The deprecated FileAccessLog `format` / `json_format` / `typed_json_format` fields. */
export function compileTextFormat(format: string, where: string): LineFormatter {
  return text(format, where, false);
}

export function compileJsonLog(obj: JsonObject, where: string): LineFormatter {
  return compileJsonFormat(obj, where, { hook: extensionCommands });
}
