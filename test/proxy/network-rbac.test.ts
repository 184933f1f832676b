// envoy.filters.network.rbac in front of tcp_proxy on real loopback listeners: a refused connection is
// closed before anything reaches the upstream, an admitted one carries bytes both ways, and the
// counters are Envoy's `<stat_prefix>rbac.allowed|denied` (prefix joined with a dot when missing) and
// `<stat_prefix>rbac.<shadow_rules_stat_prefix>shadow_allowed|shadow_denied`.
import t, { type Test } from 'tap';
import net from 'node:net';
import tls from 'node:tls';
import { toJson, type JsonObject } from '@bufbuild/protobuf';
import { FilterSchema } from '../../src/gen/envoy/config/listener/v3/listener_components_pb';
import { buildAuthzNetworkFilters } from '../../src/security/authz/builder';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { cfg } from '../discovery/fixtures';
import { adminGet, makePki, sock, startProxy, statValue, type RunningEngine } from './helpers';
import { freePort } from '../helpers/ports';

const TCP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const RBAC = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';

interface Upstream {
  port: number;
  accepted: () => number;
  close(): void;
}

async function echoUpstream(): Promise<Upstream> {
  let n = 0;
  const s = net.createServer((c) => {
    n++;
    c.on('data', (d) => c.write(`echo:${d}`));
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { port: (s.address() as net.AddressInfo).port, accepted: () => n, close: () => s.close() };
}

/** What the client sees: the bytes received before the connection ended, and whether it ended. */
function exchange(port: number, msg: string): Promise<{ data: string; closed: boolean }> {
  return new Promise((resolve) => {
    let data = '';
    const c = net.connect(port, '127.0.0.1', () => c.write(msg));
    c.on('data', (d) => {
      data += d;
      if (data.startsWith('echo:') && data.length >= msg.length + 5) {
        c.destroy();
        resolve({ data, closed: false });
      }
    });
    c.on('error', () => undefined);
    c.on('close', () => resolve({ data, closed: true }));
  });
}

function listener(name: string, port: number, rbac: JsonObject[]): JsonObject {
  return {
    name,
    address: sock('127.0.0.1', port),
    filter_chains: [
      { filters: [...rbac, { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP, stat_prefix: name, cluster: 'up' } }] },
    ],
  };
}

const rbacFilter = (config: JsonObject): JsonObject => ({ name: 'envoy.filters.network.rbac', typed_config: { '@type': RBAC, ...config } });
const denyFrom = (ip: string): JsonObject => ({
  action: 'DENY',
  policies: { 'deny-source': { permissions: [{ any: true }], principals: [{ direct_remote_ip: { address_prefix: ip, prefix_len: 32 } }] } },
});

async function proxyWith(t: Test, listeners: JsonObject[], upstreamPort: number): Promise<RunningEngine> {
  const p = await startProxy({
    node: { id: 'sidecar~127.0.0.1~app.ns~ns.svc.cluster.local', cluster: 'app' },
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners,
      clusters: [
        {
          name: 'up',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: 'up', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', upstreamPort) } }] }] },
        },
      ],
    },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  return p;
}

t.test('DENY on the source address closes the connection; other sources pass bytes', async (t) => {
  const up = await echoUpstream();
  t.teardown(() => up.close());
  const [denied, allowed, allowEmpty, shadow] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const p = await proxyWith(
    t,
    [
      listener('denied', denied, [rbacFilter({ stat_prefix: 'a.', rules: denyFrom('127.0.0.1') })]),
      listener('allowed', allowed, [rbacFilter({ stat_prefix: 'b', rules: denyFrom('10.9.9.9') })]),
      // Istio's ALLOW filter whose rules were all HTTP-only: an empty ALLOW set admits nobody
      listener('allow-empty', allowEmpty, [rbacFilter({ stat_prefix: 'c.', rules: {} })]),
      listener('shadow', shadow, [
        rbacFilter({
          stat_prefix: 'd.',
          rules: { action: 'ALLOW', policies: { port: { permissions: [{ destination_port: shadow }], principals: [{ any: true }] } } },
          shadow_rules: denyFrom('127.0.0.1'),
          shadow_rules_stat_prefix: 'istio_dry_run_deny_',
        }),
      ]),
    ],
    up.port,
  );

  const refused = await exchange(denied, 'hello');
  t.same(refused, { data: '', closed: true }, 'denied: closed, nothing received');
  t.same(await exchange(allowed, 'hello'), { data: 'echo:hello', closed: false }, 'allowed: bytes flow both ways');
  t.same(await exchange(allowEmpty, 'x'), { data: '', closed: true }, 'an empty ALLOW rule set refuses');
  t.same(await exchange(shadow, 'hi'), { data: 'echo:hi', closed: false }, 'shadow rules never refuse');
  t.equal(up.accepted(), 2, 'refused connections never reached the upstream');

  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'a.rbac.denied'), 1);
  t.equal(statValue(stats, 'a.rbac.allowed'), 0);
  t.equal(statValue(stats, 'b.rbac.allowed'), 1, 'a prefix without a trailing dot gets one');
  t.equal(statValue(stats, 'c.rbac.denied'), 1);
  t.equal(statValue(stats, 'd.rbac.allowed'), 1);
  t.equal(statValue(stats, 'd.rbac.istio_dry_run_deny_shadow_denied'), 1, 'the shadow verdict is counted under its own prefix');
});

