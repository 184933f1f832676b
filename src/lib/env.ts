// Typed environment variables (Istio's pkg/env: Bool, String, Int, Duration, Float), read through a declared
// table (the programs' tables in commands/env/ are the one home of each variable's name, type and default).
// Unlike Istio, a malformed value is an error naming the variable, not a silent fallback to the default: a typo
// in a deployment should not change behaviour unnoticed. Settings readers take the plain environment (EnvVars)
// and read it through the table of the program they serve.
import * as t from 'typanion';
import { goQuote, parseDurationMs } from './duration';
import { parseGoBool } from './gostrconv';

/** Environment variable types of Istio's env package: Bool, String, Int, Duration, Float. */
export type EnvType = 'B' | 'S' | 'I' | 'D' | 'F';

/** What reading needs of a declared variable (commands/types.ts's EnvVarSpec adds its help text). */
export interface EnvVar {
  name: string;
  type: EnvType;
  /** Default in Go syntax; undefined = none (the spec's dash). */
  default?: string;
}

/** The process environment as settings readers take it. */
export type EnvVars = Readonly<Record<string, string | undefined>>;

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

export function parseEnvValue(spec: Pick<EnvVar, 'name' | 'type'>, raw: string): EnvValue {
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
        if (raw.trim() === '' || !isFiniteNumber(n)) throw new Error(`strconv.ParseFloat: parsing ${goQuote(raw)}: invalid syntax`);
        return n;
      }
    }
  } catch (e) {
    throw new EnvError(
      `invalid value ${goQuote(raw)} for environment variable ${spec.name}: expected ${TYPE_WORD[spec.type]}: ${(e as Error).message}`,
    );
  }
}

/** What a reader of typed environment values needs of an EnvTable (tests hand in a plain object of these). */
export type EnvValues = Pick<EnvTable, 'string' | 'int' | 'bool' | 'duration' | 'float' | 'isSet'>;

/** Typed access to one program's environment variables. */
export class EnvTable {
  private readonly byName: ReadonlyMap<string, EnvVar>;
  constructor(
    specs: readonly EnvVar[],
    private readonly env: EnvVars,
  ) {
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
