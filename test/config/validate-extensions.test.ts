// EnvoyFilter, Telemetry, ProxyConfig and WasmPlugin validation: the cases of Istio 1.26's
// validation_test.go (TestValidateTelemetry, TestValidateProxyConfig, TestValidateTelemetryFilter,
// TestValidateWasmPlugin) and envoyfilter_test.go (TestValidateEnvoyFilter), with Istio's messages.
import t from 'tap';
import { celSyntaxError } from '../../src/config/validate/telemetry';
import { parseDocuments } from '../../src/config/parse';
import { validateObject } from '../../src/config/validate/object';
import { loadEnvoyFilterTypes, validateConfig } from '../../src/config/validate';
import { accepts, mk, rejects } from './helpers';

await loadEnvoyFilterTypes();

const EF_WARNING = [
  'spec',
  'EnvoyFilter exposes internal implementation details that may change at any time. Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.',
] as [string, string];
const ef = (spec: Record<string, unknown>) => mk('EnvoyFilter', spec);
const patch = (p: Record<string, unknown>) => ef({ configPatches: [p] });
const remove = { operation: 'REMOVE' };
const listenerFilter = (filter: Record<string, unknown>) => ({ listener: { filterChain: { filter } } });

t.test('EnvoyFilter', async (t) => {
  accepts(t, ef({}), [EF_WARNING], 'empty filters: only the standing warning');
  accepts(t, ef({ workloadSelector: {} }), [
    EF_WARNING,
    ['spec.workloadSelector', 'Envoy filter: workload selector specified without labels, will be applied to all services in namespace'],
  ]);
  rejects(t, ef({ workloadSelector: { labels: { app: 'a*' } } }), [
    ['spec.workloadSelector.labels[app]', 'wildcard is not supported in selector: "app=a*"'],
  ]);
  rejects(t, patch({}), [['spec.configPatches[0].applyTo', 'Envoy filter: missing applyTo']]);
  rejects(t, patch({ applyTo: 'INVALID' }), [['spec.configPatches[0].applyTo', 'Envoy filter: missing applyTo']]);
  rejects(t, patch({ applyTo: 'LISTENER' }), [['spec.configPatches[0].patch', 'Envoy filter: missing patch']]);
  rejects(t, patch({ applyTo: 'LISTENER', patch: {} }), [['spec.configPatches[0].patch.operation', 'Envoy filter: missing patch operation']]);
  rejects(t, patch({ applyTo: 'LISTENER', patch: { operation: 'ADD' } }), [
    ['spec.configPatches[0].patch.value', 'Envoy filter: missing patch value for non-remove operation'],
  ]);
  rejects(t, patch({ applyTo: 'LISTENER', match: { proxy: { proxyVersion: '%#@~++==`24c234`' } }, patch: remove }), [
    [
      'spec.configPatches[0].match.proxy.proxyVersion',
      'Envoy filter: invalid regex for proxy version, [error parsing regexp: invalid nested repetition operator: `++`]',
    ],
  ]);
  accepts(
    t,
    patch({ applyTo: 'LISTENER', match: { proxy: { proxyVersion: 'release-1\\.2-23434' } }, patch: remove }),
    [EF_WARNING],
    'a proxy version regex that compiles',
  );
  rejects(t, patch({ applyTo: 'LISTENER', match: { cluster: {} }, patch: remove }), [
    ['spec.configPatches[0].match', 'Envoy filter: applyTo for listener class objects cannot have non listener match'],
  ]);
  rejects(t, patch({ applyTo: 'NETWORK_FILTER', match: { listener: { filterChain: { sni: '124', filter: {} } } }, patch: remove }), [
    ['spec.configPatches[0].match.listener.filterChain.filter.name', 'Envoy filter: filter match has no name to match on'],
  ]);
  rejects(t, patch({ applyTo: 'NETWORK_FILTER', match: listenerFilter({ name: 'random', subFilter: {} }), patch: remove }), [
    ['spec.configPatches[0].match.listener.filterChain.filter.subFilter', 'Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only'],
  ]);
  rejects(t, patch({ applyTo: 'HTTP_FILTER', match: listenerFilter({ name: 'random', subFilter: {} }), patch: remove }), [
    [
      'spec.configPatches[0].match.listener.filterChain.filter.name',
      'Envoy filter: subfilter match requires filter match with envoy.filters.network.http_connection_manager',
    ],
  ]);
  rejects(
    t,
    patch({ applyTo: 'HTTP_FILTER', match: listenerFilter({ name: 'envoy.filters.network.http_connection_manager', subFilter: {} }), patch: remove }),
    [['spec.configPatches[0].match.listener.filterChain.filter.subFilter.name', 'Envoy filter: subfilter match has no name to match on']],
  );
  accepts(
    t,
    patch({ applyTo: 'LISTENER', match: listenerFilter({ name: 'envoy.filters.network.tcp_proxy' }), patch: remove }),
    [EF_WARNING, ['spec.configPatches[0].match.listener.filterChain.filter', 'Envoy filter: filter match has no effect when used with LISTENER']],
    'a filter match on a LISTENER patch is a warning',
  );
  rejects(t, patch({ applyTo: 'VIRTUAL_HOST', match: { cluster: {} }, patch: remove }), [
    ['spec.configPatches[0].match', 'Envoy filter: applyTo for http route class objects cannot have non route configuration match'],
  ]);
  rejects(t, patch({ applyTo: 'CLUSTER', match: { listener: {} }, patch: remove }), [
    ['spec.configPatches[0].match', 'Envoy filter: applyTo for cluster class objects cannot have non cluster match'],
  ]);
  rejects(t, patch({ applyTo: 'CLUSTER', match: { cluster: {} }, patch: { operation: 'ADD', value: { name: false } } }), [
    [
      'spec.configPatches[0].patch.value',
      'Envoy filter: cannot decode field envoy.config.cluster.v3.Cluster.name from JSON: expected string, got false',
    ],
  ]);
  const extAuthz = (type: string) => ({
    applyTo: 'NETWORK_FILTER',
    match: { listener: { filterChain: { name: 'envoy.tcp_proxy' } } },
    patch: { operation: 'INSERT_FIRST', value: { typed_config: { '@type': `type.googleapis.com/${type}` } } },
  });
  accepts(
    t,
    ef({
      configPatches: [
        { applyTo: 'CLUSTER', match: { cluster: {} }, patch: { operation: 'ADD', value: { lb_policy: 'RING_HASH' } } },
        extAuthz('envoy.extensions.filters.http.ext_authz.v3.ExtAuthz'),
      ],
    }),
    [EF_WARNING],
    'happy config: a v3 type Istio resolves is accepted',
  );
  rejects(t, ef({ configPatches: [extAuthz('envoy.config.filter.network.ext_authz.v2.ExtAuthz')] }), [
    [
      'spec.configPatches[0].patch.value',
      'referenced type unknown (hint: try using the v3 XDS API): Envoy filter: could not resolve Any message type: type.googleapis.com/envoy.config.filter.network.ext_authz.v2.ExtAuthz',
    ],
  ]);
  rejects(t, ef({ configPatches: [extAuthz('example.com.NotAFilter')] }), [
    [
      'spec.configPatches[0].patch.value',
      'referenced type unknown: Envoy filter: could not resolve Any message type: type.googleapis.com/example.com.NotAFilter',
    ],
  ]);
  accepts(
    t,
    patch({
      applyTo: 'HTTP_FILTER',
      match: listenerFilter({ name: 'envoy.http_connection_manager' }),
      patch: { operation: 'INSERT_FIRST', value: {} },
    }),
    [
      EF_WARNING,
      [
        'spec.configPatches[0].match.listener.filterChain.filter.name',
        'using deprecated filter name "envoy.http_connection_manager"; use "envoy.filters.network.http_connection_manager" instead',
      ],
      ['spec.configPatches[0].patch.value', 'using deprecated types by name without typed_config; '],
    ],
    'deprecated filter name',
  );
  accepts(
    t,
    patch({ applyTo: 'CLUSTER', patch: { operation: 'ADD', value: { dns_refresh_rate: '500ms' } } }),
    [EF_WARNING],
    'Go durations decode as Istio decodes them',
  );
  accepts(
    t,
    patch({ applyTo: 'CLUSTER', patch: { operation: 'MERGE', value: { dns_refresh_rate: '1s', no_such_field: 1 } } }),
    [
      EF_WARNING,
      [
        'spec.configPatches[0].patch.value',
        'Envoy filter: cannot decode message envoy.config.cluster.v3.Cluster from JSON: key "no_such_field" is unknown',
      ],
    ],
    'an unknown field is a warning (strict decode), not an error',
  );
  accepts(
    t,
    patch({ applyTo: 'NETWORK_FILTER', patch: { operation: 'INSERT_FIRST', value: { name: 'envoy.filters.network.tcp_proxy' } } }),
    [EF_WARNING, ['spec.configPatches[0].patch.value', 'using deprecated types by name without typed_config; envoy.filters.network.tcp_proxy']],
    'recurseMissingTypedConfig: a filter with no typed_config',
  );
  accepts(
    t,
    patch({
      applyTo: 'HTTP_FILTER',
      patch: {
        operation: 'INSERT_FIRST',
        value: { name: 'x', config_discovery: { type_urls: ['type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua'] } },
      },
    }),
    [EF_WARNING],
    'recurseMissingTypedConfig: config discovery (ECDS) counts as typed config',
  );
  rejects(
    t,
    patch({
      applyTo: 'HTTP_FILTER',
      patch: {
        operation: 'INSERT_FIRST',
        value: {
          name: 'f',
          typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault', abort: { http_status: 'x' } },
        },
      },
    }),
    [
      [
        'spec.configPatches[0].patch.value',
        'Envoy filter: cannot decode field envoy.extensions.filters.http.fault.v3.FaultAbort.http_status from JSON: expected number (uint32), got "x"',
      ],
    ],
  );
  rejects(t, patch({ applyTo: 'LISTENER', match: { listner: {} }, patch: remove }), [
    [
      'spec.configPatches[0].match.listner',
      'unknown field "listner" in EnvoyConfigObjectMatch (known fields: context, proxy, listener, routeConfiguration, cluster): a misspelt match condition would match more than intended',
    ],
  ]);
});

