// envoy.access_loggers.open_telemetry (OpenTelemetryAccessLogConfig) as
// source/extensions/access_loggers/open_telemetry/{access_log_impl,grpc_access_log_impl}.cc send it: one OTLP
// LogRecord per request or connection (time_unix_nano = start time, body and attributes from formatters over the
// configured AnyValue / KeyValueList, the filter state objects named in common_config as attributes), batched into
// one ExportLogsServiceRequest per logger and sent as the unary gRPC LogsService/Export to the envoy_grpc
// cluster when buffer_size_bytes (16384) is reached or buffer_flush_interval (1 s) has passed. The resource carries
// log_name, zone_name, cluster_name and node_name unless disable_builtin_labels (istiod sets it), then
// resource_attributes. Differences: no trace context on records (no tracer hands the engine a span yet); a failed
// export is dropped without retry, as Envoy's is; no access_logs.open_telemetry_access_log.* stats.
import { create, toBinary, type JsonObject } from '@bufbuild/protobuf';
import { anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import { OpenTelemetryAccessLogConfigSchema } from '../../gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb';
import { ExportLogsServiceRequestSchema } from '../../gen/opentelemetry/proto/collector/logs/v1/logs_service_pb';
import { AnyValueSchema, KeyValueSchema, type AnyValue, type KeyValue } from '../../gen/opentelemetry/proto/common/v1/common_pb';
import { LogRecordSchema, type LogRecord } from '../../gen/opentelemetry/proto/logs/v1/logs_pb';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import { compileFormat, formatLog } from '../format/substitution';
import type { CelContext } from '../cel/evaluator';
import { extensionCommands } from './format-string';

/** A POST through a cluster of the engine (the HCM's upstreamCall). */
export type ClusterCall = (
  cluster: string,
  call: { method: string; path: string; authority: string; headers?: Readonly<Record<string, string>>; body?: Buffer; timeoutMs: number },
) => Promise<{ status: number }>;

/** What Envoy's LocalInfo gives the built-in resource labels. */
export interface LocalInfo {
  nodeName: string;
  clusterName: string;
  zoneName: string;
}

const EXPORT_PATH = '/opentelemetry.proto.collector.logs.v1.LogsService/Export';

type ValueFn = (c: CelContext) => AnyValue;

/** OpenTelemetryFormatter: every string inside the AnyValue is a format (missing commands print `-`). */
function compileAnyValue(v: AnyValue, where: string): ValueFn {
  const k = v.value;
  switch (k.case) {
    case 'stringValue': {
      const p = compileFormat(k.value, where, extensionCommands);
      return (c) => create(AnyValueSchema, { value: { case: 'stringValue', value: formatLog(p, c) } });
    }
    case 'kvlistValue': {
      const kv = compileKeyValues(k.value.values, where);
      return (c) => create(AnyValueSchema, { value: { case: 'kvlistValue', value: { values: kv(c) } } });
    }
    case 'arrayValue': {
      const items = k.value.values.map((x, i) => compileAnyValue(x, `${where}[${i}]`));
      return (c) => create(AnyValueSchema, { value: { case: 'arrayValue', value: { values: items.map((f) => f(c)) } } });
    }
    default:
      return () => v;
  }
}

function compileKeyValues(kvs: readonly KeyValue[], where: string): (c: CelContext) => KeyValue[] {
  const fs = kvs.map((kv) => [kv.key, kv.value ? compileAnyValue(kv.value, `${where}.${kv.key}`) : undefined] as const);
  return (c) => fs.map(([key, f]) => create(KeyValueSchema, f ? { key, value: f(c) } : { key }));
}

const stringKv = (key: string, value: string): KeyValue => create(KeyValueSchema, { key, value: { value: { case: 'stringValue', value } } });

/** A filter state object as Envoy serialises it for the log: strings as they are, objects as JSON. */
function filterStateText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return JSON.stringify(v as JsonObject);
  return undefined;
}

/** One logger's buffer and its exports. */
class OtlpExporter {
  private records: LogRecord[] = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cluster: string,
    private readonly authority: string,
    private readonly timeoutMs: number,
    private readonly resource: KeyValue[],
    private readonly flushMs: number,
    private readonly maxBytes: number,
    private readonly call: ClusterCall,
  ) {}

  add(r: LogRecord): void {
    this.records.push(r);
    // Envoy compares the message's encoded size with buffer_size_bytes after each entry
    this.bytes += toBinary(LogRecordSchema, r).length;
    if (this.bytes >= this.maxBytes) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.records.length === 0) return;
    const req = create(ExportLogsServiceRequestSchema, {
      resourceLogs: [{ resource: { attributes: this.resource }, scopeLogs: [{ logRecords: this.records }] }],
    });
    this.records = [];
    this.bytes = 0;
    const msg = toBinary(ExportLogsServiceRequestSchema, req);
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt32BE(msg.length, 1);
    frame.set(msg, 5);
    this.call(this.cluster, {
      method: 'POST',
      path: EXPORT_PATH,
      authority: this.authority,
      headers: { 'content-type': 'application/grpc', te: 'trailers' },
      body: frame,
      timeoutMs: this.timeoutMs,
    }).catch(() => {});
  }
}

/** Compiles one OpenTelemetry access logger; the returned function logs one request or connection. */
export function compileOtelLogger(any: Any, where: string, call: ClusterCall | undefined, local: LocalInfo | undefined): (c: CelContext) => void {
  const cfg = anyUnpack(any, OpenTelemetryAccessLogConfigSchema);
  if (!cfg) throw new ConfigError(`${where}: cannot decode ${any.typeUrl}`);
  const common = cfg.commonConfig;
  if (!common) throw new ConfigError(`${where}.common_config: value is required`);
  if (!common.logName) throw new ConfigError(`${where}.common_config.log_name: value length must be at least 1 characters`);
  const svc = common.grpcService;
  if (svc?.targetSpecifier.case !== 'envoyGrpc')
    throw new ConfigError(`${where}.common_config.grpc_service: only envoy_grpc is supported by the engine`);
  if (!call) throw new ConfigError(`${where}: OpenTelemetry access logs need the engine's clusters`);
  const target = svc.targetSpecifier.value;
  const resource: KeyValue[] = [];
  if (!cfg.disableBuiltinLabels)
    resource.push(
      stringKv('log_name', common.logName),
      stringKv('zone_name', local?.zoneName ?? ''),
      stringKv('cluster_name', local?.clusterName ?? ''),
      stringKv('node_name', local?.nodeName ?? ''),
    );
  resource.push(...(cfg.resourceAttributes?.values ?? []));
  const exporter = new OtlpExporter(
    target.clusterName,
    target.authority || target.clusterName,
    durationToMs(svc.timeout) ?? 5_000,
    resource,
    durationToMs(common.bufferFlushInterval) ?? 1_000,
    common.bufferSizeBytes ?? 16_384,
    call,
  );
  const body = cfg.body && cfg.body.value.case !== undefined ? compileAnyValue(cfg.body, `${where}.body`) : undefined;
  const attributes = compileKeyValues(cfg.attributes?.values ?? [], `${where}.attributes`);
  const stateKeys = common.filterStateObjectsToLog;
  return (c) => {
    const attrs = attributes(c);
    for (const k of stateKeys) {
      const v = filterStateText(c.filterState?.get(k));
      if (v !== undefined) attrs.push(stringKv(k, v));
    }
    const record = create(LogRecordSchema, {
      timeUnixNano: BigInt(c.info.startTime) * 1_000_000n,
      ...(body ? { body: body(c) } : {}),
      attributes: attrs,
    });
    exporter.add(record);
  };
}
