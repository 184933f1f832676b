// AuthorizationPolicy → envoy.filters.http.rbac. Expected values are Istio's authz builder testdata
// (testdata/http/*-out.yaml, Envoy JSON form) and generator shapes; the RBAC engine of the proxy then
// shows what they mean for a request with and without a verified token.
import t from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import type { AuthorizationPolicySpec, Config } from '../../src/config/types';
import { RBACSchema } from '../../src/gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import type { HttpFilter } from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RbacEngine, type RbacInput } from '../../src/proxy/rbac/engine';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { buildAuthzHttpFilters } from '../../src/security/authz/builder';
import { cidrRange, convertToPort, extractNameInNestedBrackets } from '../../src/security/authz/model';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { cfg } from '../discovery/fixtures';
import './helpers';
import { plainConnection } from '../helpers/connection';

const ap = (name: string, spec: AuthorizationPolicySpec, annotations: Record<string, string> = {}, ns = 'foo') =>
  cfg('AuthorizationPolicy', ns, name, spec, { annotations });

function filterJson(f: HttpFilter): JsonValue {
  if (f.configType.case !== 'typedConfig') throw new Error('no typed config');
  return { name: f.name, typedConfig: toJson(RBACSchema, anyUnpack(f.configType.value, RBACSchema)!, { registry: envoyTypeRegistry() }) };
}
const build = (...policies: Config<'AuthorizationPolicy'>[]) => buildAuthzHttpFilters(policies).map(filterJson);
/** The single RBAC policy a one-rule policy produces. */
function onlyPolicy(spec: AuthorizationPolicySpec): Record<string, JsonValue> {
  const [f] = build(ap('p', spec)) as Array<{ typedConfig: { rules: { policies: Record<string, Record<string, JsonValue>> } } }>;
  return f!.typedConfig.rules.policies['ns[foo]-policy[p]-rule[0]']!;
}

const ANY_PERMISSION = [{ andRules: { rules: [{ any: true }] } }];
const ANY_PRINCIPAL = [{ andIds: { ids: [{ any: true }] } }];
const PREFIX = 'istio_dry_run_allow_';
const jwtClaim = (claim: string, stringMatch: JsonValue) => ({
  metadata: { filter: 'envoy.filters.http.jwt_authn', path: [{ key: 'payload' }, { key: claim }], value: { stringMatch } },
});
const principalPair = (iss: JsonValue, sub: JsonValue) => ({ andIds: { ids: [jwtClaim('iss', iss), jwtClaim('sub', sub)] } });
const ANY = { safeRegex: { regex: '.+' } };

t.test('DENY then ALLOW, one filter each (Istio deny-and-allow-out1/out2)', async (t) => {
  const got = build(
    ap('httpbin-deny', { action: 'DENY', rules: [{ from: [{ source: { principals: ['deny'] } }] }] }),
    ap('httpbin-allow', { action: 'ALLOW', rules: [{ from: [{ source: { principals: ['allow'] } }] }] }),
  );
  const policy = (name: string, principal: string) => ({
    [`ns[foo]-policy[${name}]-rule[0]`]: {
      permissions: ANY_PERMISSION,
      principals: [{ andIds: { ids: [{ orIds: { ids: [{ authenticated: { principalName: { exact: `spiffe://${principal}` } } }] } }] } }],
    },
  });
  t.same(got, [
    {
      name: 'envoy.filters.http.rbac',
      typedConfig: { rules: { action: 'DENY', policies: policy('httpbin-deny', 'deny') }, shadowRulesStatPrefix: PREFIX },
    },
    { name: 'envoy.filters.http.rbac', typedConfig: { rules: { policies: policy('httpbin-allow', 'allow') }, shadowRulesStatPrefix: PREFIX } },
  ]);
});