const telemetry = (spec: Record<string, unknown>) => mk('Telemetry', spec);
const gatewayRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'foo' };
const envTag = { customTags: { clusterID: { environment: { name: 'FOO' } } } };
const TARGETS = '[core/v1/Service networking.istio.io/v1/ServiceEntry networking.mesh.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway]';

t.test('Telemetry', async (t) => {
  accepts(t, telemetry({}), []);
  accepts(t, telemetry({ tracing: [{ providers: [{ name: 'a' }, { name: 'b' }] }] }), [
    ['spec.tracing[0].providers', 'multiple providers is not currently supported'],
  ]);
  accepts(t, telemetry({ tracing: [{}, {}] }), [['spec.tracing', 'multiple tracing is not currently supported']]);
  rejects(t, telemetry({ tracing: [{ randomSamplingPercentage: 101 }] }), [
    ['spec.tracing[0].randomSamplingPercentage', 'randomSamplingPercentage must be in range [0.0, 100.0]'],
  ]);
  accepts(t, telemetry({ tracing: [{ randomSamplingPercentage: 100 }] }), [], 'randomSamplingPercentage 100 is in range');
  accepts(t, telemetry({ tracing: [envTag] }), [], 'a good custom tag');
  rejects(t, telemetry({ tracing: [{ customTags: { a: { literal: { value: '' } } } }] }), [
    ['spec.tracing[0].customTags[a].literal.value', 'literal tag value may not be empty'],
  ]);
  rejects(t, telemetry({ tracing: [{ customTags: { a: { header: {} } } }] }), [
    ['spec.tracing[0].customTags[a].header.name', 'header tag name may not be empty'],
  ]);
  rejects(t, telemetry({ tracing: [{ customTags: { a: { environment: { name: '' } } } }] }), [
    ['spec.tracing[0].customTags[a].environment.name', 'environment tag name may not be empty'],
  ]);
  rejects(t, telemetry({ tracing: [{ customTags: { a: { literal: { value: 'x' }, header: { name: 'y' } } } }] }), [
    ['spec.tracing[0].customTags[a]', 'only one of literal, environment, header may be set, found literal and header'],
  ]);
  const override = (o: Record<string, unknown>) => telemetry({ metrics: [{ overrides: [o] }] });
  rejects(t, override({ tagOverrides: { 'my-tag': { operation: 'UPSERT', value: '' } } }), [
    ['spec.metrics[0].overrides[0].tagOverrides[my-tag].value', 'tagOverrides.value must be set when operation is UPSERT'],
  ]);
  rejects(
    t,
    override({ tagOverrides: { 'my-tag': {} } }),
    [['spec.metrics[0].overrides[0].tagOverrides[my-tag].value', 'tagOverrides.value must be set when operation is UPSERT']],
    'UPSERT is the default',
  );
  accepts(t, override({ tagOverrides: { 'my-tag': { operation: 'UPSERT', value: 'some-cel-expression' } } }), []);
  rejects(t, override({ tagOverrides: { 'my-tag': { operation: 'REMOVE', value: 'x' } } }), [
    ['spec.metrics[0].overrides[0].tagOverrides[my-tag].value', 'tagOverrides.value may only be set when operation is UPSERT'],
  ]);
  accepts(t, override({ tagOverrides: { 'my-tag': { operation: 'REMOVE' } } }), []);
  rejects(t, override({ match: { customMetric: '' } }), [['spec.metrics[0].overrides[0].match.customMetric', 'customMetric may not be empty']]);
  rejects(t, override({ match: { metric: 'REQUEST_COUNT', customMetric: 'x' } }), [
    ['spec.metrics[0].overrides[0].match', 'only one of metric, customMetric may be set, found metric and customMetric'],
  ]);
  rejects(t, telemetry({ metrics: [{ providers: [{ name: 'prometheus' }, { name: '' }] }] }), [
    ['spec.metrics[0].providers[1].name', 'providers.name may not be empty'],
  ]);
  accepts(t, telemetry({ accessLogging: [{ providers: [{ name: 'envoy' }] }, { providers: [{ name: 'otel' }] }] }), [], 'multiple access loggings');
  accepts(t, telemetry({ accessLogging: [{ providers: [{ name: 'envoy' }, { name: 'otel' }] }] }), [], 'multiple access logging providers');
  rejects(t, telemetry({ accessLogging: [{ providers: [{}] }] }), [['spec.accessLogging[0].providers[0].name', 'providers.name may not be empty']]);
  accepts(t, telemetry({ accessLogging: [{ filter: { expression: 'response.code >= 400' } }] }), []);
  {
    // Istio's message is `must be a valid CEL expression, ` and the parser's issue, at the same place
    const v = validateConfig(telemetry({ accessLogging: [{ filter: { expression: ')++++' } }] }));
    t.same(
      v.errors.map((e) => e.field),
      ['spec.accessLogging[0].filter.expression'],
    );
    t.match(v.errors[0]?.message, /^must be a valid CEL expression, <input>:1:1: /);
  }
  accepts(t, telemetry({ tracing: [envTag], targetRef: gatewayRef }), [], 'good targetRef');
  rejects(t, telemetry({ targetRef: { group: gatewayRef.group, kind: 'Gateway' } }), [['spec.targetRef.name', 'targetRef name must be set']]);
  rejects(t, telemetry({ targetRef: { ...gatewayRef, namespace: 'bar' } }), [
    ['spec.targetRef.namespace', 'targetRef namespace must not be set; cross namespace referencing is not supported'],
  ]);
  rejects(t, telemetry({ targetRef: { ...gatewayRef, group: 'wrong-group' } }), [
    ['spec.targetRef', `targetRef must be to one of ${TARGETS} but was wrong-group/Gateway`],
  ]);
  rejects(t, telemetry({ targetRef: { ...gatewayRef, kind: 'wrong-kind' } }), [
    ['spec.targetRef', `targetRef must be to one of ${TARGETS} but was gateway.networking.k8s.io/wrong-kind`],
  ]);
  rejects(t, telemetry({ targetRef: gatewayRef, selector: { matchLabels: { app: 'httpbin' } } }), [
    ['spec', 'only one of targetRefs or workloadSelector can be set'],
  ]);
  rejects(t, telemetry({ metrics: [{ reportingInterval: '5x' }] }), [
    ['spec.metrics[0].reportingInterval', 'time: unknown unit "x" in duration "5x"'],
  ]);
});

