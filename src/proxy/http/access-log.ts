// Access logs (envoy.access_loggers.file / stdout / stderr) with Envoy's default format or a
// SubstitutionFormatString, and the common access-log filters. Files are opened once per path and
// written asynchronously; nothing is formatted unless a log is configured.
import fs from 'node:fs';
import { fromBinary, type JsonObject } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { AccessLog, AccessLogFilter, ComparisonFilter } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { ComparisonFilter_Op } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { SubstitutionFormatStringSchema, type SubstitutionFormatString } from '../../gen/envoy/config/core/v3/substitution_format_string_pb';
import { FileAccessLogSchema } from '../../gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { compileFormat, compileJsonFormat, DEFAULT_ACCESS_LOG_FORMAT, formatLog, type FormatContext } from '../format/substitution';
import { ConfigError } from '../common/config-error';
import { compileHeaderMatcher, headerFieldsOf } from '../route/match';
import { readDataSource } from '../common/data-source';
import { fractionOf } from '../route/match';

export type AccessLogger = (ctx: FormatContext) => void;

const sinks = new Map<string, (line: string) => void>();

function sinkFor(path: string): (line: string) => void {
  if (path === '/dev/stdout') return (l) => process.stdout.write(l);
  if (path === '/dev/stderr') return (l) => process.stderr.write(l);
  let s = sinks.get(path);
  if (!s) {
    const stream = fs.createWriteStream(path, { flags: 'a' });
    stream.on('error', () => {});
    s = (l) => stream.write(l);
    sinks.set(path, s);
  }
  return s;
}

function compileFormatString(f: SubstitutionFormatString | undefined, where: string): (c: FormatContext) => string {
  if (!f) {
    const p = compileFormat(DEFAULT_ACCESS_LOG_FORMAT, where);
    return (c) => formatLog(p, c);
  }
  switch (f.format.case) {
    case 'textFormat': {
      const p = compileFormat(f.format.value, `${where}.text_format`);
      return (c) => formatLog(p, c);
    }
    case 'textFormatSource': {
      const text = readDataSource(f.format.value, `${where}.text_format_source`)?.toString() ?? '';
      const p = compileFormat(text, `${where}.text_format_source`);
      return (c) => formatLog(p, c);
    }
    case 'jsonFormat':
      return compileJsonFormat(f.format.value as JsonObject, `${where}.json_format`);
    default: {
      const p = compileFormat(DEFAULT_ACCESS_LOG_FORMAT, where);
      return (c) => formatLog(p, c);
    }
  }
}

function compare(c: ComparisonFilter | undefined, v: number): boolean {
  const want = c?.value?.defaultValue ?? 0;
  switch (c?.op) {
    case ComparisonFilter_Op.GE:
      return v >= want;
    case ComparisonFilter_Op.LE:
      return v <= want;
    default:
      return v === want;
  }
}

const RESPONSE_FLAGS = new Set([
  'LH',
  'UH',
  'UT',
  'LR',
  'UR',
  'UF',
  'UC',
  'UO',
  'NR',
  'DI',
  'FI',
  'RL',
  'UAEX',
  'RLSE',
  'DC',
  'URX',
  'SI',
  'IH',
  'DPE',
  'UMSDR',
  'RFCF',
  'NFCF',
  'DT',
  'UPE',
  'NC',
  'OM',
  'DF',
  'DO',
  'DR',
]);

function compileFilter(f: AccessLogFilter, where: string): (c: FormatContext) => boolean {
  const s = f.filterSpecifier;
  switch (s.case) {
    case 'statusCodeFilter':
      return (c) => compare(s.value.comparison, c.info.responseCode);
    case 'durationFilter':
      return (c) => compare(s.value.comparison, c.info.durationMs());
    case 'notHealthCheckFilter':
      return () => true;
    case 'traceableFilter':
      return () => false;
    case 'runtimeFilter': {
      const frac = fractionOf(s.value.percentSampled, 0);
      return () => Math.random() < frac;
    }
    case 'andFilter': {
      const fs = s.value.filters.map((x, i) => compileFilter(x, `${where}.and_filter.filters[${i}]`));
      return (c) => fs.every((x) => x(c));
    }
    case 'orFilter': {
      const fs = s.value.filters.map((x, i) => compileFilter(x, `${where}.or_filter.filters[${i}]`));
      return (c) => fs.some((x) => x(c));
    }
    case 'headerFilter': {
      const m = s.value.header ? compileHeaderMatcher(s.value.header, `${where}.header_filter.header`) : () => true;
      return (c) => (c.request ? m(headerFieldsOf(c.request)) : false);
    }
    case 'responseFlagFilter': {
      for (const fl of s.value.flags)
        if (!RESPONSE_FLAGS.has(fl)) throw new ConfigError(`${where}.response_flag_filter.flags: unknown response flag '${fl}'`);
      const flags = new Set(s.value.flags);
      return (c) => (flags.size === 0 ? c.info.flags.length > 0 : c.info.flags.some((x) => flags.has(x)));
    }
    default:
      throw new ConfigError(`${where}: access log filter '${s.case ?? 'none'}' is not supported`);
  }
}

const STDOUT_TYPE = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog';
const STDERR_TYPE = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog';

/** Stdout/StderrAccessLog have one field, `log_format` (1): decoded by hand (no generated code). */
function streamLogFormat(value: Uint8Array, where: string): SubstitutionFormatString | undefined {
  if (value.length === 0) return undefined;
  if (value[0] !== 0x0a) throw new ConfigError(`${where}: cannot decode stream access log config`);
  let len = 0;
  let shift = 0;
  let i = 1;
  for (; i < value.length; i++) {
    const b = value[i]!;
    len |= (b & 0x7f) << shift;
    shift += 7;
    if ((b & 0x80) === 0) break;
  }
  return fromBinary(SubstitutionFormatStringSchema, value.subarray(i + 1, i + 1 + len));
}

export function compileAccessLogs(logs: readonly AccessLog[], where: string): AccessLogger[] {
  return logs.map((l, i) => {
    const w = `${where}.access_log[${i}]`;
    const filter = l.filter ? compileFilter(l.filter, `${w}.filter`) : undefined;
    if (l.configType.case !== 'typedConfig') throw new ConfigError(`${w}: typed_config is required`);
    const any = l.configType.value;
    let format: (c: FormatContext) => string;
    let write: (line: string) => void;
    if (any.typeUrl === STDOUT_TYPE || any.typeUrl === STDERR_TYPE) {
      format = compileFormatString(streamLogFormat(any.value, w), `${w}.log_format`);
      write = any.typeUrl === STDOUT_TYPE ? (x) => process.stdout.write(x) : (x) => process.stderr.write(x);
    } else {
      const f = anyUnpack(any, FileAccessLogSchema);
      if (!f) throw new ConfigError(`${w}: Didn't find a registered implementation for name: '${l.name}'`);
      if (!f.path) throw new ConfigError(`${w}.path: must not be empty`);
      const af = f.accessLogFormat;
      if (af.case === 'logFormat') format = compileFormatString(af.value, `${w}.log_format`);
      else if (af.case === 'format') {
        const p = compileFormat(af.value || DEFAULT_ACCESS_LOG_FORMAT, `${w}.format`);
        format = (c) => formatLog(p, c);
      } else if (af.case === 'jsonFormat') format = compileJsonFormat(af.value as JsonObject, `${w}.json_format`);
      else format = compileFormatString(undefined, w);
      write = sinkFor(f.path);
    }
    return (c) => {
      if (filter && !filter(c)) return;
      write(format(c));
    };
  });
}
