// VirtualService validation: the rules and messages of Istio 1.26's ValidateVirtualService
// (pkg/config/validation/validation.go, virtualservice.go). Expected messages are Istio's strings.
import t from 'tap';
import type { HTTPRoute } from '../../src/config/types';
import { accepts, mk, rejects } from './helpers';

const dest = (host: string, extra: Record<string, unknown> = {}) => ({ destination: { host, ...extra } });
const vs = (spec: Record<string, unknown>, meta = {}) => mk('VirtualService', { hosts: ['reviews'], ...spec }, meta);
const http = (route: Partial<HTTPRoute> & Record<string, unknown>) => vs({ http: [route] });
const RE2 = '; mesh uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)';

t.test('accepted', async (t) => {
  accepts(
    t,
    http({
      route: [
        { ...dest('reviews', { subset: 'v1' }), weight: 80 },
        { ...dest('reviews', { subset: 'v2' }), weight: 20 },
      ],
    }),
    [],
  );
  // Weights are relative: Istio does not require them to add up to 100.
  accepts(
    t,
    http({
      route: [
        { ...dest('a'), weight: 30 },
        { ...dest('b'), weight: 30 },
      ],
    }),
    [],
    'weights 30/30',
  );
  accepts(
    t,
    http({
      route: [dest('reviews.default.svc.cluster.local', { port: { number: 9080 } })],
      timeout: '1m',
      retries: { attempts: 3, perTryTimeout: '2s', retryOn: '5xx,503,reset' },
    }),
  );
  accepts(t, http({ match: [{ uri: { prefix: '' } }], route: [dest('a')] }), [], 'an empty uri prefix matches everything');
  accepts(
    t,
    http({ match: [{ uri: { regex: '^/api/v[0-9]+/(?P<rest>.*)$' }, headers: { 'x-user': { regex: '(?i)admin\\z' } } }], route: [dest('a')] }),
    [],
    'RE2-only syntax',
  );
  accepts(t, http({ redirect: { uri: '/new', redirectCode: 301 } }));
  accepts(t, http({ directResponse: { status: 503, body: { string: 'unavailable' } } }));
  accepts(t, http({ fault: { abort: { httpStatus: 503, percentage: { value: 0.5 } } }, route: [dest('a')] }));
  accepts(t, vs({ hosts: ['reviews'], tcp: [{ match: [{ port: 27017 }], route: [dest('mongo', { port: { number: 27017 } })] }] }));
  accepts(t, vs({ hosts: ['*'], gateways: ['istio-system/gw'], http: [{ route: [dest('a')] }] }), [], 'wildcard host on a gateway');
});

t.test('route destinations and weights', async (t) => {
  rejects(
    t,
    http({
      route: [
        { ...dest('a'), weight: 0 },
        { ...dest('b'), weight: 0 },
      ],
    }),
    [['spec.http[0].route', 'total destination weight = 0']],
  );
  rejects(
    t,
    http({
      route: [
        { ...dest('a'), weight: 101 },
        { ...dest('b'), weight: -1 },
      ],
    }),
    [['spec.http[0].route[1].weight', 'weight -1 < 0']],
  );
  rejects(t, http({ route: [{ destination: { host: '' } }] }), [['spec.http[0].route[0].destination.host', 'empty domain name not allowed']]);
  rejects(t, http({ route: [dest('*')] }), [['spec.http[0].route[0].destination.host', 'invalid destination host *']]);
  rejects(t, http({ route: [dest('a', { subset: 'v_1' })] }), [['spec.http[0].route[0].destination.subset', 'subset name is invalid: v_1']]);
  rejects(t, http({ route: [dest('a', { port: {} })] }), [
    ['spec.http[0].route[0].destination.port.number', 'port number 0 must be in the range 1..65535'],
  ]);
  rejects(t, http({ route: [{ weight: 100 }] as never }), [['spec.http[0].route[0].destination', 'destination is required']]);
});

