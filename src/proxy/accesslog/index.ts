// Access logs of the HTTP connection manager and tcp_proxy (envoy/config/accesslog/v3 AccessLog): each entry is
// compiled once per config into a filter and a writer — envoy.access_loggers.file (path incl. /dev/stdout),
// envoy.access_loggers.stdout / stderr, envoy.access_loggers.open_telemetry — as
// source/common/access_log/access_log_impl.cc and the loggers under source/extensions/access_loggers build them.
// A listener without access logs compiles to an empty list: its requests never build a log context.
import type { JsonObject } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { AccessLog } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { FileAccessLogSchema } from '../../gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { StderrAccessLogSchema, StdoutAccessLogSchema } from '../../gen/envoy/extensions/access_loggers/stream/v3/stream_pb';
import type { CelContext } from '../cel/evaluator';
import { ConfigError } from '../common/config-error';
import { DEFAULT_ACCESS_LOG_FORMAT } from '../format/substitution';
import { compileFilter } from './filters';
import { compileJsonLog, compileLogFormat, compileTextFormat, type LineFormatter } from './format-string';
import { compileOtelLogger, type ClusterCall, type LocalInfo } from './otel';
import { sinkFor, stderrSink, stdoutSink, type Sink } from './sinks';

export type { ClusterCall, LocalInfo } from './otel';

/** Logs one finished request or connection. */
export type AccessLogger = (c: CelContext) => void;

export interface AccessLogDeps {
  /** Requests through the engine's clusters (OpenTelemetry exports). */
  call?: ClusterCall;
  local?: LocalInfo;
}

const FILE = 'envoy.extensions.access_loggers.file.v3.FileAccessLog';
const STDOUT = 'envoy.extensions.access_loggers.stream.v3.StdoutAccessLog';
const STDERR = 'envoy.extensions.access_loggers.stream.v3.StderrAccessLog';
const OTEL = 'envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig';

const typeName = (url: string): string => url.slice(url.lastIndexOf('/') + 1);

function fileFormat(f: ReturnType<typeof anyUnpack<typeof FileAccessLogSchema>> & object, w: string): LineFormatter {
  const af = f.accessLogFormat;
  switch (af.case) {
    case 'logFormat':
      return compileLogFormat(af.value, `${w}.log_format`, DEFAULT_ACCESS_LOG_FORMAT);
    case 'format':
      return compileTextFormat(af.value || DEFAULT_ACCESS_LOG_FORMAT, `${w}.format`);
    case 'jsonFormat':
      return compileJsonLog(af.value as JsonObject, `${w}.json_format`);
    case 'typedJsonFormat':
      return compileJsonLog(af.value as JsonObject, `${w}.typed_json_format`);
    default:
      return compileTextFormat(DEFAULT_ACCESS_LOG_FORMAT, w);
  }
}

function compileOne(l: AccessLog, w: string, deps: AccessLogDeps): AccessLogger {
  if (l.configType.case !== 'typedConfig') throw new ConfigError(`${w}: typed_config is required`);
  const any = l.configType.value;
  const filter = l.filter ? compileFilter(l.filter, `${w}.filter`) : undefined;
  let log: AccessLogger;
  switch (typeName(any.typeUrl)) {
    case FILE: {
      const f = anyUnpack(any, FileAccessLogSchema)!;
      if (!f.path) throw new ConfigError(`${w}.path: value length must be at least 1 characters`);
      log = writer(fileFormat(f, w), sinkFor(f.path, `${w}.path`));
      break;
    }
    case STDOUT:
    case STDERR: {
      const out = typeName(any.typeUrl) === STDOUT;
      const f = out ? anyUnpack(any, StdoutAccessLogSchema)! : anyUnpack(any, StderrAccessLogSchema)!;
      log = writer(compileLogFormat(f.accessLogFormat.value, `${w}.log_format`, DEFAULT_ACCESS_LOG_FORMAT), out ? stdoutSink : stderrSink);
      break;
    }
    case OTEL:
      log = compileOtelLogger(any, w, deps.call, deps.local);
      break;
    default:
      throw new ConfigError(`${w}: Didn't find a registered implementation for name: '${l.name}'`);
  }
  // a logger never fails the request or connection it logs
  return (c) => {
    try {
      if (!filter || filter(c)) log(c);
    } catch {
      /* dropped, as Envoy drops an entry it cannot write */
    }
  };
}

const writer =
  (format: LineFormatter, sink: Sink): AccessLogger =>
  (c) =>
    sink(format(c));

export function compileAccessLogs(logs: readonly AccessLog[], where: string, deps: AccessLogDeps = {}): AccessLogger[] {
  return logs.map((l, i) => compileOne(l, `${where}.access_log[${i}]`, deps));
}
