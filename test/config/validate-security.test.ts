// RequestAuthentication, AuthorizationPolicy and PeerAuthentication validation (Istio's
// validation.go and pkg/config/security messages), and the Kubernetes objects' structural checks.
import t from 'tap';
import { accepts, mk, rejects } from './helpers';

const ra = (spec: Record<string, unknown>) => mk('RequestAuthentication', spec, { namespace: 'istio-system' });
const rule = (r: Record<string, unknown>) =>
  ra({ selector: { matchLabels: { istio: 'ingressgateway' } }, jwtRules: [{ issuer: 'testing@secure.istio.io', ...r }] });

t.test('RequestAuthentication', async (t) => {
  accepts(t, rule({ jwksUri: 'https://raw.githubusercontent.com/istio/istio/release-1.26/security/tools/jwt/samples/jwks.json' }), []);
  accepts(
    t,
    rule({
      fromHeaders: [{ name: 'Authorization', prefix: 'Bearer ' }],
      outputClaimToHeaders: [{ header: 'x-jwt-group', claim: 'groups' }],
      timeout: '5s',
    }),
    [],
  );
  rejects(t, ra({ jwtRules: [{ jwksUri: 'https://example.com/jwks' }] }), [['spec.jwtRules[0].issuer', 'issuer must be set']]);
  rejects(t, rule({ jwksUri: 'ftp://example.com/jwks' }), [['spec.jwtRules[0].jwksUri', 'URI scheme "ftp" is not supported']]);
  rejects(t, rule({ jwksUri: 'example.com/jwks' }), [['spec.jwtRules[0].jwksUri', 'URI scheme "" is not supported']]);
  rejects(t, rule({ audiences: ['a', ''] }), [['spec.jwtRules[0].audiences[1]', 'audience must be non-empty string']]);
  rejects(t, rule({ fromHeaders: [{ prefix: 'Bearer ' }] }), [['spec.jwtRules[0].fromHeaders[0]', 'location header name must be non-empty string']]);
  rejects(t, rule({ fromParams: [''] }), [['spec.jwtRules[0].fromParams[0]', 'location query must be non-empty string']]);
  rejects(t, rule({ fromCookies: [''] }), [['spec.jwtRules[0].fromCookies[0]', 'cookie name must be non-empty string']]);
  rejects(t, rule({ outputClaimToHeaders: [{ header: '', claim: 'sub' }] }), [
    ['spec.jwtRules[0].outputClaimToHeaders[0]', 'outputClaimToHeaders header and claim value must be non-empty string'],
  ]);
  rejects(t, rule({ outputClaimToHeaders: [{ header: 'x jwt', claim: 'sub' }] }), [
    ['spec.jwtRules[0].outputClaimToHeaders[0].header', 'header name x jwt is not a valid header name'],
  ]);
  rejects(t, rule({ timeout: '0s' }), [['spec.jwtRules[0].timeout', 'duration must be greater than 1ms']]);
  const { validateConfig } = await import('../../src/config/validate');
  const bad = validateConfig(rule({ jwks: '{"keys": [' }));
  t.equal(bad.errors.length, 1);
  t.equal(bad.errors[0]?.field, 'spec.jwtRules[0].jwks');
  t.match(bad.errors[0]?.message, /^jwks parse error: /);
  const rsa =
    '{"keys":[{"e":"AQAB","kid":"DHFbpoIUqrY8t2zpA2qXfCmr5VO5ZEr4RzHU_-envvQ","kty":"RSA","n":"xAE7eB6qugXyCAG3yhh7pkDkT65pHymX-P7KfIupjf59vsdo91bSP9C8H07pSAGQO1MV_xFj9VswgsCg4R6otmg5PV2He95lZdHtOcU5DXIg_pbhLdKXbi66GlVeK6ABZOUW3WYtnNHD-91gVuoeJT_DwtGGcp4ignkgXfkiEm4sw-4sfb4qdt5oLbyVpmW6x9cfa7vs2WTfURiCrBoUqgBo_-4WTiULmmHSGZHOjzwa8WtrtOQGsAFjIbno85jp6MnGGGZPYZbDAa_b3y5u-YpW7ypZrvD8BgtKVjgtQgZhLAGezMt0ua3DRrWnKqTZ0BJ_EyxOGuHJrLsn00fnMQ"}]}';
  accepts(t, rule({ jwks: rsa }), [], 'an inline JWKS');
  accepts(t, rule({ jwks: rsa, jwksUri: 'https://example.com/jwks' }), [
    ['spec.jwtRules[0].jwks', 'only one of jwks and jwksUri should be set; jwks is used and jwksUri ignored'],
  ]);
  rejects(t, ra({ selector: { matchLabels: { app: 'a' } }, targetRef: { kind: 'Service', name: 's' } }), [
    ['spec', 'only one of targetRefs or workloadSelector can be set'],
  ]);
  rejects(t, ra({ targetRef: { group: 'apps', kind: 'Deployment', name: 'd' } }), [
    [
      'spec.targetRef',
      'targetRef must be to one of [core/v1/Service networking.istio.io/v1/ServiceEntry networking.mesh.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway] but was apps/Deployment',
    ],
  ]);
  rejects(t, ra({ targetRef: { kind: 'Service', name: 's', namespace: 'other' } }), [
    ['spec.targetRef.namespace', 'targetRef namespace must not be set; cross namespace referencing is not supported'],
  ]);
  rejects(t, ra({ selector: { matchLabels: { app: '*' } } }), [['spec.selector.matchLabels[app]', 'wildcard is not supported in selector: "app=*"']]);
  rejects(t, ra({ jwtRules: [{ issuer: 'i', jwksUri: 5 }] }), [['spec.jwtRules[0].jwksUri', 'must be of type string, got integer']]);
});

