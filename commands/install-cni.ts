// install-cni: the node CNI plugin installer (spec doc 2 §4.5, §8). The root command is the installer.
// Each flag also reads the upper-case environment variable of the same name, as Istio binds them.
import type { FlagSpec, ProgramSpec } from './types';
import { completionCommand, logFlags, mergeEnv, versionCommand } from './shared';
import { sharedEnv } from './env/shared';
import { cniEnv } from './env/cni';

export const CNI_SCOPES = [
  'ads',
  'all',
  'cni-agent',
  'cni-plugin',
  'controllers',
  'default',
  'grpc',
  'klog',
  'krt',
  'model',
  'monitoring',
  'spiffe',
  'trustBundle',
  'validation',
] as const;

/** `--repair-node-name` → `REPAIR_NODE_NAME`. */
function bound(flag: FlagSpec): FlagSpec {
  return { ...flag, env: flag.env ?? flag.name.toUpperCase().replace(/-/g, '_') };
}

const installerFlagsUnbound: FlagSpec[] = [
  { name: 'ambient-enabled', type: 'bool', help: 'Whether ambient controller is enabled' },
  { name: 'chained-cni-plugin', type: 'bool', help: 'Whether to install CNI plugin as a chained or standalone' },
  {
    name: 'cni-agent-run-dir',
    type: 'string',
    default: '/var/run/mesh-cni',
    help: 'Location of the node agent writable path on the node (used for sockets, etc)',
  },
  { name: 'cni-conf-name', type: 'string', help: 'Name of the CNI configuration file' },
  { name: 'cni-network-config', type: 'string', help: 'CNI configuration template as a string' },
  { name: 'cni-network-config-file', type: 'string', help: 'CNI config template as a file' },
  {
    name: 'ctrlz_address',
    type: 'string',
    default: 'localhost',
    env: 'CTRLZ_ADDRESS',
    help: "The IP Address to listen on for the ControlZ introspection facility. Use '*' to indicate all addresses.",
  },
  { name: 'ctrlz_port', type: 'uint16', default: '9876', env: 'CTRLZ_PORT', help: 'The IP port to use for the ControlZ introspection facility' },
  { name: 'log-level', type: 'string', default: 'warn', help: 'Fallback value for log level in CNI config file, if not specified in helm template' },
  { name: 'monitoring-port', type: 'int', default: '15014', help: 'HTTP port to serve prometheus metrics' },
  {
    name: 'mounted-cni-net-dir',
    type: 'string',
    default: '/host/etc/cni/net.d',
    help: 'Directory on the container where CNI networks are installed',
  },
  {
    name: 'nodeproxy-uds-address',
    type: 'string',
    default: '/var/run/nodeproxy/nodeproxy.sock',
    help: 'The UDS server address which the node proxy will connect to',
  },
  { name: 'orch-ca-file', type: 'string', help: 'CA file for the orchestrator client configuration. Defaults to the same as install-cni pod' },
  { name: 'orchconfig-mode', type: 'int', default: '384', help: 'File mode of the orchestrator client configuration file' },
  {
    name: 'repair-broken-pod-label-key',
    type: 'string',
    default: 'cni.mesh.io/uninitialized',
    help: 'The key portion of the label which will be set by the race repair if label pods is true',
  },
  {
    name: 'repair-broken-pod-label-value',
    type: 'string',
    default: 'true',
    help: 'The value portion of the label which will be set by the race repair if label pods is true',
  },
  { name: 'repair-delete-pods', type: 'bool', help: 'Controls whether broken pods are deleted' },
  { name: 'repair-enabled', type: 'bool', help: 'Whether to enable race condition repair or not' },
  {
    name: 'repair-field-selectors',
    type: 'string',
    help: 'A set of field selectors in label=value format that will be added to the pod list filters',
  },
  {
    name: 'repair-init-container-exit-code',
    type: 'int',
    default: '126',
    help: 'Expected exit code for the init container when in CrashLoopBackOff state',
  },
  {
    name: 'repair-init-container-name',
    type: 'string',
    default: 'mesh-validation',
    help: 'The name of the mesh init container (will crash-loop if CNI is not configured for the pod)',
  },
  {
    name: 'repair-init-container-termination-message',
    type: 'string',
    help: 'The expected termination message for the init container when in CrashLoopBackOff state',
  },
  { name: 'repair-label-pods', type: 'bool', help: 'Controls whether broken pods are labeled' },
  {
    name: 'repair-label-selectors',
    type: 'string',
    help: 'A set of label selectors in label=value format that will be added to the pod list filters',
  },
  { name: 'repair-node-name', type: 'string', help: 'The name of the managed node (will manage all nodes if unset)' },
  {
    name: 'repair-sidecar-annotation',
    type: 'string',
    default: 'sidecar.mesh.io/status',
    help: 'An annotation key that indicates this pod contains a mesh sidecar. All pods without this annotation will be ignored. The value of the annotation is ignored.',
  },
  { name: 'skip-tls-verify', type: 'bool', help: 'Whether to use insecure TLS in the orchestrator client configuration file' },
];
const installerFlags = installerFlagsUnbound.map(bound);

export const installCni: ProgramSpec = {
  name: 'install-cni',
  word: 'cni',
  logScopes: CNI_SCOPES,
  errorExitCode: 1,
  env: mergeEnv(sharedEnv, [
    ...cniEnv,
    { name: 'CTRLZ_ADDRESS', type: 'S', default: 'localhost', help: 'ControlZ address (--ctrlz_address)' },
    { name: 'CTRLZ_PORT', type: 'I', default: '9876', help: 'ControlZ port (--ctrlz_port)' },
  ]),
  root: {
    name: 'install-cni',
    short: 'Install and configure mesh CNI plugin on a node, detect and repair pod which is broken by race condition.',
    run: 'cni.install',
    flags: installerFlags,
    persistentFlags: logFlags(CNI_SCOPES, { vklog: false }),
    subcommands: [versionCommand(), completionCommand('install-cni')],
  },
};