t.test('an empty rule matches everything; a policy without rules matches nothing (Istio deny-empty-rule / allow-none)', async (t) => {
  t.same(build(ap('deny-all', { action: 'DENY', rules: [{}] })), [
    {
      name: 'envoy.filters.http.rbac',
      typedConfig: {
        rules: { action: 'DENY', policies: { 'ns[foo]-policy[deny-all]-rule[0]': { permissions: ANY_PERMISSION, principals: ANY_PRINCIPAL } } },
        shadowRulesStatPrefix: PREFIX,
      },
    },
  ]);
  t.same(
    build(ap('allow-none', {})),
    [
      {
        name: 'envoy.filters.http.rbac',
        typedConfig: {
          rules: {
            policies: { 'ns[foo]-policy[allow-none]-rule[0]': { permissions: [{ notRule: { any: true } }], principals: [{ notId: { any: true } }] } },
          },
          shadowRulesStatPrefix: PREFIX,
        },
      },
    ],
    'ALLOW without rules: deny everything',
  );
});

t.test('dry-run policies go to shadow rules (Istio dry-run-mix)', async (t) => {
  const got = build(
    ap('httpbin-1', { action: 'ALLOW', rules: [{ to: [{ operation: { paths: ['/allow'] } }] }] }, { 'istio.io/dry-run': 'true' }),
    ap('httpbin-2', { action: 'ALLOW', rules: [{ to: [{ operation: { paths: ['/another'] } }] }] }, { 'istio.io/dry-run': 'false' }),
  );
  const pathPolicy = (p: string) => ({
    permissions: [{ andRules: { rules: [{ orRules: { rules: [{ urlPath: { path: { exact: p } } }] } }] } }],
    principals: ANY_PRINCIPAL,
  });
  t.same(got, [
    {
      name: 'envoy.filters.http.rbac',
      typedConfig: {
        rules: { policies: { 'ns[foo]-policy[httpbin-2]-rule[0]': pathPolicy('/another') } },
        shadowRules: { policies: { 'ns[foo]-policy[httpbin-1]-rule[0]': pathPolicy('/allow') } },
        shadowRulesStatPrefix: PREFIX,
      },
    },
  ]);
  const denyDry = build(ap('d', { action: 'DENY', rules: [{}] }, { 'mesh.io/dry-run': 'true' })) as Array<{ typedConfig: Record<string, JsonValue> }>;
  t.equal(denyDry[0]!.typedConfig['rules'], undefined, 'only shadow rules');
  t.equal(denyDry[0]!.typedConfig['shadowRulesStatPrefix'], 'istio_dry_run_deny_');
});

t.test('AUDIT, DENY, ALLOW order; AUDIT is LOG; CUSTOM without a provider denies all first', async (t) => {
  const got = build(
    ap('a', { action: 'ALLOW', rules: [{}] }),
    ap('c', { action: 'CUSTOM', provider: { name: 'ext' }, rules: [{}] }),
    ap('d', { action: 'DENY', rules: [{}] }),
    ap('u', { action: 'AUDIT', rules: [{}] }),
  ) as Array<{ typedConfig: { rules: { action?: string; policies: Record<string, unknown> } } }>;
  t.same(
    got.map((f) => [f.typedConfig.rules.action ?? 'ALLOW', Object.keys(f.typedConfig.rules.policies)]),
    [
      ['DENY', ['default-deny-all-due-to-bad-CUSTOM-action']],
      ['LOG', ['ns[foo]-policy[u]-rule[0]']],
      ['DENY', ['ns[foo]-policy[d]-rule[0]']],
      ['ALLOW', ['ns[foo]-policy[a]-rule[0]']],
    ],
  );
  t.same(build(), [], 'no policies, no filter');
});

t.test('requestPrincipals: issuer/subject matches on the jwt_authn payload (Istio extended-allow-full-rule)', async (t) => {
  const p = onlyPolicy({
    rules: [{ from: [{ source: { requestPrincipals: ['requestPrincipals', 'requestPrincipals-prefix-*', '*-suffix-requestPrincipals', '*'] } }] }],
  });
  t.same(p['principals'], [
    {
      andIds: {
        ids: [
          {
            orIds: {
              ids: [
                principalPair({ exact: 'requestPrincipals' }, { exact: '' }),
                principalPair({ prefix: 'requestPrincipals-prefix-' }, ANY),
                principalPair(ANY, { suffix: '-suffix-requestPrincipals' }),
                principalPair(ANY, ANY),
              ],
            },
          },
        ],
      },
    },
  ]);
  const split = onlyPolicy({
    rules: [{ from: [{ source: { requestPrincipals: ['https://issuer.example/user-1'], notRequestPrincipals: ['*/banned'] } }] }],
  });
  t.same(
    split['principals'],
    [
      {
        andIds: {
          ids: [principalPair({ exact: 'https://issuer.example' }, { exact: 'user-1' }), { notId: principalPair(ANY, { exact: 'banned' }) }],
        },
      },
    ],
    'the last "/" splits issuer and subject; one value is not wrapped in or_ids; not-values negate',
  );
});

