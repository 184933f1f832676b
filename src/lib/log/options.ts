// The logging flags every program accepts, parsed into typed options with Istio's error wording:
//   --log_as_json            bool      JSON instead of console text
//   --log_caller             string    comma-separated scopes that include caller information (`all` = every scope)
//   --log_output_level       string    `<scope>:<level>,...`; a bare `<level>` means the default scope; `all:<level>` every scope
//   --log_stacktrace_level   string    same form, default `default:none`
//   --log_target             []string  `stdout`, `stderr` or file paths (appended to); default [stdout]
//   --vklog                  int       klog verbosity; non-zero turns the `klog` scope to debug

import { levelFromName, type LevelName } from './levels';
import { DEFAULT_SCOPE_NAME } from './scope';

/** The scope name meaning every scope in level and caller lists. */
export const OVERRIDE_SCOPE_NAME = 'all';
export const KLOG_SCOPE_NAME = 'klog';
export const GRPC_SCOPE_NAME = 'grpc';

/** Built-in defaults applied before --log_output_level (Istio's defaultOutputLevels). */
export const DEFAULT_OUTPUT_LEVELS = 'default:info,grpc:none';
export const DEFAULT_STACKTRACE_LEVELS = 'default:none';
export const DEFAULT_LOG_TARGETS: readonly string[] = ['stdout'];

export interface ScopedLevel {
  readonly scope: string;
  readonly level: LevelName;
}

export interface LogOptions {
  /** --log_as_json */
  readonly jsonEncoding: boolean;
  /** --log_caller, split on commas, empty entries dropped. */
  readonly logCallers: readonly string[];
  /** --log_output_level, in the order given. */
  readonly outputLevels: readonly ScopedLevel[];
  /** Program defaults applied before outputLevels (default `default:info,grpc:none`); see setDefaultOutputLevel. */
  readonly defaultOutputLevels: readonly ScopedLevel[];
  /** --log_stacktrace_level */
  readonly stackTraceLevels: readonly ScopedLevel[];
  /** --log_target */
  readonly outputPaths: readonly string[];
  /** --vklog */
  readonly klogVerbosity: number;
}

/** Raw flag values keyed by the long flag name, e.g. `{ log_output_level: 'ads:debug', vklog: 0 }`. */
export type LogFlagValues = Readonly<Record<string, unknown>>;

export class LogOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogOptionsError';
  }
}

/** One `<scope>:<level>` or `<level>` entry, as Istio's convertScopedLevel. */
export function parseScopedLevel(sl: string): ScopedLevel {
  const pieces = sl.split(':');
  let scope: string;
  let level: string;
  if (pieces.length === 1) {
    scope = DEFAULT_SCOPE_NAME;
    level = pieces[0] as string;
  } else if (pieces.length === 2) {
    scope = pieces[0] as string;
    level = pieces[1] as string;
  } else {
    throw new LogOptionsError(`invalid output level format '${sl}'`);
  }
  if (levelFromName(level) === undefined) throw new LogOptionsError(`invalid output level '${level}'`);
  return { scope, level: level as LevelName };
}

/** A comma-separated list of scoped levels. Every entry must parse; an empty entry is `invalid output level ''`. */
export function parseScopedLevels(arg: string): ScopedLevel[] {
  return arg.split(',').map(parseScopedLevel);
}

export function formatScopedLevels(levels: readonly ScopedLevel[]): string {
  return levels.map((l) => `${l.scope}:${l.level}`).join(',');
}

export function defaultLogOptions(): LogOptions {
  return {
    jsonEncoding: false,
    logCallers: [],
    outputLevels: [],
    defaultOutputLevels: parseScopedLevels(DEFAULT_OUTPUT_LEVELS),
    stackTraceLevels: parseScopedLevels(DEFAULT_STACKTRACE_LEVELS),
    outputPaths: DEFAULT_LOG_TARGETS,
    klogVerbosity: 0,
  };
}

/**
 * Returns options whose program default for `scope` is `level` (Istio's SetDefaultOutputLevel): replaces
 * that scope's entry (for `default` also a bare-level entry) or appends one. --log_output_level still wins.
 */
