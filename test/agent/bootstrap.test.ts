// The bootstrap the agent renders for the proxy (the agent↔proxy contract, Istio's envoy_bootstrap.json),
// checked by parsing it back with the generated envoy.config.bootstrap.v3.Bootstrap schema; user templates
// in the Go-template subset; the gRPC xDS bootstrap; and the proxy's command line.
import t from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { defaultProxyConfig, type ProxyConfig } from '../../src/config/proxyconfig';
import { bootstrapFilePath, renderBootstrap, runtimeFlags, templateParams, type BootstrapInputs } from '../../src/agent/bootstrap';
import { validateBootstrap } from '../../src/agent/bootstrap-schema';
import { renderBootstrapTemplate } from '../../src/agent/template';
import { nodeMetadata } from '../../src/agent/node';
import { grpcBootstrap } from '../../src/agent/grpc-bootstrap';
import { builtinEngineOptions, exitStatus, findProxyBinary, proxyArgs } from '../../src/agent/process';
import * as fs from 'node:fs';
import path from 'node:path';
import { ApiConfigSource_ApiType, ApiVersion } from '../../src/gen/envoy/config/core/v3/config_source_pb';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { re2SyntaxError } from '../../src/lib/re2';
import { tempDir } from '../helpers/temp';
import { gatewayNodeInputs } from './helpers';

function inputs(over: Partial<BootstrapInputs> = {}, pc: Partial<ProxyConfig> = {}): BootstrapInputs {
  const proxyConfig = { ...defaultProxyConfig(), serviceCluster: 'mesh-proxy', ...pc };
  const node = nodeMetadata(
    gatewayNodeInputs({
      proxyConfig,
      instanceIp: '10.0.0.4',
      machineIps: [],
      env: { MESH_METAJSON_LABELS: '{"mesh":"ingressgateway","istio-locality":"r.z.s"}' },
    }),
  );
  return {
    node,
    proxyConfig,
    ipv6: false,
    envoyStatusPort: 15021,
    envoyPrometheusPort: 15090,
    exitOnZeroActiveConnections: false,
    outlierLogPath: '',
    stripFragmentFromPath: true,
    xdsType: 'GRPC',
    stsPort: 0,
    pilotSan: [],
    xdsRootCert: '',
    ...over,
  };
}

function socketOf(addr: unknown): { address: string; port: number } | undefined {
  const a = addr as { address?: { case: string; value: { address: string; portSpecifier: { case: string; value: number } } } } | undefined;
  if (a?.address?.case !== 'socketAddress') return undefined;
  return { address: a.address.value.address, port: a.address.value.portSpecifier.value };
}

