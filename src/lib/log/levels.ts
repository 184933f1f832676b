// Log levels with the ordering of Istio's pkg/log: a scope's output level admits every message whose level
// is numerically at most its own, so `none` (0) admits nothing and `debug` (5) admits everything.

export const Level = {
  None: 0,
  Fatal: 1,
  Error: 2,
  Warn: 3,
  Info: 4,
  Debug: 5,
} as const;
export type Level = (typeof Level)[keyof typeof Level];

export type LevelName = 'none' | 'fatal' | 'error' | 'warn' | 'info' | 'debug';

/** Level names in the order Istio lists them in flag help: debug, info, warn, error, fatal, none. */
export const LEVEL_NAMES: readonly LevelName[] = ['debug', 'info', 'warn', 'error', 'fatal', 'none'];

const NAMES: readonly LevelName[] = ['none', 'fatal', 'error', 'warn', 'info', 'debug'];
const BY_NAME: ReadonlyMap<string, Level> = new Map(NAMES.map((n, i) => [n, i as Level]));

/** The level called `name` (exact, lower case, as Istio accepts), or undefined. */
export function levelFromName(name: string): Level | undefined {
  return BY_NAME.get(name);
}

export function levelName(level: Level): LevelName {
  return NAMES[level] as LevelName;
}

/** Accepts a Level or its name; throws on anything else. */
export function toLevel(level: Level | LevelName | string): Level {
  if (typeof level === 'number') {
    if (Number.isInteger(level) && level >= Level.None && level <= Level.Debug) return level;
    throw new Error(`invalid log level ${String(level)}`);
  }
  const l = BY_NAME.get(level);
  if (l === undefined) throw new Error(`invalid output level '${level}'`);
  return l;
}
