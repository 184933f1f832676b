// Envoy's original_src listener filter in the engine (Istio puts it on virtualInbound in TPROXY mode, mark
// 1337), in-process on loopback: every 127.0.0.0/8 address is local, so clients bound to 127.0.0.2 and
// 127.0.0.3 are two downstreams the backend can tell apart. With the real native addon (compiled here; its
// IP_TRANSPARENT and SO_MARK need root, as CI runs) the backend must see each client's own address, upstream
// HTTP connections must be reused only for the same client (Envoy keys pools by socket options), and the
// upstream sockets carry the mark. Without the addon's transparentSocket the engine says once that it
// cannot apply the filter and serves from its own address. The namespace version with Istio's TPROXY rules
// is test/e2e/tproxy-original-src.test.ts.
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { buildOriginalDstAddon } from '../../scripts/native-addon.mjs';
import { ADDON_FILE, loadAddonFile, type OriginalDstSource } from '../../src/native/original-dst';
import { poolKey } from '../../src/proxy/upstream/pool';
import type { UpstreamSource } from '../../src/proxy/upstream/source';
import { tempDir } from '../helpers/temp';
import { freePort } from '../helpers/ports';
import { hcm, sock, startProxy, ORIGINAL_DST } from './helpers';

const SRC = 'type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc';
const TCP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const MARK = 1337;

/** A backend that answers with the peer address it saw and the number of the connection (1, 2, …). */
async function peerReporter(): Promise<{ port: number; close: () => Promise<void> }> {
  let n = 0;
  const ids = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    let id = ids.get(req.socket);
    if (id === undefined) ids.set(req.socket, (id = ++n));
    res.end(`${req.socket.remoteAddress} ${id}`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** One GET over a new connection from `from`: the body. */
function getFrom(from: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', localAddress: from, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

const inbound = (port: number, appPort: number, filters: object[]) => ({
  admin: { address: sock('127.0.0.1', 0) },
  static_resources: {
    listeners: [
      {
        name: 'virtualInbound',
        address: sock('127.0.0.1', port),
        traffic_direction: 'INBOUND',
        listener_filters: [ORIGINAL_DST, { name: 'envoy.filters.listener.original_src', typed_config: { '@type': SRC, mark: MARK } }],
        filter_chains: [{ filters }],
      },
    ],
    // Istio's inbound clusters bind 127.0.0.6; original_src's source takes its place
    clusters: [
      {
        name: 'inbound|8080||',
        type: 'STATIC',
        connect_timeout: '1s',
        upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } },
        load_assignment: { cluster_name: 'inbound|8080||', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', appPort) } }] }] },
      },
    ],
  },
});
const httpChain = () => [
  hcm({
    statPrefix: 'inbound_0.0.0.0_8080',
    routeConfig: {
      name: 'inbound',
      virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'inbound|8080||' } }] }],
    },
  }),
];

t.test('pool keys: the source address and mark keep connections apart, as Envoy hashes socket options into the pool key', async (t) => {
  const binder = {} as UpstreamSource['binder'];
  const from = (address: string, mark = MARK): UpstreamSource => ({ address, mark, binder });
  t.equal(poolKey('default', undefined), poolKey('default', {}), 'no options: one pool');
  t.not(poolKey('default', { source: from('10.1.0.2') }), poolKey('default', undefined), 'a source is not the proxy');
  t.not(poolKey('default', { source: from('10.1.0.2') }), poolKey('default', { source: from('10.1.0.3') }), 'two downstream addresses');
  t.not(poolKey('default', { source: from('10.1.0.2') }), poolKey('default', { source: from('10.1.0.2', 7) }), 'two marks');
  t.equal(poolKey('default', { source: from('10.1.0.2') }), poolKey('default', { source: from('10.1.0.2') }), 'the same downstream address shares');
  t.not(
    poolKey('tlsMode-istio', { source: from('10.1.0.2') }),
    poolKey('default', { source: from('10.1.0.2') }),
    'transport sockets still keep pools apart',
  );
  t.not(poolKey('default', { source: from('fd00::2') }), poolKey('default', { source: from('fd00::3') }), 'IPv6 too');
});

