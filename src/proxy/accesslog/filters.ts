// Access log filters (envoy/config/accesslog/v3/accesslog.proto AccessLogFilter), as
// source/common/access_log/access_log_impl.cc evaluates them, plus the CEL extension filter
// (envoy.access_loggers.extension_filters.cel, source/extensions/access_loggers/filters/cel): its expression is
// compiled once; an error or a non-boolean result is false. Differences: not_health_check_filter passes every
// request (the engine has no health-check filter to mark one); traceable_filter is false (no tracing decision yet).
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { AccessLogFilter, ComparisonFilter } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { ComparisonFilter_Op } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { ExpressionFilterSchema } from '../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb';
import { compileCel, type CelContext } from '../cel/evaluator';
import { ConfigError } from '../common/config-error';
import { compileHeaderMatcher, fractionOf, headerFieldsOf } from '../route/match';
import { RESPONSE_FLAGS } from '../stream-info';

export type LogFilter = (c: CelContext) => boolean;

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

export function compileFilter(f: AccessLogFilter, where: string): LogFilter {
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
        if (!RESPONSE_FLAGS.includes(fl)) throw new ConfigError(`${where}.response_flag_filter.flags: unknown response flag '${fl}'`);
      const flags = new Set(s.value.flags);
      return (c) => (flags.size === 0 ? c.info.flags.length > 0 : c.info.flags.some((x) => flags.has(x)));
    }
    case 'extensionFilter': {
      const any = s.value.configType.case === 'typedConfig' ? s.value.configType.value : undefined;
      const cel = any ? anyUnpack(any, ExpressionFilterSchema) : undefined;
      if (!cel)
        throw new ConfigError(
          `${where}.extension_filter: Didn't find a registered implementation for '${s.value.name}' with type URL: '${any?.typeUrl ?? ''}'`,
        );
      const p = compileCel(cel.expression, `${where}.extension_filter`);
      return (c) => p.matches(c);
    }
    default:
      throw new ConfigError(`${where}: access log filter '${s.case ?? 'none'}' is not supported`);
  }
}