t.test('when request.auth.claims / audiences / presenter: list-or-value matches (Istio extended generators)', async (t) => {
  const sm = (v: string): JsonValue =>
    v === '*' ? ANY : v.endsWith('*') ? { prefix: v.slice(0, -1) } : v.startsWith('*') ? { suffix: v.slice(1) } : { exact: v };
  const orOf = (vs: string[]): JsonValue => ({ orMatch: { valueMatchers: vs.map((v) => ({ stringMatch: sm(v) })) } });
  const listOrValue = (path: string[], value: JsonValue) => ({
    metadata: {
      filter: 'envoy.filters.http.jwt_authn',
      path: [{ key: 'payload' }, ...path.map((key) => ({ key }))],
      value: { orMatch: { valueMatchers: [{ listMatch: { oneOf: value } }, value] } },
    },
  });
  const vals = ['nested', 'nested-prefix-*', '*-suffix-nested', '*'];
  const p = onlyPolicy({ rules: [{ when: [{ key: 'request.auth.claims[nested1][nested2]', values: vals, notValues: ['not-nested'] }] }] });
  t.same(p['principals'], [
    {
      andIds: {
        ids: [
          listOrValue(['nested1', 'nested2'], orOf(vals)),
          { notId: listOrValue(['nested1', 'nested2'], { stringMatch: { exact: 'not-nested' } }) },
        ],
      },
    },
  ]);
  const g = onlyPolicy({
    rules: [
      {
        when: [
          { key: 'request.auth.claims[groups]', values: ['group1'] },
          { key: 'request.auth.audiences', values: ['aud1'] },
          { key: 'request.auth.presenter', values: ['azp1', 'azp2'] },
        ],
      },
    ],
  });
  t.same(g['principals'], [
    {
      andIds: {
        ids: [
          listOrValue(['groups'], { stringMatch: { exact: 'group1' } }),
          listOrValue(['aud'], { stringMatch: { exact: 'aud1' } }),
          listOrValue(['azp'], orOf(['azp1', 'azp2'])),
        ],
      },
    },
  ]);
  t.same(
    onlyPolicy({ rules: [{ when: [{ key: 'request.auth.principal', values: ['iss/sub'] }] }] })['principals'],
    [{ andIds: { ids: [principalPair({ exact: 'iss' }, { exact: 'sub' })] } }],
    'request.auth.principal is the request principal',
  );
});

t.test('operations: hosts, methods, paths, ports and their negations (Istio generators)', async (t) => {
  const p = onlyPolicy({
    rules: [
      {
        to: [
          {
            operation: {
              hosts: ['exact.com', '*.suffix.com', 'prefix.*', '*'],
              notHosts: ['not.com'],
              methods: ['GET', 'method-prefix-*'],
              notMethods: ['DELETE'],
              paths: ['/exact', '/prefix/*', '*/suffix', '*'],
              notPaths: ['/admin'],
              ports: ['80', '90'],
              notPorts: ['8000'],
            },
          },
        ],
      },
    ],
  });
  const hostM = (sm: JsonValue) => ({ header: { name: ':authority', stringMatch: sm } });
  t.same(p['permissions'], [
    {
      andRules: {
        rules: [
          {
            orRules: {
              rules: [
                hostM({ exact: 'exact.com', ignoreCase: true }),
                hostM({ suffix: '.suffix.com', ignoreCase: true }),
                hostM({ prefix: 'prefix.', ignoreCase: true }),
                { header: { name: ':authority', presentMatch: true } },
              ],
            },
          },
          { notRule: { orRules: { rules: [hostM({ exact: 'not.com', ignoreCase: true })] } } },
          {
            orRules: {
              rules: [
                { header: { name: ':method', stringMatch: { exact: 'GET' } } },
                { header: { name: ':method', stringMatch: { prefix: 'method-prefix-' } } },
              ],
            },
          },
          { notRule: { orRules: { rules: [{ header: { name: ':method', stringMatch: { exact: 'DELETE' } } }] } } },
          {
            orRules: {
              rules: [
                { urlPath: { path: { exact: '/exact' } } },
                { urlPath: { path: { prefix: '/prefix/' } } },
                { urlPath: { path: { suffix: '/suffix' } } },
                { urlPath: { path: ANY } },
              ],
            },
          },
          { notRule: { orRules: { rules: [{ urlPath: { path: { exact: '/admin' } } }] } } },
          { orRules: { rules: [{ destinationPort: 80 }, { destinationPort: 90 }] } },
          { notRule: { orRules: { rules: [{ destinationPort: 8000 }] } } },
        ],
      },
    },
  ]);
  t.same(p['principals'], ANY_PRINCIPAL);
});

