// The command table of `meshctl`, the operator command-line utility (spec document 3).
//
// Conventions of this table:
// - Flag groups shared by several commands (XDS, PROXYCFG, the install family, …) are declared once below and
//   spread into the commands that take them; a flag that several commands declare identically is one constant.
// - Arg names are the usage tokens as the synopsis writes them (`<file>`, `<pod-name>`,
//   `[<type>/]<name>[.<namespace>]`); whether an arg may be absent or repeats is data (`optional`, `variadic`),
//   not part of the name.
// - Runnable commands name their behaviour `meshctl.<command path joined by dots>`; groups without `run` print
//   their help.
import type { CommandSpec, EnvVarSpec, FlagSpec, ProgramSpec } from './types';

// ---------------------------------------------------------------------------------------------------------------
// Shared texts

const EXPERIMENTAL_MSG = 'THIS COMMAND IS UNDER ACTIVE DEVELOPMENT AND NOT READY FOR PRODUCTION USE.';
/** The usage token of a pod or workload target (`deployment/productpage-v1.default`). */
const TARGET = '[<type>/]<name>[.<namespace>]';
const optionalTarget = { name: TARGET, optional: true } as const;

// ---------------------------------------------------------------------------------------------------------------
// Global flags (§4.1)

export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  {
    name: 'as',
    type: 'string',
    help: 'Username to impersonate for the operation. User could be a regular user or a service account in a namespace',
  },
  {
    name: 'as-group',
    type: 'stringArray',
    help: 'Group to impersonate for the operation, this flag can be repeated to specify multiple groups.',
  },
  { name: 'as-uid', type: 'string', help: 'UID to impersonate for the operation.' },
  { name: 'context', type: 'string', help: 'Orchestrator configuration context' },
  {
    name: 'meshNamespace',
    short: 'i',
    type: 'string',
    default: 'mesh-system',
    env: 'MESHCTL_MESHNAMESPACE',
    help: 'Mesh system namespace',
  },
  {
    name: 'orchclient-timeout',
    type: 'string',
    default: '15s',
    help: 'Orchestrator client timeout as a time.Duration string, defaults to 15 seconds.',
  },
  { name: 'orchconfig', short: 'c', type: 'string', env: 'ORCHCONFIG', help: 'Orchestrator configuration file' },
  { name: 'namespace', short: 'n', type: 'string', help: 'Orchestrator namespace' },
  {
    name: 'vklog',
    type: 'Level',
    default: '0',
    help: 'number for the log level verbosity. Like -v flag. ex: --vklog=9',
  },
];

// ---------------------------------------------------------------------------------------------------------------
// XDS group: reaching the discovery daemon directly or through the orchestrator

/** `--timeout 30s`, the XDS group's and `analyze`'s. */
const TIMEOUT: FlagSpec = {
  name: 'timeout',
  type: 'duration',
  default: '30s',
  help: 'The duration to wait before failing',
};

export const XDS_FLAGS: readonly FlagSpec[] = [
  {
    name: 'authority',
    type: 'string',
    env: 'MESHCTL_AUTHORITY',
    help: 'XDS Subject Alternative Name (for example meshd.mesh-system.svc)',
  },
  { name: 'cert-dir', type: 'string', env: 'MESHCTL_CERT_DIR', help: 'XDS Endpoint certificate directory' },
  {
    name: 'insecure',
    type: 'bool',
    env: 'MESHCTL_INSECURE',
    help: 'Skip server certificate and domain verification. (NOT SECURE!)',
  },
  {
    name: 'plaintext',
    type: 'bool',
    env: 'MESHCTL_PLAINTEXT',
    help: 'Use plain-text HTTP/2 when connecting to server (no TLS).',
  },
  TIMEOUT,
  { name: 'xds-address', type: 'string', env: 'MESHCTL_XDS_ADDRESS', help: 'XDS Endpoint' },
  { name: 'xds-label', type: 'string', help: 'Meshd pod label selector' },
  { name: 'xds-port', type: 'int', default: '15012', env: 'MESHCTL_XDS_PORT', help: 'Meshd pod port' },
];

// ---------------------------------------------------------------------------------------------------------------
// PROXYCFG group: reading a proxy's admin interface

/** `--output/-o json|yaml|short` defaulting to `short` (PROXYCFG's; also `admin log`'s). */
const SHORT_OUTPUT: FlagSpec = {
  name: 'output',
  short: 'o',
  type: 'string',
  default: 'short',
  enum: ['json', 'yaml', 'short'],
  help: 'Output format: one of json|yaml|short',
};

const PROXY_ADMIN_PORT: FlagSpec = {
  name: 'proxy-admin-port',
  type: 'int',
  default: '15000',
  help: 'Proxy admin port',
};

export const PROXYCFG_FLAGS: readonly FlagSpec[] = [SHORT_OUTPUT, PROXY_ADMIN_PORT];

// ---------------------------------------------------------------------------------------------------------------
// Small constructors and shared single flags

function revisionFlag(help = 'Control plane revision', def?: string): FlagSpec {
  return def === undefined
    ? { name: 'revision', short: 'r', type: 'string', help }
    : { name: 'revision', short: 'r', type: 'string', default: def, help };
}

/** `--revision/-r` with the usual help text. */
const REVISION = revisionFlag();
/** `--revision/-r` of the install family. */
const TARGET_REVISION = revisionFlag('Target control plane revision for the command.');

/** `--selector/-l` without a default (dashboards, proxy logs, proxy stats). */
const SELECTOR: FlagSpec = { name: 'selector', short: 'l', type: 'string', help: 'Label selector' };

function uiPortFlag(port: number): FlagSpec {
  return { name: 'ui-port', type: 'int', default: String(port), help: 'The component dashboard UI port.' };
}

function outputFlag(help: string, def?: string, values?: readonly string[]): FlagSpec {
  const flag: FlagSpec = { name: 'output', short: 'o', type: 'string', help };
  return { ...flag, ...(def === undefined ? {} : { default: def }), ...(values === undefined ? {} : { enum: values }) };
}

/** `--output/-o log|json|yaml` of `analyze` and `experimental precheck`. */
const MESSAGE_OUTPUT = outputFlag('Output format: one of [log json yaml]', 'log', ['log', 'json', 'yaml']);
/** `--output/-o yaml|json` of the version commands. */
// No enum: the version handler answers a bad value with Istio's own message (`--output must be 'yaml' or 'json'`).
const VERSION_OUTPUT = outputFlag("One of 'yaml' or 'json'.");

function shortVersionFlag(def: boolean): FlagSpec {
  const flag: FlagSpec = {
    name: 'short',
    short: 's',
    type: 'bool',
    help: 'Use --short=false to generate full version information',
  };
  return def ? { ...flag, default: 'true' } : flag;
}

const REMOTE: FlagSpec = {
  name: 'remote',
  type: 'bool',
  default: 'true',
  help: 'Use --remote=false to suppress control plane check',
};

const CTRLZ_PORT: FlagSpec = { name: 'ctrlz_port', type: 'int', default: '9876', help: 'ControlZ port' };

/** `--file/-f`: a proxy config dump read instead of asking a pod. */
const PROXY_DUMP_FILE: FlagSpec = { name: 'file', short: 'f', type: 'string', help: 'Proxy config dump JSON file' };

const DRY_RUN: FlagSpec = { name: 'dry-run', type: 'bool', help: 'Console/log output only, make no changes.' };
const FORCE: FlagSpec = { name: 'force', type: 'bool', help: 'Proceed even with validation errors.' };
const MANIFESTS: FlagSpec = {
  name: 'manifests',
  short: 'd',
  type: 'string',
  help: 'Specify a path to a directory of charts and profiles\n(e.g. ~/Downloads/mesh-1.26.0/manifests).',
};
const CHARTS: FlagSpec = { name: 'charts', type: 'string', hidden: true, help: 'Deprecated, use --manifests instead.' };
const SET: FlagSpec = {
  name: 'set',
  short: 's',
  type: 'stringArray',
  help:
    'Override a MeshOperator value, e.g. to choose a profile\n(--set profile=demo), enable or disable components ' +
    '(--set components.cni.enabled=true), or override mesh\nsettings (--set meshConfig.enableTracing=true). ' +
    'See the MeshOperator reference documentation for more info.',
};
const SKIP_CONFIRMATION: FlagSpec = {
  name: 'skip-confirmation',
  short: 'y',
  type: 'bool',
  help:
    'The skipConfirmation determines whether the user is prompted for confirmation.\n' +
    'If set to true, the user is not prompted and a Yes response is assumed in all cases.',
};
/** `--filename/-f`, repeatable MeshOperator files overlaid left to right. */
const OPERATOR_FILENAMES: FlagSpec = {
  name: 'filename',
  short: 'f',
  type: 'stringSlice',
  help:
    'Path to file containing MeshOperator custom resource\nThis flag can be specified multiple times to overlay ' +
    'multiple files. Multiple files are overlaid in left to right order.',
};

/** The install family without `--dry-run` (which `manifest` declares for all its subcommands). */
const INSTALL_FLAGS_BUT_DRY_RUN: readonly FlagSpec[] = [
  CHARTS,
  OPERATOR_FILENAMES,
  FORCE,
  MANIFESTS,
  {
    name: 'readiness-timeout',
    type: 'duration',
    default: '5m0s',
    help: 'Maximum time to wait for mesh resources in each component to be ready.',
  },
  TARGET_REVISION,
  SET,
  SKIP_CONFIRMATION,
  { name: 'verify', type: 'bool', help: 'Verify the mesh control plane after installation/in-place upgrade' },
];
/** `install`, `upgrade`. */
const INSTALL_FLAGS: readonly FlagSpec[] = [DRY_RUN, ...INSTALL_FLAGS_BUT_DRY_RUN];

// ---------------------------------------------------------------------------------------------------------------
// admin