t.test('exactly one of route, redirect, direct response (delegate on roots)', async (t) => {
  rejects(t, http({}), [['spec.http[0].route', 'HTTP route, redirect or direct_response is required']]);
  rejects(t, http({ route: [dest('a')], redirect: { uri: '/x' } }), [['spec.http[0]', 'HTTP route cannot contain both route and redirect']]);
  rejects(t, http({ redirect: { uri: '/x' }, directResponse: { status: 200 } }), [
    ['spec.http[0]', 'HTTP route rule cannot contain both direct_response and redirect'],
  ]);
  rejects(t, http({ route: [dest('a')], directResponse: { status: 200 } }), [
    ['spec.http[0]', 'HTTP route cannot contain both route and direct_response'],
  ]);
  rejects(t, http({ redirect: { uri: '/x' }, rewrite: { uri: '/y' } }), [
    ['spec.http[0]', 'HTTP route rule cannot contain both rewrite and redirect'],
  ]);
  rejects(t, http({ redirect: { uri: '/x' }, fault: { abort: { httpStatus: 500 } } }), [
    ['spec.http[0]', 'HTTP route cannot contain both fault and redirect'],
  ]);
  rejects(t, http({ delegate: { name: 'd' }, route: [dest('a')] }), [['spec.http[0].route', 'root HTTP route  must not specify route']]);
  accepts(t, http({ delegate: { name: 'd', namespace: 'ns' } }), [], 'a root route with only a delegate');
  // A delegate VirtualService has no hosts and may not itself delegate.
  rejects(t, mk('VirtualService', { http: [{ delegate: { name: 'x' } }] }), [
    ['spec.http[0].delegate', 'delegate HTTP route cannot contain delegate'],
    ['spec.http[0].route', 'HTTP route, redirect or direct_response is required'],
  ]);
  rejects(t, mk('VirtualService', { gateways: ['ns/gw'], http: [{ route: [dest('a')] }] }), [
    ['spec.gateways', 'delegate virtual service must have no gateways specified'],
  ]);
  rejects(t, http({ redirect: {} }), [['spec.http[0].redirect', 'redirect must specify URI, authority, scheme, or port']]);
  rejects(t, http({ redirect: { uri: '/x', redirectCode: 200 } }), [['spec.http[0].redirect', '200 is not a valid redirect code, must be 3xx']]);
  rejects(t, http({ redirect: { scheme: 'ftp' } }), [['spec.http[0].redirect', 'invalid redirect scheme, must be "http" or "https"']]);
  rejects(t, http({ directResponse: { status: 700 } }), [['spec.http[0].directResponse.status', 'HTTP status 700 is not in range 200-599']]);
});

