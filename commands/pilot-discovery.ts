// pilot-discovery: the discovery daemon (spec doc 1 §4.2–§4.4, §8).
import type { ProgramSpec } from './types';
import { completionCommand, logFlags, versionCommand } from './shared';
import { sharedEnv } from './env/shared';

export const DISCOVERY_SCOPES = [
  'ads', 'adsc', 'all', 'analysis', 'authn', 'authorization', 'ca', 'controllers', 'default', 'delta', 'deltaadsc',
  'file', 'fullpush', 'gateway', 'grpc', 'grpcgen', 'ip-autoallocate', 'klog', 'krt', 'orch', 'model', 'monitor',
  'monitoring', 'pkica', 'pkira', 'probes', 'processing', 'retry', 'rootcertrotator', 'secretcontroller', 'security',
  'serverca', 'serviceentry', 'spiffe', 'status', 'trustBundle', 'untaint', 'validation', 'validationController',
  'validationServer', 'wasm', 'wle',
] as const;

export const PREFERRED_CIPHER_SUITES = [
  'TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA', 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA',
  'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA',
  'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
] as const;

export const INSECURE_CIPHER_SUITES = [
  'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256', 'TLS_ECDHE_ECDSA_WITH_RC4_128_SHA', 'TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA',
  'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256', 'TLS_ECDHE_RSA_WITH_RC4_128_SHA', 'TLS_RSA_WITH_3DES_EDE_CBC_SHA',
  'TLS_RSA_WITH_AES_128_CBC_SHA', 'TLS_RSA_WITH_AES_128_CBC_SHA256', 'TLS_RSA_WITH_AES_128_GCM_SHA256',
  'TLS_RSA_WITH_AES_256_CBC_SHA', 'TLS_RSA_WITH_AES_256_GCM_SHA384', 'TLS_RSA_WITH_RC4_128_SHA',
] as const;