t.test('Telemetry access-log filters parse as CEL (TestValidateTelemetryFilter and cel-spec grammar)', async (t) => {
  const valid = [
    'response.code >= 400',
    "connection.mtls && request.url_path.contains('v1beta3')",
    'response.code',
    'request.headers[\'x-user\'] == "a" || !(response.code in [500, 503])',
    'size(request.headers) > 0u ? 1.5e3 : -0x1F',
    "{'a': 1, 'b': [1, 2,],}.a == 1",
    'google.protobuf.Duration{seconds: 1} < duration("2s")',
    'r"raw\\d" + b\'bytes\' + """multi\nline"""',
    '.top.level(1, 2) // trailing comment',
  ];
  for (const e of valid) t.equal(celSyntaxError(e), undefined, `parses: ${e}`);
  // cel-go's test inputs; @bufbuild/cel words its errors its own way (and places some at the token before),
  // so the verdict is compared, and the line. It also accepts the invalid escape `"\\q"`, which cel-go rejects.
  const invalid = [')++++', '', 'a &&', 'a b', 'f(1,', "'unterminated", 'if.x', 'a ? b', 'a # b'];
  for (const e of invalid) t.match(celSyntaxError(e), /^<input>:1:\d+: /, `rejects: ${JSON.stringify(e)}`);
});