t.test('built-in bootstrap: the contract, parsed back as envoy.config.bootstrap.v3.Bootstrap', async (t) => {
  const b = validateBootstrap(renderBootstrap(inputs()), 'test');
  t.equal(b.node?.id, 'router~10.0.0.4~gw-0.mesh-system~mesh-system.svc.cluster.local');
  t.equal(b.node?.cluster, 'mesh-proxy.mesh-system');
  t.same(
    { region: b.node?.locality?.region, zone: b.node?.locality?.zone, subZone: b.node?.locality?.subZone },
    { region: 'r', zone: 'z', subZone: 's' },
  );
  t.same((b.node?.metadata as Record<string, unknown>)['LABELS'], { mesh: 'ingressgateway', 'istio-locality': 'r/z/s' });
  t.equal((b.node?.metadata as Record<string, unknown>)['NAMESPACE'], 'mesh-system');
  t.equal(
    (b.node?.metadata as Record<string, unknown>)['INSTANCE_IPS'],
    '10.0.0.4,127.0.0.1,::1',
    'no machine addresses: loopback of both families follows the instance IP',
  );

  t.same(socketOf(b.admin?.address), { address: '127.0.0.1', port: 15000 }, 'admin on 127.0.0.1:15000');

  const ads = b.dynamicResources?.adsConfig;
  t.equal(ads?.apiType, ApiConfigSource_ApiType.GRPC);
  t.equal(ads?.transportApiVersion, ApiVersion.V3);
  t.equal(ads?.setNodeOnFirstMessageOnly, true);
  t.equal(ads?.grpcServices[0]?.targetSpecifier.case, 'envoyGrpc');
  t.equal((ads?.grpcServices[0]?.targetSpecifier.value as { clusterName: string }).clusterName, 'xds-grpc');
  t.equal(b.dynamicResources?.cdsConfig?.configSourceSpecifier.case, 'ads');
  t.equal(b.dynamicResources?.ldsConfig?.configSourceSpecifier.case, 'ads');

  const clusters = new Map(b.staticResources!.clusters.map((c) => [c.name, c]));
  const endpointOf = (name: string) =>
    clusters.get(name)?.loadAssignment?.endpoints[0]?.lbEndpoints[0]?.hostIdentifier.value as {
      address?: { address: { case: string; value: unknown } };
    };
  const pipeOf = (name: string) => {
    const a = endpointOf(name).address?.address;
    return a?.case === 'pipe' ? (a.value as { path: string }).path : undefined;
  };
  t.equal(pipeOf('xds-grpc'), './etc/mesh/proxy/XDS', 'xds-grpc → the agent socket');
  t.equal(pipeOf('sds-grpc'), './var/run/secrets/workload-spiffe-uds/socket');
  t.same(socketOf(endpointOf('agent').address), { address: '127.0.0.1', port: 15020 }, 'agent cluster → status port');
  t.same(socketOf(endpointOf('prometheus_stats').address), { address: '127.0.0.1', port: 15000 }, 'prometheus_stats → admin');

  const listeners = b.staticResources!.listeners.map((l) => {
    const hcm = anyUnpack(l.filterChains[0]!.filters[0]!.configType.value as never, envoyTypeRegistry()) as unknown as {
      routeSpecifier: {
        value: {
          virtualHosts: Array<{
            routes: Array<{ match: { pathSpecifier: { value: string } }; action: { value: { clusterSpecifier: { value: string } } } }>;
          }>;
        };
      };
    };
    const route = hcm.routeSpecifier.value.virtualHosts[0]!.routes[0]!;
    return {
      port: socketOf(l.address)!.port,
      address: socketOf(l.address)!.address,
      prefix: route.match.pathSpecifier.value,
      cluster: route.action.value.clusterSpecifier.value,
    };
  });
  t.same(listeners, [
    { port: 15090, address: '0.0.0.0', prefix: '/stats/prometheus', cluster: 'prometheus_stats' },
    { port: 15021, address: '0.0.0.0', prefix: '/healthz/ready', cluster: 'agent' },
  ]);
});

t.test('built-in bootstrap follows the ProxyConfig and options', async (t) => {
  const json = renderBootstrap(
    inputs(
      {
        ipv6: true,
        envoyStatusPort: 25021,
        envoyPrometheusPort: 25090,
        exitOnZeroActiveConnections: true,
        outlierLogPath: '/dev/stdout',
        xdsType: 'DELTA_GRPC',
      },
      {
        proxyAdminPort: 25000,
        statusPort: 25020,
        configPath: '/var/run/mesh',
        runtimeValues: { 're2.max_program_size.error_level': '', 'x.y': 'true' },
        extraStatTags: ['request_host'],
      },
    ),
  );
  const b = validateBootstrap(json, 'test');
  t.same(socketOf(b.admin?.address), { address: '::1', port: 25000 });
  t.equal(b.dynamicResources?.adsConfig?.apiType, ApiConfigSource_ApiType.DELTA_GRPC);
  t.same(
    b.staticResources!.listeners.map((l) => socketOf(l.address)),
    [
      { address: '::', port: 25090 },
      { address: '::', port: 25021 },
    ],
  );
  const xds = b.staticResources!.clusters.find((c) => c.name === 'xds-grpc')!;
  t.equal(
    (xds.loadAssignment!.endpoints[0]!.lbEndpoints[0]!.hostIdentifier.value as { address: { address: { value: { path: string } } } }).address.address
      .value.path,
    '/var/run/mesh/XDS',
  );
  const patterns = b.statsConfig!.statsMatcher!.statsMatcher.value as { patterns: Array<{ matchPattern: { case: string; value: unknown } }> };
  const suffixes = patterns.patterns.filter((p) => p.matchPattern.case === 'suffix').map((p) => p.matchPattern.value);
  t.ok(suffixes.includes('downstream_cx_active'), 'EXIT_ON_ZERO_ACTIVE_CONNECTIONS keeps the drain stat');
  const prefixes = patterns.patterns.filter((p) => p.matchPattern.case === 'prefix').map((p) => p.matchPattern.value);
  for (const p of ['cluster_manager', 'listener_manager', 'server', 'cluster.xds-grpc'])
    t.ok(prefixes.includes(p), `readiness stat prefix ${p} kept`);
  t.ok(
    b.statsConfig!.statsTags.some((s) => s.tagName === 'request_host'),
    'extraStatTags become tags',
  );
  t.equal(b.clusterManager?.outlierDetection?.eventLogPath, '/dev/stdout');
  const flags = runtimeFlags({ ...defaultProxyConfig(), runtimeValues: { 're2.max_program_size.error_level': '', 'x.y': 'true' } }, false);
  t.equal(flags['re2.max_program_size.error_level'], undefined, 'an empty runtime value removes the default');
  t.equal(flags['x.y'], true, '"true" becomes a boolean');
  t.equal(flags['overload.global_downstream_max_connections'], '2147483647');
  t.equal(flags['envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled'], 'false');
  const plain = validateBootstrap(renderBootstrap(inputs()), 'test').statsConfig!.statsMatcher!.statsMatcher.value as typeof patterns;
  t.notOk(
    plain.patterns.some((p) => p.matchPattern.value === 'downstream_cx_active'),
    'without it, the drain stat is not kept',
  );
  t.equal(bootstrapFilePath('./etc/mesh/proxy/'), './etc/mesh/proxy/envoy-rev.json');
});

