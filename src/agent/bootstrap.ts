// The data-plane proxy's bootstrap (envoy.config.bootstrap.v3.Bootstrap as JSON), as Istio's agent renders
// it from tools/packaging/common/envoy_bootstrap.json: node identity, admin on localhost, ADS over the
// agent's local xDS socket (cluster `xds-grpc`), the `sds-grpc` cluster, and the static :15090
// (/stats/prometheus → admin) and :15021 (/healthz/ready → agent status port) listeners. Pure.
// `--templateFile` renders a user template instead (see template.ts for the Go-template subset and
// templateParams below for the names it can use).
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { protoDuration, proxyAddress, type ProxyConfig } from '../config/proxyconfig';
import type { Locality, NodeInfo } from './node';
import { DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE, WORKLOAD_IDENTITY_DIR } from './identity/options';

/** The SDS socket the proxy dials: WORKLOAD_IDENTITY_SOCKET_FILE under ./var/run/secrets/workload-spiffe-uds. */
export function sdsSocketPath(socketFile = DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE): string {
  return `${WORKLOAD_IDENTITY_DIR}/${socketFile}`;
}
export const XDS_CLUSTER = 'xds-grpc';
export const SDS_CLUSTER = 'sds-grpc';
export const AGENT_CLUSTER = 'agent';
export const PROMETHEUS_CLUSTER = 'prometheus_stats';

/** The agent's local xDS socket under the proxy config path (Istio's ./etc/istio/proxy/XDS). */
export function xdsSocketPath(configPath: string): string {
  return `${configPath.replace(/\/+$/, '')}/XDS`;
}

/** The rendered bootstrap's file (Istio's envoy-rev.json under the config path). */
export function bootstrapFilePath(configPath: string): string {
  return `${configPath.replace(/\/+$/, '')}/envoy-rev.json`;
}

// Stats the agent itself relies on (readiness, drain) stay included whatever the user's matcher says.
const REQUIRED_PREFIXES = ['cluster_manager', 'listener_manager', 'server', `cluster.${XDS_CLUSTER}`, 'wasm'];
const RBAC_SUFFIXES = ['rbac.allowed', 'rbac.denied', 'shadow_allowed', 'shadow_denied'];
const DRAIN_SUFFIX = 'downstream_cx_active';
const REQUIRED_REGEXPS = ['vhost\\.*\\.route\\.*'];

export interface BootstrapInputs {
  node: Pick<NodeInfo, 'id' | 'cluster' | 'locality' | 'metadata'>;
  proxyConfig: ProxyConfig;
  /** All addresses of the node; an IPv6-only node gets ::1 and :: instead of 127.0.0.1 and 0.0.0.0. */
  ipv6: boolean;
  /** PROXY_STATUS_PORT: the proxy's own health listener (15021). */
  envoyStatusPort: number;
  /** PROXY_METRICS_PORT: the proxy's Prometheus listener (15090). */
  envoyPrometheusPort: number;
  exitOnZeroActiveConnections: boolean;
  outlierLogPath: string;
  /** HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED */
  stripFragmentFromPath: boolean;
  /** `GRPC` (state of the world) or `DELTA_GRPC`. */
  xdsType: 'GRPC' | 'DELTA_GRPC';
  stsPort: number;
  /** Expected SAN of the daemon, when the control plane uses mTLS. */
  pilotSan: string[];
  /** Root CA path for the control plane, when TLS is used. */
  xdsRootCert: string;
  /** WORKLOAD_IDENTITY_SOCKET_FILE (default `socket`). */
  workloadIdentitySocketFile?: string;
  /** COMPLIANCE_POLICY */
  compliancePolicy?: string;
}

/** Istio's extractRuntimeFlags: defaults, then ProxyConfig.runtimeValues ("" removes a default). */
export function runtimeFlags(pc: ProxyConfig, stripFragmentFromPath: boolean, compliancePolicy = ''): Record<string, JsonValue> {
  const flags: Record<string, JsonValue> = {
    'overload.global_downstream_max_connections': '2147483647',
    're2.max_program_size.error_level': '32768',
    'envoy.deprecated_features:envoy.config.listener.v3.Listener.hidden_envoy_deprecated_use_original_dst': true,
    'envoy.reloadable_features.http_reject_path_with_fragment': false,
  };
  // FIPS: keeps the proxy's google_grpc clients at TLS 1.2 at most.
  if (compliancePolicy === 'fips-140-2') flags['envoy.reloadable_features.google_grpc_disable_tls_13'] = true;
  // The condition reads backwards on purpose: Istio shipped it so and kept it for compatibility.
  if (!stripFragmentFromPath) flags['envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled'] = 'false';
  for (const [k, v] of Object.entries(pc.runtimeValues)) {
    if (v === '') delete flags[k];
    else flags[k] = v === 'true' ? true : v === 'false' ? false : v;
  }
  return flags;
}