t.test('ProxyConfig', async (t) => {
  accepts(t, mk('ProxyConfig', {}), []);
  accepts(t, mk('ProxyConfig', { concurrency: 0, environmentVariables: { A: 'b' }, image: { imageType: 'distroless' } }), []);
  rejects(t, mk('ProxyConfig', { concurrency: -1 }), [['spec.concurrency', 'concurrency must be greater than or equal to 0']]);
  accepts(t, mk('ProxyConfig', { selector: {} }), [['spec.selector.matchLabels', 'workload selector specified without labels']]);
  rejects(t, mk('ProxyConfig', { selector: { matchLabels: { '': 'x' } } }), [
    ['spec.selector.matchLabels[]', 'empty key is not supported in selector: "=x"'],
  ]);
});

const wasm = (spec: Record<string, unknown>) => mk('WasmPlugin', spec);
const url = 'http://test.com/test';

t.test('WasmPlugin', async (t) => {
  rejects(t, wasm({}), [['spec.url', 'url field needs to be set']]);
  rejects(t, wasm({ url: 'ftp://test.com/test' }), [['spec.url', 'url contains unsupported scheme: ftp']]);
  accepts(t, wasm({ url }), []);
  accepts(t, wasm({ url, sha256: '01ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b' }), []);
  rejects(t, wasm({ url, sha256: '01ba47' }), [['spec.sha256', 'sha256 field must be 64 characters long']]);
  rejects(t, wasm({ url, sha256: 'test' }), [['spec.sha256', 'sha256 field must be 64 characters long']]);
  rejects(t, wasm({ url, sha256: '01Ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b' }), [
    ['spec.sha256', 'sha256 field must match [a-f0-9]{64} pattern'],
  ]);
  accepts(t, wasm({ url: 'oci://test.com/test' }), []);
  accepts(t, wasm({ url: 'test.com/test' }), [], 'no scheme: read as http://');
  accepts(t, wasm({ url: 'file:///opt/filter.wasm' }), []);
  rejects(
    t,
    wasm({ url: 'localhost:5000/filter' }),
    [['spec.url', 'url contains unsupported scheme: localhost']],
    'Go reads host:port/… as a scheme',
  );
  rejects(t, wasm({ url: 'http://test.com/%zz' }), [['spec.url', 'failed to parse url: parse "http://test.com/%zz": invalid URL escape "%zz"']]);
  rejects(t, wasm({ url: 'test.com/test', vmConfig: { env: [{ name: '', valueFrom: 'HOST' }] } }), [
    ['spec.vmConfig.env[0]', 'spec.vmConfig.env invalid'],
  ]);
  rejects(
    t,
    wasm({
      url: 'test.com/test',
      vmConfig: {
        env: [
          { name: 'ENV1', value: 'VAL1' },
          { name: 'ENV1', value: 'VAL1' },
        ],
      },
    }),
    [['spec.vmConfig.env[1]', 'duplicate env']],
  );
  rejects(t, wasm({ url, vmConfig: { env: [{ name: 'E', valueFrom: 'HOST', value: 'v' }] } }), [
    ['spec.vmConfig.env[0]', 'value may only be set when valueFrom is INLINE'],
  ]);
  accepts(t, wasm({ url, targetRef: gatewayRef }), [], 'target-ref-good');
  accepts(t, wasm({ url, targetRef: { kind: 'Service', name: 'foo' } }), [], 'target-ref-good-service');
  rejects(t, wasm({ url, targetRef: { ...gatewayRef, namespace: 'bar' } }), [
    ['spec.targetRef.namespace', 'targetRef namespace must not be set; cross namespace referencing is not supported'],
  ]);
  rejects(t, wasm({ url, targetRef: { group: gatewayRef.group, kind: 'Gateway' } }), [['spec.targetRef.name', 'targetRef name must be set']]);
  rejects(t, wasm({ url, targetRef: { ...gatewayRef, group: 'wrong-group' } }), [
    ['spec.targetRef', `targetRef must be to one of ${TARGETS} but was wrong-group/Gateway`],
  ]);
  rejects(t, wasm({ url, targetRef: gatewayRef, selector: { matchLabels: { app: 'httpbin' } } }), [
    ['spec', 'only one of targetRefs or workloadSelector can be set'],
  ]);
  rejects(t, wasm({ url, match: [{ ports: [{ number: 80 }, { number: 0 }] }] }), [
    ['spec.match[0].ports[1].number', 'spec.Match[0].Ports[1] is out of range: 0'],
  ]);
  rejects(t, wasm({ url, pluginName: 'x'.repeat(257) }), [['spec.pluginName', 'pluginName field must be less than 255 characters long']]);
  rejects(t, wasm({ url, imagePullSecret: 'x'.repeat(254) }), [
    ['spec.imagePullSecret', 'imagePullSecret field must be less than 253 characters long'],
  ]);
  rejects(t, wasm({ url, phase: 'LATER' }), [['spec.phase', 'invalid value "LATER", must be one of UNSPECIFIED_PHASE, AUTHN, AUTHZ, STATS']]);
});

