// `meshctl x authz check` and the `authz` pointer (issue 28 item 6) with the built binary: Istio 1.26.8's own
// test dump and expected table (istioctl/pkg/authz/authz_test.go, fixtures/istio-1.26.8/authz), a dump with
// DENY, LOG and network RBAC filters built here in Envoy's config dump JSON, and the error cases.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { tempDir } from '../helpers/temp';
import { REPO } from '../helpers/spec';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const meshctl = (args: string[], env: Record<string, string> = {}) => exec(MESHCTL, args, { env: { ...ENV, ...env } });
const FIXTURE = path.join(REPO, 'test/meshctl/fixtures/istio-1.26.8/authz/configdump.yaml');

t.test("Istio's test dump", async (t) => {
  const r = await meshctl(['x', 'authz', 'check', '-f', FIXTURE]);
  t.equal(r.code, 0, r.stderr);
  // authz_test.go's ExpectedOutput.
  t.equal(
    r.stdout,
    `ACTION   AuthorizationPolicy         RULES
ALLOW    _anonymous_match_nothing_   1
ALLOW    httpbin.default             1
CUSTOM   ext-authz.default           1
`,
  );
});

const rbac = (type: string, rules: object, shadow?: object) => ({
  '@type': type,
  rules,
  ...(shadow ? { shadow_rules: shadow } : {}),
});
const HTTP_RBAC = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';
const NET_RBAC = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';
const any = { any: true };
const policy = { permissions: [any], principals: [any] };

function listener(name: string, filters: object[]) {
  return {
    name,
    active_state: {
      version_info: '1',
      listener: {
        '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener',
        name,
        address: { socket_address: { address: '0.0.0.0', port_value: 15006 } },
        filter_chains: [{ filters }],
      },
    },
  };
}

t.test('DENY before ALLOW, LOG, network RBAC, rules counted per policy', async (t) => {
  const hcm = {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: 'inbound',
      http_filters: [
        {
          name: 'envoy.filters.http.rbac',
          typed_config: rbac(HTTP_RBAC, {
            action: 'DENY',
            policies: { 'ns[prod]-policy[deny-admin]-rule[0]': policy, 'ns[prod]-policy[deny-admin]-rule[1]': policy },
          }),
        },
        { name: 'envoy.filters.http.rbac', typed_config: rbac(HTTP_RBAC, { policies: { 'ns[prod]-policy[allow-get]-rule[0]': policy } }) },
        {
          name: 'envoy.filters.http.rbac',
          typed_config: rbac(HTTP_RBAC, { action: 'LOG', policies: { 'ns[mesh-system]-policy[audit]-rule[0]': policy } }),
        },
        { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
      ],
    },
  };
  const tcp = [
    {
      name: 'envoy.filters.network.rbac',
      typed_config: { ...rbac(NET_RBAC, { action: 'DENY', policies: { 'ns[prod]-policy[deny-admin]-rule[2]': policy } }), stat_prefix: 'tcp.' },
    },
    {
      name: 'envoy.filters.network.tcp_proxy',
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: 'x', cluster: 'c' },
    },
  ];
  const dump = {
    configs: [
      {
        '@type': 'type.googleapis.com/envoy.admin.v3.ListenersConfigDump',
        dynamic_listeners: [listener('virtualInbound', [hcm]), listener('tcp', tcp)],
      },
    ],
  };
  const f = path.join(tempDir(t), 'dump.json');
  writeFileSync(f, JSON.stringify(dump));
  const r = await meshctl(['x', 'authz', 'check', '-f', f]);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    `ACTION   AuthorizationPolicy   RULES
DENY     deny-admin.prod       3
ALLOW    allow-get.prod        1
LOG      audit.mesh-system     1
`,
  );
});

t.test('errors and the pointer', async (t) => {
  let r = await meshctl(['x', 'authz', 'check', '-f', 'fake.yaml']);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: failed to get config dump from file fake.yaml: open fake.yaml: no such file or directory\n');
  r = await meshctl(['x', 'authz', 'check']);
  t.equal(r.stderr, 'Error: expecting pod name or config dump, found: 0\n');
  const bad = path.join(tempDir(t), 'bad.json');
  writeFileSync(bad, '{"configs": [');
  r = await meshctl(['x', 'authz', 'check', '-f', bad]);
  t.equal(r.code, 1);
  t.match(r.stderr, /^Error: failed to unmarshal proxy config: error unmarshalling config dump response from Envoy: /);
  r = await meshctl(['authz']);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: (authz is experimental. Use `meshctl experimental authz`)\n');
  r = await meshctl(['x', 'authz', 'check', 'httpbin-0.default'], { MESHCTL_XDS_ADDRESS: '127.0.0.1:9' });
  t.equal(r.code, 1);
  t.match(r.stderr, /^Error: could not dial 127\.0\.0\.1:9: /, 'a live pod is looked up through the daemon');
});