const ap = (spec: Record<string, unknown>, meta = {}) => mk('AuthorizationPolicy', spec, meta);
const when = (key: string, values?: string[], notValues?: string[]) =>
  ap({ rules: [{ when: [{ key, ...(values ? { values } : {}), ...(notValues ? { notValues } : {}) }] }] });

t.test('AuthorizationPolicy', async (t) => {
  // A misspelt field would turn a rule into a broader one (an ALLOW that allows everyone): rejected.
  rejects(t, ap({ rules: [{ from: [{ source: { principal: ['cluster.local/ns/a/sa/b'] } }] }] }), [
    [
      'spec.rules[0].from[0].source.principal',
      'unknown field "principal" in Source (known fields: principals, notPrincipals, requestPrincipals, notRequestPrincipals, namespaces, notNamespaces, serviceAccounts, notServiceAccounts, ipBlocks, notIpBlocks, remoteIpBlocks, notRemoteIpBlocks): a misspelt match condition would match more than intended',
    ],
  ]);
  rejects(t, ap({ rules: [{ to: [{ operation: { path: ['/admin'] } }] }] }), [
    [
      'spec.rules[0].to[0].operation.path',
      'unknown field "path" in Operation (known fields: hosts, notHosts, ports, notPorts, methods, notMethods, paths, notPaths): a misspelt match condition would match more than intended',
    ],
  ]);
  accepts(
    t,
    ap({
      selector: { matchLabels: { app: 'httpbin' } },
      action: 'ALLOW',
      rules: [
        {
          from: [{ source: { principals: ['cluster.local/ns/default/sa/sleep'] } }],
          to: [{ operation: { methods: ['GET'], paths: ['/info*'] } }],
          when: [{ key: 'request.auth.claims[iss]', values: ['https://accounts.google.com'] }],
        },
      ],
    }),
    [],
  );
  accepts(t, ap({}), [], 'ALLOW without rules (denies everything) is valid');
  rejects(t, ap({ action: 'DENY' }), [
    [
      'spec.rules',
      'DENY action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request',
    ],
  ]);
  accepts(t, ap({ action: 'DENY', rules: [{}] }), [], 'DENY with an empty rule matches every request');
  rejects(t, ap({ action: 'CUSTOM' }), [
    [
      'spec.rules',
      'CUSTOM action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request',
    ],
  ]);
  rejects(t, ap({ action: 'CUSTOM', rules: [{}] }), [['spec.provider.name', '`provider.name` must not be empty']]);
  rejects(
    t,
    ap({
      action: 'CUSTOM',
      provider: { name: 'ext' },
      rules: [{ from: [{ source: { requestPrincipals: ['*'] } }], when: [{ key: 'request.auth.claims[iss]', values: ['x'] }] }],
    }),
    [
      ['spec.rules[0].from[0].source.requestPrincipals', 'From.RequestPrincipals is currently not supported with CUSTOM action'],
      ['spec.rules[0].when[0].key', 'request.auth.claims[iss] is currently not supported with CUSTOM action'],
    ],
  );
  rejects(t, ap({ provider: { name: 'ext' }, rules: [{}] }), [['spec.provider', '`provider` must not be with non CUSTOM action, found ALLOW']]);
  rejects(t, ap({ rules: [{ from: [{ source: {} }] }] }), [['spec.rules[0].from[0].source', '`from.source` must not be empty, found at rule 0']]);
  rejects(t, ap({ rules: [{ to: [{ operation: {} }] }] }), [['spec.rules[0].to[0].operation', '`to.operation` must not be empty, found at rule 0']]);
  rejects(t, ap({ rules: [{ from: [{ source: { principals: [''] } }] }] }), [
    ['spec.rules[0].from[0].source.principals', 'empty value not allowed, found in Principals'],
  ]);
  rejects(t, ap({ rules: [{ from: [{ source: { ipBlocks: ['10.0.0.300'] } }] }] }), [
    ['spec.rules[0].from[0].source.ipBlocks', 'bad IP address (10.0.0.300)'],
  ]);
  rejects(t, ap({ rules: [{ to: [{ operation: { ports: ['http'] } }] }] }), [
    ['spec.rules[0].to[0].operation.ports', 'bad port (http): strconv.ParseUint: parsing "http": invalid syntax'],
  ]);
  rejects(t, ap({ rules: [{ to: [{ operation: { paths: ['/{foo}'] } }] }] }), [
    [
      'spec.rules[0].to[0].operation.paths',
      "invalid or unsupported path {foo}, found in Paths. Contains '{' or '}' beyond a supported path template",
    ],
  ]);
  accepts(t, ap({ rules: [{ to: [{ operation: { paths: ['/api/{*}/items/{**}'] } }] }] }), [], 'supported path templates');
  rejects(t, ap({ rules: [{ from: [{ source: { serviceAccounts: ['a/b/c'] } }] }] }), [
    [
      'spec.rules[0].from[0].source.serviceAccounts',
      "expected format 'serviceAccount' or 'namespace/serviceAccount', found \"a/b/c\" in ServiceAccounts",
    ],
  ]);
  // Istio checks the key against values and notValues alike, so a bad key is reported twice.
  rejects(t, when('foo.bar', ['x']), [
    ['spec.rules[0].when[0].values', 'invalid `value` for `key` foo.bar: unknown attribute: foo.bar'],
    ['spec.rules[0].when[0].notValues', 'invalid `notValue` for `key` foo.bar: unknown attribute: foo.bar'],
  ]);
  rejects(t, when('source.ip', ['300.1.1.1']), [['spec.rules[0].when[0].values', 'invalid `value` for `key` source.ip: bad IP address (300.1.1.1)']]);
  rejects(t, when('destination.port', undefined, ['99999']), [
    ['spec.rules[0].when[0].notValues', 'invalid `notValue` for `key` destination.port: bad port (99999): <nil>'],
  ]);
  rejects(t, when('request.headers[x-token]'), [
    ['spec.rules[0].when[0]', 'at least one of `values` or `notValues` must be set for key request.headers[x-token]'],
  ]);
  rejects(t, when('request.headers', ['x']), [
    ['spec.rules[0].when[0].values', 'invalid `value` for `key` request.headers: bad key (request.headers): should have format a[b]'],
    ['spec.rules[0].when[0].notValues', 'invalid `notValue` for `key` request.headers: bad key (request.headers): should have format a[b]'],
  ]);
  rejects(t, when('destination.namespace', ['ns']), [
    [
      'spec.rules[0].when[0].values',
      'invalid `value` for `key` destination.namespace: attribute destination.namespace is replaced by the metadata.namespace',
    ],
    [
      'spec.rules[0].when[0].notValues',
      'invalid `notValue` for `key` destination.namespace: attribute destination.namespace is replaced by the metadata.namespace',
    ],
  ]);
  rejects(t, ap({ rules: [{ when: [{ values: ['x'] }] }] }), [['spec.rules[0].when[0].key', '`key` must not be empty']]);
  for (const key of [
    'source.namespace',
    'source.principal',
    'request.auth.principal',
    'request.auth.audiences',
    'request.auth.presenter',
    'connection.sni',
    'remote.ip',
    'destination.ip',
    'experimental.envoy.filters.a[b]',
  ])
    accepts(t, when(key, [key.endsWith('ip') ? '10.0.0.0/8' : 'v']), [], `when key ${key}`);
  accepts(t, ap({ action: 'DENY', rules: [{ to: [{ operation: { methods: ['POST'] } }] }] }), [
    [
      'spec.rules[0]',
      'configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port',
    ],
  ]);
  rejects(t, ap({ action: 'DENY', rules: [{}] }, { annotations: { 'istio.io/dry-run': 'maybe' } }), [
    [
      'metadata.annotations[istio.io/dry-run]',
      'default/test has annotation istio.io/dry-run with invalid value (maybe): strconv.ParseBool: parsing "maybe": invalid syntax',
    ],
  ]);
  rejects(t, ap({ action: 'AUDIT', rules: [{}] }, { annotations: { 'mesh.io/dry-run': 'true' } }), [
    [
      'metadata.annotations[mesh.io/dry-run]',
      'the annotation mesh.io/dry-run currently only supports action ALLOW/DENY, found action AUDIT in default/test',
    ],
  ]);
  rejects(t, ap({ action: 'PERMIT' }), [['spec.action', 'invalid value "PERMIT", must be one of ALLOW, DENY, AUDIT, CUSTOM']]);
});