const admin: CommandSpec = {
  name: 'admin',
  aliases: ['meshd'],
  short: 'Manage control plane (meshd) configuration',
  long: 'A group of commands used to manage meshd configuration',
  example: `  # Retrieve information about meshd configuration.
  meshctl admin log`,
  persistentFlags: [{ name: 'selector', short: 'l', type: 'string', default: 'app=meshd', help: 'label selector' }],
  subcommands: [
    {
      name: 'log',
      aliases: ['l'],
      short: 'Manage meshd logging.',
      long: 'Retrieve or update logging levels of meshd components.',
      example: `  # Retrieve information about meshd logging levels.
  meshctl admin log

  # Retrieve information about meshd logging levels on a specific control plane pod.
  meshctl admin l meshd-5c868d8bdd-pmvgg

  # Update levels of the specified loggers.
  meshctl admin log --level ads:debug,authorization:debug

  # Retrieve information about meshd logging levels for a specified revision.
  meshctl admin log --revision v1

  # Reset levels of all the loggers to default value (info).
  meshctl admin log --reset
`,
      args: [{ name: '<pod-name>', optional: true }],
      flags: [
        CTRLZ_PORT,
        {
          name: 'level',
          type: 'string',
          help:
            'Comma-separated list of output logging level for scopes in the format of <scope>:<level>' +
            '[,<scope>:<level>,...]. Possible values for <level>: none, error, warn, info, debug',
        },
        SHORT_OUTPUT,
        { name: 'reset', type: 'bool', help: 'Reset levels to default value. (info)' },
        REVISION,
        {
          name: 'stack-trace-level',
          type: 'string',
          help:
            'Comma-separated list of stack trace level for scopes in the format of <scope>:<stack-trace-level>' +
            '[,<scope>:<stack-trace-level>,...]. Possible values for <stack-trace-level>: none, error, warn, info, debug',
        },
      ],
      run: 'meshctl.admin.log',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// analyze

const SEVERITIES = ['Info', 'Warning', 'Error'] as const;

const analyze: CommandSpec = {
  name: 'analyze',
  short: 'Analyze mesh configuration and print validation messages',
  long:
    'Analyze mesh configuration and print validation messages.\n' +
    'For more information about message codes, refer to:\nhttps://mesh.io/v1.26/docs/reference/config/analysis',
  example: `  # Analyze the current live cluster
  meshctl analyze

  # Analyze the current live cluster for a specific revision
  meshctl analyze --revision 1-16

  # Analyze the current live cluster, simulating the effect of applying additional yaml files
  meshctl analyze a.yaml b.yaml my-app-config/

  # Analyze yaml files without connecting to a live cluster
  meshctl analyze --use-kube=false a.yaml b.yaml my-app-config/

  # Analyze the current live cluster and suppress PodMissingProxy for pod mypod in namespace 'testing'.
  meshctl analyze -S "IST0103=Pod mypod.testing"

  # Analyze the current live cluster and suppress PodMissingProxy for all pods in namespace 'testing',
  # and suppress MisplacedAnnotation on deployment foobar in namespace default.
  meshctl analyze -S "IST0103=Pod *.testing" -S "IST0107=Deployment foobar.default"

  # List available analyzers
  meshctl analyze -L

  # Run specific analyzer
  meshctl analyze --analyzer "gateway.ConflictingGatewayAnalyzer"`,
  args: [{ name: '<file>', variadic: true }],
  flags: [
    { name: 'all-namespaces', short: 'A', type: 'bool', help: 'Analyze all namespaces' },
    {
      name: 'analyzer',
      type: 'stringArray',
      help:
        'Select specific analyzers to run. Can be repeated. If not specified, all analyzers are run. ' +
        '(e.g. meshctl analyze --analyzer "gateway.ConflictingGatewayAnalyzer")',
    },
    { name: 'color', type: 'bool', default: 'true', help: "Default true.  Disable with '=false' or set $TERM to dumb" },
    {
      name: 'failure-threshold',
      type: 'string',
      default: 'Error',
      enum: SEVERITIES,
      help: 'The severity level of analysis at which to set a non-zero exit code. Valid values: [Info Warning Error]',
    },
    {
      name: 'ignore-unknown',
      type: 'bool',
      help: "Don't complain about un-parseable input documents, for cases where analyze should run only on " + 'orchestrator compliant inputs.',
    },
    {
      name: 'list-analyzers',
      short: 'L',
      type: 'bool',
      help: 'List the analyzers available to run. Suppresses normal execution.',
    },
    { name: 'meshConfigFile', type: 'string', help: 'Overrides the mesh config values to use for analysis.' },
    MESSAGE_OUTPUT,
    {
      name: 'output-threshold',
      type: 'string',
      default: 'Info',
      enum: SEVERITIES,
      help: 'The severity level of analysis at which to display messages. Valid values: [Info Warning Error]',
    },
    {
      name: 'recursive',
      short: 'R',
      type: 'bool',
      help: '[Removed: The recursive flag has been removed and is hardcoded to true] Process directory arguments recursively.',
    },
    {
      name: 'remote-contexts',
      type: 'stringArray',
      help:
        'Orchestrator configuration contexts for remote clusters to be used in multi-cluster analysis. Not to be ' +
        "confused with '--context'. If unspecified, contexts are read from the remote secrets in the cluster.",
    },
    revisionFlag('analyze a specific revision deployed.', 'default'),
    {
      name: 'suppress',
      short: 'S',
      type: 'stringArray',
      help:
        'Suppress reporting a message code on a specific resource. Values are supplied in the form ' +
        `<code>=<resource> (e.g. '--suppress "IST0102=DestinationRule primary-dr.default"'). Can be repeated. ` +
        `You can include the wildcard character '*' to support a partial match (e.g. '--suppress "IST0102=DestinationRule *.default" ).`,
    },
    TIMEOUT,
    {
      name: 'use-kube',
      short: 'k',
      type: 'bool',
      default: 'true',
      help: 'Use live orchestrator cluster for analysis. Set --use-kube=false to analyze files only.',
    },
    { name: 'verbose', short: 'v', type: 'bool', help: 'Enable verbose output' },
  ],
  run: 'meshctl.analyze',
};

// ---------------------------------------------------------------------------------------------------------------
// authz: the top-level name only points at `experimental authz`

const authzPointer: CommandSpec = {
  name: 'authz',
  short: '(authz is experimental. Use `meshctl experimental authz`)',
  run: 'meshctl.authz',
};

// ---------------------------------------------------------------------------------------------------------------
// bug-report

const BUG_REPORT_FLAGS: readonly FlagSpec[] = [
  { name: 'context', type: 'string', help: 'Name of the orchconfig Context to use.' },
  {
    name: 'critical-errs',
    type: 'stringSlice',
    help:
      'List of comma separated glob patterns to match against log error strings. If any pattern matches an error ' +
      'in the log, the logs is given the highest priority for archive inclusion.',
  },
  { name: 'dir', type: 'string', help: 'Set a specific directory for temporary artifact storage.' },
  { name: 'dry-run', type: 'bool', help: "Only log commands that would be run, don't fetch or write." },
  {
    name: 'duration',
    type: 'duration',
    help:
      'How far to go back in time from end-time for log entries to include in the archive. Default is infinity. ' +
      'If set, --start-time must be unset.',
  },
  {
    name: 'end-time',
    type: 'string',
    help: 'End time for the range of log entries to include in the archive. Default is now.',
  },
  {
    name: 'exclude',
    type: 'stringSlice',
    default: '["local-path-storage,orch-node-lease,orch-public,orch-system"]',
    help: "Spec for which pod's proxy logs to exclude from the archive, after the include spec is processed. " + 'See above for format and examples.',
  },
  {
    name: 'filename',
    short: 'f',
    type: 'string',
    help:
      'Path to a file containing configuration in YAML format. The file contents are applied over the default ' +
      'values and flag settings, with lists being replaced per JSON merge semantics.',
  },
  { name: 'full-secrets', type: 'bool', help: 'If set, secret contents are included in output.' },
  {
    name: 'ignore-errs',
    type: 'stringSlice',
    help:
      'List of comma separated glob patterns to match against log error strings. Any error matching these ' +
      'patterns is ignored when calculating the log importance heuristic.',
  },
  {
    name: 'include',
    type: 'stringSlice',
    help: "Spec for which pod's proxy logs to include in the archive. See above for format and examples.",
  },
  {
    name: 'mesh-namespace',
    type: 'string',
    default: 'mesh-system',
    help: 'Namespace where the mesh control plane is installed.',
  },
  { name: 'output-dir', type: 'string', help: 'Set a specific directory for output archive file.' },
  {
    name: 'rq-concurrency',
    type: 'int',
    help: 'Set the concurrency limit of requests to the orchestrator API server, defaults to 32.',
  },
  {
    name: 'start-time',
    type: 'string',
    help: 'Start time for the range of log entries to include in the archive. Default is the infinite past. ' + 'If set, --duration must be unset.',
  },
  {
    name: 'timeout',
    type: 'duration',
    default: '30m0s',
    help: 'Maximum amount of time to spend fetching logs. When timeout is reached only the logs captured so far are ' + 'saved to the archive.',
  },
];

const bugReport: CommandSpec = {
  name: 'bug-report',
  short: 'Cluster information and log capture support tool.',
  long: `bug-report selectively captures cluster information and logs into an archive to help diagnose problems.
Proxy logs can be filtered using:
  --include|--exclude ns1,ns2.../dep1,dep2.../pod1,pod2.../lbl1=val1,lbl2=val2.../ann1=val1,ann2=val2.../cntr1,cntr...
where ns=namespace, dep=deployment, lbl=label, ann=annotation, cntr=container

The filter spec is interpreted as 'must be in (ns1 OR ns2) AND (dep1 OR dep2) AND (cntr1 OR cntr2)...'
The log will be included only if the container matches at least one include filter and does not match any exclude filters.
All parts of the filter are optional and can be omitted e.g. ns1//pod1 filters only for namespace ns1 and pod1.
All names except label and annotation keys support '*' glob matching pattern.

e.g.
--include ns1,ns2 (only namespaces ns1 and ns2)
--include n*//p*/l=v* (pods with name beginning with 'p' in namespaces beginning with 'n' and having label 'l' with value beginning with 'v'.)`,
  persistentFlags: BUG_REPORT_FLAGS,
  run: 'meshctl.bug-report',
  subcommands: [
    {
      name: 'version',
      short: 'Prints out build version information',
      flags: [VERSION_OUTPUT, shortVersionFlag(false)],
      run: 'meshctl.bug-report.version',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// completion (cobra's generated command)

const NO_DESCRIPTIONS: FlagSpec = { name: 'no-descriptions', type: 'bool', help: 'disable completion descriptions' };

const completion: CommandSpec = {
  name: 'completion',
  short: 'Generate the autocompletion script for the specified shell',
  long: `Generate the autocompletion script for meshctl for the specified shell.
See each sub-command's help for details on how to use the generated script.
`,
  subcommands: [
    {
      name: 'bash',
      short: 'Generate the autocompletion script for bash',
      long: `Generate the autocompletion script for the bash shell.

This script depends on the 'bash-completion' package.
If it is not installed already, you can install it via your OS's package manager.

To load completions in your current shell session:

	source <(meshctl completion bash)

To load completions for every new session, execute once:

#### Linux:

	meshctl completion bash > /etc/bash_completion.d/meshctl

#### macOS:

	meshctl completion bash > $(brew --prefix)/etc/bash_completion.d/meshctl

You will need to start a new shell for this setup to take effect.
`,
      flags: [NO_DESCRIPTIONS],
      run: 'completion',
    },
    {
      name: 'fish',
      short: 'Generate the autocompletion script for fish',
      long: `Generate the autocompletion script for the fish shell.

To load completions in your current shell session:

	meshctl completion fish | source

To load completions for every new session, execute once:

	meshctl completion fish > ~/.config/fish/completions/meshctl.fish

You will need to start a new shell for this setup to take effect.
`,
      flags: [NO_DESCRIPTIONS],
      run: 'completion',
    },
    {
      name: 'powershell',
      short: 'Generate the autocompletion script for powershell',
      long: `Generate the autocompletion script for powershell.

To load completions in your current shell session:

	meshctl completion powershell | Out-String | Invoke-Expression

To load completions for every new session, add the output of the above command
to your powershell profile.
`,
      flags: [NO_DESCRIPTIONS],
      run: 'completion',
    },
    {
      name: 'zsh',
      short: 'Generate the autocompletion script for zsh',
      long: `Generate the autocompletion script for the zsh shell.

If shell completion is not already enabled in your environment you will need
to enable it.  You can execute the following once:

	echo "autoload -U compinit; compinit" >> ~/.zshrc

To load completions in your current shell session:

	source <(meshctl completion zsh)

To load completions for every new session, execute once:

#### Linux:

	meshctl completion zsh > "\${fpath[1]}/_meshctl"

#### macOS:

	meshctl completion zsh > $(brew --prefix)/share/zsh/site-functions/_meshctl

You will need to start a new shell for this setup to take effect.
`,
      flags: [NO_DESCRIPTIONS],
      run: 'completion',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// create-remote-secret

const createRemoteSecret: CommandSpec = {
  name: 'create-remote-secret',
  short: 'Create a secret with credentials to allow the mesh to access remote orchestrator apiservers',
  example: `  # Create a secret to access cluster c0's apiserver and install it in cluster c1.
  meshctl --orchconfig=c0.yaml create-remote-secret --name c0 \\
    | orchctl --orchconfig=c1.yaml apply -f -

  # Delete a secret that was previously installed in c1
  meshctl --orchconfig=c0.yaml create-remote-secret --name c0 \\
    | orchctl --orchconfig=c1.yaml delete -f -

  # Create a secret access a remote cluster with an auth plugin
  meshctl --orchconfig=c0.yaml create-remote-secret --name c0 --auth-type=plugin --auth-plugin-name=<cloud_a> \\
    | orchctl --orchconfig=c1.yaml apply -f -`,
  flags: [
    {
      name: 'auth-plugin-config',
      type: 'stringToString',
      help: 'Authenticator plug-in configuration. --auth-type=plugin must be set with this option',
    },
    {
      name: 'auth-plugin-name',
      type: 'string',
      help: 'Authenticator plug-in name. --auth-type=plugin must be set with this option',
    },
    {
      name: 'auth-type',
      type: 'string',
      default: 'bearer-token',
      enum: ['bearer-token', 'plugin'],
      help: 'Type of authentication to use. supported values = [bearer-token plugin]',
    },
    {
      name: 'create-service-account',
      type: 'bool',
      default: 'true',
      help: "If true, the service account needed for creating the remote secret will be created if it doesn't exist.",
    },
    MANIFESTS,
    {
      name: 'name',
      type: 'string',
      help:
        'Name of the local cluster whose credentials are stored in the secret. If a name is not specified the ' +
        // The orchestrator's own system namespace keeps its name (the API server is Kubernetes').
        "kube-system namespace's UUID of the local cluster will be used.",
    },
    {
      name: 'secret-name',
      type: 'string',
      help: 'The name of the specific secret to use from the service-account. Needed when there are multiple secrets ' + 'in the service account.',
    },
    { name: 'server', type: 'string', help: 'The address and port of the orchestrator API server.' },
    {
      name: 'service-account',
      type: 'string',
      help:
        "Create a secret with this service account's credentials. Default value is " +
        '"mesh-reader-service-account" if --type is "remote", "meshd" if --type is "config".',
    },
    {
      name: 'tls-server-name',
      type: 'string',
      help:
        'The server name that should be validated by the orchestrator client during establishing TLS connection ' +
        'with the orchestrator API server.',
    },
    {
      name: 'type',
      type: 'string',
      default: 'remote',
      enum: ['remote', 'config'],
      help: 'Type of the generated secret. supported values = [remote config]',
    },
  ],
  run: 'meshctl.create-remote-secret',
};

// ---------------------------------------------------------------------------------------------------------------
// dashboard

function addonDashboard(name: string, short: string, long: string, port: number): CommandSpec {
  return {
    name,
    short,
    long,
    example: `  meshctl dashboard ${name}

  # with short syntax
  meshctl dash ${name}
  meshctl d ${name}`,
    flags: [uiPortFlag(port)],
    run: `meshctl.dashboard.${name}`,
  };
}

const dashboard: CommandSpec = {
  name: 'dashboard',
  aliases: ['dash', 'd'],
  short: 'Access to mesh web UIs',
  persistentFlags: [
    {
      name: 'address',
      type: 'string',
      default: 'localhost',
      help:
        'Address to listen on. Only accepts IP address or localhost as a value. When localhost is supplied, ' +
        'meshctl will try to bind on both 127.0.0.1 and ::1 and will fail if neither of these address are ' +
        'available to bind.',
    },
    {
      name: 'browser',
      type: 'bool',
      default: 'true',
      help:
        'When --browser is supplied as false, meshctl dashboard will not open the browser. Default is true which ' +
        'means meshctl dashboard will always open a browser to view the dashboard.',
    },
    { name: 'port', short: 'p', type: 'int', help: 'Local port to listen to' },
  ],
  subcommands: [
    {
      name: 'controlz',
      short: 'Open ControlZ web UI',
      long: 'Open the ControlZ web UI for a pod in the mesh control plane',
      example: `  # Open ControlZ web UI for the meshd-123-456.mesh-system pod
  meshctl dashboard controlz meshd-123-456.mesh-system

  # Open ControlZ web UI for the meshd-56dd66799-jfdvs pod in a custom namespace
  meshctl dashboard controlz meshd-123-456 -n custom-ns

  # Open ControlZ web UI for any meshd pod
  meshctl dashboard controlz deployment/meshd.mesh-system

  # with short syntax
  meshctl dash controlz meshd-123-456.mesh-system
  meshctl d controlz meshd-123-456.mesh-system
`,
      args: [optionalTarget],
      flags: [CTRLZ_PORT, REVISION, SELECTOR],
      run: 'meshctl.dashboard.controlz',
    },
    addonDashboard('graphs', 'Open the graphs web UI', "Open the mesh's graph dashboard", 3000),
    {
      name: 'meshd-debug',
      short: 'Open the mesh debug web UI',
      long: 'Open the debug web UI for a mesh control plane pod',
      example: `  # Open the mesh debug web UI for the meshd-123-456.mesh-system pod
  meshctl dashboard meshd-debug meshd-123-456.mesh-system

  # Open the mesh debug web UI for the meshd-56dd66799-jfdvs pod in a custom namespace
  meshctl dashboard meshd-debug meshd-123-456 -n custom-ns

  # Open the mesh debug web UI for any meshd pod
  meshctl dashboard meshd-debug deployment/meshd.mesh-system

  # with short syntax
  meshctl dash meshd-debug meshd-123-456.mesh-system
  meshctl d meshd-debug meshd-123-456.mesh-system
`,
      args: [optionalTarget],
      flags: [REVISION, SELECTOR],
      run: 'meshctl.dashboard.meshd-debug',
    },
    addonDashboard('metrics-ui', 'Open the metrics web UI', "Open the mesh's metrics dashboard", 9090),
    {
      name: 'proxy',
      short: 'Open admin web UI for a proxy',
      long: 'Open the admin dashboard for a proxy, like sidecar proxy, node proxy and waypoint pods',
      example: `  # Open the proxy admin dashboard for the productpage-123-456.default pod
  meshctl dashboard proxy productpage-123-456.default

  # Open the proxy admin dashboard for one pod under a deployment
  meshctl dashboard proxy deployment/productpage-v1

  # Open the dashboard for the nodeproxy-bwh89.mesh-system pod
  meshctl dashboard proxy nodeproxy-bwh89.mesh-system

  # Open the dashboard for a waypoint pod
  meshctl dashboard proxy namespace-mesh-waypoint-869b56b69c-7khz4

  # with short syntax
  meshctl dash proxy nodeproxy-bwh89.mesh-system
  meshctl d proxy nodeproxy-bwh89.mesh-system
`,
      args: [optionalTarget],
      flags: [SELECTOR, uiPortFlag(15000)],
      run: 'meshctl.dashboard.proxy',
    },
    {
      name: 'proxy-legacy',
      short: 'Open the proxy admin web UI',
      long:
        'Open the proxy admin dashboard for a sidecar\n\n' +
        'Note: proxy-legacy command is deprecated and can be replaced with proxy command, ' +
        'e.g. `meshctl dashboard proxy --help`\n',
      example: `  # Open the proxy dashboard for the productpage-123-456.default pod
  meshctl dashboard proxy-legacy productpage-123-456.default

  # Open the proxy dashboard for one pod under a deployment
  meshctl dashboard proxy-legacy deployment/productpage-v1

  # with short syntax
  meshctl dash proxy-legacy productpage-123-456.default
  meshctl d proxy-legacy productpage-123-456.default
`,
      args: [optionalTarget],
      flags: [SELECTOR, uiPortFlag(15000)],
      run: 'meshctl.dashboard.proxy-legacy',
    },
    addonDashboard('topology-ui', 'Open the topology web UI', "Open the mesh's topology dashboard", 20001),
    addonDashboard('trace-ui-a', 'Open the first tracing web UI', "Open the mesh's first tracing dashboard", 16686),
    addonDashboard('trace-ui-b', 'Open the second tracing web UI', 'Open the mesh dashboard in the second tracing UI', 8080),
    addonDashboard('trace-ui-c', 'Open the third tracing web UI', "Open the mesh's third tracing dashboard", 9411),
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// experimental

const XDS_PROXY_STATUS_EXAMPLE = (cmd: string): string => `  # Retrieve sync status for all proxies in a mesh
  meshctl ${cmd}

  # Retrieve sync status for proxies in a specific namespace
  meshctl ${cmd} --namespace foo

  # Retrieve sync diff for a single proxy and meshd
  meshctl ${cmd} mesh-egressgateway-59585c5b9c-ndc59.mesh-system

  # SECURITY OPTIONS

  # Retrieve proxy status information directly from the control plane, using token security
  # (This is the usual way to get the proxy-status with an out-of-cluster control plane.)
  meshctl ${cmd} --xds-address mesh.cloudprovider.example.com:15012

  # Retrieve proxy status information via orchestrator config, using token security
  # (This is the usual way to get the proxy-status with an in-cluster control plane.)
  meshctl ${cmd}

  # Retrieve proxy status information directly from the control plane, using RSA certificate security
  # (Certificates must be obtained before this step.  The --cert-dir flag lets meshctl bypass the orchestrator API server.)
  meshctl ${cmd} --xds-address mesh.example.com:15012 --cert-dir ~/.mesh-certs

  # Retrieve proxy status information via XDS from specific control plane in multi-control plane in-cluster configuration
  # (Select a specific control plane in an in-cluster canary mesh configuration.)
  meshctl ${cmd} --xds-label mesh.io/rev=default
`;

function proxyStatusCommand(cmd: string, run: string): CommandSpec {
  return {
    name: 'proxy-status',
    aliases: ['ps'],
    short: 'Retrieves the synchronization status of each proxy in the mesh',
    long: '\nRetrieves last sent and last acknowledged xDS sync from meshd to each proxy in the mesh\n',
    example: XDS_PROXY_STATUS_EXAMPLE(cmd),
    args: [optionalTarget],
    flags: [...XDS_FLAGS, PROXY_DUMP_FILE, REVISION],
    run,
  };
}

const WORKLOAD_GROUP_NAME: FlagSpec = { name: 'name', type: 'string', help: 'The name of the workload group' };
/** Our no-cluster flags: the daemon's CA directory, and its mesh config in place of the `mesh` ConfigMap. */
const CA_DIR: FlagSpec = {
  name: 'ca-dir',
  type: 'string',
  help:
    "The discovery daemon's CA directory (./var/lib/mesh/ca under its working directory, or a plug-in CA's ROOT_CA_DIR): " +
    'sign with it instead of asking the cluster',
};
const NO_CLUSTER_MESH_CONFIG: FlagSpec = {
  name: 'meshConfigFile',
  type: 'string',
  help: "With --ca-dir: the daemon's mesh config file (its --meshConfig), read instead of the cluster's mesh ConfigMap",
};

const experimental: CommandSpec = {
  name: 'experimental',
  aliases: ['x'],
  short: 'Experimental commands that may be modified or deprecated',
  subcommands: [
    {
      name: 'authz',
      short: 'Inspect mesh AuthorizationPolicy',
      long: `\n${EXPERIMENTAL_MSG}`,
      subcommands: [
        {
          name: 'check',
          short: 'Check AuthorizationPolicy applied in the pod.',
          long: `Check prints the AuthorizationPolicy applied to a pod by directly checking
the proxy configuration of the pod. The command is especially useful for inspecting
the policy propagation from meshd to the proxy and the final AuthorizationPolicy list merged
from multiple sources (mesh-level, namespace-level and workload-level).

The command also supports reading from a standalone config dump file with flag -f.`,
          example: `  # Check AuthorizationPolicy applied to pod httpbin-88ddbcfdd-nt5jb:
  meshctl x authz check httpbin-88ddbcfdd-nt5jb

  # Check AuthorizationPolicy applied to one pod under a deployment
  meshctl x authz check deployment/productpage-v1

  # Check AuthorizationPolicy from proxy config dump file:
  meshctl x authz check -f httpbin_config_dump.json`,
          args: [optionalTarget],
          flags: [{ name: 'file', short: 'f', type: 'string', help: 'The json file with proxy config dump to be checked' }],
          run: 'meshctl.experimental.authz.check',
        },
      ],
    },
    {
      name: 'ca',
      short: "Credentials from the discovery daemon's CA directory, with no cluster",
      example: '  meshctl x ca client-cert --ca-dir var/lib/mesh/ca -o ~/.meshctl/certs',
      subcommands: [
        {
          name: 'client-cert',
          short: "Writes a client certificate signed by the daemon's CA, for meshctl's --cert-dir against the secure xDS port",
          long: `Writes key.pem, cert-chain.pem and root-cert.pem into the output directory: a certificate for
spiffe://<trust domain>/ns/<namespace>/sa/<serviceAccount> signed with the CA in --ca-dir (the daemon's
./var/lib/mesh/ca, or a plug-in CA's ROOT_CA_DIR), read directly, without the daemon. The directory is what
--cert-dir (or cert-dir in $HOME/.meshctl/config.yaml) takes: meshctl then speaks mutual TLS to :15012 as that
identity, which the daemon accepts for its debug types when the namespace is its own (mesh-system).`,
          example: `  # a meshctl identity in the daemon's namespace, used for proxy-status over :15012
  meshctl x ca client-cert --ca-dir /srv/meshd/var/lib/mesh/ca -o ~/.meshctl/certs
  meshctl proxy-status --xds-address 10.0.0.5:15012 --authority meshd.mesh-system.svc --cert-dir ~/.meshctl/certs`,
          flags: [
            CA_DIR,
            NO_CLUSTER_MESH_CONFIG,
            outputFlag('Output directory for key.pem, cert-chain.pem and root-cert.pem'),
            {
              name: 'serviceAccount',
              short: 's',
              type: 'string',
              default: 'default',
              help: "The service account of the identity (its namespace is --namespace, default the mesh namespace); meshctl's xDS requests claim the mesh namespace's default service account, as istioctl's do",
            },
            { name: 'ttl', type: 'duration', default: '24h0m0s', help: 'How long the certificate is valid' },
          ],
          run: 'meshctl.experimental.ca.client-cert',
        },
      ],
    },
    {
      name: 'injector',
      short: 'List sidecar injector and sidecar versions',
      long: 'List sidecar injector and sidecar versions',
      example: '  meshctl experimental injector list',
      subcommands: [
        {
          name: 'list',
          short: 'List sidecar injector and sidecar versions',
          long: 'List sidecar injector and sidecar versions',
          example: '  meshctl experimental injector list',
          run: 'meshctl.experimental.injector.list',
        },
      ],
    },
    {
      name: 'internal-debug',
      short: 'Retrieves the debug information of the mesh',
      long:
        '\nRetrieves the debug information from meshd or Pods in the mesh using the service account from the pod ' +
        'if --cert-dir is empty.\nBy default it will use the default serviceAccount from (mesh-system) namespace if ' +
        `the pod is not specified.\n\n\n${EXPERIMENTAL_MSG}`,
      example: `  # Retrieve sync status for all proxies in a mesh
  meshctl x internal-debug syncz

  # Retrieve sync diff for a single proxy and meshd
  meshctl x internal-debug syncz mesh-egressgateway-59585c5b9c-ndc59.mesh-system

  # SECURITY OPTIONS

  # Retrieve syncz debug information directly from the control plane, using token security
  # (This is the usual way to get the debug information with an out-of-cluster control plane.)
  meshctl x internal-debug syncz --xds-address mesh.cloudprovider.example.com:15012

  # Retrieve syncz debug information via orchestrator config, using token security
  # (This is the usual way to get the debug information with an in-cluster control plane.)
  meshctl x internal-debug syncz

  # Retrieve syncz debug information directly from the control plane, using RSA certificate security
  # (Certificates must be obtained before this step.  The --cert-dir flag lets meshctl bypass the orchestrator API server.)
  meshctl x internal-debug syncz --xds-address mesh.example.com:15012 --cert-dir ~/.mesh-certs

  # Retrieve syncz information via XDS from specific control plane in multi-control plane in-cluster configuration
  # (Select a specific control plane in an in-cluster canary mesh configuration.)
  meshctl x internal-debug syncz --xds-label mesh.io/rev=default
`,
      // The first word names the debug endpoint (`syncz`); the behaviour reports a missing one itself.
      args: [{ name: '<debug-type>', optional: true }, optionalTarget],
      flags: [
        ...XDS_FLAGS,
        {
          name: 'all',
          type: 'bool',
          help: 'Send the same request to all instances of meshd. Only applicable for in-cluster deployment.',
        },
        REVISION,
      ],
      run: 'meshctl.experimental.internal-debug',
    },
    {
      name: 'metrics',
      aliases: ['m'],
      short: 'Prints the metrics for the specified workload(s) when running in the orchestrator.',
      long: `
Prints the metrics for the specified service(s) when running in the orchestrator.

This command finds a metrics server pod running in the specified mesh system
namespace. It then executes a series of queries per requested workload to
find the following top-level workload metrics: total requests per second,
error rate, and request latency at p50, p90, and p99 percentiles. The
query results are printed to the console, organized by workload name.

All metrics returned are from server-side reports. This means that latencies
and error rates are from the perspective of the service itself and not of an
individual client (or aggregate set of clients). Rates and latencies are
calculated over a time interval of 1 minute.
`,
      example: `  # Retrieve workload metrics for productpage-v1 workload
  meshctl experimental metrics productpage-v1

  # Retrieve workload metrics for various services with custom duration
  meshctl experimental metrics productpage-v1 -d 2m

  # Retrieve workload metrics for various services in the different namespaces
  meshctl experimental metrics productpage-v1.foo reviews-v1.bar ratings-v1.baz`,
      args: [{ name: '<workload name>', variadic: true, required: true }],
      flags: [
        {
          name: 'duration',
          short: 'd',
          type: 'duration',
          default: '1m0s',
          help: 'Duration of query metrics, default value is 1m.',
        },
      ],
      run: 'meshctl.experimental.metrics',
    },
    {
      name: 'precheck',
      short: 'Check whether the mesh can safely be installed or upgraded',
      long: 'precheck inspects an orchestrator cluster for mesh install and upgrade requirements.',
      example: `  # Verify that the mesh can be installed or upgraded
  meshctl x precheck

  # Check only a single namespace
  meshctl x precheck --namespace default

  # Check for behavioral changes since a specific version
  meshctl x precheck --from-version 1.10`,
      flags: [
        { name: 'from-version', short: 'f', type: 'string', help: 'check changes since the provided version' },
        MESSAGE_OUTPUT,
        {
          name: 'output-threshold',
          type: 'string',
          default: 'Warning',
          enum: SEVERITIES,
          help: 'The severity level of precheck at which to display messages. Valid values: [Info Warning Error]',
        },
        REVISION,
        { name: 'skip-controlplane', type: 'bool', help: 'skip checking the control plane' },
      ],
      run: 'meshctl.experimental.precheck',
    },
    {
      name: 'proxy-stats',
      aliases: ['es'],
      short: 'Retrieves proxy metrics in the specified pod',
      long: 'Retrieve proxy emitted metrics for the specified pod.',
      example: `  # Retrieve proxy emitted metrics for the specified pod.
  meshctl experimental proxy-stats <pod-name[.namespace]>

  # Retrieve proxy server metrics in prometheus format
  meshctl experimental proxy-stats <pod-name[.namespace]> --output prom

  # Retrieve proxy server metrics in prometheus format with custom proxy admin port
  meshctl experimental proxy-stats <pod-name[.namespace]> --output prom --proxy-admin-port 15000

  # Retrieve proxy server metrics in prometheus format with merged application metrics
  meshctl experimental proxy-stats <pod-name[.namespace]> --output prom-merged

  # Retrieve proxy cluster metrics
  meshctl experimental proxy-stats <pod-name[.namespace]> --type clusters
`,
      args: [optionalTarget],
      flags: [
        outputFlag('Output format: one of json|yaml|short|prom|prom-merged', 'short', ['json', 'yaml', 'short', 'prom', 'prom-merged']),
        PROXY_ADMIN_PORT,
        SELECTOR,
        // No enum: the behaviour also takes `cluster` and reports unknown types itself.
        {
          name: 'type',
          short: 't',
          type: 'string',
          default: 'server',
          help: 'Where to grab the stats: one of server|clusters',
        },
      ],
      run: 'meshctl.experimental.proxy-stats',
    },
    proxyStatusCommand('x proxy-status', 'meshctl.experimental.proxy-status'),
    {
      name: 'version',
      short: 'Prints out build version information',
      example: `  # Retrieve version information directly from the control plane, using token security
  # (This is the usual way to get the control plane version with an out-of-cluster control plane.)
  meshctl x version --xds-address mesh.cloudprovider.example.com:15012

  # Retrieve version information via orchestrator config, using token security
  # (This is the usual way to get the control plane version with an in-cluster control plane.)
  meshctl x version

  # Retrieve version information directly from the control plane, using RSA certificate security
  # (Certificates must be obtained before this step.  The --cert-dir flag lets meshctl bypass the orchestrator API server.)
  meshctl x version --xds-address mesh.example.com:15012 --cert-dir ~/.mesh-certs

  # Retrieve version information via XDS from specific control plane in multi-control plane in-cluster configuration
  # (Select a specific control plane in an in-cluster canary mesh configuration.)
  meshctl x version --xds-label mesh.io/rev=default
`,
      flags: [...XDS_FLAGS, VERSION_OUTPUT, REMOTE, REVISION, shortVersionFlag(true)],
      run: 'meshctl.experimental.version',
    },
    {
      name: 'workload',
      short: 'Commands to assist in configuring and deploying workloads running on VMs and other non-orchestrator environments',
      example: `  # workload group yaml generation
  meshctl x workload group create

  # workload entry configuration generation
  meshctl x workload entry configure`,
      subcommands: [
        {
          name: 'entry',
          short: 'Commands dealing with WorkloadEntry resources',
          example: '  meshctl x workload entry configure -f workloadgroup.yaml -o outputDir',
          subcommands: [
            {
              name: 'configure',
              short: 'Generates all the required configuration files for a workload instance running on a VM or ' + 'non-orchestrator environment',
              long: `Generates all the required configuration files for workload instance on a VM or non-orchestrator environment from a WorkloadGroup artifact.
This includes a MeshConfig resource, the cluster.env file, and necessary certificates and security tokens.
Configure requires either the WorkloadGroup artifact path or its location on the API server.`,
              example: `  # configure example using a local WorkloadGroup artifact
  meshctl x workload entry configure -f workloadgroup.yaml -o config

  # configure example using the API server
  meshctl x workload entry configure --name foo --namespace bar -o config`,
              flags: [
                {
                  name: 'autoregister',
                  type: 'bool',
                  help: 'Creates a WorkloadEntry upon connection to meshd (if enabled in the discovery daemon).',
                },
                CA_DIR,
                {
                  name: 'capture-dns',
                  type: 'bool',
                  default: 'true',
                  help: 'Enables the capture of outgoing DNS packets on port 53, redirecting to the mesh agent',
                },
                { name: 'clusterID', type: 'string', help: 'The ID used to identify the cluster' },
                { name: 'externalIP', type: 'string', help: 'External IP address of the workload' },
                {
                  name: 'file',
                  short: 'f',
                  type: 'string',
                  help: 'filename of the WorkloadGroup artifact. Leave this field empty if using the API server',
                },
                { name: 'ingressIP', type: 'string', help: 'IP address of the ingress gateway' },
                {
                  name: 'ingressService',
                  type: 'string',
                  default: 'mesh-eastwestgateway',
                  help:
                    'Name of the Service to be used as the ingress gateway, in the format <service>.<namespace>. ' +
                    'If no namespace is provided, the default mesh-system namespace will be used.',
                },
                { name: 'internalIP', type: 'string', help: 'Internal IP address of the workload' },
                NO_CLUSTER_MESH_CONFIG,
                WORKLOAD_GROUP_NAME,
                {
                  name: 'namespace',
                  short: 'n',
                  type: 'string',
                  help: 'The namespace that the workload instances belong to',
                },
                outputFlag('Output directory for generated files'),
                REVISION,
                {
                  name: 'tokenDuration',
                  type: 'int',
                  default: '3600',
                  help: 'The token duration in seconds (default: 1 hour)',
                },
              ],
              run: 'meshctl.experimental.workload.entry.configure',
            },
          ],
        },
        {
          name: 'group',
          short: 'Commands dealing with WorkloadGroup resources',
          example: '  meshctl x workload group create --name foo --namespace bar --labels app=foobar',
          subcommands: [
            {
              name: 'create',
              short: 'Creates a WorkloadGroup resource that provides a template for associated WorkloadEntries',
              long: `Creates a WorkloadGroup resource that provides a template for associated WorkloadEntries.
The default output is serialized YAML, which can be piped into 'orchctl apply -f -' to send the artifact to the API Server.`,
              example:
                '  meshctl x workload group create --name foo --namespace bar --labels app=foo,bar=baz ' +
                '--ports grpc=3550,http=8080 --annotations annotation=foobar --serviceAccount sa',
              flags: [
                {
                  name: 'annotations',
                  short: 'a',
                  type: 'stringSlice',
                  help: 'The annotations to apply to the workload instances',
                },
                {
                  name: 'labels',
                  short: 'l',
                  type: 'stringSlice',
                  help: 'The labels to apply to the workload instances; e.g. -l env=prod,vers=2',
                },
                {
                  name: 'locality',
                  type: 'string',
                  help: 'The locality of the workload instances, in the form <region>/<zone>/<subzone>',
                },
                WORKLOAD_GROUP_NAME,
                {
                  name: 'namespace',
                  short: 'n',
                  type: 'string',
                  help: 'The namespace that the workload instances will belong to',
                },
                {
                  name: 'network',
                  type: 'string',
                  help: 'Network enables the mesh to group endpoints resident in the same L3 domain/network.',
                },
                {
                  name: 'ports',
                  short: 'p',
                  type: 'stringSlice',
                  help: 'The incoming ports exposed by the workload instance',
                },
                {
                  name: 'serviceAccount',
                  short: 's',
                  type: 'string',
                  default: 'default',
                  help: 'The service identity to associate with the workload instances',
                },
                {
                  name: 'weight',
                  short: 'w',
                  type: 'uint32',
                  help: 'The load balancing weight of the workload instances',
                },
              ],
              run: 'meshctl.experimental.workload.group.create',
            },
          ],
        },
      ],
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// install, upgrade, manifest

const INSTALL_EXAMPLE = (cmd: string): string => `  # Apply a default mesh installation
  meshctl ${cmd}

  # Enable Tracing
  meshctl ${cmd} --set meshConfig.enableTracing=true

  # Generate the demo profile and don't wait for confirmation
  meshctl ${cmd} --set profile=demo --skip-confirmation

  # To override a setting that includes dots, escape them with a backslash (\\).  Your shell may require enclosing quotes.
  meshctl ${cmd} --set "values.sidecarInjectorWebhook.injectedAnnotations.container\\.apparmor\\.security\\.beta\\.orch\\.io/mesh-proxy=runtime/default"
`;

const INSTALL_SHORT = 'Applies a mesh manifest, installing or reconfiguring the mesh on a cluster.';
const INSTALL_LONG = 'The install command generates a mesh install manifest and applies it to a cluster.';

const install: CommandSpec = {
  name: 'install',
  aliases: ['apply'],
  short: INSTALL_SHORT,
  long: INSTALL_LONG,
  example: INSTALL_EXAMPLE('install'),
  flags: INSTALL_FLAGS,
  run: 'meshctl.install',
};

const upgrade: CommandSpec = {
  name: 'upgrade',
  short: 'Upgrade the mesh control plane in-place',
  long: 'The upgrade command is an alias for the install command',
  flags: INSTALL_FLAGS,
  run: 'meshctl.upgrade',
};

const manifest: CommandSpec = {
  name: 'manifest',
  short: 'Commands related to mesh manifests',
  long: 'The manifest command generates and diffs mesh manifests.',
  persistentFlags: [DRY_RUN],
  subcommands: [
    {
      name: 'generate',
      short: 'Generates a mesh install manifest',
      long: 'The generate subcommand generates a mesh install manifest and outputs to the console by default.',
      example: `  # Generate a default mesh installation
  meshctl manifest generate

  # Enable Tracing
  meshctl manifest generate --set meshConfig.enableTracing=true

  # Generate the demo profile
  meshctl manifest generate --set profile=demo

  # To override a setting that includes dots, escape them with a backslash (\\).  Your shell may require enclosing quotes.
  meshctl manifest generate --set "values.sidecarInjectorWebhook.injectedAnnotations.container\\.apparmor\\.security\\.beta\\.orch\\.io/mesh-proxy=runtime/default"
`,
      flags: [
        CHARTS,
        {
          name: 'cluster-specific',
          type: 'bool',
          help: 'If enabled, the current cluster will be checked for cluster-specific setting detection.',
        },
        OPERATOR_FILENAMES,
        FORCE,
        MANIFESTS,
        TARGET_REVISION,
        SET,
      ],
      run: 'meshctl.manifest.generate',
    },
    {
      name: 'install',
      aliases: ['apply'],
      short: INSTALL_SHORT,
      long: INSTALL_LONG,
      example: INSTALL_EXAMPLE('install'),
      flags: INSTALL_FLAGS_BUT_DRY_RUN,
      run: 'meshctl.manifest.install',
    },
    {
      name: 'translate',
      short: 'Translates a mesh install manifest to chart values',
      long: 'The translate subcommand translates a mesh install manifest and outputs to the console by default.',
      example: `  # Translate a MeshOperator yaml file into chart values
  meshctl manifest translate -f mesh.yaml

  # Translate a default mesh installation
  meshctl manifest translate

  # Enable Tracing
  meshctl manifest translate --set meshConfig.enableTracing=true

  # Translate the demo profile
  meshctl manifest translate --set profile=demo

  # To override a setting that includes dots, escape them with a backslash (\\).  Your shell may require enclosing quotes.
  meshctl manifest translate --set "values.sidecarInjectorWebhook.injectedAnnotations.container\\.apparmor\\.security\\.beta\\.orch\\.io/mesh-proxy=runtime/default"
`,
      flags: [OPERATOR_FILENAMES, MANIFESTS, outputFlag('where to put translated outputs'), TARGET_REVISION, SET],
      run: 'meshctl.manifest.translate',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// nodeproxy-config

const NODE: FlagSpec = { name: 'node', type: 'string', help: 'Filter workloads by node field' };
const NODEPROXY_COMMON: readonly FlagSpec[] = [
  ...PROXYCFG_FLAGS,
  { name: 'file', short: 'f', type: 'string', help: 'Node proxy config dump JSON file' },
  NODE,
];
const WORKLOAD_NAMESPACE: FlagSpec = {
  name: 'workload-namespace',
  type: 'string',
  help: 'Filter workloads by namespace field',
};
/** `--level` of the proxy and node proxy log commands. */
function proxyLogLevelFlag(listCommand: string, extra: string): FlagSpec {
  return {
    name: 'level',
    type: 'string',
    help:
      'Comma-separated minimum per-logger level of messages to output, in the form of ' +
      '[<logger>:]<level>,[<logger>:]<level>,... or <level> to change all active loggers, where logger components ' +
      `can be listed by running "${listCommand} <pod-name[.namespace]>"${extra}, and level can be one of ` +
      '[trace, debug, info, warning, error, critical, off]',
  };
}
const RESET_TO_WARNING: FlagSpec = {
  name: 'reset',
  short: 'r',
  type: 'bool',
  help: 'Reset levels to default value (warning).',
};

const nodeproxyConfig: CommandSpec = {
  name: 'nodeproxy-config',
  short: 'Update or retrieve current node proxy configuration.',
  long: 'A group of commands used to update or retrieve node proxy configuration from a node proxy instance.',
  example: `  # Retrieve summary about workload configuration
  meshctl nodeproxy-config workload

  # Retrieve summary about certificates
  meshctl nodeproxy-config certificates`,
  subcommands: [
    {
      name: 'all',
      short: 'Retrieves all configuration for the specified node proxy pod.',
      long: 'Retrieve information about all configuration for the node proxy instance.',
      example: `  # Retrieve summary about all configuration for a randomly chosen node proxy.
  meshctl nodeproxy-config all

  # Retrieve full configuration dump of workloads for a given node proxy instance.
  meshctl nodeproxy-config all <nodeproxy-name[.namespace]> -o json
`,
      args: [optionalTarget],
      flags: NODEPROXY_COMMON,
      run: 'meshctl.nodeproxy-config.all',
    },
    {
      name: 'certificate',
      aliases: ['certificates', 'certs', 'cert'],
      short: 'Retrieves certificate for the specified node proxy pod.',
      long: 'Retrieve information about certificates for the node proxy instance.',
      example: `  # Retrieve summary about workload configuration for a randomly chosen node proxy.
  meshctl nodeproxy-config certificates

  # Retrieve full certificate dump of workloads for a given node proxy instance.
  meshctl nodeproxy-config certificates <nodeproxy-name[.namespace]> -o json
`,
      args: [optionalTarget],
      flags: NODEPROXY_COMMON,
      run: 'meshctl.nodeproxy-config.certificate',
    },
    {
      name: 'connections',
      aliases: ['cons'],
      short: 'Retrieves connections for the specified node proxy pod.',
      long: 'Retrieve information about connections for the node proxy instance.',
      example: `  # Retrieve summary about connections for the node proxy on a specific node.
  meshctl nodeproxy-config connections --node ambient-worker

  # Retrieve summary of connections for a given node proxy instance.
  meshctl nodeproxy-config connections <nodeproxy-name[.namespace]>
`,
      args: [optionalTarget],
      flags: [
        ...NODEPROXY_COMMON,
        {
          name: 'direction',
          type: 'string',
          enum: ['inbound', 'outbound'],
          help: 'Filter workloads by direction (inbound or outbound)',
        },
        { name: 'raw', type: 'bool', help: 'If set, show IP addresses instead of names' },
        WORKLOAD_NAMESPACE,
      ],
      run: 'meshctl.nodeproxy-config.connections',
    },
    {
      name: 'log',
      aliases: ['o'],
      short: 'Retrieves logging levels of the node proxy instance in the specified pod.',
      long: 'Retrieve information about logging levels of the node proxy instance in the specified pod, and update optionally.',
      example: `  # Retrieve information about logging levels from all node proxy pods
  meshctl nodeproxy-config log

  # Update levels of the all loggers for a specific node proxy pod
  meshctl nodeproxy-config log <pod-name[.namespace]> --level off

  # Update levels of the specified loggers for all node proxy pods
  meshctl nodeproxy-config log --level access:debug,info

  # Reset levels of all the loggers to default value (warning) for a specific node proxy pod.
  meshctl nodeproxy-config log <pod-name[.namespace]> -r
`,
      args: [optionalTarget],
      flags: [...NODEPROXY_COMMON, proxyLogLevelFlag('meshctl nodeproxy-config log', ''), RESET_TO_WARNING],
      run: 'meshctl.nodeproxy-config.log',
    },
    {
      name: 'policy',
      aliases: ['policies', 'p', 'pol'],
      short: 'Retrieves policies for the specified node proxy pod.',
      long: 'Retrieve information about policies for the node proxy instance.',
      example: `  # Retrieve summary about policy configuration for a randomly chosen node proxy.
  meshctl nodeproxy-config policies

  # Retrieve full policy dump of workloads for a given node proxy instance.
  meshctl nodeproxy-config policies <nodeproxy-name[.namespace]> -o json
`,
      args: [optionalTarget],
      flags: [...NODEPROXY_COMMON, { name: 'policy-namespace', type: 'string', help: 'Filter policies by namespace field' }],
      run: 'meshctl.nodeproxy-config.policy',
    },
    {
      name: 'service',
      aliases: ['services', 's', 'svc'],
      short: 'Retrieves services for the specified node proxy pod.',
      long: 'Retrieve information about services for the node proxy instance.',
      example: `  # Retrieve summary about services configuration for a randomly chosen node proxy.
  meshctl nodeproxy-config services

  # Retrieve full services dump of workloads for a given node proxy instance.
  meshctl nodeproxy-config services <nodeproxy-name[.namespace]> -o json
`,
      args: [optionalTarget],
      flags: [...NODEPROXY_COMMON, { name: 'service-namespace', type: 'string', help: 'Filter services by namespace field' }],
      run: 'meshctl.nodeproxy-config.service',
    },
    {
      name: 'workload',
      aliases: ['w', 'workloads'],
      short: 'Retrieves workload configuration for the specified node proxy pod.',
      long: 'Retrieve information about workload configuration for the node proxy instance.',
      example: `  # Retrieve summary about workload configuration for a randomly chosen node proxy.
  meshctl nodeproxy-config workload

  # Retrieve summary of workloads on node XXXX for a given node proxy instance.
  meshctl nodeproxy-config workload <nodeproxy-name[.namespace]> --node ambient-worker

  # Retrieve full workload dump of workloads with address XXXX for a given node proxy instance.
  meshctl nodeproxy-config workload <nodeproxy-name[.namespace]> --address 0.0.0.0 -o json

  # Retrieve node proxy config dump separately and inspect from file.
  orchctl exec -it $NODEPROXY -n mesh-system -- curl localhost:15000/config_dump > nodeproxy-config.json
  meshctl nodeproxy-config workloads --file nodeproxy-config.json

  # Retrieve workload summary for a specific namespace
  meshctl nodeproxy-config workloads <nodeproxy-name[.namespace]> --workload-namespace foo
`,
      args: [optionalTarget],
      flags: [
        ...NODEPROXY_COMMON,
        { name: 'address', type: 'string', help: 'Filter workloads by address field' },
        WORKLOAD_NAMESPACE,
        { name: 'workload-node', type: 'string', help: 'Filter workloads by node' },
      ],
      run: 'meshctl.nodeproxy-config.workload',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// options

const options: CommandSpec = {
  name: 'options',
  short: 'Displays meshctl global options',
  run: 'meshctl.options',
};

// ---------------------------------------------------------------------------------------------------------------
// orch-inject

const orchInject: CommandSpec = {
  name: 'orch-inject',
  short: 'Inject mesh sidecar into orchestrator pod resources',
  long: `
orch-inject manually injects the mesh sidecar into orchestrator
workloads. Unsupported resources are left unmodified so it is safe to
run orch-inject over a single file that contains multiple Service,
ConfigMap, Deployment, etc. definitions for a complex application. When in
doubt re-run meshctl orch-inject on deployments to get the most up-to-date changes.

It's best to do orch-inject when the resource is initially created.
`,
  example: `  # Update resources on the fly before applying.
  orchctl apply -f <(meshctl orch-inject -f <resource.yaml>)

  # Create a persistent version of the deployment with the mesh sidecar injected.
  meshctl orch-inject -f deployment.yaml -o deployment-injected.yaml

  # Update an existing deployment.
  orchctl get deployment -o yaml | meshctl orch-inject -f - | orchctl apply -f -

  # Capture cluster configuration for later use with orch-inject
  orchctl -n mesh-system get cm mesh-sidecar-injector  -o jsonpath="{.data.config}" > /tmp/inj-template.tmpl
  orchctl -n mesh-system get cm mesh -o jsonpath="{.data.mesh}" > /tmp/mesh.yaml
  orchctl -n mesh-system get cm mesh-sidecar-injector -o jsonpath="{.data.values}" > /tmp/values.json

  # Use orch-inject based on captured configuration
  meshctl orch-inject -f samples/bookinfo/platform/orch/bookinfo.yaml \\
    --injectConfigFile /tmp/inj-template.tmpl \\
    --meshConfigFile /tmp/mesh.yaml \\
    --valuesFile /tmp/values.json
`,
  flags: [
    ...XDS_FLAGS,
    { name: 'filename', short: 'f', type: 'string', help: 'Input orchestrator resource filename' },
    {
      name: 'injectConfigFile',
      type: 'string',
      help: 'Injection configuration filename. Cannot be used with --injectConfigMapName',
    },
    {
      name: 'injectConfigMapName',
      type: 'string',
      default: 'mesh-sidecar-injector',
      hidden: true,
      help: 'ConfigMap name for mesh sidecar injection, key should be "config".',
    },
    {
      name: 'meshConfigFile',
      type: 'string',
      help: 'Mesh configuration filename. Takes precedence over --meshConfigMapName if set',
    },
    {
      name: 'meshConfigMapName',
      type: 'string',
      default: 'mesh',
      help: 'ConfigMap name for mesh configuration, key should be "mesh"',
    },
    {
      name: 'operatorFileName',
      type: 'string',
      help:
        'Path to file containing MeshOperator custom resources. If configs from files like meshConfigFile, ' +
        'valuesFile are provided, they will be overridden by MeshOperator config values.',
    },
    outputFlag('Modified output orchestrator resource filename'),
    REVISION,
    { name: 'valuesFile', type: 'string', help: 'Injection values configuration filename.' },
    {
      name: 'webhookConfig',
      type: 'string',
      default: 'mesh-sidecar-injector',
      help: 'MutatingWebhookConfiguration name for the mesh',
    },
  ],
  run: 'meshctl.orch-inject',
};

// ---------------------------------------------------------------------------------------------------------------
// proxy-config

const PC_VERBOSE: FlagSpec = { name: 'verbose', type: 'bool', default: 'true', help: 'Output more information' };
const PC_FQDN: FlagSpec = { name: 'fqdn', type: 'string', help: 'Filter clusters by substring of Service FQDN field' };
const PC_DIRECTION: FlagSpec = { name: 'direction', type: 'string', help: 'Filter clusters by Direction field' };
const PC_SUBSET: FlagSpec = { name: 'subset', type: 'string', help: 'Filter clusters by substring of Subset field' };
const PC_LISTENER_ADDRESS: FlagSpec = { name: 'address', type: 'string', help: 'Filter listeners by address field' };
const PC_LISTENER_TYPE: FlagSpec = { name: 'type', type: 'string', help: 'Filter listeners by type field' };
const PC_ROUTE_NAME: FlagSpec = { name: 'name', type: 'string', help: 'Filter listeners by route name field' };

function portFilterFlag(help: string): FlagSpec {
  return { name: 'port', type: 'int', help };
}

const proxyConfig: CommandSpec = {
  name: 'proxy-config',
  aliases: ['pc'],
  short: 'Retrieve information about proxy configuration from the proxy [orch only]',
  long: 'A group of commands used to retrieve information about proxy configuration from the proxy config dump',
  example: `  # Retrieve information about proxy configuration from a proxy instance.
  meshctl proxy-config <clusters|listeners|routes|endpoints|ecds|bootstrap|log|secret> <pod-name[.namespace]>`,
  persistentFlags: PROXYCFG_FLAGS,
  subcommands: [
    {
      name: 'all',
      aliases: ['a'],
      short: 'Retrieves all configuration for the proxy in the specified pod',
      long: 'Retrieve information about all configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve summary about all configuration for a given pod from the proxy.
  meshctl proxy-config all <pod-name[.namespace]>

  # Retrieve summary about all configuration for a pod under a deployment from the proxy.
  meshctl proxy-config all deployment/<deployment-name[.namespace]>

  # Retrieve full cluster dump as JSON
  meshctl proxy-config all <pod-name[.namespace]> -o json

  # Retrieve full cluster dump with short syntax
  meshctl pc a <pod-name[.namespace]>

  # Retrieve cluster summary without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config all --file proxy-config.json
`,
      args: [optionalTarget],
      flags: [
        PC_LISTENER_ADDRESS,
        PC_DIRECTION,
        PROXY_DUMP_FILE,
        PC_FQDN,
        PC_ROUTE_NAME,
        portFilterFlag('Filter clusters and listeners by Port field'),
        PC_SUBSET,
        PC_LISTENER_TYPE,
        PC_VERBOSE,
      ],
      run: 'meshctl.proxy-config.all',
    },
    {
      name: 'bootstrap',
      aliases: ['b'],
      short: 'Retrieves bootstrap configuration for the proxy in the specified pod',
      long: 'Retrieve information about bootstrap configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve full bootstrap configuration for a given pod from the proxy.
  meshctl proxy-config bootstrap <pod-name[.namespace]>

  # Retrieve full bootstrap configuration for a pod under a deployment from the proxy.
  meshctl proxy-config bootstrap deployment/<deployment-name[.namespace]>

  # Retrieve full bootstrap without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config bootstrap --file proxy-config.json

  # Show a human-readable mesh and proxy version summary
  meshctl proxy-config bootstrap <pod-name[.namespace]> -o short
`,
      args: [optionalTarget],
      // Bootstrap dumps default to JSON: a local --output shadows the group's.
      flags: [{ ...SHORT_OUTPUT, default: 'json' }, PROXY_DUMP_FILE],
      run: 'meshctl.proxy-config.bootstrap',
    },
    {
      name: 'cluster',
      aliases: ['clusters', 'c'],
      short: 'Retrieves cluster configuration for the proxy in the specified pod',
      long: 'Retrieve information about cluster configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve summary about cluster configuration for a given pod from the proxy.
  meshctl proxy-config clusters <pod-name[.namespace]>

  # Retrieve summary about cluster configuration for a pod under a deployment from the proxy.
  meshctl proxy-config clusters deployment/<deployment-name[.namespace]>

  # Retrieve cluster summary for clusters with port 9080.
  meshctl proxy-config clusters <pod-name[.namespace]> --port 9080

  # Retrieve full cluster dump for clusters that are inbound with a FQDN of details.default.svc.cluster.local.
  meshctl proxy-config clusters <pod-name[.namespace]> --fqdn details.default.svc.cluster.local --direction inbound -o json

  # Retrieve cluster summary without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config clusters --file proxy-config.json
`,
      args: [optionalTarget],
      flags: [PC_DIRECTION, PROXY_DUMP_FILE, PC_FQDN, portFilterFlag('Filter clusters by Port field'), PC_SUBSET],
      run: 'meshctl.proxy-config.cluster',
    },
    {
      name: 'ecds',
      aliases: ['ec'],
      short: 'Retrieves typed extension configuration for the proxy in the specified pod',
      long: 'Retrieve information about typed extension configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve full typed extension configuration for a given pod from the proxy.
  meshctl proxy-config ecds <pod-name[.namespace]>

  # Retrieve full typed extension configuration for a pod under a deployment from the proxy.
  meshctl proxy-config ecds deployment/<deployment-name[.namespace]>

  # Retrieve typed extension configuration without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config ecds --file proxy-config.json
`,
      args: [optionalTarget],
      flags: [PROXY_DUMP_FILE],
      run: 'meshctl.proxy-config.ecds',
    },
    {
      name: 'endpoint',
      aliases: ['endpoints', 'ep'],
      short: 'Retrieves endpoint configuration for the proxy in the specified pod',
      long: 'Retrieve information about endpoint configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve full endpoint configuration for a given pod from the proxy.
  meshctl proxy-config endpoint <pod-name[.namespace]>

  # Retrieve full endpoint configuration for a pod under a deployment from the proxy.
  meshctl proxy-config endpoint deployment/<deployment-name[.namespace]>

  # Retrieve endpoint summary for endpoint with port 9080.
  meshctl proxy-config endpoint <pod-name[.namespace]> --port 9080

  # Retrieve full endpoint with a address (172.17.0.2).
  meshctl proxy-config endpoint <pod-name[.namespace]> --address 172.17.0.2 -o json

  # Retrieve full endpoint with a cluster name (outbound|9411||zipkin.mesh-system.svc.cluster.local).
  meshctl proxy-config endpoint <pod-name[.namespace]> --cluster "outbound|9411||zipkin.mesh-system.svc.cluster.local" -o json
  # Retrieve full endpoint with the status (healthy).
  meshctl proxy-config endpoint <pod-name[.namespace]> --status healthy -ojson

  # Retrieve endpoint summary without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/clusters?format=json' > proxy-clusters.json
  meshctl proxy-config endpoints --file proxy-clusters.json
`,
      args: [optionalTarget],
      flags: [
        { name: 'address', type: 'string', help: 'Filter endpoints by address field' },
        { name: 'cluster', type: 'string', help: 'Filter endpoints by cluster name field' },
        PROXY_DUMP_FILE,
        portFilterFlag('Filter endpoints by Port field'),
        { name: 'status', type: 'string', help: 'Filter endpoints by status field' },
      ],
      run: 'meshctl.proxy-config.endpoint',
    },
    {
      name: 'listener',
      aliases: ['listeners', 'l'],
      short: 'Retrieves listener configuration for the proxy in the specified pod',
      long: 'Retrieve information about listener configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve summary about listener configuration for a given pod from the proxy.
  meshctl proxy-config listeners <pod-name[.namespace]>

  # Retrieve summary about listener configuration a pod under a deployment from the proxy.
  meshctl proxy-config listeners deployment/<deployment-name[.namespace]>

  # Retrieve listener summary for listeners with port 9080.
  meshctl proxy-config listeners <pod-name[.namespace]> --port 9080

  # Retrieve full listener dump for HTTP listeners with a wildcard address (0.0.0.0).
  meshctl proxy-config listeners <pod-name[.namespace]> --type HTTP --address 0.0.0.0 -o json

  # Retrieve listener summary without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config listeners --file proxy-config.json
`,
      args: [optionalTarget],
      flags: [
        PC_LISTENER_ADDRESS,
        PROXY_DUMP_FILE,
        portFilterFlag('Filter listeners by Port field'),
        PC_LISTENER_TYPE,
        PC_VERBOSE,
        { name: 'waypoint', type: 'bool', hidden: true, help: 'Output waypoint information' },
      ],
      run: 'meshctl.proxy-config.listener',
    },
    {
      name: 'log',
      aliases: ['o'],
      short: 'Retrieves logging levels of the proxy in the specified pod',
      long: 'Retrieve information about logging levels of the proxy instance in the specified pod, and update optionally',
      example: `  # Retrieve information about logging levels for a given pod from the proxy.
  meshctl proxy-config log <pod-name[.namespace]>

  # Update levels of the all loggers
  meshctl proxy-config log <pod-name[.namespace]> --level none

  # Update levels of the specified loggers.
  meshctl proxy-config log <pod-name[.namespace]> --level http:debug,redis:debug

  # Reset levels of all the loggers to default value (warning).
  meshctl proxy-config log <pod-name[.namespace]> -r
`,
      args: [optionalTarget],
      flags: [proxyLogLevelFlag('meshctl proxy-config log', " or referred from the proxy's logger list"), RESET_TO_WARNING, SELECTOR],
      run: 'meshctl.proxy-config.log',
    },
    {
      name: 'rootca-compare',
      aliases: ['rc'],
      short: 'Compare ROOTCA values for the two given pods',
      long: `Compare ROOTCA values for given 2 pods to check the connectivity between them.\n\n${EXPERIMENTAL_MSG}`,
      example: `  # Compare ROOTCA values for given 2 pods to check the connectivity between them.
  meshctl proxy-config rootca-compare <pod-name-1[.namespace]> <pod-name-2[.namespace]>`,
      args: [{ name: '[pod/]<name-1>[.<namespace-1>]' }, { name: '[pod/]<name-2>[.<namespace-2>]' }],
      run: 'meshctl.proxy-config.rootca-compare',
    },
    {
      name: 'route',
      aliases: ['routes', 'r'],
      short: 'Retrieves route configuration for the proxy in the specified pod',
      long: 'Retrieve information about route configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve summary about route configuration for a given pod from the proxy.
  meshctl proxy-config routes <pod-name[.namespace]>

  # Retrieve summary about route configuration for a pod under a deployment from the proxy.
  meshctl proxy-config routes deployment/<deployment-name[.namespace]>

  # Retrieve route summary for route 9080.
  meshctl proxy-config route <pod-name[.namespace]> --name 9080

  # Retrieve full route dump for route 9080
  meshctl proxy-config route <pod-name[.namespace]> --name 9080 -o json

  # Retrieve route summary without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config routes --file proxy-config.json
`,
      args: [optionalTarget],
      flags: [PROXY_DUMP_FILE, PC_ROUTE_NAME, PC_VERBOSE],
      run: 'meshctl.proxy-config.route',
    },
    {
      name: 'secret',
      aliases: ['secrets', 's'],
      short: 'Retrieves secret configuration for the proxy in the specified pod',
      long: 'Retrieve information about secret configuration for the proxy instance in the specified pod.',
      example: `  # Retrieve full secret configuration for a given pod from the proxy.
  meshctl proxy-config secret <pod-name[.namespace]>

  # Retrieve full secret configuration for a pod under a deployment from the proxy.
  meshctl proxy-config secret deployment/<deployment-name[.namespace]>

  # Retrieve full secret configuration without using the orchestrator API
  ssh <user@hostname> 'curl localhost:15000/config_dump' > proxy-config.json
  meshctl proxy-config secret --file proxy-config.json`,
      args: [optionalTarget],
      flags: [PROXY_DUMP_FILE],
      run: 'meshctl.proxy-config.secret',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// remote-clusters

const remoteClusters: CommandSpec = {
  name: 'remote-clusters',
  short: 'Lists the remote clusters each meshd instance is connected to.',
  long: 'Lists the remote clusters each meshd instance is connected to.',
  flags: [REVISION],
  run: 'meshctl.remote-clusters',
};

// ---------------------------------------------------------------------------------------------------------------
// tag

const TAG_WRITE_FLAGS: readonly FlagSpec[] = [
  {
    name: 'auto-inject-namespaces',
    type: 'bool',
    help: 'If set to true, the sidecars should be automatically injected into all namespaces by default',
  },
  MANIFESTS,
  {
    name: 'overwrite',
    type: 'bool',
    help: 'If true, allow revision tags to be overwritten, otherwise reject revision tag updates that\n' + 'overwrite existing revision tags.',
  },
  revisionFlag('Control plane revision to reference from a given revision tag'),
  SKIP_CONFIRMATION,
  {
    name: 'webhook-name',
    type: 'string',
    help: "Name to use for a revision tag's mutating webhook configuration.",
  },
];
const REVISION_TAG = { name: '<revision-tag>' } as const;

const tag: CommandSpec = {
  name: 'tag',
  short: 'Command group used to interact with revision tags',
  long: `Command group used to interact with revision tags. Revision tags allow for the creation of mutable aliases
referring to control plane revisions for sidecar injection.

With revision tags, rather than relabeling a namespace from "mesh.io/rev=revision-a" to "mesh.io/rev=revision-b" to
change which control plane revision handles injection, it's possible to create a revision tag "prod" and label our
namespace "mesh.io/rev=prod". The "prod" revision tag could point to "1-7-6" initially and then be changed to point to "1-8-1"
at some later point.

This allows operators to change which mesh control plane revision should handle injection for a namespace or set of namespaces
without manual relabeling of the "mesh.io/rev" tag.
`,
  subcommands: [
    {
      name: 'generate',
      short: 'Generate configuration for a revision tag to stdout',
      long:
        "Create a revision tag and output to the command's stdout. Tag a mesh control plane revision for use with " +
        'namespace mesh.io/rev\ninjection labels.',
      example: `  # Create a revision tag from the "1-8-0" revision
  meshctl tag generate prod --revision 1-8-0 > tag.yaml

  # Apply the tag to cluster
  orchctl apply -f tag.yaml

  # Point namespace "test-ns" at the revision pointed to by the "prod" revision tag
  orchctl label ns test-ns mesh.io/rev=prod

  # Rollout namespace "test-ns" to update workloads to the "1-8-0" revision
  orchctl rollout restart deployments -n test-ns
`,
      args: [REVISION_TAG],
      flags: TAG_WRITE_FLAGS,
      run: 'meshctl.tag.generate',
    },
    {
      name: 'list',
      aliases: ['show'],
      short: 'List existing revision tags',
      long: 'List existing revision tags',
      example: '  meshctl tag list',
      flags: [outputFlag('Output format for tag description (available formats: table,json,yaml)', 'table', ['table', 'json', 'yaml'])],
      run: 'meshctl.tag.list',
    },
    {
      name: 'remove',
      aliases: ['delete'],
      short: 'Remove mesh control plane revision tag',
      long: `Remove mesh control plane revision tag.

Removing a revision tag should be done with care. Removing a revision tag will disrupt sidecar injection in namespaces
that reference the tag in an "mesh.io/rev" label. Verify that there are no remaining namespaces referencing a
revision tag before removing using the "meshctl tag list" command.
`,
      example: `  # Remove the revision tag "prod"
  meshctl tag remove prod
`,
      args: [REVISION_TAG],
      flags: [SKIP_CONFIRMATION],
      run: 'meshctl.tag.remove',
    },
    {
      name: 'set',
      short: 'Create or modify revision tags',
      long: 'Create or modify revision tags. Tag a mesh control plane revision for use with namespace mesh.io/rev\n' + 'injection labels.',
      example: `  # Create a revision tag from the "1-8-0" revision
  meshctl tag set prod --revision 1-8-0

  # Point namespace "test-ns" at the revision pointed to by the "prod" revision tag
  orchctl label ns test-ns mesh.io/rev=prod

  # Change the revision tag to reference the "1-8-1" revision
  meshctl tag set prod --revision 1-8-1 --overwrite

  # Make revision "1-8-1" the default revision, both resulting in that revision handling injection for "mesh-injection=enabled"
  # and validating resources cluster-wide
  meshctl tag set default --revision 1-8-1

  # Rollout namespace "test-ns" to update workloads to the "1-8-1" revision
  orchctl rollout restart deployments -n test-ns
`,
      args: [REVISION_TAG],
      flags: TAG_WRITE_FLAGS,
      run: 'meshctl.tag.set',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// uninstall, validate, version

const uninstall: CommandSpec = {
  name: 'uninstall',
  short: 'Uninstall the mesh from a cluster',
  long: 'The uninstall command uninstalls the mesh from a cluster',
  example: `  # Uninstall a single control plane by revision
  meshctl uninstall --revision foo

  # Uninstall a single control plane by MeshOperator file
  meshctl uninstall -f iop.yaml

  # Uninstall all control planes and shared resources
  meshctl uninstall --purge`,
  flags: [
    DRY_RUN,
    { name: 'filename', short: 'f', type: 'string', help: 'The filename of the MeshOperator CR.' },
    FORCE,
    MANIFESTS,
    { name: 'purge', type: 'bool', help: 'Delete all mesh related sources for all versions' },
    TARGET_REVISION,
    SET,
    SKIP_CONFIRMATION,
    { name: 'verbose', short: 'v', type: 'bool', help: 'Verbose output.' },
  ],
  run: 'meshctl.uninstall',
};

const validate: CommandSpec = {
  name: 'validate',
  aliases: ['v'],
  short: 'Validate mesh policy and rules files',
  long: 'Validate mesh policy and rules files',
  example: `  # Validate bookinfo-gateway.yaml
  meshctl validate -f samples/bookinfo/networking/bookinfo-gateway.yaml

  # Validate bookinfo-gateway.yaml with shorthand syntax
  meshctl v -f samples/bookinfo/networking/bookinfo-gateway.yaml

  # Validate all yaml files under samples/bookinfo/networking directory
  meshctl validate -f samples/bookinfo/networking

  # Validate current deployments under 'default' namespace within the cluster
  orchctl get deployments -o yaml | meshctl validate -f -

  # Validate current services under 'default' namespace within the cluster
  orchctl get services -o yaml | meshctl validate -f -

  # Also see the related command 'meshctl analyze'
  meshctl analyze samples/bookinfo/networking/bookinfo-gateway.yaml
`,
  flags: [
    { name: 'filename', short: 'f', type: 'stringSlice', help: 'Inputs of files to validate' },
    // istioctl keeps this hidden flag for old scripts; validation is always structural.
    { name: 'referential', short: 'x', type: 'bool', default: 'true', hidden: true, help: 'Enable structural validation for policy and telemetry' },
  ],
  run: 'meshctl.validate',
};

const version: CommandSpec = {
  name: 'version',
  short: 'Prints out build version information',
  flags: [VERSION_OUTPUT, REMOTE, REVISION, shortVersionFlag(true)],
  run: 'version',
};

// ---------------------------------------------------------------------------------------------------------------
// waypoint

const WAYPOINT_FOR: FlagSpec = {
  name: 'for',
  type: 'string',
  enum: ['all', 'none', 'service', 'workload'],
  help: 'Specify the traffic type [all none service workload] for the waypoint',
};
const WAYPOINT_REVISION = revisionFlag('The revision to label the waypoint with');

function waypointTimeoutFlag(help: string): FlagSpec {
  return { name: 'waypoint-timeout', type: 'duration', default: '1m30s', help };
}

const waypoint: CommandSpec = {
  name: 'waypoint',
  short: 'Manage waypoint configuration',
  long: 'A group of commands used to manage waypoint configuration',
  example: `  # Apply a waypoint to the current namespace
  meshctl waypoint apply

  # Generate a waypoint as yaml
  meshctl waypoint generate --namespace default

  # List all waypoints in a specific namespace
  meshctl waypoint list --namespace default`,
  persistentFlags: [{ name: 'name', type: 'string', default: 'waypoint', help: 'name of the waypoint' }],
  subcommands: [
    {
      name: 'apply',
      short: 'Apply a waypoint configuration',
      long: 'Apply a waypoint configuration to the cluster',
      example: `  # Apply a waypoint to the current namespace
  meshctl waypoint apply

  # Apply a waypoint to a specific namespace and wait for it to be ready
  meshctl waypoint apply --namespace default --wait`,
      flags: [
        {
          name: 'enroll-namespace',
          type: 'bool',
          help: 'If set, the namespace will be labeled with the waypoint name',
        },
        WAYPOINT_FOR,
        { name: 'overwrite', type: 'bool', help: 'Overwrite the existing Waypoint used by the namespace' },
        WAYPOINT_REVISION,
        { name: 'wait', short: 'w', type: 'bool', help: 'Wait for the waypoint to be ready' },
        waypointTimeoutFlag('Timeout for waiting for waypoint ready'),
      ],
      run: 'meshctl.waypoint.apply',
    },
    {
      name: 'delete',
      short: 'Delete a waypoint configuration',
      long: 'Delete a waypoint configuration from the cluster',
      example: `  # Delete a waypoint from the default namespace
  meshctl waypoint delete

  # Delete a waypoint by name, which can obtain from meshctl waypoint list
  meshctl waypoint delete waypoint-name --namespace default

  # Delete several waypoints by name
  meshctl waypoint delete waypoint-name1 waypoint-name2 --namespace default

  # Delete all waypoints in a specific namespace
  meshctl waypoint delete --all --namespace default

  # Delete specific revision waypoints in a namespace
  meshctl waypoint delete --revision v1 --namespace default`,
      args: [{ name: '<name>', variadic: true }],
      flags: [
        { name: 'all', type: 'bool', help: 'Delete all waypoints in the namespace' },
        revisionFlag('Delete the specified version of the waypoint in the namespace'),
      ],
      run: 'meshctl.waypoint.delete',
    },
    {
      name: 'generate',
      short: 'Generate a waypoint configuration',
      long: 'Generate a waypoint configuration as YAML',
      example: `  # Generate a waypoint as yaml
  meshctl waypoint generate --namespace default`,
      flags: [WAYPOINT_FOR, WAYPOINT_REVISION],
      run: 'meshctl.waypoint.generate',
    },
    {
      name: 'list',
      short: 'List managed waypoint configurations',
      long: 'List managed waypoint configurations in the cluster',
      example: `  # List all waypoints in a specific namespace
  meshctl waypoint list --namespace default

  # List all waypoints in the cluster
  meshctl waypoint list -A`,
      flags: [{ name: 'all-namespaces', short: 'A', type: 'bool', help: 'List all waypoints in all namespaces' }],
      run: 'meshctl.waypoint.list',
    },
    {
      name: 'status',
      short: 'Show the status of waypoints in a namespace',
      long: 'Show the status of waypoints for the namespace provided or default namespace if none is provided',
      example: `  # Show the status of the waypoint in the default namespace
  meshctl waypoint status

  # Show the status of the waypoint in a specific namespace
  meshctl waypoint status --namespace default`,
      flags: [waypointTimeoutFlag('Timeout for retrieving status for waypoint')],
      run: 'meshctl.waypoint.status',
    },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// Environment: defaults file and MESHCTL_<FLAG> overrides (read through the defaults mechanism)

const ENV: readonly EnvVarSpec[] = [
  { name: 'MESHCONFIG', type: 'S', default: '$HOME/.meshctl/config.yaml', help: 'Default values for meshctl flags' },
  { name: 'ORCHCONFIG', type: 'S', help: 'Orchestrator client configuration file, when --orchconfig is not given' },
  { name: 'MESHCTL_AUTHORITY', type: 'S', default: '', help: 'The meshctl --authority override' },
  { name: 'MESHCTL_CERT_DIR', type: 'S', default: '', help: 'The meshctl --cert-dir override' },
  { name: 'MESHCTL_INSECURE', type: 'B', default: 'false', help: 'The meshctl --insecure override' },
  {
    name: 'MESHCTL_MESHNAMESPACE',
    type: 'S',
    default: 'mesh-system',
    help: 'The meshctl --meshNamespace override',
  },
  { name: 'MESHCTL_PLAINTEXT', type: 'B', default: 'false', help: 'The meshctl --plaintext override' },
  {
    name: 'MESHCTL_PREFER_EXPERIMENTAL',
    type: 'B',
    default: 'false',
    help: 'The meshctl should use experimental subcommand variants',
  },
  { name: 'MESHCTL_XDS_ADDRESS', type: 'S', default: '', help: 'The meshctl --xds-address override' },
  { name: 'MESHCTL_XDS_PORT', type: 'I', default: '15012', help: 'The meshctl --xds-port override' },
];

// ---------------------------------------------------------------------------------------------------------------
// The program

export const meshctl: ProgramSpec = {
  name: 'meshctl',
  word: 'meshctl',
  errorExitCode: 1,
  usageExitCode: 64,
  env: ENV,
  root: {
    name: 'meshctl',
    short: 'Mesh control interface.',
    long: 'Mesh configuration command line utility for service operators to\ndebug and diagnose their mesh.\n',
    persistentFlags: GLOBAL_FLAGS,
    subcommands: [
      admin,
      analyze,
      authzPointer,
      bugReport,
      completion,
      createRemoteSecret,
      dashboard,
      experimental,
      install,
      manifest,
      nodeproxyConfig,
      options,
      orchInject,
      proxyConfig,
      proxyStatusCommand('proxy-status', 'meshctl.proxy-status'),
      remoteClusters,
      tag,
      uninstall,
      upgrade,
      validate,
      version,
      waypoint,
    ],
  },
};
