// Pieces every program shares: the log flags (with each program's own scope list), `version`,
// `completion`, and merging of env tables. Declared once here, used by each program's table.
import type { CommandSpec, EnvVarSpec, FlagSpec } from './types';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'fatal', 'none'] as const;

/** Istio's log flags (pkg/log AttachCobraFlags) for a program with the given scopes. */
export function logFlags(scopes: readonly string[], opts: { vklog: boolean }): FlagSpec[] {
  const scopeList = `[${scopes.join(', ')}]`;
  const levelList = `[${LOG_LEVELS.join(', ')}]`;
  const flags: FlagSpec[] = [
    { name: 'log_as_json', type: 'bool', help: 'Whether to format output as JSON or in plain console-friendly format' },
    {
      name: 'log_caller',
      type: 'string',
      help: `Comma-separated list of scopes for which to include caller information, scopes can be any of ${scopeList}`,
    },
    {
      name: 'log_output_level',
      type: 'string',
      help:
        `Comma-separated minimum per-scope logging level of messages to output, in the form of ` +
        `<scope>:<level>,<scope>:<level>,... where scope can be one of ${scopeList} and level can be one of ${levelList}`,
    },
    {
      name: 'log_stacktrace_level',
      type: 'string',
      default: 'default:none',
      help:
        `Comma-separated minimum per-scope logging level at which stack traces are captured, in the form of ` +
        `<scope>:<level>,<scope:level>,... where scope can be one of ${scopeList} and level can be one of ${levelList}`,
    },
    {
      name: 'log_target',
      type: 'stringArray',
      default: '[stdout]',
      help: 'The set of paths where to output the log. This can be any path as well as the special values stdout and stderr',
    },
  ];
  if (opts.vklog) flags.push(VKLOG_FLAG);
  return flags;
}

export const VKLOG_FLAG: FlagSpec = {
  name: 'vklog',
  type: 'Level',
  default: '0',
  help: 'number for the log level verbosity. Like -v flag. ex: --vklog=9',
};

/** `version` as Istio's pkg/version cobra command has it. */
export function versionCommand(extraFlags: readonly FlagSpec[] = []): CommandSpec {
  return {
    name: 'version',
    short: 'Prints out build version information',
    run: 'version',
    flags: [
      { name: 'output', short: 'o', type: 'string', help: "One of 'yaml' or 'json'." },
      { name: 'short', short: 's', type: 'bool', help: 'Use --short=false to generate full version information' },
      ...extraFlags,
    ],
  };
}

const SHELLS: ReadonlyArray<[string, string]> = [
  ['bash', 'Generate the autocompletion script for bash'],
  ['fish', 'Generate the autocompletion script for fish'],
  ['powershell', 'Generate the autocompletion script for powershell'],
  ['zsh', 'Generate the autocompletion script for zsh'],
];

/** `completion bash|fish|powershell|zsh [--no-descriptions]`, cobra's default completion command. */
export function completionCommand(program: string): CommandSpec {
  return {
    name: 'completion',
    short: 'Generate the autocompletion script for the specified shell',
    long:
      `Generate the autocompletion script for ${program} for the specified shell.\n` +
      `See each sub-command's help for details on how to use the generated script.`,
    subcommands: SHELLS.map(([shell, short]) => ({
      name: shell,
      short,
      long: completionLong(program, shell),
      run: 'completion',
      flags: [{ name: 'no-descriptions', type: 'bool', help: 'disable completion descriptions' }],
    })),
  };
}

function completionLong(program: string, shell: string): string {
  switch (shell) {
    case 'bash':
      return (
        `Generate the autocompletion script for the bash shell.\n\n` +
        `To load completions in your current shell session:\n\n\tsource <(${program} completion bash)\n\n` +
        `To load completions for every new session, execute once:\n\n` +
        `#### Linux:\n\n\t${program} completion bash > /etc/bash_completion.d/${program}\n\n` +
        `You will need to start a new shell for this setup to take effect.\n`
      );
    case 'zsh':
      return (
        `Generate the autocompletion script for the zsh shell.\n\n` +
        `If shell completion is not already enabled in your environment you will need\n` +
        `to enable it.  You can execute the following once:\n\n\techo "autoload -U compinit; compinit" >> ~/.zshrc\n\n` +
        `To load completions in your current shell session:\n\n\tsource <(${program} completion zsh)\n\n` +
        `To load completions for every new session, execute once:\n\n\t${program} completion zsh > "\${fpath[1]}/_${program}"\n\n` +
        `You will need to start a new shell for this setup to take effect.\n`
      );
    case 'fish':
      return (
        `Generate the autocompletion script for the fish shell.\n\n` +
        `To load completions in your current shell session:\n\n\t${program} completion fish | source\n\n` +
        `To load completions for every new session, execute once:\n\n\t${program} completion fish > ~/.config/fish/completions/${program}.fish\n\n` +
        `You will need to start a new shell for this setup to take effect.\n`
      );
    default:
      return (
        `Generate the autocompletion script for powershell.\n\n` +
        `To load completions in your current shell session:\n\n\t${program} completion powershell | Out-String | Invoke-Expression\n\n` +
        `To load completions for every new session, add the output of the above command\nto your powershell profile.\n`
      );
  }
}

/** A program's variables: the shared ones, overridden by the program's own where names meet. */
export function mergeEnv(shared: readonly EnvVarSpec[], own: readonly EnvVarSpec[]): EnvVarSpec[] {
  const byName = new Map<string, EnvVarSpec>();
  for (const e of shared) byName.set(e.name, e);
  for (const e of own) byName.set(e.name, e);
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}
