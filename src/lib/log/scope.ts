// Scopes: named loggers with their own output level, stack-trace level and caller flag, as in Istio's
// pkg/log. A Scope object is a view (state + labels); withLabels() views share the state of their scope, so
// changing a level through any of them (or through ControlZ) affects all.

import { captureCaller, captureStack } from './caller';
import { core, FATAL_EXIT_CODE, syncSinks, writeEntry } from './core';
import type { Field } from './format';
import { Level, type LevelName, toLevel } from './levels';

export const DEFAULT_SCOPE_NAME = 'default';

/** Structured fields of one call: rendered `\tk=v k2=v2` in text and as JSON members in JSON. */
export type Fields = Readonly<Record<string, unknown>>;

export interface ScopeState {
  readonly name: string;
  description: string;
  /** Name written to the scope column; empty for the default scope. */
  readonly emitName: string;
  /** Extra frames to skip when finding the caller (for adapters that wrap a scope). */
  readonly callerSkip: number;
  outputLevel: Level;
  stackTraceLevel: Level;
  logCallers: boolean;
}

export interface RegisterScopeOptions {
  /** Frames between the user's code and the Scope method, for wrappers (Istio's callerSkip). */
  callerSkip?: number;
}

const registry = new Map<string, ScopeState>();
let registrationHook: ((s: ScopeState) => void) | undefined;

/** Called for each newly registered scope; configure() uses it to apply the configured levels. */
export function setRegistrationHook(hook: ((s: ScopeState) => void) | undefined): void {
  registrationHook = hook;
}

/** All registered scope states, in registration order. */
export function scopeStates(): ScopeState[] {
  return [...registry.values()];
}

export function findScopeState(name: string): ScopeState | undefined {
  return registry.get(name);
}

/**
 * Registers a scope, or returns the existing one of that name. Names cannot contain colons, commas or
 * periods. New scopes start at info / stack traces none / no caller, then get whatever the last configure()
 * said for them (so scopes registered after configure() still get their configured levels).
 */
export function registerScope(name: string, description = '', opts: RegisterScopeOptions = {}): Scope {
  if (/[:,.]/.test(name)) {
    throw new Error(`scope name ${name} is invalid, it cannot contain colons, commas, or periods`);
  }
  let s = registry.get(name);
  if (!s) {
    s = {
      name,
      description,
      emitName: name === DEFAULT_SCOPE_NAME ? '' : name,
      callerSkip: opts.callerSkip ?? 0,
      outputLevel: Level.Info,
      stackTraceLevel: Level.None,
      logCallers: false,
    };
    registry.set(name, s);
    registrationHook?.(s);
  } else if (!s.description && description) {
    s.description = description;
  }
  return new Scope(s, EMPTY);
}

/** The scope registered under `name`, or undefined. */
export function findScope(name: string): Scope | undefined {
  const s = registry.get(name);
  return s ? new Scope(s, EMPTY) : undefined;
}

const EMPTY: readonly Field[] = [];

function toMessage(msg: unknown): string {
  if (typeof msg === 'string') return msg;
  if (msg instanceof Error) return msg.message;
  return String(msg);
}

function mergeFields(labels: readonly Field[], fields: Fields | undefined): readonly Field[] {
  if (fields === undefined) return labels;
  const keys = Object.keys(fields);
  if (keys.length === 0) return labels;
  if (labels.length === 0) return keys.map((k) => [k, fields[k]] as const);
  const out: Field[] = labels.slice();
  for (const k of keys) {
    const i = out.findIndex((f) => f[0] === k);
    if (i >= 0) out[i] = [k, fields[k]];
    else out.push([k, fields[k]]);
  }
  return out;
}

type Method = Function;

export class Scope {
  /** Use registerScope(); the constructor is internal. */
  constructor(
    private readonly s: ScopeState,
    private readonly labels: readonly Field[],
  ) {}

  get name(): string {
    return this.s.name;
  }
  get description(): string {
    return this.s.description;
  }

  debug(msg: unknown, fields?: Fields): void {
    if (this.s.outputLevel >= Level.Debug) this.emit(Level.Debug, msg, fields, undefined, Scope.prototype.debug);
  }
  info(msg: unknown, fields?: Fields): void {
    if (this.s.outputLevel >= Level.Info) this.emit(Level.Info, msg, fields, undefined, Scope.prototype.info);
  }
  warn(msg: unknown, fields?: Fields): void {
    if (this.s.outputLevel >= Level.Warn) this.emit(Level.Warn, msg, fields, undefined, Scope.prototype.warn);
  }
  error(msg: unknown, fields?: Fields): void {
    if (this.s.outputLevel >= Level.Error) this.emit(Level.Error, msg, fields, undefined, Scope.prototype.error);
  }
  /**
   * Logs at fatal level (when the scope's output level admits it) and exits the process with code 1, as
   * Istio does. Unlike Istio, the process also exits when the scope is silenced with `none`.
   */
  fatal(msg: unknown, fields?: Fields): never {
    if (this.s.outputLevel >= Level.Fatal) this.emit(Level.Fatal, msg, fields, undefined, Scope.prototype.fatal);
    syncSinks();
    core.exit(FATAL_EXIT_CODE);
    throw new Error('log: exit function returned after a fatal message');
  }

