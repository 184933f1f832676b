// The declarative shape of every program: commands, flags and environment variables as data.
// argv parsing (src/cli/argv.ts), --help, completion scripts and docs are all generated from these tables,
// so a flag is declared exactly once, here.
import type { EnvVar } from '../src/lib/env';

/** pflag value types we support, named as pflag's Value.Type() names them. */
export type FlagType =
  'bool' | 'string' | 'int' | 'int32' | 'uint16' | 'uint32' | 'float32' | 'duration' | 'stringSlice' | 'stringArray' | 'stringToString' | 'Level';

export interface FlagSpec {
  /** Long name without dashes, exactly as users type it (case matters: `grpcAddr`). */
  name: string;
  /** One-letter short form without the dash. */
  short?: string;
  type: FlagType;
  /**
   * Default as pflag renders it (Go syntax): `:15010`, `30s`, `[stdout]`, `[]`, `true`, `80`.
   * Omitted means the zero value of the type.
   */
  default?: string;
  /** Environment variable read when the flag is not given on the command line. */
  env?: string;
  help: string;
  /** Allowed values, checked after parsing (string and slice types). */
  enum?: readonly string[];
  /** Hidden from help and completion (still parsed). */
  hidden?: boolean;
  /** Deprecation text shown as `(DEPRECATED: …)` and warned about when used. */
  deprecated?: string;
}

export interface ArgSpec {
  name: string;
  /** `optional` args may be absent; `variadic` takes the rest (implies optional unless `required`). */
  optional?: boolean;
  variadic?: boolean;
  required?: boolean;
}

export interface CommandSpec {
  name: string;
  aliases?: readonly string[];
  /** One-line description (cobra's Short). */
  short: string;
  /** Longer description (cobra's Long). */
  long?: string;
  example?: string;
  args?: readonly ArgSpec[];
  /** Flags of this command only. */
  flags?: readonly FlagSpec[];
  /** Flags this command and all its subcommands accept (cobra's persistent flags). */
  persistentFlags?: readonly FlagSpec[];
  subcommands?: readonly CommandSpec[];
  /**
   * Key of the behaviour that runs this command, looked up lazily in src/main/handlers.ts.
   * A group without `run` prints its help.
   */
  run?: string;
  hidden?: boolean;
  deprecated?: string;
}

/** A declared environment variable: its name, type and default (what src/lib/env.ts reads) and its help. */
export interface EnvVarSpec extends EnvVar {
  help: string;
}

export type ProgramName = 'pilot-discovery' | 'pilot-agent' | 'install-cni' | 'meshctl';

export interface ProgramSpec {
  name: ProgramName;
  /** Word that selects the program after `mesh` (`mesh discovery …`). */
  word: string;
  /** Root command: its persistentFlags are every command's global flags. */
  root: CommandSpec;
  env: readonly EnvVarSpec[];
  /** Log scopes the `--log_*` flags accept; absent when the program has no log flags. */
  logScopes?: readonly string[];
  /** Exit code on any command error (Istio's daemons exit -1, i.e. 255; istioctl exits 1). */
  errorExitCode: number;
  /** Exit code for a command line that does not parse (istioctl: 64, sysexits' EX_USAGE); errorExitCode when unset. */
  usageExitCode?: number;
}