t.test('without transparent sockets the engine says original_src cannot be applied, and serves from its own address', async (t) => {
  const app = await peerReporter();
  t.teardown(() => app.close());
  const port = await freePort();
  const noSockets: OriginalDstSource = { from: 'test', read: () => undefined, setTransparent: () => 'not in tests' };
  const p = await startProxy(inbound(port, app.port, httpChain()) as never, { originalDst: noSockets });
  t.teardown(() => p.close());
  t.match(await getFrom('127.0.0.2', port), /^127\.0\.0\.6 \d+$/, "the cluster's bind address (127.0.0.6), not the caller");
  const warnings = p.logs.filter((l) => /original_src \(mark 1337\) cannot be applied/.test(l));
  t.equal(warnings.length, 1, 'said once');
  t.match(warnings[0], /the native addon \(test\) was built without transparentSocket; upstream connections leave from the proxy's own address/);
});

t.test('socket options refused at run time: the upstream connection fails (as in Envoy) and the first failure is logged', async (t) => {
  const app = await peerReporter();
  t.teardown(() => app.close());
  const port = await freePort();
  const calls: Array<[string, number]> = [];
  const refused: OriginalDstSource = {
    from: 'test',
    read: () => undefined,
    setTransparent: () => 'not in tests',
    transparentSocket: (source, mark) => {
      calls.push([source, mark]);
      throw Object.assign(new Error('IP_TRANSPARENT: EPERM (needs CAP_NET_ADMIN)'), { code: 'EPERM' });
    },
  };
  const p = await startProxy(inbound(port, app.port, httpChain()) as never, { originalDst: refused });
  t.teardown(() => p.close());
  const status = (from: string) =>
    new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/', localAddress: from, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
  t.equal(await status('127.0.0.2'), 503, 'no upstream connection from the proxy instead');
  t.equal(await status('127.0.0.2'), 503);
  t.same(calls[0], ['127.0.0.2', MARK], "the addon was asked for the caller's address and the filter's mark");
  const warned = p.logs.filter((l) =>
    /original_src: cannot make an upstream socket from 127\.0\.0\.2 \(mark 1337\) to 127\.0\.0\.1:\d+: IP_TRANSPARENT: EPERM \(needs CAP_NET_ADMIN\); such upstream connections fail/.test(
      l,
    ),
  );
  t.equal(warned.length, 1, 'warned once');
});

const rootSkip =
  process.getuid?.() !== 0 ? 'IP_TRANSPARENT and SO_MARK need root (CAP_NET_ADMIN)' : process.platform !== 'linux' ? 'Linux only' : false;

t.test('with the native addon: each caller is the peer, pools are per caller, upstream sockets carry the mark', { skip: rootSkip }, async (t) => {
  const dir = tempDir(t, 'mesh-origsrc-');
  const file = path.join(dir, ADDON_FILE);
  const compiled = buildOriginalDstAddon(file);
  if (!compiled.ok) {
    t.fail(`the addon does not compile here: ${compiled.reason}`);
    return;
  }
  const addon = loadAddonFile(file);
  if (!addon.ok) {
    t.fail(addon.reason);
    return;
  }
  t.throws(
    () => addon.source.transparentSocket!('not-an-ip', MARK),
    { code: 'EINVAL', message: 'source address: EINVAL' },
    'a source that is no IP literal',
  );
  const app = await peerReporter();
  t.teardown(() => app.close());
  const port = await freePort();
  const p = await startProxy(inbound(port, app.port, httpChain()) as never, { originalDst: addon.source });
  t.teardown(() => p.close());

  t.equal(await getFrom('127.0.0.2', port), '127.0.0.2 1', 'the first caller is the peer of a new upstream connection');
  t.equal(await getFrom('127.0.0.3', port), '127.0.0.3 2', 'another caller gets its own connection (not the kept-alive one of the first)');
  t.equal(await getFrom('127.0.0.2', port), '127.0.0.2 1', "the first caller's connection is reused for it");
  const ss = spawnSync('ss', ['-tne', 'state', 'established', `( dport = :${app.port} )`], { encoding: 'utf8' });
  if (ss.status === 0) {
    const lines = ss.stdout.split('\n').filter((l) => /127\.0\.0\.[23]:/.test(l));
    t.equal(lines.length, 2, `one upstream connection per caller:\n${ss.stdout}`);
    for (const l of lines) t.match(l, /fwmark:0x539/, 'SO_MARK 1337 on the upstream socket');
  }
  t.notOk(
    p.logs.some((l) => /cannot be applied|cannot make an upstream socket/.test(l)),
    'no warning',
  );
});

t.test('with the native addon, tcp_proxy: the caller is the peer', { skip: rootSkip }, async (t) => {
  const dir = tempDir(t, 'mesh-origsrc-');
  const file = path.join(dir, ADDON_FILE);
  const compiled = buildOriginalDstAddon(file);
  const addon = compiled.ok ? loadAddonFile(file) : { ok: false as const, reason: compiled.reason };
  if (!addon.ok) {
    t.fail(addon.reason);
    return;
  }
  const echo = net.createServer((c) => c.end(`${c.remoteAddress}\n`));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  t.teardown(() => echo.close());
  const port = await freePort();
  const p = await startProxy(
    inbound(port, (echo.address() as net.AddressInfo).port, [
      { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP, stat_prefix: 'inbound|8080||', cluster: 'inbound|8080||' } },
    ]) as never,
    { originalDst: addon.source },
  );
  t.teardown(() => p.close());
  const line = await new Promise<string>((resolve, reject) => {
    const c = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.3' });
    let d = '';
    c.on('data', (x) => (d += x));
    c.on('end', () => resolve(d.trim()));
    c.on('error', reject);
  });
  t.equal(line, '127.0.0.3');
});