/** Stats inclusion lists: the ProxyConfig matcher's, plus the ones the agent needs. */
export function statsInclusions(pc: ProxyConfig, exitOnZeroActiveConnections: boolean, nodeIps: readonly string[]) {
  const sub = (patterns: string[]) => patterns.flatMap((p) => (p.includes('{pod_ip}') ? nodeIps.map((ip) => p.split('{pod_ip}').join(ip)) : [p]));
  return {
    prefixes: sub([...(pc.proxyStatsMatcher?.inclusionPrefixes ?? []), ...REQUIRED_PREFIXES]),
    suffixes: sub([...(pc.proxyStatsMatcher?.inclusionSuffixes ?? []), ...RBAC_SUFFIXES, ...(exitOnZeroActiveConnections ? [DRAIN_SUFFIX] : [])]),
    regexps: sub([...(pc.proxyStatsMatcher?.inclusionRegexps ?? []), ...REQUIRED_REGEXPS]),
  };
}

// Envoy's stats tag extraction for the names Istio's dashboards use.
const STATS_TAGS: Array<{ tag_name: string; regex: string }> = [
  { tag_name: 'cluster_name', regex: '^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)' },
  { tag_name: 'tcp_prefix', regex: '^tcp\\.((.*?)\\.)\\w+?$' },
  { tag_name: 'response_code', regex: '_rq(_(\\d{3}))$' },
  { tag_name: 'response_code_class', regex: '_rq(_(\\dxx))$' },
  // Istio writes `^listener(?=\.).*?\.http\.…`; the lookahead is spelled as an optional group starting with a
  // dot (the same language) so that RE2-based proxies accept it too.
  { tag_name: 'http_conn_manager_listener_prefix', regex: '^listener(?:\\..*?)?\\.http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
  { tag_name: 'http_conn_manager_prefix', regex: '^http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
  { tag_name: 'listener_address', regex: '^listener\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
  { tag_name: 'mongo_prefix', regex: '^mongo\\.(.+?)\\.(collection|cmd|cx_|op_|delays_|decoding_)(.*?)$' },
];
const TRAILING_STATS_TAGS: Array<{ tag_name: string; regex: string }> = [
  { tag_name: 'cache', regex: '(cache\\.(.+?)\\.)' },
  { tag_name: 'component', regex: '(component\\.(.+?)\\.)' },
  { tag_name: 'tag', regex: '(tag\\.(.+?);\\.)' },
  { tag_name: 'wasm_filter', regex: '(wasm_filter\\.(.+?)\\.)' },
  { tag_name: 'authz_enforce_result', regex: 'rbac(\\.(allowed|denied))' },
  { tag_name: 'authz_dry_run_action', regex: '(\\.istio_dry_run_(allow|deny)_)' },
  { tag_name: 'authz_dry_run_result', regex: '(\\.shadow_(allowed|denied))' },
];

function localityJson(l: Locality | undefined): JsonObject {
  const out: JsonObject = {};
  if (l?.region) out['region'] = l.region;
  if (l?.zone) out['zone'] = l.zone;
  if (l?.subZone) out['sub_zone'] = l.subZone;
  return out;
}

function staticCluster(name: string, address: JsonObject, extra: JsonObject = {}): JsonObject {
  return {
    name,
    type: 'STATIC',
    connect_timeout: name === AGENT_CLUSTER || name === PROMETHEUS_CLUSTER ? '0.250s' : '1s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address } }] }] },
    ...extra,
  };
}

const HTTP2_OPTIONS: JsonObject = {
  'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
    '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    explicit_http_config: { http2_protocol_options: {} },
  },
};

function forwardingListener(wildcard: string, port: number, statPrefix: string, prefix: string, cluster: string): JsonObject {
  return {
    // Envoy names an unnamed listener itself; naming it as Envoy's listener stats do keeps stricter proxies happy.
    name: `${wildcard}_${port}`,
    address: { socket_address: { protocol: 'TCP', address: wildcard, port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
              codec_type: 'AUTO',
              stat_prefix: statPrefix,
              route_config: {
                virtual_hosts: [{ name: 'backend', domains: ['*'], routes: [{ match: { prefix }, route: { cluster } }] }],
              },
              http_filters: [
                {
                  name: 'envoy.filters.http.router',
                  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                },
              ],
            },
          },
        ],
      },
    ],
  };
}