t.test('every regex of the built-in bootstrap is RE2 syntax (safe_regex is RE2; proxies may use RE2 for tags too)', async (t) => {
  const b = renderBootstrap(inputs({}, { proxyStatsMatcher: { inclusionRegexps: ['.*upstream_rq_.*'] } })) as {
    stats_config: {
      stats_tags: Array<{ tag_name: string; regex: string }>;
      stats_matcher: { inclusion_list: { patterns: Array<{ safe_regex?: { regex: string } }> } };
    };
  };
  const regexes = [
    ...b.stats_config.stats_tags.map((s) => s.regex),
    ...b.stats_config.stats_matcher.inclusion_list.patterns.flatMap((p) => (p.safe_regex ? [p.safe_regex.regex] : [])),
  ];
  t.ok(regexes.length > 10);
  for (const re of regexes) t.equal(re2SyntaxError(re), undefined, re);
  // The listener-prefix tag still extracts what Istio's lookahead version does.
  const tag = new RegExp(
    b.stats_config.stats_tags.find((s) => s.tag_name === 'http_conn_manager_listener_prefix')!.regex.replace(/\[:digit:\]/g, '0-9'),
  );
  t.equal(tag.exec('listener.0.0.0.0_8080.http.10.0.0.1_8080.downstream_rq_2xx')?.[2], '10.0.0.1_8080');
});

t.test('validateBootstrap refuses what Envoy would', async (t) => {
  t.throws(() => validateBootstrap({ node: { idd: 'x' } }, 'custom.json'), {
    message: /^custom\.json: invalid envoy\.config\.bootstrap\.v3\.Bootstrap: .*idd/,
  });
});

const TEMPLATE = `{
  "node": {
    "id": "{{ .nodeID }}",
    "cluster": "{{ .cluster }}",
    "locality": {
      {{- if .region }}
      "region": "{{ .region }}"
      {{- end }}
      {{- if .zone }}
      {{- if .region }}
      ,
      {{- end }}
      "zone": "{{ .zone }}"
      {{- end }}
    },
    "metadata": {{ .meta_json_str }}
  },
  {{/* stats: the lists the agent computes */}}
  "stats_config": {
    "stats_matcher": {
      "inclusion_list": {
        "patterns": [
          {{- range $a, $s := .inclusionPrefix }}
          { "prefix": "{{$s}}" },
          {{- end }}
          {{- range $a, $s := .inclusionRegexps }}
          { "safe_regex": {"regex": "{{js $s}}"} },
          {{- end }}
          { "prefix": "component" }
        ]
      }
    }
  },
  "admin": { "address": { "socket_address": { "address": "{{ .localhost }}", "port_value": {{ .config.ProxyAdminPort }} } } },
  "dynamic_resources": {
    "ads_config": { "api_type": "{{ .xds_type }}", "transport_api_version": "V3", "grpc_services": [{ "envoy_grpc": { "cluster_name": "xds-grpc" } }] }
  },
  "static_resources": {
    "clusters": [{
      "name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
      "load_assignment": { "cluster_name": "xds-grpc", "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": { "pipe": { "path": "{{ .config.ConfigPath }}/XDS" } } } }] }] }
    }]
    {{- if .zipkin }},"unused": true{{ end }}
  }
}`;

