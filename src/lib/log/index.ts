// Public API of the logging library (the semantics of Istio's pkg/log). Typical program start:
//
//   const opts = parseLogOptions(ctx.flags);               // --log_* and --vklog
//   configure(opts, { scopes: PROGRAM_SCOPES });           // format, targets, levels
//   const log = registerScope('ads', 'ADS debugging');
//   log.info('push', { version: 3 });                      // 2026-...Z\tinfo\tads\tpush\tversion=3
//   if (log.debugEnabled()) log.debug(expensive());

import { defaultScope } from './config';
import { Level } from './levels';
import type { Fields, Scope } from './scope';

export { Level, LEVEL_NAMES, levelFromName, levelName, type LevelName, toLevel } from './levels';
export { formatTimestamp, systemTimeSource, type TimeSource } from './clock';
export { encodeJson, encodeText, type Encoder, type Field, type LogEntry, textValue } from './format';
export { FdSink, type LogSink, MemorySink, openTarget, SinkOpenError } from './sink';
export { shortCaller } from './caller';
export { FATAL_EXIT_CODE, type ExitFunction } from './core';
export { DEFAULT_SCOPE_NAME, type Fields, findScope, registerScope, type RegisterScopeOptions, Scope } from './scope';
export {
  checkScopes,
  DEFAULT_LOG_TARGETS,
  DEFAULT_OUTPUT_LEVELS,
  DEFAULT_STACKTRACE_LEVELS,
  defaultLogOptions,
  formatScopedLevels,
  GRPC_SCOPE_NAME,
  KLOG_SCOPE_NAME,
  type LogFlagValues,
  type LogOptions,
  LogOptionsError,
  OVERRIDE_SCOPE_NAME,
  parseLogOptions,
  type ParseLogOptionsConfig,
  parseScopedLevel,
  parseScopedLevels,
  type ScopedLevel,
  setDefaultOutputLevel,
} from './options';
export {
  close,
  configure,
  type ConfigureRuntime,
  defaultScope,
  getScopes,
  isJson,
  type ScopeInfo,
  type ScopeSpec,
  setExitFunction,
  setLogCallers,
  setOutputLevel,
  setSinks,
  setStackTraceLevel,
  setTimeSource,
  sync,
} from './config';

// Package-level functions log to the default scope (no scope column), like Istio's log.Info etc.; the
// caller location is that of the code calling them.
export function debug(msg: unknown, fields?: Fields): void {
  if (defaultScope.debugEnabled()) defaultScope.logCalledFrom(debug, Level.Debug, msg, fields);
}
export function info(msg: unknown, fields?: Fields): void {
  if (defaultScope.infoEnabled()) defaultScope.logCalledFrom(info, Level.Info, msg, fields);
}
export function warn(msg: unknown, fields?: Fields): void {
  if (defaultScope.warnEnabled()) defaultScope.logCalledFrom(warn, Level.Warn, msg, fields);
}
export function error(msg: unknown, fields?: Fields): void {
  if (defaultScope.errorEnabled()) defaultScope.logCalledFrom(error, Level.Error, msg, fields);
}
export function fatal(msg: unknown, fields?: Fields): never {
  defaultScope.logCalledFrom(fatal, Level.Fatal, msg, fields);
  throw new Error('log: exit function returned after a fatal message');
}
export function withLabels(...kv: unknown[]): Scope {
  return defaultScope.withLabels(...kv);
}
