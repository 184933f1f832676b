// configure(): applies LogOptions to the output (encoder, sinks) and to the scopes. The applied options are
// kept, so a scope registered later gets exactly the levels configure() would have given it ("pending"
// levels), and configure() is deterministic: every scope is reset to info / none / no caller first.

import { systemTimeSource, type TimeSource } from './clock';
import { core, defaultExit, type ExitFunction, syncSinks } from './core';
import { encodeJson, encodeText } from './format';
import { Level, levelFromName, type LevelName, levelName, toLevel } from './levels';
import { checkScopes, defaultLogOptions, KLOG_SCOPE_NAME, type LogOptions, LogOptionsError, OVERRIDE_SCOPE_NAME, type ScopedLevel } from './options';
import { findScopeState, registerScope, type Scope, type ScopeState, scopeStates, setRegistrationHook } from './scope';
import { type LogSink, openTargets } from './sink';

export interface ScopeSpec {
  name: string;
  description?: string;
}

export interface ConfigureRuntime {
  /**
   * The program's scope names (e.g. the list in its --log_* flag help); each is registered so that it can be
   * listed and configured even before the code that logs to it is loaded. `all` is skipped (it is not a scope).
   */
  scopes?: readonly (string | ScopeSpec)[];
  /**
   * With `strict`, scopes named in the options must be in `scopes` (or `all`): `unknown scope '<x>' specified`.
   * Default false: like Istio 1.26, unknown names are ignored (kept for scopes registered later).
   */
  strict?: boolean;
  /** Sinks to use instead of opening options.outputPaths (tests, capturing). */
  sinks?: readonly LogSink[];
}

interface Applied {
  output: readonly ScopedLevel[];
  stack: readonly ScopedLevel[];
  callers: readonly string[];
  klogDebug: boolean;
}

let applied: Applied = toApplied(defaultLogOptions());
let ownedSinks: readonly LogSink[] = [];

function toApplied(o: LogOptions): Applied {
  return {
    output: [...o.defaultOutputLevels, ...o.outputLevels],
    stack: o.stackTraceLevels,
    callers: o.logCallers,
    klogDebug: o.klogVerbosity !== 0,
  };
}

/** Istio's processLevels for one scope: entries in order; `all` sets the level and ends the list. */
function levelFor(name: string, entries: readonly ScopedLevel[], initial: Level): Level {
  let l = initial;
  for (const e of entries) {
    if (e.scope === name) {
      l = toLevel(e.level);
    } else if (e.scope === OVERRIDE_SCOPE_NAME) {
      return toLevel(e.level);
    }
  }
  return l;
}

function callersFor(name: string, callers: readonly string[]): boolean {
  for (const c of callers) {
    if (c === OVERRIDE_SCOPE_NAME || c === name) return true;
  }
  return false;
}

function applyTo(s: ScopeState): void {
  s.outputLevel = levelFor(s.name, applied.output, Level.Info);
  s.stackTraceLevel = levelFor(s.name, applied.stack, Level.None);
  s.logCallers = callersFor(s.name, applied.callers);
  // Istio: a non-zero --vklog turns the klog scope to debug after the level flags were applied.
  if (applied.klogDebug && s.name === KLOG_SCOPE_NAME) s.outputLevel = Level.Debug;
}

function validate(o: LogOptions): void {
  for (const e of [...o.defaultOutputLevels, ...o.outputLevels, ...o.stackTraceLevels]) {
    if (levelFromName(e.level) === undefined) throw new LogOptionsError(`invalid output level '${e.level}'`);
  }
}

/**
 * Configures logging: output format, targets (opened before anything changes; a failure leaves the previous
 * configuration in place), the program's scopes and their levels. Throws LogOptionsError or the sink error.
 */
export function configure(options: LogOptions, runtime: ConfigureRuntime = {}): void {
  validate(options);
  const specs = (runtime.scopes ?? []).map((s) => (typeof s === 'string' ? { name: s } : s));
  if (runtime.strict) checkScopes(options, [...specs.map((s) => s.name), ...scopeStates().map((s) => s.name)]);

  const sinks = runtime.sinks ? [...runtime.sinks] : openTargets(options.outputPaths);
  const previous = ownedSinks;
  core.sinks = sinks;
  ownedSinks = runtime.sinks ? [] : sinks;
  for (const s of previous) if (!sinks.includes(s)) s.close?.();

  core.json = options.jsonEncoding;
  core.encoder = options.jsonEncoding ? encodeJson : encodeText;

  applied = toApplied(options);
  for (const spec of specs) {
    if (spec.name !== OVERRIDE_SCOPE_NAME) registerScope(spec.name, spec.description ?? '');
  }
  for (const s of scopeStates()) applyTo(s);
}

export interface ScopeInfo {
  name: string;
  description: string;
  outputLevel: LevelName;
  stackTraceLevel: LevelName;
  logCallers: boolean;
}

/** Every registered scope, sorted by name, for listing (ControlZ). */
export function getScopes(): ScopeInfo[] {
  return scopeStates()
    .map((s) => ({
      name: s.name,
      description: s.description,
      outputLevel: levelName(s.outputLevel),
      stackTraceLevel: levelName(s.stackTraceLevel),
      logCallers: s.logCallers,
    }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Sets a registered scope's output level; false when no such scope. Throws on an invalid level. */
export function setOutputLevel(scope: string, level: Level | LevelName): boolean {
  const s = findScopeState(scope);
  if (!s) return false;
  s.outputLevel = toLevel(level);
  return true;
}

export function setStackTraceLevel(scope: string, level: Level | LevelName): boolean {
  const s = findScopeState(scope);
  if (!s) return false;
  s.stackTraceLevel = toLevel(level);
  return true;
}

export function setLogCallers(scope: string, on: boolean): boolean {
  const s = findScopeState(scope);
  if (!s) return false;
  s.logCallers = on;
  return true;
}

/** Replaces the output sinks (closing file sinks opened by configure()). */
export function setSinks(sinks: readonly LogSink[]): void {
  const previous = ownedSinks;
  core.sinks = [...sinks];
  ownedSinks = [];
  for (const s of previous) if (!sinks.includes(s)) s.close?.();
}

/** Replaces the clock (epoch microseconds); no argument restores the system clock. */
export function setTimeSource(source?: TimeSource): void {
  core.clock = source ?? systemTimeSource;
}

/** Replaces the function fatal() calls to exit (it must not return); no argument restores process.exit. */
export function setExitFunction(exit?: ExitFunction): void {
  core.exit = exit ?? defaultExit;
}

/** Whether output is JSON (--log_as_json). */
export function isJson(): boolean {
  return core.json;
}

/** Flushes file targets to disk. Writes are synchronous, so this is only about durability. */
export function sync(): void {
  syncSinks();
}

/** Closes file targets opened by configure() and falls back to stdout. */
export function close(): void {
  syncSinks();
  setSinks(openTargets(['stdout']));
}

setRegistrationHook(applyTo);

/** The `default` scope: its column is omitted from output. */
export const defaultScope: Scope = registerScope('default', 'Unscoped logging messages.');