  /** Logs at the given level (not fatal's exit); `none` logs nothing. `time` overrides the timestamp. */
  log(level: Level | LevelName, msg: unknown, fields?: Fields, time?: Date | number): void {
    const l = toLevel(level);
    if (l === Level.None || this.s.outputLevel < l) return;
    const t = time === undefined ? undefined : typeof time === 'number' ? time : time.getTime() * 1000;
    this.emit(l, msg, fields, t, Scope.prototype.log);
  }

  /**
   * For wrappers (like the package-level functions): logs like the level's method, but the caller location
   * and stack start at the code that called `above`. A fatal level exits like fatal().
   */
  logCalledFrom(above: Method, level: Level, msg: unknown, fields?: Fields): void {
    if (level !== Level.None && this.s.outputLevel >= level) this.emit(level, msg, fields, undefined, above);
    if (level === Level.Fatal) {
      syncSinks();
      core.exit(FATAL_EXIT_CODE);
      throw new Error('log: exit function returned after a fatal message');
    }
  }

  fatalEnabled(): boolean {
    return this.s.outputLevel >= Level.Fatal;
  }
  errorEnabled(): boolean {
    return this.s.outputLevel >= Level.Error;
  }
  warnEnabled(): boolean {
    return this.s.outputLevel >= Level.Warn;
  }
  infoEnabled(): boolean {
    return this.s.outputLevel >= Level.Info;
  }
  debugEnabled(): boolean {
    return this.s.outputLevel >= Level.Debug;
  }

  getOutputLevel(): Level {
    return this.s.outputLevel;
  }
  setOutputLevel(level: Level | LevelName): void {
    this.s.outputLevel = toLevel(level);
  }
  getStackTraceLevel(): Level {
    return this.s.stackTraceLevel;
  }
  setStackTraceLevel(level: Level | LevelName): void {
    this.s.stackTraceLevel = toLevel(level);
  }
  getLogCallers(): boolean {
    return this.s.logCallers;
  }
  setLogCallers(on: boolean): void {
    this.s.logCallers = on;
  }

  /**
   * A view of this scope that adds labels to every entry. Accepts an object (`{ pod: 'a', n: 1 }`) or
   * alternating keys and values like Istio (`'pod', 'a', 'n', 1`). Re-setting a key keeps its position.
   * Istio's errors are reproduced as a `WithLabels error` label: odd argument count or a non-string key.
   */
  withLabels(...kv: unknown[]): Scope {
    const out: Field[] = this.labels.slice();
    const set = (k: string, v: unknown): void => {
      const i = out.findIndex((f) => f[0] === k);
      if (i >= 0) out[i] = [k, v];
      else out.push([k, v]);
    };
    const only = kv[0];
    if (kv.length === 1 && typeof only === 'object' && only !== null && !Array.isArray(only)) {
      for (const [k, v] of Object.entries(only)) set(k, v);
      return new Scope(this.s, out);
    }
    if (kv.length % 2 !== 0) {
      set('WithLabels error', `even number of parameters required, got ${kv.length}`);
      return new Scope(this.s, out);
    }
    for (let i = 0; i < kv.length; i += 2) {
      const k = kv[i];
      if (typeof k !== 'string') {
        set('WithLabels error', `label name ${String(k)} must be a string, got ${typeof k} `);
        return new Scope(this.s, out);
      }
      set(k, kv[i + 1]);
    }
    return new Scope(this.s, out);
  }

  /** A view without the given labels. */
  withoutLabels(...keys: string[]): Scope {
    return new Scope(
      this.s,
      this.labels.filter((f) => !keys.includes(f[0])),
    );
  }

  /** The labels of this view, in order. */
  getLabels(): readonly Field[] {
    return this.labels;
  }

  private emit(level: Level, msg: unknown, fields: Fields | undefined, time: number | undefined, above: Method): void {
    const s = this.s;
    writeEntry({
      level,
      time: time ?? core.clock(),
      scope: s.emitName,
      caller: s.logCallers ? captureCaller(above, s.callerSkip) : undefined,
      msg: toMessage(msg),
      fields: mergeFields(this.labels, fields),
      // A stack trace is captured for entries at least as severe as the scope's stack-trace level.
      stack: s.stackTraceLevel >= level ? captureStack(above, s.callerSkip) : undefined,
    });
  }
}
