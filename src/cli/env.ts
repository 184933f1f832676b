// Typed environment variables (Istio's pkg/env: Bool, String, Int, Duration, Float), read from the
// program's env table. Unlike Istio, a malformed value is an error naming the variable, not a
// silent fallback to the default: a typo in a deployment should not change behaviour unnoticed.
import * as t from 'typanion';
import type { EnvType, EnvVarSpec, FlagSpec } from '../../commands/types';
import type { FlagValue } from './context';
import { goQuote, parseDurationMs } from '../lib/duration';
import { parseFlagValue, parseGoBool } from './values';

export class EnvError extends Error {}

const TYPE_WORD: Record<EnvType, string> = {
  B: 'a boolean (true/false)',
  S: 'a string',
  I: 'an integer',
  D: 'a duration (e.g. 100ms, 1m30s)',
  F: 'a floating-point number',
};

const isInteger = t.cascade(t.isNumber(), [t.isInteger()]);
const isFiniteNumber = t.cascade(t.isNumber(), [t.isInInclusiveRange(-Number.MAX_VALUE, Number.MAX_VALUE)]);

export type EnvValue = boolean | string | number;

export function parseEnvValue(spec: Pick<EnvVarSpec, 'name' | 'type'>, raw: string): EnvValue {
  try {
    switch (spec.type) {
      case 'B':
        return parseGoBool(raw);
      case 'S':
        return raw;
      case 'I': {
        const n = Number(raw.trim());
        if (raw.trim() === '' || !isInteger(n)) throw new Error(`strconv.Atoi: parsing ${goQuote(raw)}: invalid syntax`);
        return n;
      }
      case 'D':
        return parseDurationMs(raw);
      case 'F': {
        const n = Number(raw.trim());
        if (raw.trim() === '' || !isFiniteNumber(n))
          throw new Error(`strconv.ParseFloat: parsing ${goQuote(raw)}: invalid syntax`);
        return n;
      }
    }
  } catch (e) {
    throw new EnvError(
      `invalid value ${goQuote(raw)} for environment variable ${spec.name}: expected ${TYPE_WORD[spec.type]}: ${(e as Error).message}`,
    );
  }
}

/** Typed access to one program's environment variables. */
export class EnvTable {
  private readonly byName: ReadonlyMap<string, EnvVarSpec>;
  constructor(specs: readonly EnvVarSpec[], private readonly env: NodeJS.ProcessEnv) {
    this.byName = new Map(specs.map((s) => [s.name, s]));
  }

  /** Every set variable of the table that does not parse: checked before a command runs. */
  errors(): string[] {
    const out: string[] = [];
    for (const spec of this.byName.values()) {
      const raw = this.env[spec.name];
      if (raw === undefined) continue;
      try {
        parseEnvValue(spec, raw);
      } catch (e) {
        out.push((e as Error).message);
      }
    }
    return out;
  }

  private get(name: string, type: EnvType): EnvValue | undefined {
    const spec = this.byName.get(name);
    if (!spec) throw new Error(`environment variable ${name} is not in this program's table`);
    if (spec.type !== type) throw new Error(`environment variable ${name} is of type ${spec.type}, not ${type}`);
    const raw = this.env[name];
    if (raw !== undefined) return parseEnvValue(spec, raw);
    return spec.default === undefined ? undefined : parseEnvValue(spec, spec.default);
  }

  bool(name: string): boolean {
    return (this.get(name, 'B') as boolean | undefined) ?? false;
  }
  string(name: string): string {
    return (this.get(name, 'S') as string | undefined) ?? '';
  }
  int(name: string): number {
    return (this.get(name, 'I') as number | undefined) ?? 0;
  }
  /** Milliseconds. */
  duration(name: string): number {
    return (this.get(name, 'D') as number | undefined) ?? 0;
  }
  float(name: string): number {
    return (this.get(name, 'F') as number | undefined) ?? 0;
  }
  isSet(name: string): boolean {
    return this.env[name] !== undefined;
  }
}

/** A flag's fallback from its environment variable, parsed with the flag's own type. */
export function flagEnvFallback(flag: FlagSpec, env: NodeJS.ProcessEnv): { value: FlagValue; raw: string } | undefined {
  if (!flag.env) return undefined;
  const raw = env[flag.env];
  if (raw === undefined || raw === '') return undefined;
  try {
    return { value: parseFlagValue(flag.type, raw), raw };
  } catch (e) {
    throw new EnvError(
      `invalid value ${goQuote(raw)} for environment variable ${flag.env} (default of --${flag.name}, a ${flag.type}): ${(e as Error).message}`,
    );
  }
}