/** The built-in bootstrap, as Envoy JSON (proto field names). */
export function renderBootstrap(i: BootstrapInputs): JsonObject {
  const pc = i.proxyConfig;
  const localhost = i.ipv6 ? '::1' : '127.0.0.1';
  const wildcard = i.ipv6 ? '::' : '0.0.0.0';
  const ips = String(i.node.metadata['INSTANCE_IPS'] ?? '')
    .split(',')
    .filter(Boolean);
  const inc = statsInclusions(pc, i.exitOnZeroActiveConnections, ips);
  const socket = (port: number): JsonObject => ({ socket_address: { protocol: 'TCP', address: localhost, port_value: port } });
  const out: JsonObject = {
    node: {
      id: i.node.id,
      cluster: i.node.cluster,
      locality: localityJson(i.node.locality),
      metadata: i.node.metadata,
    },
    layered_runtime: {
      layers: [
        { name: 'global config', static_layer: runtimeFlags(pc, i.stripFragmentFromPath, i.compliancePolicy) },
        { name: 'admin', admin_layer: {} },
      ],
    },
    stats_config: {
      use_all_default_tags: false,
      stats_tags: [
        ...STATS_TAGS,
        ...pc.extraStatTags.filter(Boolean).map((tag) => ({ regex: `(${tag}=\\.=(.*?);\\.;)`, tag_name: tag })),
        ...TRAILING_STATS_TAGS,
      ],
      stats_matcher: {
        inclusion_list: {
          patterns: [
            { prefix: 'reporter=' },
            ...inc.prefixes.map((prefix) => ({ prefix })),
            ...inc.suffixes.map((suffix) => ({ suffix })),
            ...inc.regexps.map((regex) => ({ safe_regex: { regex } })),
            { prefix: 'component' },
            { prefix: 'istio' },
            { prefix: 'mesh' },
          ],
        },
      },
    },
    admin: {
      access_log: [
        {
          name: 'envoy.access_loggers.file',
          typed_config: { '@type': 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog', path: '/dev/null' },
        },
      ],
      address: { socket_address: { address: localhost, port_value: pc.proxyAdminPort } },
    },
    dynamic_resources: {
      lds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
      cds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
      ads_config: {
        api_type: i.xdsType,
        set_node_on_first_message_only: true,
        transport_api_version: 'V3',
        grpc_services: [{ envoy_grpc: { cluster_name: XDS_CLUSTER } }],
      },
    },
    static_resources: {
      clusters: [
        staticCluster(PROMETHEUS_CLUSTER, socket(pc.proxyAdminPort)),
        staticCluster(AGENT_CLUSTER, socket(pc.statusPort)),
        staticCluster(
          SDS_CLUSTER,
          { pipe: { path: sdsSocketPath(i.workloadIdentitySocketFile) } },
          { typed_extension_protocol_options: HTTP2_OPTIONS },
        ),
        staticCluster(
          XDS_CLUSTER,
          { pipe: { path: xdsSocketPath(pc.configPath) } },
          {
            circuit_breakers: {
              thresholds: [
                { priority: 'DEFAULT', max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 },
                { priority: 'HIGH', max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 },
              ],
            },
            upstream_connection_options: { tcp_keepalive: { keepalive_time: 300 } },
            max_requests_per_connection: 1,
            typed_extension_protocol_options: HTTP2_OPTIONS,
          },
        ),
      ],
      listeners: [
        forwardingListener(wildcard, i.envoyPrometheusPort, 'stats', '/stats/prometheus', PROMETHEUS_CLUSTER),
        forwardingListener(wildcard, i.envoyStatusPort, 'agent', '/healthz/ready', AGENT_CLUSTER),
      ],
    },
  };
  if (i.outlierLogPath) out['cluster_manager'] = { outlier_detection: { event_log_path: i.outlierLogPath } };
  return out;
}

export class BootstrapError extends Error {}

/** Go's reflection names of the ProxyConfig fields a template reads as `.config.<Name>`. */
function goProxyConfig(pc: ProxyConfig): Record<string, unknown> {
  return {
    ConfigPath: pc.configPath,
    BinaryPath: pc.binaryPath,
    ServiceCluster: pc.serviceCluster,
    DrainDuration: protoDuration(pc.drainDuration),
    ParentShutdownDuration: protoDuration(pc.parentShutdownDuration),
    TerminationDrainDuration: protoDuration(pc.terminationDrainDuration),
    DiscoveryAddress: pc.discoveryAddress,
    StatsdUdpAddress: pc.statsdUdpAddress,
    ProxyAdminPort: pc.proxyAdminPort,
    ControlPlaneAuthPolicy: pc.controlPlaneAuthPolicy,
    CustomConfigFile: pc.customConfigFile,
    StatNameLength: pc.statNameLength,
    Concurrency: pc.concurrency ?? 0,
    ProxyBootstrapTemplatePath: pc.proxyBootstrapTemplatePath,
    InterceptionMode: pc.interceptionMode,
    StatusPort: pc.statusPort,
    ProxyMetadata: { ...pc.proxyMetadata },
    RuntimeValues: { ...pc.runtimeValues },
    ExtraStatTags: [...pc.extraStatTags],
    MeshId: pc.meshId,
  };
}

/**
 * The values a `--templateFile` template can use, under Istio's option names: nodeID, cluster, region, zone,
 * sub_zone, meta_json_str, runtime_flags (JSON text), localhost, wildcard, additional_wildcard, dual_stack,
 * dns_lookup_family, xds_type, discovery_address, discovery_host, pilot_grpc_address, envoy_status_port,
 * envoy_prometheus_port, stats_config (JSON text of the built-in stats_config), inclusionPrefix,
 * inclusionSuffix, inclusionRegexps, extraStatTags, outlier_log_path, sts_port, pilot_SAN, xds_root_cert,
 * xds_socket_path, sds_socket_path, workload_identity_socket_file, metadata_discovery, and config (the ProxyConfig under Go field names:
 * .config.ProxyAdminPort, .config.StatusPort, .config.ConfigPath, .config.DiscoveryAddress, …).
 */
export function templateParams(i: BootstrapInputs): Record<string, unknown> {
  const pc = i.proxyConfig;
  const ips = String(i.node.metadata['INSTANCE_IPS'] ?? '')
    .split(',')
    .filter(Boolean);
  const inc = statsInclusions(pc, i.exitOnZeroActiveConnections, ips);
  const builtIn = renderBootstrap(i);
  const params: Record<string, unknown> = {
    nodeID: i.node.id,
    cluster: i.node.cluster,
    region: i.node.locality?.region ?? '',
    zone: i.node.locality?.zone ?? '',
    sub_zone: i.node.locality?.subZone ?? '',
    meta_json_str: JSON.stringify(i.node.metadata, null, '  '),
    runtime_flags: JSON.stringify(runtimeFlags(pc, i.stripFragmentFromPath, i.compliancePolicy)),
    localhost: i.ipv6 ? '::1' : '127.0.0.1',
    wildcard: i.ipv6 ? '::' : '0.0.0.0',
    additional_wildcard: '',
    dual_stack: false,
    dns_lookup_family: i.ipv6 ? 'V6_ONLY' : 'V4_ONLY',
    xds_type: i.xdsType,
    metadata_discovery: false,
    discovery_address: pc.discoveryAddress,
    discovery_host: proxyAddress(pc.discoveryAddress)?.host ?? pc.discoveryAddress.split(':')[0],
    pilot_grpc_address: pc.discoveryAddress,
    envoy_status_port: i.envoyStatusPort,
    envoy_prometheus_port: i.envoyPrometheusPort,
    stats_config: JSON.stringify(builtIn['stats_config']),
    inclusionPrefix: inc.prefixes,
    inclusionSuffix: inc.suffixes,
    inclusionRegexps: inc.regexps,
    extraStatTags: pc.extraStatTags.filter(Boolean),
    outlier_log_path: i.outlierLogPath,
    pilot_SAN: i.pilotSan,
    xds_root_cert: i.xdsRootCert,
    xds_socket_path: xdsSocketPath(pc.configPath),
    sds_socket_path: sdsSocketPath(i.workloadIdentitySocketFile),
    workload_identity_socket_file: i.workloadIdentitySocketFile ?? DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE,
    config: goProxyConfig(pc),
  };
  if (i.stsPort > 0) {
    params['sts'] = true;
    params['sts_port'] = i.stsPort;
  }
  return params;
}