export const pilotDiscovery: ProgramSpec = {
  name: 'pilot-discovery',
  word: 'discovery',
  logScopes: DISCOVERY_SCOPES,
  errorExitCode: 255,
  env: sharedEnv,
  root: {
    name: 'pilot-discovery',
    short: 'Mesh Pilot.',
    long: 'Mesh Pilot provides management plane functionality to the mesh: it turns declarative configuration into ' +
      'configuration for data-plane proxies and issues workload certificates.',
    persistentFlags: logFlags(DISCOVERY_SCOPES, { vklog: true }),
    subcommands: [
      {
        name: 'discovery',
        short: 'Start mesh proxy discovery service.',
        example: 'pilot-discovery discovery',
        run: 'discovery.discovery',
        flags: [
          { name: 'caCertFile', type: 'string', help: 'File containing the x509 Server CA Certificate' },
          {
            name: 'clusterAliases',
            type: 'stringToString',
            default: '[]',
            help: 'Alias names for clusters. Example: alias1=cluster1,alias2=cluster2',
          },
          { name: 'clusterID', type: 'string', default: 'Orchestrator', env: 'CLUSTER_ID', help: 'The ID of the cluster that this meshd instance resides' },
          {
            name: 'clusterRegistriesNamespace',
            type: 'string',
            default: 'mesh-system',
            help: 'Namespace for ConfigMap which stores clusters configs',
          },
          {
            name: 'cniNamespace',
            type: 'string',
            default: 'mesh-system',
            env: 'POD_NAMESPACE',
            help: 'Select a namespace where the mesh-cni resides. If not set, uses ${POD_NAMESPACE} environment variable',
          },
          {
            name: 'configDir',
            type: 'string',
            help:
              'Directory to watch for updates to config yaml files. If specified, the files will be used as the source ' +
              'of config, rather than a CRD client.',
          },
          {
            name: 'ctrlz_address',
            type: 'string',
            default: 'localhost',
            help: "The IP Address to listen on for the ControlZ introspection facility. Use '*' to indicate all addresses.",
          },
          { name: 'ctrlz_port', type: 'uint16', default: '9876', help: 'The IP port to use for the ControlZ introspection facility' },
          { name: 'domain', type: 'string', default: 'cluster.local', help: 'DNS domain suffix' },
          { name: 'grpcAddr', type: 'string', default: ':15010', help: 'Discovery service gRPC address' },
          { name: 'httpAddr', type: 'string', default: ':8080', help: 'Discovery service HTTP address' },
          { name: 'httpsAddr', type: 'string', default: ':15017', help: 'Injection and validation service HTTPS address' },
          {
            name: 'keepaliveInterval',
            type: 'duration',
            default: '30s',
            help: 'The time interval if no activity on the connection it pings the peer to see if the transport is alive',
          },
          {
            name: 'keepaliveMaxServerConnectionAge',
            type: 'duration',
            default: '2562047h47m16.854775807s',
            help: 'Maximum duration a connection will be kept open on the server before a graceful close.',
          },
          {
            name: 'keepaliveTimeout',
            type: 'duration',
            default: '10s',
            help:
              'After having pinged for keepalive check, the client/server waits for a duration of keepaliveTimeout ' +
              'and if no activity is seen even after that the connection is closed.',
          },
          {
            name: 'meshConfig',
            type: 'string',
            default: './etc/mesh/config/mesh',
            help: 'File name for mesh configuration. If not specified, a default mesh will be used.',
          },
          { name: 'monitoringAddr', type: 'string', default: ':15014', help: "HTTP address to use for pilot's self-monitoring information" },
          {
            name: 'namespace',
            short: 'n',
            type: 'string',
            default: 'mesh-system',
            env: 'POD_NAMESPACE',
            help: 'Select a namespace where the controller resides. If not set, uses ${POD_NAMESPACE} environment variable',
          },
          {
            name: 'networksConfig',
            type: 'string',
            default: './etc/mesh/config/meshNetworks',
            help: 'File name for mesh networks configuration. If not specified, a default mesh networks will be used.',
          },
          { name: 'orchApiBurst', type: 'int', default: '160', help: 'Maximum burst for throttle when communicating with the orchestrator API' },
          { name: 'orchApiQPS', type: 'float32', default: '80', help: 'Maximum QPS when communicating with the orchestrator API' },
          { name: 'orchconfig', type: 'string', help: 'Use an orchestrator client configuration file instead of in-cluster configuration' },
          { name: 'profile', type: 'bool', help: 'Enable profiling via web interface host:port/debug/pprof' },
          {
            name: 'registries',
            type: 'stringSlice',
            default: '[Orchestrator]',
            enum: ['Orchestrator', 'Mock'],
            help: 'Comma separated list of platform service registries to read from (choose one or more from {Orchestrator, Mock})',
          },
          { name: 'secureGRPCAddr', type: 'string', default: ':15012', help: 'Discovery service secured gRPC address' },
          { name: 'shutdownDuration', type: 'duration', default: '10s', help: 'Duration the discovery server needs to terminate gracefully' },
          {
            name: 'tls-cipher-suites',
            type: 'stringSlice',
            default: '[]',
            enum: [...PREFERRED_CIPHER_SUITES, ...INSECURE_CIPHER_SUITES],
            help:
              'Comma-separated list of cipher suites for meshd TLS server. If omitted, the default Go cipher suites will be used. \n' +
              `Preferred values: ${PREFERRED_CIPHER_SUITES.join(', ')}. \n` +
              `Insecure values: ${INSECURE_CIPHER_SUITES.join(', ')}.`,
          },
          { name: 'tlsCertFile', type: 'string', help: 'File containing the x509 Server Certificate' },
          { name: 'tlsKeyFile', type: 'string', help: 'File containing the x509 private key matching --tlsCertFile' },
        ],
      },
      {
        name: 'request',
        short: 'Makes an HTTP request to Pilot metrics/debug endpoint',
        args: [{ name: 'method' }, { name: 'path' }, { name: 'body', optional: true }],
        run: 'discovery.request',
      },
      versionCommand(),
      completionCommand('pilot-discovery'),
    ],
  },
};