export function setDefaultOutputLevel(options: LogOptions, scope: string, level: LevelName): LogOptions {
  if (levelFromName(level) === undefined) throw new LogOptionsError(`invalid output level '${level}'`);
  const list = options.defaultOutputLevels.slice();
  const i = list.findIndex((e) => e.scope === scope);
  if (i >= 0) list[i] = { scope, level };
  else list.push({ scope, level });
  return { ...options, defaultOutputLevels: list };
}

export interface ParseLogOptionsConfig {
  /**
   * When given, scope names in the level and caller flags must be one of these (or `all`), failing with
   * `unknown scope '<name>' specified`. Istio 1.26 itself ignores unknown scopes; leave this out for that.
   */
  knownScopes?: readonly string[];
  /** Starting point for values not given (default: defaultLogOptions()). */
  base?: LogOptions;
}

function bad(value: unknown, flag: string, reason: string): LogOptionsError {
  return new LogOptionsError(`invalid argument ${JSON.stringify(String(value))} for "--${flag}" flag: ${reason}`);
}

const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

function parseBool(v: unknown, flag: string): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string') {
    if (GO_TRUE.has(v)) return true;
    if (GO_FALSE.has(v)) return false;
  }
  throw bad(v, flag, `strconv.ParseBool: parsing ${JSON.stringify(String(v))}: invalid syntax`);
}

function parseInt32(v: unknown, flag: string): number {
  const text = typeof v === 'number' ? String(v) : typeof v === 'string' ? v.trim() : undefined;
  if (text === undefined || !/^[+-]?\d+$/.test(text)) {
    throw bad(v, flag, `strconv.ParseInt: parsing ${JSON.stringify(String(v))}: invalid syntax`);
  }
  const n = Number(text);
  if (n > 2147483647 || n < -2147483648) {
    throw bad(v, flag, `strconv.ParseInt: parsing ${JSON.stringify(text)}: value out of range`);
  }
  return n;
}

function parseString(v: unknown, flag: string): string {
  if (typeof v === 'string') return v;
  throw new LogOptionsError(`flag --${flag} must be a string`);
}

function parseStringList(v: unknown, flag: string): string[] {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v.slice() as string[];
  throw new LogOptionsError(`flag --${flag} must be a list of strings`);
}

/**
 * Parses the log flags out of a command's flag values (other keys are ignored; missing ones keep their
 * defaults). Throws LogOptionsError with Istio's wording, e.g. `invalid output level 'loud'` or
 * `invalid output level format 'a:b:c'`.
 */
export function parseLogOptions(values: LogFlagValues, config: ParseLogOptionsConfig = {}): LogOptions {
  const base = config.base ?? defaultLogOptions();
  const has = (k: string): boolean => values[k] !== undefined;

  const jsonEncoding = has('log_as_json') ? parseBool(values.log_as_json, 'log_as_json') : base.jsonEncoding;

  let outputLevels = base.outputLevels;
  if (has('log_output_level')) {
    const s = parseString(values.log_output_level, 'log_output_level');
    outputLevels = s === '' ? [] : parseScopedLevels(s);
  }
  const stackTraceLevels = has('log_stacktrace_level')
    ? parseScopedLevels(parseString(values.log_stacktrace_level, 'log_stacktrace_level'))
    : base.stackTraceLevels;
  const logCallers = has('log_caller')
    ? parseString(values.log_caller, 'log_caller')
        .split(',')
        .filter((s) => s !== '')
    : base.logCallers;
  const outputPaths = has('log_target') ? parseStringList(values.log_target, 'log_target') : base.outputPaths;
  const klogVerbosity = has('vklog') ? parseInt32(values.vklog, 'vklog') : base.klogVerbosity;

  const options: LogOptions = {
    jsonEncoding,
    logCallers,
    outputLevels,
    defaultOutputLevels: base.defaultOutputLevels,
    stackTraceLevels,
    outputPaths,
    klogVerbosity,
  };
  if (config.knownScopes) checkScopes(options, config.knownScopes);
  return options;
}

/** Fails with `unknown scope '<name>' specified` for a scope outside `known` (and not `all`). */
export function checkScopes(options: LogOptions, known: readonly string[]): void {
  const ok = new Set(known);
  ok.add(OVERRIDE_SCOPE_NAME);
  const names = [...options.outputLevels.map((e) => e.scope), ...options.stackTraceLevels.map((e) => e.scope), ...options.logCallers];
  for (const n of names) {
    if (!ok.has(n)) throw new LogOptionsError(`unknown scope '${n}' specified`);
  }
}