t.test('--templateFile: a Go template with Istio option names renders to a valid bootstrap', async (t) => {
  const i = inputs({}, { proxyAdminPort: 19000, proxyStatsMatcher: { inclusionRegexps: ['.*"quoted".*'] } });
  const json = renderBootstrapTemplate(TEMPLATE, templateParams(i), 'custom.tmpl');
  const b = validateBootstrap(json, 'custom');
  t.equal(b.node?.id, 'router~10.0.0.4~gw-0.mesh-system~mesh-system.svc.cluster.local');
  t.equal(b.node?.cluster, 'mesh-proxy.mesh-system');
  t.equal(b.node?.locality?.region, 'r');
  t.equal(b.node?.locality?.zone, 'z');
  t.equal((b.node?.metadata as Record<string, unknown>)['NAMESPACE'], 'mesh-system');
  t.same(socketOf(b.admin?.address), { address: '127.0.0.1', port: 19000 });
  t.equal(b.dynamicResources?.adsConfig?.apiType, ApiConfigSource_ApiType.GRPC);
  const patterns = (b.statsConfig!.statsMatcher!.statsMatcher.value as { patterns: Array<{ matchPattern: { case: string; value: unknown } }> })
    .patterns;
  t.same(patterns[0]!.matchPattern, { case: 'prefix', value: 'cluster_manager' });
  const regex = patterns.find((p) => p.matchPattern.case === 'safeRegex')!.matchPattern.value as { regex: string };
  t.equal(regex.regex, '.*"quoted".*', 'js escaping keeps the JSON valid');
  t.equal(
    (
      b.staticResources!.clusters[0]!.loadAssignment!.endpoints[0]!.lbEndpoints[0]!.hostIdentifier.value as {
        address: { address: { value: { path: string } } };
      }
    ).address.address.value.path,
    './etc/mesh/proxy/XDS',
  );
});

t.test('--templateFile errors', async (t) => {
  t.throws(() => renderBootstrapTemplate('{"a": {{ .nodeID }', {}, 'bad.tmpl'), {
    message: /^failed to render bootstrap template bad\.tmpl: template: bad\.tmpl:1: /,
  });
  t.throws(() => renderBootstrapTemplate('{ "a": "{{ .nodeID }}" ', templateParams(inputs()), 'bad.tmpl'), {
    message: /^bootstrap template bad\.tmpl did not render to JSON/,
  });
  t.throws(() => renderBootstrapTemplate('{{ frobnicate .x }}', {}, 'f.tmpl'), { message: /template: f\.tmpl:1: function "frobnicate" not defined/ });
});

t.test('gRPC xDS bootstrap (GRPC_XDS_BOOTSTRAP)', async (t) => {
  const g = grpcBootstrap({
    nodeId: 'sidecar~10.0.0.1~a.b~b.svc.cluster.local',
    metadata: { NAMESPACE: 'b' },
    xdsSocketPath: './etc/mesh/proxy/XDS',
    cwd: '/srv',
    certDir: '/certs',
  });
  t.same(g['xds_servers'], [{ server_uri: 'unix:///srv/etc/mesh/proxy/XDS', channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }]);
  t.same(g['node'], { id: 'sidecar~10.0.0.1~a.b~b.svc.cluster.local', metadata: { NAMESPACE: 'b', GENERATOR: 'grpc' } });
  t.equal(g['server_listener_resource_name_template'], 'xds.istio.io/grpc/lds/inbound/%s');
  t.same(
    (g['certificate_providers'] as Record<string, { config: Record<string, string> }>)['default']!.config['certificate_file'],
    '/certs/cert-chain.pem',
  );
});

t.test("proxy command line: Istio's Envoy flags", async (t) => {
  const base = {
    configFile: 'etc/mesh/proxy/envoy-rev.json',
    drainDurationMs: 45_000,
    parentShutdownDurationMs: 60_000,
    ipv6: false,
    logLevel: 'warning',
    componentLogLevel: 'misc:error',
    realEnvoy: false,
    skipDeprecatedLogs: true,
    enableCoreDump: true,
  };
  t.same(proxyArgs({ ...base, concurrency: 2 }), [
    '-c',
    'etc/mesh/proxy/envoy-rev.json',
    '--drain-time-s',
    '45',
    '--drain-strategy',
    'immediate',
    '--parent-shutdown-time-s',
    '60',
    '--local-address-ip-version',
    'v4',
    '--disable-hot-restart',
    '--allow-unknown-static-fields',
    '-l',
    'warning',
    '--component-log-level',
    'misc:error',
    '--concurrency',
    '2',
  ]);
  const real = proxyArgs({ ...base, ipv6: true, realEnvoy: true, logLevel: '', componentLogLevel: '', override: '{"a":1}' });
  t.ok(
    real.includes('--file-flush-interval-msec') && real.includes('--skip-deprecated-logs') && real.includes('--enable-core-dump'),
    'Envoy-only flags for a real Envoy',
  );
  t.same(real.slice(real.indexOf('--local-address-ip-version'), real.indexOf('--local-address-ip-version') + 2), [
    '--local-address-ip-version',
    'v6',
  ]);
  t.same(real.slice(-2), ['--config-yaml', '{"a":1}']);
  t.notOk(real.includes('--concurrency'), 'no --concurrency when unset');
  t.notOk(real.includes('-l'));
});