t.test('the new kinds parse under Istio’s apiVersions and ours', async (t) => {
  const yaml = [
    'networking.istio.io/v1alpha3 EnvoyFilter',
    'networking.istio.io/v1beta1 ProxyConfig',
    'telemetry.istio.io/v1 Telemetry',
    'telemetry.istio.io/v1alpha1 Telemetry',
    'extensions.istio.io/v1alpha1 WasmPlugin',
    'telemetry.mesh.io/v1 Telemetry',
  ]
    .map((s) => s.split(' '))
    .map(([av, kind]) => `apiVersion: ${av}\nkind: ${kind}\nmetadata: {name: x, namespace: ns}\nspec: {}\n`)
    .join('---\n');
  const r = parseDocuments(yaml, 'kinds.yaml');
  t.same(r.errors, []);
  t.same(r.warnings, []);
  t.same(
    r.configs.map((c) => `${c.apiVersion} ${c.kind}`),
    [
      'networking.istio.io/v1alpha3 EnvoyFilter',
      'networking.istio.io/v1beta1 ProxyConfig',
      'telemetry.istio.io/v1 Telemetry',
      'telemetry.istio.io/v1alpha1 Telemetry',
      'extensions.istio.io/v1alpha1 WasmPlugin',
      'telemetry.mesh.io/v1 Telemetry',
    ],
  );
  const wrong = parseDocuments('apiVersion: networking.istio.io/v1\nkind: EnvoyFilter\nmetadata: {name: x}\n', 'ef.yaml');
  t.match(
    wrong.warnings[0]?.message,
    /apiVersion networking\.istio\.io\/v1 is not served for kind EnvoyFilter \(accepted: networking\.mesh\.io\/v1alpha3, networking\.istio\.io\/v1alpha3\)/,
  );
});

t.test('validateObject: the webhook’s and meshctl’s one check', async (t) => {
  const vs = {
    apiVersion: 'networking.istio.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'v', namespace: 'd' },
    spec: { hosts: ['a'], http: [{ route: [{ destination: { host: 'a' } }], bogus: 1 }] },
  };
  const lenient = validateObject(vs);
  t.same(lenient.errors, [], 'the daemon warns about unknown fields');
  t.same(lenient.warnings, ['spec.http[0].bogus: unknown field "bogus"']);
  const strict = validateObject({ ...vs, unexpected_junk: {} }, { strict: true });
  t.same(
    strict.errors,
    ['unknown field "unexpected_junk"', 'spec.http[0].bogus: unknown field "bogus"'],
    'meshctl validate rejects them, top level included',
  );
  t.same(validateObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } }).unknownType, true);
  t.same(validateObject({ apiVersion: 'v1', kind: 'Pod', metadata: {} }).errors, ['metadata.name: name is required']);
  t.same(validateObject({ ...vs, metadata: { ...vs.metadata, annotations: { 'mesh.io/alwaysReject': '' } } }).errors, [
    'metadata.annotations[mesh.io/alwaysReject]: "mesh.io/alwaysReject" annotation found, rejecting',
  ]);
});
