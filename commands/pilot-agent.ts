// pilot-agent: the workload agent (spec doc 2 §4.2–§4.4, §5, §8).
import type { ProgramSpec } from './types';
import { completionCommand, logFlags, mergeEnv, versionCommand } from './shared';
import { sharedEnv } from './env/shared';
import { agentEnv } from './env/agent';

export const AGENT_SCOPES = [
  'ads',
  'all',
  'ca',
  'cache',
  'citadelclient',
  'default',
  'dns',
  'gcecred',
  'grpc',
  'healthcheck',
  'klog',
  'mockcred',
  'monitoring',
  'probes',
  'sds',
  'security',
  'spiffe',
  'validation',
  'wasm',
  'xdsproxy',
] as const;

export const PROXY_LOG_LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'] as const;

export const pilotAgent: ProgramSpec = {
  name: 'pilot-agent',
  word: 'agent',
  logScopes: AGENT_SCOPES,
  errorExitCode: 255,
  env: mergeEnv(sharedEnv, agentEnv),
  root: {
    name: 'pilot-agent',
    short: 'Mesh Pilot agent.',
    long: 'Mesh Pilot agent runs in the sidecar or gateway container and bootstraps the data-plane proxy.',
    persistentFlags: logFlags(AGENT_SCOPES, { vklog: true }),
    subcommands: [
      {
        name: 'proxy',
        short: 'XDS proxy agent',
        args: [{ name: 'sidecar|router' }],
        run: 'agent.proxy',
        flags: [
          { name: 'concurrency', type: 'int', help: 'number of worker threads to run' },
          {
            name: 'domain',
            type: 'string',
            help: 'DNS domain suffix. If not provided uses ${POD_NAMESPACE}.svc.cluster.local',
          },
          {
            name: 'meshConfig',
            type: 'string',
            default: './etc/mesh/config/mesh',
            help:
              'File name for mesh configuration. If not specified, a default mesh will be used. This may be overridden ' +
              'by PROXY_CONFIG environment variable or proxy.mesh.io/config annotation.',
          },
          { name: 'outlierLogPath', type: 'string', help: 'The log path for outlier detection' },
          { name: 'profiling', type: 'bool', help: 'Enable profiling via web interface host:port/debug/pprof/.' },
          {
            name: 'proxyComponentLogLevel',
            type: 'string',
            help: 'The component log level used to start the proxy. Deprecated, use proxyLogLevel instead',
          },
          {
            name: 'proxyLogLevel',
            type: 'string',
            default: 'warning',
            help:
              `The log level used to start the proxy (choose from {${PROXY_LOG_LEVELS.join(', ')}}).` +
              `Level may also include one or more scopes, such as 'info,misc:error,upstream:debug'`,
          },
          { name: 'serviceCluster', type: 'string', default: 'mesh-proxy', help: 'Service cluster' },
          {
            name: 'stsPort',
            type: 'int',
            help: 'HTTP Port on which to serve Security Token Service (STS). If zero, STS service will not be provided.',
          },
          { name: 'templateFile', type: 'string', help: 'Go template bootstrap config' },
          { name: 'tokenManagerPlugin', type: 'string', help: 'Token provider specific plugin name.' },
        ],
      },
      {
        name: 'mesh-iptables',
        short: 'Set up iptables rules for mesh sidecar',
        long: 'Script responsible for setting up port forwarding for mesh sidecar.',
        run: 'agent.mesh-iptables',
        flags: [
          {
            name: 'capture-all-dns',
            type: 'bool',
            help:
              'Instead of only capturing DNS traffic to DNS server IP, capture all DNS traffic at port 53. ' +
              'This setting is only effective when redirect dns is enabled.',
          },
          { name: 'cleanup-only', type: 'bool', help: 'Perform a forced cleanup without creating new iptables chains or rules.' },
          { name: 'cni-mode', type: 'bool', help: 'Whether to run as CNI plugin.' },
          { name: 'drop-invalid', type: 'bool', help: 'Enable invalid drop in the iptables rules.' },
          {
            name: 'dry-run',
            short: 'n',
            type: 'bool',
            help: 'Do not call any external dependencies like iptables.',
          },
          { name: 'dual-stack', type: 'bool', env: 'MESH_DUAL_STACK', help: 'Enable ipv4/ipv6 redirects for dual-stack.' },
          {
            name: 'force-apply',
            type: 'bool',
            help: 'Apply iptables changes even if they appear to already be in place.',
          },
          {
            name: 'inbound-capture-port',
            short: 'z',
            type: 'string',
            default: '15006',
            help: 'Port to which all inbound TCP traffic to the pod/VM should be redirected to. For REDIRECT only.',
          },
          {
            name: 'inbound-tunnel-port',
            short: 'e',
            type: 'string',
            default: '15008',
            help: 'Specify the mesh tunnel port for inbound tcp traffic.',
          },
          {
            name: 'iptables-probe-port',
            type: 'uint16',
            default: '15002',
            help: 'Set listen port for failure detection.',
          },
          {
            name: 'mesh-exclude-interfaces',
            short: 'c',
            type: 'string',
            help: 'Comma separated list of NIC (optional). Neither inbound nor outbound traffic will be captured.',
          },
          {
            name: 'mesh-inbound-interception-mode',
            short: 'm',
            type: 'string',
            env: 'INBOUND_INTERCEPTION_MODE',
            help: 'The mode used to redirect inbound connections to the proxy, either "REDIRECT" or "TPROXY".',
          },
          {
            name: 'mesh-inbound-ports',
            short: 'b',
            type: 'string',
            help:
              'Comma separated list of inbound ports for which traffic is to be redirected to the proxy. ' +
              'The wildcard character "*" can be used to configure redirection for all ports. An empty list will disable.',
          },
          {
            name: 'mesh-inbound-tproxy-mark',
            short: 't',
            type: 'string',
            default: '1337',
            env: 'INBOUND_TPROXY_MARK',
            help: 'The packet mark used to identify inbound connections redirected with TPROXY.',
          },
          {
            name: 'mesh-inbound-tproxy-route-table',
            short: 'r',
            type: 'string',
            default: '133',
            help: 'The routing table used to route packets marked for TPROXY redirection.',
          },
          {
            name: 'mesh-local-exclude-ports',
            short: 'd',
            type: 'string',
            help:
              'Comma separated list of inbound ports to be excluded from redirection to the proxy (optional). ' +
              'Only applies when all inbound traffic (i.e. "*") is being redirected.',
          },
          {
            name: 'mesh-local-outbound-ports-exclude',
            short: 'o',
            type: 'string',
            help: 'Comma separated list of outbound ports to be excluded from redirection to the proxy.',
          },
          {
            name: 'mesh-outbound-ports',
            short: 'q',
            type: 'string',
            help: 'Comma separated list of outbound ports to be explicitly included for redirection to the proxy.',
          },
          {
            name: 'mesh-service-cidr',
            short: 'i',
            type: 'string',
            help:
              'Comma separated list of IP ranges in CIDR form to redirect to the proxy (optional). ' +
              'The wildcard character "*" can be used to redirect all outbound traffic. An empty list will disable all outbound redirection.',
          },
          {
            name: 'mesh-service-exclude-cidr',
            short: 'x',
            type: 'string',
            help:
              'Comma separated list of IP ranges in CIDR form to be excluded from redirection. ' +
              'Only applies when all outbound traffic (i.e. "*") is being redirected.',
          },
          {
            name: 'network-namespace',
            type: 'string',
            help: 'The network namespace that iptables rules should be applied to.',
          },
          {
            name: 'orch-virt-interfaces',
            short: 'k',
            type: 'string',
            help: 'Comma separated list of virtual interfaces whose inbound traffic (from VM) will be treated as outbound.',
          },
          { name: 'probe-timeout', type: 'duration', default: '5s', help: 'Failure detection timeout.' },
          {
            name: 'proxy-gid',
            short: 'g',
            type: 'string',
            help: 'Specify the GID of the user for which the redirection is not applied. (same default value as -u param)',
          },
          {
            name: 'proxy-port',
            short: 'p',
            type: 'string',
            default: '15001',
            help: 'Specify the proxy port to which redirect all TCP traffic.',
          },
          {
            name: 'proxy-uid',
            short: 'u',
            type: 'string',
            help: 'Specify the UID of the user for which the redirection is not applied. Typically, this is the UID of the proxy container.',
          },
          {
            name: 'reconcile',
            type: 'bool',
            help: 'Reconcile pre-existing and incompatible iptables rules instead of failing if drift is detected.',
          },
          { name: 'redirect-dns', type: 'bool', env: 'MESH_META_DNS_CAPTURE', help: 'Enable capture of dns traffic by mesh-agent.' },
          { name: 'run-validation', type: 'bool', help: 'Validate iptables.' },
          { name: 'skip-rule-apply', type: 'bool', help: 'Skip iptables apply.' },
        ],
      },
      {
        name: 'request',
        short: 'Makes an HTTP request to the proxy admin API',
        args: [{ name: 'method' }, { name: 'path' }, { name: 'body', optional: true }],
        run: 'agent.request',
        flags: [
          {
            name: 'debug-port',
            type: 'int32',
            default: '15000',
            help: 'Set the port to make a local request to. The default points to the proxy admin API.',
          },
        ],
      },
      {
        name: 'wait',
        short: 'Waits until the proxy is ready',
        run: 'agent.wait',
        flags: [
          { name: 'periodMillis', type: 'int', default: '500', help: 'number of milliseconds to wait between attempts' },
          { name: 'requestTimeoutMillis', type: 'int', default: '500', help: 'number of milliseconds to wait for response' },
          { name: 'timeoutSeconds', type: 'int', default: '60', help: 'maximum number of seconds to wait for the proxy to be ready' },
          { name: 'url', type: 'string', default: 'http://localhost:15021/healthz/ready', help: 'URL to use in requests' },
        ],
      },
      {
        // The built-in data-plane engine, started by `pilot-agent proxy` exactly as it would start Envoy
        // (same flags, bootstrap file and admin API), so the agent has one code path for both.
        name: 'envoy',
        short: "Run the built-in xDS data-plane proxy engine with Envoy's command-line interface",
        hidden: true,
        run: 'agent.envoy',
        flags: [
          {
            name: 'config-path',
            short: 'c',
            type: 'string',
            help: 'Path to the bootstrap file (JSON or YAML of envoy.config.bootstrap.v3.Bootstrap)',
          },
          { name: 'config-yaml', type: 'string', help: 'Bootstrap as YAML, merged over --config-path' },
          { name: 'log-level', short: 'l', type: 'string', default: 'info', help: 'Log level: trace, debug, info, warning, error, critical, off' },
          { name: 'component-log-level', type: 'string', help: 'Per-component log levels, e.g. upstream:debug,connection:trace' },
          { name: 'log-format', type: 'string', help: 'Log line format' },
          { name: 'concurrency', type: 'uint32', help: 'Number of worker threads' },
          { name: 'drain-time-s', type: 'uint32', default: '600', help: 'Hot restart and LDS removal drain time in seconds' },
          {
            name: 'drain-strategy',
            type: 'string',
            default: 'gradual',
            enum: ['gradual', 'immediate'],
            help: 'Hot restart drain sequence behaviour',
          },
          { name: 'parent-shutdown-time-s', type: 'uint32', default: '900', help: 'Hot restart parent shutdown time in seconds' },
          { name: 'local-address-ip-version', type: 'string', default: 'v4', enum: ['v4', 'v6'], help: 'The local IP address version' },
          { name: 'service-cluster', type: 'string', help: 'Cluster name' },
          { name: 'service-node', type: 'string', help: 'Node name' },
          { name: 'allow-unknown-static-fields', type: 'bool', help: 'Allow unknown fields in static configuration' },
          { name: 'base-id', type: 'uint32', help: 'Base ID so that multiple envoys can run on the same host' },
          { name: 'restart-epoch', type: 'uint32', help: 'Hot restart epoch' },
          { name: 'disable-hot-restart', type: 'bool', help: 'Disable hot restart functionality' },
        ],
      },
      versionCommand(),
      completionCommand('pilot-agent'),
    ],
  },
};
