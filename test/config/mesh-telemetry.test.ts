// The telemetry fields of the mesh config: Istio 1.26 DefaultMeshConfig's defaults and built-in providers,
// ApplyMeshConfig's provider merge, and errors that name the field.
import t from 'tap';
import { MeshConfigError, parseMeshConfig } from '../../src/config/meshconfig';

const parse = (yaml: string) => parseMeshConfig(yaml, 'mesh.yaml').telemetry;

t.test('defaults: tracing on, TEXT, no file, the built-in prometheus, stackdriver and envoy providers', async (t) => {
  const m = parse('');
  t.same([m.enableTracing, m.accessLogFile, m.accessLogEncoding, m.accessLogFormat], [true, '', 'TEXT', '']);
  t.same(
    m.extensionProviders.map((p) => [p.name, p.kind]),
    [
      ['prometheus', 'prometheus'],
      ['stackdriver', 'unsupported'],
      ['envoy', 'envoyFileAccessLog'],
    ],
  );
  t.same(m.defaultProviders, { metrics: [], accessLogging: [], tracing: [] });
});

t.test('providers: a user provider replaces the built-in one of its name, others are appended', async (t) => {
  const m = parse(`
accessLogFile: /dev/stdout
accessLogEncoding: JSON
enableTracing: false
defaultConfig:
  tracing:
    sampling: 10
    zipkin: { address: zipkin.obs:9411 }
    custom_tags:
      team: { literal: { value: a } }
defaultProviders:
  metrics: [prometheus]
  tracing: [otel]
extensionProviders:
- name: envoy
  envoyFileAccessLog: { path: /tmp/x.log, logFormat: { labels: { code: "%RESPONSE_CODE%" } } }
- name: otel
  opentelemetry: { service: otel.obs.svc.cluster.local, port: 4317, http: { path: /v1/traces, timeout: 5s, headers: [{ name: x, value: y }] } }
- name: als
  envoyOtelAls: { service: otel.obs.svc.cluster.local, port: 4317 }
- name: sky
  skywalking: { service: sky, port: 11800 }
`);
  t.same([m.accessLogFile, m.accessLogEncoding, m.enableTracing], ['/dev/stdout', 'JSON', false]);
  t.same(m.tracing, { customTags: { team: { literal: { value: 'a' } } }, sampling: 10, zipkinAddress: 'zipkin.obs:9411' });
  t.same(m.defaultProviders, { metrics: ['prometheus'], accessLogging: [], tracing: ['otel'] });
  t.same(
    m.extensionProviders.map((p) => p.name),
    ['prometheus', 'stackdriver', 'envoy', 'otel', 'als', 'sky'],
  );
  t.same(m.extensionProviders[2], {
    name: 'envoy',
    kind: 'envoyFileAccessLog',
    path: '/tmp/x.log',
    labels: { code: '%RESPONSE_CODE%' },
    omitEmptyValues: false,
  });
  t.same(m.extensionProviders[3], {
    name: 'otel',
    kind: 'opentelemetry',
    service: 'otel.obs.svc.cluster.local',
    port: 4317,
    maxTagLength: 0,
    http: { path: '/v1/traces', timeoutMs: 5000, headers: [{ name: 'x', value: 'y' }] },
  });
  t.same(m.extensionProviders[5], { name: 'sky', kind: 'unsupported', type: 'skywalking' });
});

t.test('errors name the file and field', async (t) => {
  t.throws(() => parse('accessLogEncoding: XML\n'), new MeshConfigError('mesh config mesh.yaml: accessLogEncoding: must be TEXT or JSON, not "XML"'));
  t.throws(() => parse('extensionProviders:\n- name: x\n'), /extensionProviders\[0\]: exactly one provider kind must be set/);
  t.throws(() => parse('enableTracing: yes please\n'), /enableTracing: must be true or false/);
});