t.test('PeerAuthentication', async (t) => {
  accepts(t, mk('PeerAuthentication', { mtls: { mode: 'STRICT' } }, { namespace: 'istio-system' }), []);
  accepts(
    t,
    mk('PeerAuthentication', { selector: { matchLabels: { app: 'a' } }, mtls: { mode: 'STRICT' }, portLevelMtls: { 8080: { mode: 'DISABLE' } } }),
    [],
  );
  rejects(t, mk('PeerAuthentication', { portLevelMtls: { 8080: { mode: 'DISABLE' } } }), [
    ['spec.portLevelMtls', 'mesh/namespace peer authentication cannot have port level mTLS'],
  ]);
  rejects(t, mk('PeerAuthentication', { selector: { matchLabels: { app: 'a' } }, portLevelMtls: { 0: { mode: 'DISABLE' } } }), [
    ['spec.portLevelMtls[0]', 'port must be in range 1..65535'],
  ]);
  rejects(t, mk('PeerAuthentication', { selector: { matchLabels: { app: 'a' } }, portLevelMtls: { http: { mode: 'DISABLE' } } }), [
    ['spec.portLevelMtls[http]', 'invalid map key "http": must be an unsigned integer'],
  ]);
  rejects(t, mk('PeerAuthentication', { mtls: { mode: 'ON' } }), [
    ['spec.mtls.mode', 'invalid value "ON", must be one of UNSET, DISABLE, PERMISSIVE, STRICT'],
  ]);
});

