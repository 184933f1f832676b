// The differential harness's HTTP gateway scenarios (issue 27, item 3): one Gateway + VirtualService config with
// a rule per feature (matches, rewrites, header operations, redirects, direct responses, retries, time-outs,
// faults, mirroring, weighted splits, CORS), run through the built gateway on our engine and on the real Envoy
// (test/helpers/differential.ts); what the client and the echo backends saw must be the same but for the
// README's listed differences. Rule shapes follow Istio's networking.istio.io/v1 VirtualService reference.
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type Scenario } from '../../helpers/differential';
import { gatewayDoc, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../../helpers/mesh-yaml';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const host = (b: string) => `${b}.demo.svc.cluster.local`;
const to = (b: string, extra = '') => `route: [{destination: {host: ${host(b)}, port: {number: 80}}${extra}}]`;

const RULES = `  - name: exact
    match: [{uri: {exact: /exact}}]
    ${to('a')}
  - name: header-match
    match: [{uri: {prefix: /match}, headers: {x-version: {exact: v2}}}]
    ${to('b')}
  - name: query-match
    match: [{uri: {prefix: /match}, queryParams: {pick: {exact: b}}}]
    ${to('b')}
  - name: method-regex
    match: [{uri: {regex: "/re/[0-9]+"}, method: {exact: POST}}]
    ${to('b')}
  - name: match-default
    match: [{uri: {prefix: /match}}]
    ${to('a')}
  - name: rewrite
    match: [{uri: {prefix: /v1/}}]
    rewrite: {uri: /v2/, authority: rewritten.example}
    ${to('a')}
  - name: rewrite-regex
    match: [{uri: {prefix: /rx/}}]
    rewrite: {uriRegexRewrite: {match: "^/rx/([a-z]+)/(.*)$", rewrite: "/\\\\2/\\\\1"}}
    ${to('a')}
  - name: headers
    match: [{uri: {prefix: /headers}}]
    headers:
      request: {set: {x-set: one}, add: {x-added: two}, remove: [x-drop]}
      response: {set: {x-resp-set: three}, add: {x-resp-added: four}, remove: [x-echo-gone]}
    route:
    - destination: {host: ${host('a')}, port: {number: 80}}
      headers: {request: {set: {x-dest: five}}, response: {add: {x-dest-resp: six}}}
  - name: redirect
    match: [{uri: {prefix: /redirect}}]
    redirect: {uri: /landed, authority: other.example, redirectCode: 301}
  - name: redirect-scheme
    match: [{uri: {prefix: /to-https}}]
    redirect: {scheme: https, port: 8443}
  - name: direct
    match: [{uri: {prefix: /direct}}]
    directResponse: {status: 418, body: {string: "short and stout"}}
  - name: retry
    match: [{uri: {prefix: /retry}}]
    retries: {attempts: 2, perTryTimeout: 2s, retryOn: 5xx}
    ${to('a')}
  - name: no-retry
    match: [{uri: {prefix: /no-retry}}]
    retries: {attempts: 0}
    ${to('a')}
  - name: timeout
    match: [{uri: {prefix: /timeout}}]
    timeout: 1s
    ${to('a')}
  - name: abort
    match: [{uri: {prefix: /abort}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 100}}}
    ${to('a')}
  - name: delay
    match: [{uri: {prefix: /delay}}]
    fault: {delay: {fixedDelay: 0.2s, percentage: {value: 100}}}
    timeout: 5s
    ${to('a')}
  - name: mirror
    match: [{uri: {prefix: /mirror}}]
    ${to('a')}
    mirror: {host: ${host('c')}, port: {number: 80}}
    mirrorPercentage: {value: 100}
  - name: split
    match: [{uri: {prefix: /split}}]
    route:
    - {destination: {host: ${host('a')}, port: {number: 80}}, weight: 75}
    - {destination: {host: ${host('b')}, port: {number: 80}}, weight: 25}
  - name: cors
    match: [{uri: {prefix: /cors}}]
    corsPolicy:
      allowOrigins: [{exact: "https://app.example"}, {regex: "https://.*\\\\.trusted\\\\.example"}]
      allowMethods: [GET, PUT]
      allowHeaders: [x-custom]
      exposeHeaders: [x-exposed]
      maxAge: 1h
      allowCredentials: true
    ${to('a')}
`;

const ROUTING: Scenario = {
  name: 'gateway-http',
  backends: ['a', 'b', 'c'],
  config: (p) =>
    yamlDocs(
      gatewayDoc(p.gw),
      ...['a', 'b', 'c'].map((b) => serviceEntryDoc(b, { targetPort: p.backends[b] })),
      virtualServiceDoc('routes', { hosts: '"*"', http: RULES }),
    ),
  ready: { name: 'ready', path: '/exact' },
  requests: [
    { name: 'exact', path: '/exact?q=1&r=two', headers: { 'x-forwarded-for': '10.1.2.3', 'user-agent': 'diff' } },
    { name: 'exact-post-body', method: 'POST', path: '/exact', body: 'hello body', headers: { 'content-type': 'text/plain' } },
    { name: 'exact-not-prefix', path: '/exact/more' },
    { name: 'no-route', path: '/nowhere' },
    { name: 'header-match', path: '/match', headers: { 'x-version': 'v2' } },
    { name: 'query-match', path: '/match?pick=b' },
    { name: 'query-no-match', path: '/match?pick=bb' },
    { name: 'regex-post', method: 'POST', path: '/re/42', body: '' },
    { name: 'regex-get', path: '/re/42' },
    { name: 'match-default', path: '/match/x' },
    { name: 'rewrite', path: '/v1/items?id=3' },
    { name: 'rewrite-regex', path: '/rx/abc/def' },
    { name: 'headers', path: '/headers', headers: { 'x-drop': 'gone', 'x-added': 'client', 'x-set': 'client', 'x-echo-header': 'x-echo-gone=1' } },
    { name: 'redirect', path: '/redirect/a?keep=1' },
    { name: 'redirect-scheme', path: '/to-https/x' },
    { name: 'direct', path: '/direct' },
    { name: 'retry-then-ok', path: '/retry', headers: { 'x-echo-fail': '1', 'x-echo-key': 'retry-1' } },
    { name: 'retry-exhausted', path: '/retry', headers: { 'x-echo-fail': '5', 'x-echo-key': 'retry-2' } },
    { name: 'no-retry', path: '/no-retry', headers: { 'x-echo-fail': '1', 'x-echo-key': 'retry-3' } },
    { name: 'upstream-status', path: '/exact', headers: { 'x-echo-status': '503' } },
    { name: 'timeout', path: '/timeout', headers: { 'x-echo-delay-ms': '3000' } },
    { name: 'in-time', path: '/timeout', headers: { 'x-echo-delay-ms': '10' } },
    { name: 'abort', path: '/abort' },
    { name: 'delay-then-ok', path: '/delay' },
    { name: 'mirror', path: '/mirror/m', headers: { 'x-echo-key': 'mirror-1' }, mirrorWaitMs: 3000 },
    { name: 'split', path: '/split', split: { times: 200, weights: { a: 75, b: 25 }, tolerance: 0.1 } },
    {
      name: 'cors-preflight',
      method: 'OPTIONS',
      path: '/cors',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'x-custom' },
    },
    {
      name: 'cors-preflight-regex-origin',
      method: 'OPTIONS',
      path: '/cors',
      headers: { origin: 'https://x.trusted.example', 'access-control-request-method': 'GET' },
    },
    {
      name: 'cors-preflight-bad-origin',
      method: 'OPTIONS',
      path: '/cors',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'PUT' },
    },
    { name: 'cors-actual', path: '/cors', headers: { origin: 'https://app.example' } },
    { name: 'cors-actual-bad-origin', path: '/cors', headers: { origin: 'https://evil.example' } },
  ],
};

t.test('differential: HTTP gateway features', { skip: envoyMissing() }, async (t) => {
  await compareScenario(t, ROUTING, knownDifferences());
});
