// Access logs on HTTP connection managers, tcp_proxy filters and listeners, as istiod 1.26 builds them:
// pilot/pkg/networking/core/accesslog.go (setHTTPAccessLog, setTCPAccessLog, setListenerAccessLog,
// buildAccessLogFromTelemetry, the CEL ExpressionFilter, the listener's NR filter) and
// pilot/pkg/model/telemetry_logging.go (EnvoyTextLogFormat, EnvoyJSONLogFormatIstio, FileAccessLogFromMeshConfig,
// fileAccessLogFromTelemetry, openTelemetryLog, LookupCluster). Without Telemetry access logging the mesh's
// accessLogFile applies (TEXT or JSON by accessLogEncoding); with it, each provider in scope gets one logger.
// Differences on purpose: proxies are taken to be 1.26 or later (Istio's skipBuiltInFormatter: the
// %METADATA/%CEL formatters are built in, only %REQ_WITHOUT_QUERY would need a formatter extension, which is
// not generated: such a format is sent as written); the gRPC ALS providers (envoyHttpAls, envoyTcpAls) and
// enableEnvoyAccessLogService are not generated.
import { create, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import type { ExtensionProvider, MeshTelemetry } from '../../config/mesh-telemetry';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { TelemetryClass } from '../../discovery/telemetry';
import { type AccessLog, type AccessLogFilter, AccessLogFilterSchema, AccessLogSchema } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { ApiVersion } from '../../gen/envoy/config/core/v3/config_source_pb';
import { ExpressionFilterSchema } from '../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb';
import { FileAccessLogSchema } from '../../gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { OpenTelemetryAccessLogConfigSchema } from '../../gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb';
import { registerScope } from '../../lib/log';
import { buildSubsetKey, pack } from './common';

const log = registerScope('telemetry');

export const FILE_ACCESS_LOG = 'envoy.access_loggers.file';
export const OTEL_ACCESS_LOG = 'envoy.access_loggers.open_telemetry';
export const CEL_FILTER = 'envoy.access_loggers.extension_filters.cel';
const OTEL_LOG_NAME = 'otel_envoy_accesslog';
/** Filter state Istio 1.24+ proxies log with gRPC/OTel loggers (envoyStateToLog). */
const STATE_TO_LOG = ['upstream_peer', 'downstream_peer'];

/** Istio's default TEXT access log format (EnvoyTextLogFormat). */
export const ISTIO_TEXT_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% ' +
  '%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" ' +
  '"%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% ' +
  '%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n';

/** Istio's default JSON access log fields (EnvoyJSONLogFormatIstio). */
export const ISTIO_JSON_FORMAT: Readonly<Record<string, string>> = {
  start_time: '%START_TIME%',
  route_name: '%ROUTE_NAME%',
  method: '%REQ(:METHOD)%',
  path: '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%',
  protocol: '%PROTOCOL%',
  response_code: '%RESPONSE_CODE%',
  response_flags: '%RESPONSE_FLAGS%',
  response_code_details: '%RESPONSE_CODE_DETAILS%',
  connection_termination_details: '%CONNECTION_TERMINATION_DETAILS%',
  bytes_received: '%BYTES_RECEIVED%',
  bytes_sent: '%BYTES_SENT%',
  duration: '%DURATION%',
  upstream_service_time: '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%',
  x_forwarded_for: '%REQ(X-FORWARDED-FOR)%',
  user_agent: '%REQ(USER-AGENT)%',
  request_id: '%REQ(X-REQUEST-ID)%',
  authority: '%REQ(:AUTHORITY)%',
  upstream_host: '%UPSTREAM_HOST%',
  upstream_cluster: '%UPSTREAM_CLUSTER_RAW%',
  upstream_local_address: '%UPSTREAM_LOCAL_ADDRESS%',
  downstream_local_address: '%DOWNSTREAM_LOCAL_ADDRESS%',
  downstream_remote_address: '%DOWNSTREAM_REMOTE_ADDRESS%',
  requested_server_name: '%REQUESTED_SERVER_NAME%',
  upstream_transport_failure_reason: '%UPSTREAM_TRANSPORT_FAILURE_REASON%',
};

/** fileAccessLogFormat: a given format ends with a newline; none is Istio's. */
const textFormat = (f: string | undefined): string => (f ? (f.endsWith('\n') ? f : `${f}\n`) : ISTIO_TEXT_FORMAT);

type FileInit = MessageInitShape<typeof FileAccessLogSchema>;

function textLogFormat(text: string, omitEmptyValues = false): FileInit['accessLogFormat'] {
  return {
    case: 'logFormat',
    value: { format: { case: 'textFormatSource', value: { specifier: { case: 'inlineString', value: text } } }, omitEmptyValues },
  };
}

function jsonLogFormat(json: JsonObject, omitEmptyValues = false): FileInit['accessLogFormat'] {
  return {
    case: 'logFormat',
    value: { format: { case: 'jsonFormat', value: json }, jsonFormatOptions: { sortProperties: false }, omitEmptyValues },
  };
}

const fileLogger = (init: FileInit): AccessLog =>
  create(AccessLogSchema, { name: FILE_ACCESS_LOG, configType: { case: 'typedConfig', value: pack(FileAccessLogSchema, init) } });

/** FileAccessLogFromMeshConfig: accessLogFile with accessLogFormat in accessLogEncoding. */
export function meshFileAccessLog(path: string, mesh: MeshTelemetry): AccessLog {
  if (mesh.accessLogEncoding === 'JSON') {
    let json: JsonObject = { ...ISTIO_JSON_FORMAT };
    if (mesh.accessLogFormat) {
      try {
        const parsed: unknown = JSON.parse(mesh.accessLogFormat);
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object');
        json = parsed as JsonObject;
      } catch (e) {
        log.error(`error parsing provided json log format, default log format will be used: ${(e as Error).message}`);
      }
    }
    return fileLogger({ path, accessLogFormat: jsonLogFormat(json) });
  }
  return fileLogger({ path, accessLogFormat: textLogFormat(textFormat(mesh.accessLogFormat)) });
}

/** The cluster and authority of a provider's `service` (`ns/host` or a host unique across namespaces): LookupCluster. */
export function lookupCluster(push: PushContext, service: string, port: number): { hostname: string; cluster: string } | string {
  if (!service) return 'service must not be empty';
  const parts = service.split('/');
  if (parts.length === 2) {
    const svc = push.servicesByHostname(parts[1]!).find((s) => s.namespace === parts[0]);
    if (svc) return { hostname: svc.hostname, cluster: buildSubsetKey('outbound', '', svc.hostname, port) };
  } else {
    const list = push.servicesByHostname(service);
    const namespaces = [...new Set(list.map((s) => s.namespace))];
    if (namespaces.length === 1) return { hostname: list[0]!.hostname, cluster: buildSubsetKey('outbound', '', list[0]!.hostname, port) };
    if (namespaces.length > 1)
      return `found ${service} in multiple namespaces [${namespaces.join(' ')}], specify the namespace explicitly in the format of <Namespace>/<Hostname>`;
  }
  return `could not find service ${service} in Istio service registry`;
}

function otelAccessLog(push: PushContext, p: Extract<ExtensionProvider, { kind: 'envoyOtelAls' }>): AccessLog | undefined {
  const found = lookupCluster(push, p.service, p.port);
  if (typeof found === 'string') {
    log.error(`could not find cluster for open telemetry provider ${JSON.stringify(p.name)}: ${found}`);
    return undefined;
  }
  const body = p.text || ISTIO_TEXT_FORMAT;
  const labels = Object.keys(p.labels ?? {}).sort();
  const cfg = pack(OpenTelemetryAccessLogConfigSchema, {
    commonConfig: {
      logName: p.logName || OTEL_LOG_NAME,
      grpcService: { targetSpecifier: { case: 'envoyGrpc', value: { clusterName: found.cluster, authority: found.hostname } } },
      transportApiVersion: ApiVersion.V3,
      filterStateObjectsToLog: STATE_TO_LOG,
    },
    disableBuiltinLabels: true,
    body: { value: { case: 'stringValue', value: body } },
    ...(labels.length
      ? { attributes: { values: labels.map((key) => ({ key, value: { value: { case: 'stringValue' as const, value: p.labels![key]! } } })) } }
      : {}),
  });
  return create(AccessLogSchema, { name: OTEL_ACCESS_LOG, configType: { case: 'typedConfig', value: cfg } });
}

/** telemetryAccessLog: the logger of one provider; undefined for providers that are no access loggers. */
export function providerAccessLog(push: PushContext, p: ExtensionProvider): AccessLog | undefined {
  switch (p.kind) {
    case 'envoyFileAccessLog':
      // the built-in `envoy` provider without a format of its own follows the mesh's format and encoding
      if (p.name === 'envoy' && p.text === undefined && p.labels === undefined && !p.omitEmptyValues)
        return meshFileAccessLog(p.path, push.options.meshTelemetry);
      return fileLogger({
        path: p.path || '/dev/stdout',
        accessLogFormat:
          p.labels && Object.keys(p.labels).length
            ? jsonLogFormat({ ...p.labels }, p.omitEmptyValues)
            : textLogFormat(textFormat(p.text), p.omitEmptyValues),
      });
    case 'envoyOtelAls':
      return otelAccessLog(push, p);
    default:
      return undefined;
  }
}

/** The CEL filter of a Telemetry accessLogging entry. */
export function celFilter(expression: string): AccessLogFilter {
  return create(AccessLogFilterSchema, {
    filterSpecifier: {
      case: 'extensionFilter',
      value: { name: CEL_FILTER, configType: { case: 'typedConfig', value: pack(ExpressionFilterSchema, { expression }) } },
    },
  });
}

/** Istio logs listener-level events only for connections no filter chain matched (response flag NR). */
export const listenerNrFilter = (): AccessLogFilter =>
  create(AccessLogFilterSchema, { filterSpecifier: { case: 'responseFlagFilter', value: { flags: ['NR'] } } });

function andFilters(fs: AccessLogFilter[]): AccessLogFilter | undefined {
  if (fs.length <= 1) return fs[0];
  return create(AccessLogFilterSchema, { filterSpecifier: { case: 'andFilter', value: { filters: fs } } });
}

function withFilter(al: AccessLog, filter: AccessLogFilter | undefined): AccessLog {
  return filter ? create(AccessLogSchema, { name: al.name, configType: al.configType, filter }) : al;
}

/**
 * The access logs of one place (HCM, tcp_proxy, listener) of a proxy: Telemetry's providers when any are in
 * scope (disabled ones and providers that build nothing leave no logger), else the mesh's accessLogFile.
 * `base` is the filter the place always has (the listener's NR), and-ed with a provider's CEL filter.
 */
export function accessLogsFor(proxy: Proxy, push: PushContext, cls: TelemetryClass, base?: AccessLogFilter): AccessLog[] {
  const mesh = push.options.meshTelemetry;
  const built = (push.telemetry.accessLogs(proxy, cls) ?? [])
    .map((c) => ({ c, al: providerAccessLog(push, c.provider) }))
    .filter((x): x is { c: (typeof x)['c']; al: AccessLog } => x.al !== undefined);
  if (built.length === 0) return mesh.accessLogFile ? [withFilter(meshFileAccessLog(mesh.accessLogFile, mesh), base)] : [];
  return built
    .filter((x) => !x.c.disabled)
    .map((x) => withFilter(x.al, andFilters([...(base ? [base] : []), ...(x.c.filter !== undefined ? [celFilter(x.c.filter)] : [])])));
}