const K8S_RANGE = 'must be between 1 and 65535, inclusive';

t.test('Kubernetes objects', async (t) => {
  accepts(t, mk('Service', { selector: { app: 'reviews' }, ports: [{ name: 'http', port: 9080, targetPort: 9080 }] }, { name: 'reviews' }), []);
  rejects(t, mk('Service', { ports: [{ name: 'http', port: 0 }] }), [['spec.ports[0].port', `Invalid value: 0: ${K8S_RANGE}`]]);
  rejects(t, mk('Service', { ports: [{ port: 80 }, { name: 'b', port: 81, protocol: 'HTTP' }] }), [
    ['spec.ports[0].name', 'Required value'],
    ['spec.ports[1].protocol', 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'],
  ]);
  rejects(t, mk('Service', { ports: [{ port: 80 }] }, { name: 'My_Svc' }), [
    [
      'metadata.name',
      "Invalid value: \"My_Svc\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    ],
  ]);
  rejects(t, mk('Service', { type: 'ClusterIP' }), [['spec.ports', 'Required value']]);
  rejects(t, mk('Service', { ports: [{ port: 80, targetPort: 'http_port' }] }), [
    ['spec.ports[0].targetPort', 'Invalid value: "http_port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)'],
  ]);
  const slice = (spec: Record<string, unknown>, labels: Record<string, string> = { 'kubernetes.io/service-name': 'reviews' }) =>
    mk('EndpointSlice', spec, { labels });
  accepts(
    t,
    slice({
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready: true } }],
      ports: [{ name: 'http', port: 9080, protocol: 'TCP' }],
    }),
    [],
  );
  rejects(t, slice({ addressType: 'IPv5', endpoints: [] }), [['addressType', 'Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"']]);
  rejects(t, slice({ addressType: 'IPv4', endpoints: [{ addresses: ['::1'] }] }), [
    ['endpoints[0].addresses[0]', 'Invalid value: "::1": must be a valid IPv4 address'],
  ]);
  rejects(t, slice({ addressType: 'IPv4', endpoints: [{ addresses: [] }] }), [
    ['endpoints[0].addresses', 'Required value: must contain at least 1 address'],
  ]);
  accepts(t, slice({ addressType: 'IPv4', endpoints: [] }, {}), [
    ['metadata.labels[kubernetes.io/service-name]', 'EndpointSlice has no kubernetes.io/service-name label: it belongs to no Service'],
  ]);
  const pod = mk('Pod', { containers: [{ name: 'app', ports: [{ containerPort: 8080 }] }] });
  accepts(t, { ...pod, status: { podIP: '10.0.0.9', phase: 'Running' } }, []);
  rejects(t, { ...pod, status: { podIP: '10.0.0.999' } }, [['status.podIP', 'Invalid value: "10.0.0.999": must be a valid IP address']]);
  accepts(t, mk('Namespace', {}, { name: 'prod' }), []);
  rejects(t, mk('Namespace', {}, { name: 'Prod' }), [
    [
      'metadata.name',
      "Invalid value: \"Prod\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ],
  ]);
  rejects(t, mk('DestinationRule', { host: 'a' }, { namespace: 'Bad_NS' }), [
    [
      'metadata.namespace',
      "Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ],
  ]);
});
