// The config types of the access loggers, their filters and formatters, for the engine's type registry (so a
// bootstrap or config dump in JSON can name them in `@type`).
import type { DescFile } from '@bufbuild/protobuf';
import { file_envoy_extensions_access_loggers_filters_cel_v3_cel } from '../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb';
import { file_envoy_extensions_access_loggers_open_telemetry_v3_logs_service } from '../../gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb';
import { file_envoy_extensions_access_loggers_stream_v3_stream } from '../../gen/envoy/extensions/access_loggers/stream/v3/stream_pb';
import { file_envoy_extensions_formatter_cel_v3_cel } from '../../gen/envoy/extensions/formatter/cel/v3/cel_pb';
import { file_envoy_extensions_formatter_metadata_v3_metadata } from '../../gen/envoy/extensions/formatter/metadata/v3/metadata_pb';
import { file_envoy_extensions_formatter_req_without_query_v3_req_without_query } from '../../gen/envoy/extensions/formatter/req_without_query/v3/req_without_query_pb';

export const ACCESS_LOG_FILES: readonly DescFile[] = [
  file_envoy_extensions_access_loggers_filters_cel_v3_cel,
  file_envoy_extensions_access_loggers_open_telemetry_v3_logs_service,
  file_envoy_extensions_access_loggers_stream_v3_stream,
  file_envoy_extensions_formatter_cel_v3_cel,
  file_envoy_extensions_formatter_metadata_v3_metadata,
  file_envoy_extensions_formatter_req_without_query_v3_req_without_query,
];
