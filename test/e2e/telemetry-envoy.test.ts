// Real Envoy 1.36 takes the telemetry config the daemon generates for it: an HTTP connection manager built by
// the daemon's own generator (access log of the mesh's accessLogFile in Istio's TEXT format; a Telemetry
// access log provider with a CEL filter; the OpenTelemetry access logger and zipkin tracer with their
// collector clusters; Istio's tracing tags), and it writes the access log lines the formats say. It also shows
// why upstream Envoy gets no istio.stats: a listener naming it is refused unless the filter is optional.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { create, toJson } from '@bufbuild/protobuf';
import { type Any, AnySchema, anyUnpack } from '@bufbuild/protobuf/wkt';
import { parseMeshConfig } from '../../src/config/meshconfig';
import type { Config } from '../../src/config/types';
import { proxyCapabilities } from '../../src/discovery/capabilities';
import { initPushContext } from '../../src/discovery/push-context';
import { buildRegistries } from '../../src/discovery/registry';
import { ExtensionSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { HttpConnectionManagerSchema } from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { httpConnectionManager } from '../../src/xds/gen/filters';
import { mxHttpFilter } from '../../src/xds/gen/telemetry-filters';
import { cfg, internalService, ListStore, proxy } from '../discovery/fixtures';
import { envoyMissing, envoyPath } from '../helpers/envoy';
import { freePort } from '../helpers/ports';
import { loopback, loopbackCluster, runStatic } from '../helpers/static-plane';
import { REPO } from '../helpers/spec';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

const skip = envoyMissing();

const fixture = JSON.parse(fs.readFileSync(path.join(REPO, 'test/xds/gen/fixtures/envoy-1.36.2-extensions.json'), 'utf8')) as {
  extensions: Array<{ name: string; category: string; type_urls: string[] }>;
};
const upstreamEnvoy = fixture.extensions.map((e) => create(ExtensionSchema, { name: e.name, category: e.category, typeUrls: e.type_urls }));

/** The generated HCM as Envoy's JSON, routes inline: /ok answers 200, anything else 404. */
function hcmJson(configs: Config[], meshYaml: string): Record<string, unknown> {
  const store = new ListStore(configs);
  const push = initPushContext(store, buildRegistries(store, []), { meshTelemetry: parseMeshConfig(meshYaml, 'mesh.yaml').telemetry });
  const p = proxy('sidecar~127.0.0.1~web-1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', MESH_ID: 'mesh1', LABELS: { app: 'web' } });
  p.capabilities = proxyCapabilities(upstreamEnvoy);
  const routeConfig = {
    name: 'inline',
    virtualHosts: [
      {
        name: 'all',
        domains: ['*'],
        routes: [
          { match: { pathSpecifier: { case: 'path' as const, value: '/ok' } }, action: { case: 'directResponse' as const, value: { status: 200 } } },
          { match: { pathSpecifier: { case: 'prefix' as const, value: '/' } }, action: { case: 'directResponse' as const, value: { status: 404 } } },
        ],
      },
    ],
  };
  const any = httpConnectionManager(p, push, { statPrefix: 'inbound_0.0.0.0_80', cls: 'sidecarInbound', routeConfig });
  const hcm = anyUnpack(any, HttpConnectionManagerSchema)!;
  return toJson(HttpConnectionManagerSchema, hcm, { registry: envoyTypeRegistry() }) as Record<string, unknown>;
}

const listener = (name: string, port: number, hcm: Record<string, unknown>) => ({
  name,
  address: loopback(port),
  filter_chains: [
    {
      filters: [
        {
          name: 'envoy.filters.network.http_connection_manager',
          typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', ...hcm },
        },
      ],
    },
  ],
});

const h2 = {
  'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
    '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    explicit_http_config: { http2_protocol_options: {} },
  },
};