t.test('the built-in engine in the agent: concurrency unset is one worker (its workers get TLS secrets late, see process.ts)', async (t) => {
  const run = {
    configFile: 'c.json',
    drainDurationMs: 45_000,
    parentShutdownDurationMs: 60_000,
    ipv6: false,
    logLevel: 'warning',
    componentLogLevel: '',
    realEnvoy: false,
    skipDeprecatedLogs: false,
    enableCoreDump: false,
  };
  t.equal(builtinEngineOptions({ ...run, concurrency: 2 }, 'warning').concurrency, 2);
  t.equal(builtinEngineOptions(run, 'warning').concurrency, 1, 'unset');
  t.equal(builtinEngineOptions({ ...run, concurrency: 0 }, 'warning').concurrency, 1, '0');
});

t.test('exitStatus: a shell-style status of the proxy', async (t) => {
  t.equal(exitStatus({ code: 3, signal: null }), 3);
  t.equal(exitStatus({ code: null, signal: 'SIGKILL' }), 137);
});

t.test('finding envoy: binaryPath when executable, else envoy on PATH, else none', async (t) => {
  const dir = tempDir(t, 'mesh-agent-bin-');
  const onPath = path.join(dir, 'path');
  fs.mkdirSync(onPath);
  t.equal(findProxyBinary('/nonexistent/envoy', onPath, dir), undefined, 'nothing found');
  fs.writeFileSync(path.join(onPath, 'envoy'), '#!/bin/sh\n', { mode: 0o644 });
  t.equal(findProxyBinary('/nonexistent/envoy', onPath, dir), undefined, 'a non-executable file is not a proxy');
  fs.chmodSync(path.join(onPath, 'envoy'), 0o755);
  t.equal(findProxyBinary('/nonexistent/envoy', `/nowhere:${onPath}`, dir), path.join(onPath, 'envoy'), 'envoy on PATH');
  fs.writeFileSync(path.join(dir, 'my-envoy'), '#!/bin/sh\n', { mode: 0o755 });
  t.equal(findProxyBinary('my-envoy', onPath, dir), path.join(dir, 'my-envoy'), 'binaryPath (relative to the working directory) wins');
});

t.test("sds-grpc follows WORKLOAD_IDENTITY_SOCKET_FILE; fips-140-2 caps the proxy's google_grpc clients at TLS 1.2", async (t) => {
  const sdsPath = (b: ReturnType<typeof validateBootstrap>) => {
    const c = b.staticResources!.clusters.find((x) => x.name === 'sds-grpc')!;
    return (c.loadAssignment!.endpoints[0]!.lbEndpoints[0]!.hostIdentifier.value as { address: { address: { value: { path: string } } } }).address
      .address.value.path;
  };
  t.equal(sdsPath(validateBootstrap(renderBootstrap(inputs()), 'test')), './var/run/secrets/workload-spiffe-uds/socket', "Istio's path by default");
  t.equal(
    sdsPath(validateBootstrap(renderBootstrap(inputs({ workloadIdentitySocketFile: 'spire.sock' })), 'test')),
    './var/run/secrets/workload-spiffe-uds/spire.sock',
  );
  t.equal(
    templateParams(inputs({ workloadIdentitySocketFile: 'spire.sock' }))['workload_identity_socket_file'],
    'spire.sock',
    'templates get it too',
  );
  t.equal(runtimeFlags(defaultProxyConfig(), true)['envoy.reloadable_features.google_grpc_disable_tls_13'], undefined);
  t.equal(
    runtimeFlags(defaultProxyConfig(), true, 'fips-140-2')['envoy.reloadable_features.google_grpc_disable_tls_13'],
    true,
    "Istio's FIPS runtime flag",
  );
});