t.test('matchers: header names, one match type, RE2 regexes', async (t) => {
  rejects(t, http({ match: [{ headers: { 'x user': { exact: 'a' } } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].headers[x user]', 'header name x user is not a valid header name'],
  ]);
  rejects(t, http({ match: [{ headers: { 'x-a': { exact: 'a', prefix: 'b' } } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].headers[x-a]', 'only one of exact, prefix, regex may be set, found exact and prefix'],
  ]);
  rejects(t, http({ match: [{ headers: { 'x-a': { prefix: '' } } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].headers[x-a]', '"headers": prefix string match should not be empty'],
  ]);
  rejects(t, http({ match: [{ uri: { regex: '/(?=admin)' } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].uri', '"uri": error parsing regexp: invalid or unsupported Perl syntax: `(?=`' + RE2],
  ]);
  rejects(t, http({ match: [{ headers: { 'x-a': { regex: '(a)\\1' } } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].headers[x-a]', '"headers": error parsing regexp: invalid escape sequence: `\\1`' + RE2],
  ]);
  rejects(t, http({ match: [{ authority: { regex: '(abc' } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].authority', '"authority": error parsing regexp: missing closing ): `(abc`' + RE2],
  ]);
  rejects(t, http({ match: [{ uri: { regex: '' } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].uri', '"uri": regex string match should not be empty'],
  ]);
  rejects(t, http({ match: [{ uri: { regex: 'a'.repeat(1025) } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].uri', '"uri": regex is too large, max length allowed is 1024'],
  ]);
  accepts(t, http({ match: [{ withoutHeaders: { 'x-a': { regex: '*' } } }], route: [dest('a')] }), [], '`*` in withoutHeaders means present');
  rejects(t, http({ match: [{ port: 70000 }], route: [dest('a')] }), [
    ['spec.http[0].match[0].port', 'port number 70000 must be in the range 1..65535'],
  ]);
  rejects(t, http({ match: [{ sourceNamespace: 'Bad_NS' }], route: [dest('a')] }), [
    ['spec.http[0].match[0].sourceNamespace', 'sourceNamespace match Bad_NS is invalid'],
  ]);
  rejects(t, http({ match: [{ sourceLabels: { app: 'a b' } }], route: [dest('a')] }), [
    ['spec.http[0].match[0].sourceLabels[app]', 'invalid tag value: "a b"'],
  ]);
});

t.test('JWT claim routing only on gateways', async (t) => {
  const claim = (gateways: string[] | undefined, where: 'headers' | 'withoutHeaders' = 'headers') =>
    vs({
      ...(gateways ? { gateways } : {}),
      http: [{ match: [{ uri: { prefix: '/headers' }, [where]: { '@request.auth.claims.groups': { exact: 'group1' } } }], route: [dest('httpbin')] }],
    });
  rejects(t, claim(undefined), [
    [
      'spec.http[0].match[0].headers[@request.auth.claims.groups]',
      'JWT claim based routing (key: @request.auth.claims.groups) is only supported for gateway, found no gateways: []',
    ],
  ]);
  rejects(t, claim(['mesh', 'istio-system/ingressgateway']), [
    [
      'spec.http[0].match[0].headers[@request.auth.claims.groups]',
      'JWT claim based routing (key: @request.auth.claims.groups) is only supported for gateway, found no gateways: [mesh istio-system/ingressgateway]',
    ],
  ]);
  rejects(t, claim(['mesh'], 'withoutHeaders'), [
    [
      'spec.http[0].match[0].withoutHeaders[@request.auth.claims.groups]',
      'JWT claim based routing (key: @request.auth.claims.groups) is only supported for gateway, found no gateways: [mesh]',
    ],
  ]);
  accepts(t, claim(['istio-system/ingressgateway']), [], 'claims on a gateway-bound VirtualService');
  accepts(
    t,
    vs({ gateways: ['gw'], http: [{ match: [{ headers: { '@request.auth.claims[nested][key]': { exact: 'v' } } }], route: [dest('a')] }] }),
    [],
    'bracket form',
  );
  // `@request.auth.claims` alone is not a claim key; it is then an invalid header name.
  rejects(t, vs({ gateways: ['gw'], http: [{ match: [{ headers: { '@request.auth.claims': { exact: 'v' } } }], route: [dest('a')] }] }), [
    ['spec.http[0].match[0].headers[@request.auth.claims]', 'header name @request.auth.claims is not a valid header name'],
  ]);
});

t.test('hosts and gateways', async (t) => {
  rejects(t, vs({ hosts: ['*'], http: [{ route: [dest('a')] }] }), [
    ['spec.hosts[0]', 'wildcard host * is not allowed for virtual services bound to the mesh gateway'],
  ]);
  rejects(t, vs({ hosts: ['foo.*.com'], http: [{ route: [dest('a')] }] }), [['spec.hosts[0]', 'domain name "*.com" invalid (label "*" invalid)']]);
  rejects(t, vs({ hosts: ['*.foo.com', 'bar.foo.com'], http: [{ route: [dest('a')] }] }), [
    ['spec.hosts[1]', 'duplicate hosts in virtual service: *.foo.com & bar.foo.com'],
  ]);
  accepts(t, vs({ hosts: ['10.0.0.1'], http: [{ route: [dest('a')] }] }), [], 'an IP host');
  rejects(t, vs({ gateways: ['ns/Gw_1'], http: [{ route: [dest('a')] }] }), [['spec.gateways[0]', 'invalid value for gateway name: "Gw_1"']]);
  rejects(t, vs({ gateways: ['/gw'], http: [{ route: [dest('a')] }] }), [
    ['spec.gateways[0]', 'config namespace and gateway name cannot be empty'],
    ['spec.gateways[0]', 'invalid value for namespace: ""'],
  ]);
  accepts(t, vs({ gateways: ['gw.istio-system'], http: [{ route: [dest('a')] }] }), [
    ['spec.gateways[0]', 'using legacy gatewayName format "gw.istio-system"; prefer the <namespace>/<name> format: "istio-system/gw"'],
  ]);
  rejects(t, vs({}), [['spec', 'http, tcp or tls must be provided in virtual service']]);
  rejects(t, vs({ hosts: 'reviews', http: [{ route: [dest('a')] }] }), [['spec.hosts', 'must be of type array, got string']]);
  accepts(t, vs({ hostz: ['x'], http: [{ route: [dest('a')] }] }), [['spec.hostz', 'unknown field "hostz"']]);
});

t.test('a misspelt match condition is rejected, never widened (issue 16)', async (t) => {
  const widen = ': a misspelt match condition would match more than intended';
  const sm = 'in StringMatch (known fields: exact, prefix, regex)';
  rejects(
    t,
    vs({
      hosts: ['*'],
      gateways: ['ns/gw'],
      http: [{ match: [{ headers: { '@request.auth.claims.groups': { exac: 'group1' } } }], route: [dest('a')] }],
    }),
    [['spec.http[0].match[0].headers[@request.auth.claims.groups].exac', `unknown field "exac" ${sm}${widen}`]],
  );
  rejects(t, http({ match: [{ uri: { prefx: '/admin' } }] as never, route: [dest('a')] }), [
    ['spec.http[0].match[0].uri.prefx', `unknown field "prefx" ${sm}${widen}`],
  ]);
  rejects(t, http({ match: [{ withoutHeaders: { 'x-a': { Exact: 'a' } } }] as never, route: [dest('a')] }), [
    ['spec.http[0].match[0].withoutHeaders[x-a].Exact', `unknown field "Exact" ${sm}${widen}`],
  ]);
  rejects(t, http({ match: [{ header: { 'x-a': { exact: 'a' } } }] as never, route: [dest('a')] }), [
    [
      'spec.http[0].match[0].header',
      `unknown field "header" in HTTPMatchRequest (known fields: name, uri, scheme, method, authority, headers, port, sourceLabels, gateways, queryParams, ignoreUriCase, withoutHeaders, sourceNamespace, statPrefix)${widen}`,
    ],
  ]);
  rejects(t, vs({ hosts: ['a'], tcp: [{ match: [{ prot: 27017 }], route: [dest('a')] }] }), [
    [
      'spec.tcp[0].match[0].prot',
      `unknown field "prot" in L4MatchAttributes (known fields: destinationSubnets, port, sourceLabels, gateways, sourceNamespace, sourceSubnet)${widen}`,
    ],
  ]);
  // Istio's explicit presence form: an empty StringMatch checks that the header is present.
  accepts(t, http({ match: [{ headers: { 'x-a': {} } }], route: [dest('a')] }), [], 'presence form {}');
  // Unknown fields elsewhere stay warnings, as Istio decodes them.
  accepts(t, http({ route: [dest('a')], timeot: '1s' }), [['spec.http[0].timeot', 'unknown field "timeot"']]);
});

t.test('timeouts, retries, faults, mirrors, rewrites, headers, CORS', async (t) => {
  rejects(t, http({ route: [dest('a')], timeout: '0.5ms' }), [['spec.http[0].timeout', 'duration must be greater than 1ms']]);
  rejects(t, http({ route: [dest('a')], timeout: '1.5ms' }), [['spec.http[0].timeout', 'only durations to ms precision are supported']]);
  rejects(t, http({ route: [dest('a')], timeout: '10' }), [['spec.http[0].timeout', 'time: missing unit in duration "10"']]);
  rejects(t, http({ route: [dest('a')], retries: { attempts: -1 } }), [['spec.http[0].retries.attempts', 'attempts cannot be negative']]);
  rejects(t, http({ route: [dest('a')], retries: { attempts: 0, perTryTimeout: '1s' } }), [
    ['spec.http[0].retries', 'http retry policy configured when attempts are set to 0 (disabled)'],
  ]);
  rejects(t, http({ route: [dest('a')], retries: { attempts: 2, retryOn: '5xx,foo' } }), [
    ['spec.http[0].retries.retryOn', '"foo" is not a valid retryOn policy'],
  ]);
  rejects(t, http({ route: [dest('a')], fault: {} }), [['spec.http[0].fault', 'HTTP fault injection must have an abort and/or a delay']]);
  rejects(t, http({ route: [dest('a')], fault: { abort: { httpStatus: 503, percentage: { value: 101 } } } }), [
    ['spec.http[0].fault.abort.percentage', 'percentage 101 is neither 0.0, nor in range [0.0001, 100.0]'],
  ]);
  rejects(t, http({ route: [dest('a')], fault: { abort: { httpStatus: 99 } } }), [
    ['spec.http[0].fault.abort.httpStatus', 'HTTP status 99 is not in range 200-599'],
  ]);
  rejects(t, http({ route: [dest('a')], fault: { abort: { grpcStatus: 'NOPE' } } }), [
    [
      'spec.http[0].fault.abort.grpcStatus',
      `gRPC status "NOPE" is not supported. See https://github.com/grpc/grpc/blob/master/doc/statuscodes.md for a list of supported codes, for example 'NOT_FOUND'`,
    ],
  ]);
  rejects(t, http({ route: [dest('a')], fault: { delay: { fixedDelay: '0s', percentage: { value: 10 } } } }), [
    ['spec.http[0].fault.delay.fixedDelay', 'duration must be greater than 1ms'],
  ]);
  accepts(t, http({ route: [dest('a')], fault: { abort: { percentage: { value: 10 } } } }), [
    ['spec.http[0].fault.abort', 'abort configured, but error type not set'],
  ]);
  rejects(t, http({ route: [dest('a')], mirror: { host: 'b' }, mirrorPercentage: { value: 101 } }), [
    ['spec.http[0].mirrorPercentage', 'mirror_percentage must have a max value of 100 (it has 101.000000)'],
  ]);
  rejects(t, http({ route: [dest('a')], rewrite: { uri: '/a', uriRegexRewrite: { match: 'a', rewrite: 'b' } } }), [
    ['spec.http[0].rewrite', 'rewrite may only contain one of URI or UriRegexRewrite'],
  ]);
  rejects(t, http({ route: [dest('a')], rewrite: {} }), [
    [
      'spec.http[0].rewrite',
      'rewrite must specify at least one of URI, UriRegexRewrite, or authority. Only one of URI or UriRegexRewrite may be specified',
    ],
  ]);
  rejects(t, http({ route: [dest('a')], rewrite: { authority: 'a' }, headers: { request: { set: { ':authority': 'b' } } } }), [
    ['spec.http[0].headers.request', 'authority header cannot be set multiple times: have "a", attempting to set "b"'],
  ]);
  rejects(t, http({ route: [dest('a')], headers: { request: { set: { ':path': '/x' } }, response: { set: { host: 'h' } } } }), [
    ['spec.http[0].headers.request.set[:path]', 'invalid header ":path": header cannot have ":" prefix'],
    ['spec.http[0].headers.response.set[host]', 'invalid header "host": cannot set Host header'],
  ]);
  rejects(t, http({ route: [dest('a')], headers: { response: { add: { 'x-a': 'abc%123' } } } }), [
    [
      'spec.http[0].headers.response.add[x-a]',
      "header value configuration: invalid header configuration. Un-terminated variable expression 'abc%123'",
    ],
  ]);
  accepts(t, http({ route: [dest('a')], headers: { response: { add: { 'x-a': '100%% %HOSTNAME%' } } } }), [], 'Envoy header formatters');
  rejects(t, http({ route: [dest('a')], corsPolicy: { allowMethods: ['FETCH'], maxAge: '1500ms' } }), [
    ['spec.http[0].corsPolicy.allowMethods[0]', '"FETCH" is not a supported HTTP method'],
    ['spec.http[0].corsPolicy.maxAge', 'max_age duration is accurate only to seconds precision'],
  ]);
});

t.test('TLS and TCP routes, exportTo', async (t) => {
  rejects(t, vs({ hosts: ['a.com'], gateways: ['gw'], tls: [{ match: [{ sniHosts: ['b.com'] }], route: [dest('a')] }] }), [
    ['spec.tls[0].match[0].sniHosts[0]', 'SNI host "b.com" is not a compatible subset of any of the virtual service hosts: [a.com]'],
  ]);
  rejects(t, vs({ hosts: ['a.com'], tls: [{ route: [dest('a')] }] }), [['spec.tls[0].match', 'TLS route must have at least one match condition']]);
  rejects(t, vs({ hosts: ['a.com'], tls: [{ match: [{ sniHosts: ['a.com'] }] }] }), [['spec.tls[0].route', 'TLS route is required']]);
  rejects(t, vs({ tcp: [{ match: [{ destinationSubnets: ['10.0.0.0/33'] }] }] }), [
    ['spec.tcp[0].match[0].destinationSubnets[0]', '10.0.0.0/33 is not a valid CIDR block'],
    ['spec.tcp[0].route', 'TCP route is required'],
  ]);
  rejects(t, vs({ http: [{ route: [dest('a')] }], exportTo: ['~'] }), [
    ['spec.exportTo[0]', 'exportTo ~ (none) is not allowed for mesh configuration objects'],
  ]);
  rejects(t, vs({ http: [{ route: [dest('a')] }], exportTo: ['default', '.'] }), [
    ['spec.exportTo[1]', 'duplicate entries in exportTo: . and current namespace default'],
  ]);
  rejects(t, vs({ http: [{ route: [dest('a')] }], exportTo: ['.', 'default'] }), [
    ['spec.exportTo[1]', 'duplicate entries in exportTo for entry default'],
  ]);
  rejects(t, vs({ http: [{ route: [dest('a')] }], exportTo: ['*', 'ns1'] }), [
    ['spec.exportTo', 'cannot have both public (*) and non-public exportTo values for a resource'],
  ]);
});

t.test('unreachable rules are warnings', async (t) => {
  accepts(t, vs({ http: [{ route: [dest('a')] }, { route: [dest('b')] }] }), [
    ['spec.http[1]', 'virtualService rule #1 not used (only the last rule can have no matches)'],
  ]);
  accepts(
    t,
    vs({
      http: [
        { name: 'first', match: [{ uri: { exact: '/a' } }], route: [dest('a')] },
        { match: [{ name: 'again', uri: { exact: '/a' } }], route: [dest('b')] },
      ],
    }),
    [
      ['spec.http[1].match[0]', 'virtualService rule #1 match "again" is not used (duplicate/overlapping match in rule "first")'],
      ['spec.http[1]', 'virtualService rule #1 not used (all matches used by prior rules)'],
    ],
  );
  accepts(
    t,
    vs({
      http: [
        { match: [{ uri: { prefix: '/api' } }], route: [dest('a')] },
        { match: [{ uri: { prefix: '/api/v2' } }], route: [dest('b')] },
      ],
    }),
    [
      [
        'spec.http[1].match[0]',
        'virtualService rule #1 match #0 of prefix /api/v2 is not used (duplicate/overlapping match in rule #0 of prefix /api on #0)',
      ],
    ],
  );
});

t.test('metadata', async (t) => {
  rejects(t, vs({ http: [{ route: [dest('a')] }] }, { name: 'Bad_Name' }), [
    [
      'metadata.name',
      "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ],
  ]);
  rejects(t, vs({ http: [{ route: [dest('a')] }] }, { annotations: { 'istio.io/dry-run': 'true' } }), [
    ['metadata.annotations[istio.io/dry-run]', 'default/test has unsupported annotation istio.io/dry-run, please remove the annotation'],
  ]);
});