t.test('Envoy accepts the generated access logs and tracing, and logs as the formats say', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-telemetry-envoy-');
  const [a, b, c, admin, closed] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const meshLog = path.join(dir, 'mesh.log');
  const filtered = path.join(dir, 'filtered.log');
  const jsonLog = path.join(dir, 'json.log');
  const services = [
    internalService('observability', 'zipkin', { ports: [{ number: 9411, name: 'http', protocol: 'HTTP' }] }),
    internalService('observability', 'otel', { ports: [{ number: 4317, name: 'grpc', protocol: 'GRPC' }] }),
  ];
  // A: no Telemetry, the mesh's accessLogFile in Istio's TEXT format, tracing by enableTracing (no provider)
  const hcmA = hcmJson(services, `accessLogFile: ${meshLog}\n`);
  // B: Telemetry logs to a file provider only from 400 on (CEL) and to the OpenTelemetry collector; zipkin tracing
  const meshB = [
    'extensionProviders:',
    '- name: errors',
    `  envoyFileAccessLog: { path: ${filtered} }`,
    '- name: otel',
    '  envoyOtelAls: { service: otel.observability.svc.cluster.local, port: 4317 }',
    '- name: zipkin',
    '  zipkin: { service: zipkin.observability.svc.cluster.local, port: 9411 }',
  ].join('\n');
  const telemetry = cfg('Telemetry', 'mesh-system', 'default', {
    accessLogging: [{ providers: [{ name: 'errors' }], filter: { expression: 'response.code >= 400' } }, { providers: [{ name: 'otel' }] }],
    tracing: [{ providers: [{ name: 'zipkin' }], randomSamplingPercentage: 100, customTags: { team: { literal: { value: 'a' } } } }],
  });
  const hcmB = hcmJson([...services, telemetry], meshB);
  t.equal((hcmB['tracing'] as { provider?: { name: string } }).provider?.name, 'envoy.tracers.zipkin');
  t.same(
    (hcmB['accessLog'] as Array<{ name: string }>).map((l) => l.name),
    ['envoy.access_loggers.file', 'envoy.access_loggers.open_telemetry'],
  );
  // C: the mesh's accessLogFile in Istio's JSON encoding; an OpenTelemetry (gRPC) tracer from a Telemetry
  const otelTracing = cfg('Telemetry', 'mesh-system', 'default', { tracing: [{ providers: [{ name: 'otel-tracing' }] }] });
  const meshC = [
    `accessLogFile: ${jsonLog}`,
    'accessLogEncoding: JSON',
    'extensionProviders:',
    '- name: otel-tracing',
    '  opentelemetry: { service: otel.observability.svc.cluster.local, port: 4317 }',
  ].join('\n');
  const hcmC = hcmJson([...services, otelTracing], meshC);
  t.equal((hcmC['tracing'] as { provider?: { name: string } }).provider?.name, 'envoy.tracers.opentelemetry');
  const bootstrap = {
    admin: { address: loopback(admin) },
    static_resources: {
      listeners: [listener('a', a, hcmA), listener('b', b, hcmB), listener('c', c, hcmC)],
      clusters: [
        loopbackCluster('outbound|9411||zipkin.observability.svc.cluster.local', closed),
        { ...loopbackCluster('outbound|4317||otel.observability.svc.cluster.local', closed), typed_extension_protocol_options: h2 },
      ],
    },
  };
  const run = await runStatic(t, 'envoy', bootstrap, a, '/ok');
  if ('refused' in run) return t.fail(`Envoy refused the generated config:\n${run.refused}`);
  const viaB = await fetch(`http://127.0.0.1:${b}/ok`);
  t.equal(viaB.status, 200);
  const missingB = await fetch(`http://127.0.0.1:${b}/missing`, { headers: { 'user-agent': 'telemetry-test' } });
  t.equal(missingB.status, 404);
  t.equal((await fetch(`http://127.0.0.1:${c}/ok`)).status, 200);
  await waitFor(
    () => 'access log lines',
    async () => [meshLog, filtered, jsonLog].every((f) => fs.existsSync(f) && fs.readFileSync(f, 'utf8').includes('\n')),
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  // Istio's TEXT format: [start] "METHOD PATH PROTOCOL" code flags details termination "failure" bytes...
  const lineA = fs
    .readFileSync(meshLog, 'utf8')
    .split('\n')
    .find((l) => l.includes('"GET /ok HTTP/1.1"'));
  t.match(
    lineA,
    /^\[\d{4}-\d\d-\d\dT[\d:.]+Z\] "GET \/ok HTTP\/1\.1" 200 - direct_response - "-" 0 0 \d+ - "-" "[^"]*" "[0-9a-f-]{36}" "127\.0\.0\.1:\d+" "-" - - 127\.0\.0\.1:\d+ 127\.0\.0\.1:\d+ - -$/,
  );
  const linesB = fs.readFileSync(filtered, 'utf8').trim().split('\n');
  t.equal(linesB.length, 1, 'the CEL filter let only the 404 through');
  t.match(linesB[0], /"GET \/missing HTTP\/1\.1" 404 .* "telemetry-test" /);
  const entry = JSON.parse(fs.readFileSync(jsonLog, 'utf8').trim().split('\n')[0]!) as Record<string, unknown>;
  t.equal(Object.keys(entry).length, 24, "Istio's JSON fields");
  t.match(entry, { method: 'GET', path: '/ok', protocol: 'HTTP/1.1', response_code: 200, response_code_details: 'direct_response' });
});

// Envoy finds a filter's factory by its config type; Istio's filters configure by TypedStruct (the metadata
// exchange filters) or their own message (istio.stats), neither of which upstream Envoy registers. In a JSON
// bootstrap an Any of a type Envoy has no descriptor for cannot even be parsed, so the check uses the
// generated metadata exchange filter (a TypedStruct, parsed fine) to show what the factory lookup does.
t.test('upstream Envoy refuses a listener with an Istio-only filter unless it is optional: the daemon leaves them out', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-telemetry-validate-');
  const mx = mxHttpFilter('sidecarInbound');
  const typed = toJson(AnySchema, mx.configType.value as Any, { registry: envoyTypeRegistry() });
  const validate = (optional: boolean) => {
    const file = path.join(dir, `v-${optional}.json`);
    const hcm = {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: 'x',
      route_config: {},
      http_filters: [
        { name: mx.name, typed_config: typed, ...(optional ? { is_optional: true } : {}) },
        { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
      ],
    };
    const bootstrap = {
      static_resources: {
        listeners: [
          {
            name: 'l',
            address: loopback(1),
            filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }] }],
          },
        ],
      },
    };
    fs.writeFileSync(file, JSON.stringify(bootstrap));
    return spawnSync(envoyPath()!, ['--mode', 'validate', '-c', file], { encoding: 'utf8', timeout: 60_000 });
  };
  const strict = validate(false);
  t.not(strict.status, 0, 'refused');
  t.match(
    `${strict.stdout}${strict.stderr}`,
    /Didn't find a registered implementation for 'istio\.metadata_exchange' with type URL: 'io\.istio\.http\.peer_metadata\.Config'/,
  );
  const optional = validate(true);
  t.equal(optional.status, 0, 'accepted when optional');
  t.match(
    optional.stdout + optional.stderr,
    /Didn't find a registered factory for the optional http filter istio\.metadata_exchange/,
    '(and skipped)',
  );
});