t.test('sources: principals, namespaces, IP blocks and headers (Istio generators)', async (t) => {
  const p = onlyPolicy({
    rules: [
      {
        from: [
          {
            source: {
              principals: ['cluster.local/ns/a/sa/b'],
              namespaces: ['ns-prefix-*'],
              ipBlocks: ['1.2.3.4', '5.6.0.0/16'],
              remoteIpBlocks: ['2001:DB8::1'],
            },
          },
        ],
        when: [
          { key: 'request.headers[X-header]', values: ['header'] },
          { key: 'source.ip', values: ['10.0.0.0/8'] },
        ],
      },
    ],
  });
  t.same(p['principals'], [
    {
      andIds: {
        ids: [
          { orIds: { ids: [{ authenticated: { principalName: { exact: 'spiffe://cluster.local/ns/a/sa/b' } } }] } },
          { orIds: { ids: [{ authenticated: { principalName: { safeRegex: { regex: '.*/ns/ns-prefix-.*/.*' } } } }] } },
          { orIds: { ids: [{ remoteIp: { addressPrefix: '2001:db8::1', prefixLen: 128 } }] } },
          {
            orIds: {
              ids: [{ directRemoteIp: { addressPrefix: '1.2.3.4', prefixLen: 32 } }, { directRemoteIp: { addressPrefix: '5.6.0.0', prefixLen: 16 } }],
            },
          },
          { orIds: { ids: [{ header: { name: 'X-header', stringMatch: { exact: 'header' } } }] } },
          { orIds: { ids: [{ directRemoteIp: { addressPrefix: '10.0.0.0', prefixLen: 8 } }] } },
        ],
      },
    },
  ]);
});

t.test('bad values: an ALLOW rule is dropped, a DENY rule ignores the value (Istio checkError)', async (t) => {
  const allow = build(ap('bad', { rules: [{ to: [{ operation: { ports: ['99999'] } }] }, {}] })) as Array<{
    typedConfig: { rules: { policies: Record<string, unknown> } };
  }>;
  t.same(Object.keys(allow[0]!.typedConfig.rules.policies), ['ns[foo]-policy[bad]-rule[1]'], 'rule 0 of the ALLOW policy is skipped');
  const deny = build(ap('bad', { action: 'DENY', rules: [{ to: [{ operation: { ports: ['99999', '80'] } }] }] })) as Array<{
    typedConfig: { rules: { policies: Record<string, { permissions: JsonValue }> } };
  }>;
  t.same(
    deny[0]!.typedConfig.rules.policies['ns[foo]-policy[bad]-rule[0]']!.permissions,
    [{ andRules: { rules: [{ orRules: { rules: [{ destinationPort: 80 }] } }] } }],
    'the bad port is dropped, the rule stays',
  );
  // (proto3 JSON leaves an empty policy map out)
  const unknown = build(ap('u', { action: 'DENY', rules: [{ when: [{ key: 'request.nonsense', values: ['x'] }] }] })) as Array<{
    typedConfig: { rules: Record<string, unknown> };
  }>;
  t.same(unknown[0]!.typedConfig.rules, { action: 'DENY' }, 'an unknown attribute skips the rule');
  const allowOnly = build(ap('only-bad', { rules: [{ to: [{ operation: { paths: ['/a/{*}'] } }] }] })) as Array<{
    typedConfig: { rules: Record<string, unknown> };
  }>;
  t.same(allowOnly[0]!.typedConfig.rules, {}, 'an ALLOW rule set without policies (denies everything) is still there');
});