t.test('the filters the daemon builds from an AuthorizationPolicy are enforced', async (t) => {
  const up = await echoUpstream();
  t.teardown(() => up.close());
  const toFilterJson = (policies: Parameters<typeof buildAuthzNetworkFilters>[0]) =>
    buildAuthzNetworkFilters(policies).map((f) => toJson(FilterSchema, f, { registry: envoyTypeRegistry() }) as JsonObject);
  const denyLoopback = toFilterJson([
    cfg('AuthorizationPolicy', 'apps', 'deny-lo', { action: 'DENY', rules: [{ from: [{ source: { ipBlocks: ['127.0.0.0/8'] } }] }] }),
  ]);
  // an HTTP-only DENY condition is dropped on TCP: the rule then denies every connection
  const denyHttpOnly = toFilterJson([
    cfg('AuthorizationPolicy', 'apps', 'deny-get', { action: 'DENY', rules: [{ to: [{ operation: { methods: ['GET'] } }] }] }),
  ]);
  const allowPort = toFilterJson([
    cfg('AuthorizationPolicy', 'apps', 'allow-port', {
      rules: [{ to: [{ operation: { ports: ['1'] } }] }, { from: [{ source: { notIpBlocks: ['10.0.0.0/8'] } }] }],
    }),
  ]);
  const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
  const p = await proxyWith(
    t,
    [listener('lo', p1, denyLoopback), listener('http-only', p2, denyHttpOnly), listener('allow', p3, allowPort)],
    up.port,
  );
  t.same(await exchange(p1, 'a'), { data: '', closed: true }, 'source in ipBlocks: closed');
  t.same(await exchange(p2, 'b'), { data: '', closed: true }, 'DENY with only HTTP fields refuses TCP');
  t.same(await exchange(p3, 'c'), { data: 'echo:c', closed: false }, 'ALLOW by notIpBlocks admits loopback');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'tcp.rbac.denied'), 2, "Istio's `tcp.` prefix");
  t.equal(statValue(stats, 'tcp.rbac.allowed'), 1);
});

t.test('on a TLS chain the decision sees the verified peer certificate (after the handshake)', async (t) => {
  const pki = makePki();
  t.teardown(() => pki.cleanup());
  const server = pki.leaf('server', ['DNS:db.example.com']);
  const good = pki.leaf('good', ['URI:spiffe://cluster.local/ns/apps/sa/good']);
  const bad = pki.leaf('bad', ['URI:spiffe://cluster.local/ns/apps/sa/bad']);
  const up = await echoUpstream();
  t.teardown(() => up.close());
  const port = await freePort();
  const allowGood = rbacFilter({
    stat_prefix: 'tcp.',
    rules: {
      policies: {
        good: {
          permissions: [{ any: true }],
          principals: [{ authenticated: { principal_name: { exact: 'spiffe://cluster.local/ns/apps/sa/good' } } }],
        },
      },
    },
  });
  const l = listener('mtls', port, [allowGood]);
  (l.filter_chains as JsonObject[])[0]!.transport_socket = {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
      require_client_certificate: true,
      common_tls_context: {
        tls_certificates: [{ certificate_chain: { inline_string: server.cert }, private_key: { inline_string: server.key } }],
        validation_context: { trusted_ca: { inline_string: pki.ca.cert } },
      },
    },
  };
  const p = await proxyWith(t, [l], up.port);
  const tlsExchange = (client: { cert: string; key: string }, msg: string) =>
    new Promise<{ data: string; closed: boolean }>((resolve) => {
      let data = '';
      const c = tls.connect(
        {
          host: '127.0.0.1',
          port,
          servername: 'db.example.com',
          ca: pki.ca.cert,
          cert: client.cert,
          key: client.key,
          checkServerIdentity: () => undefined,
        },
        () => c.write(msg),
      );
      c.on('data', (d) => {
        data += d;
        if (data.length >= msg.length + 5) {
          c.destroy();
          resolve({ data, closed: false });
        }
      });
      c.on('error', () => undefined);
      c.on('close', () => resolve({ data, closed: true }));
    });
  t.same(await tlsExchange(good, 'ping'), { data: 'echo:ping', closed: false }, 'the allowed principal passes');
  t.same(await tlsExchange(bad, 'ping'), { data: '', closed: true }, 'another principal is closed');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'tcp.rbac.allowed'), 1);
  t.equal(statValue(stats, 'tcp.rbac.denied'), 1);
});