t.test('value parsing (Istio util tests)', async (t) => {
  const nested: Array<[string, string[] | null]> = [
    ['[good]', ['good']],
    ['[good][abc][xyz]', ['good', 'abc', 'xyz']],
    ['[]', ['']],
    ['[[good]', ['[good']],
    ['[good]]', ['good]']],
    ['[[good]]', ['[good]']],
    ['x[bad]', null],
    ['[bad', null],
    ['bad]', null],
    ['bad', null],
  ];
  for (const [s, want] of nested) {
    if (want) t.same(extractNameInNestedBrackets(s), want, s);
    else t.throws(() => extractNameInNestedBrackets(s), /expecting format \[<NAME>\]/, s);
  }
  t.equal(convertToPort('443'), 443);
  t.throws(() => convertToPort('65536'), /invalid port 65536/);
  t.throws(() => convertToPort('http'), /invalid port http/);
  t.same(cidrRange('192.168.10.0/24'), { addressPrefix: '192.168.10.0', prefixLen: 24 });
  t.same(cidrRange('10.1.2.3'), { addressPrefix: '10.1.2.3', prefixLen: 32 });
  t.same(cidrRange('::1'), { addressPrefix: '::1', prefixLen: 128 });
  t.throws(() => cidrRange('300.1.1.1'));
  t.throws(() => cidrRange('1.2.3.4/33'));
});

t.test('what the RBAC filters decide for requests with and without a verified token', async (t) => {
  const engineOf = (policies: Config<'AuthorizationPolicy'>[]) =>
    buildAuthzHttpFilters(policies).map((f) => {
      if (f.configType.case !== 'typedConfig') throw new Error('no config');
      const rbac = anyUnpack(f.configType.value, RBACSchema)!;
      return new RbacEngine(rbac.rules!, 'test');
    });
  const request = (payload?: Record<string, unknown>, path = '/headers'): RbacInput => ({
    headers: new RequestHeaders('GET', path, 'gw.example', 'http', {}),
    path,
    connection: plainConnection(),
    dynamicMetadata: payload ? new Map([['envoy.filters.http.jwt_authn', { payload } as never]]) : undefined,
  });
  const allowed = (engines: RbacEngine[], q: RbacInput) => engines.every((e) => e.evaluate(q).allowed);

  const requireToken = engineOf([ap('require-jwt', { rules: [{ from: [{ source: { requestPrincipals: ['*'] } }] }] }, {}, 'mesh-system')]);
  t.notOk(allowed(requireToken, request()), 'no token: denied (the filter answers 403)');
  t.ok(allowed(requireToken, request({ iss: 'https://issuer.example', sub: 'alice' })), 'verified token: allowed');

  const groups = engineOf([
    ap('groups', {
      rules: [{ to: [{ operation: { paths: ['/headers'], methods: ['GET'] } }], when: [{ key: 'request.auth.claims[groups]', values: ['group1'] }] }],
    }),
  ]);
  t.ok(allowed(groups, request({ iss: 'i', sub: 's', groups: ['group0', 'group1'] })), 'list claim containing the value');
  t.ok(allowed(groups, request({ iss: 'i', sub: 's', groups: 'group1' })), 'string claim equal to the value');
  t.notOk(allowed(groups, request({ iss: 'i', sub: 's', groups: ['group2'] })), 'list claim without the value');
  t.notOk(allowed(groups, request({ iss: 'i', sub: 's', groups: ['group1'] }, '/other')), 'other path');

  const denyBanned = engineOf([
    ap('deny', { action: 'DENY', rules: [{ from: [{ source: { requestPrincipals: ['https://issuer.example/mallory'] } }] }] }),
  ]);
  t.notOk(allowed(denyBanned, request({ iss: 'https://issuer.example', sub: 'mallory' })), 'DENY matches the principal');
  t.ok(allowed(denyBanned, request({ iss: 'https://issuer.example', sub: 'alice' })), 'others pass');
  t.ok(allowed(denyBanned, request()), 'no token is not that principal');
  t.same(create(RBACSchema, {}).shadowRulesStatPrefix, '', 'sanity: the prefix above is set by the builder, not a proto default');
});
