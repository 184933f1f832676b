// Listener behaviour once the original destination is read from the socket (Envoy's original_dst
// listener filter and use_original_dst), in-process: the kernel part is replaced by a source that
// answers with the destination the test scripts for the next connection, so what is checked here is
// only what the engine does with it. The real SO_ORIGINAL_DST path is test/native/original-dst.test.ts
// and test/e2e/original-dst.test.ts.
import net from 'node:net';
import t from 'tap';
import type { Destination, OriginalDstSource } from '../../src/native/original-dst';
import { backend, hcm, request, sock, startProxy, tcpProxy, virtualInbound, virtualOutbound, tcpServer } from './helpers';
import { freePort } from '../helpers/ports';

const staticCluster = (name: string, port: number) => ({
  name,
  type: 'STATIC',
  connect_timeout: '1s',
  load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', port) } }] }] },
});

/** Answers each accepted connection with the next scripted destination (undefined: "not NATed"). */
function scripted(): OriginalDstSource & { next: Array<Destination | undefined> } {
  const next: Array<Destination | undefined> = [];
  return { from: 'test', next, read: () => next.shift(), setTransparent: () => 'not in tests' };
}

/** A server-first TCP service: greets with its name, then echoes. */
function greeter(name: string): Promise<{ port: number; close: () => Promise<void> }> {
  return tcpServer((c) => {
    c.write(`hello from ${name}\n`);
    c.pipe(c);
  });
}

/** Connects, sends nothing, returns the first line the other side sends ('' when it closes). */
function firstLine(port: number): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    let d = '';
    const done = () => {
      c.destroy();
      resolve(d.split('\n')[0] ?? '');
    };
    c.setTimeout(5000, done);
    c.on('data', (x) => {
      d += x;
      if (d.includes('\n')) done();
    });
    c.on('close', done);
    c.on('error', done);
  });
}

t.test('virtualOutbound with SO_ORIGINAL_DST: hand-off by destination before any byte, passthrough, black hole', async (t) => {
  const svc = await backend('svc');
  const db = await greeter('db');
  const outside = await greeter('outside');
  t.teardown(() => Promise.all([svc.close(), db.close(), outside.close()]).then(() => undefined));
  const vo = await freePort();
  const source = scripted();
  const p = await startProxy(
    {
      node: { id: 'sidecar~10.1.0.5~app-1.demo~demo.svc.cluster.local', cluster: 'app.demo' },
      admin: { address: sock('127.0.0.1', 0) },
      static_resources: {
        listeners: [
          virtualOutbound(vo),
          {
            name: '0.0.0.0_9080',
            address: sock('0.0.0.0', 9080),
            bind_to_port: false,
            traffic_direction: 'OUTBOUND',
            filter_chains: [
              {
                filters: [
                  hcm({
                    statPrefix: 'outbound_0.0.0.0_9080',
                    routeConfig: {
                      name: '9080',
                      virtual_hosts: [
                        { name: 'svc', domains: ['svc.demo', '10.96.0.10'], routes: [{ match: { prefix: '/' }, route: { cluster: 'svc' } }] },
                        { name: 'allow_any', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'PassthroughCluster' } }] },
                      ],
                      ignore_port_in_host_matching: true,
                    },
                  }),
                ],
              },
            ],
          },
          {
            // a TCP service by VIP, as Istio builds `<vip>_<port>` listeners
            name: '10.96.0.20_5432',
            address: sock('10.96.0.20', 5432),
            bind_to_port: false,
            traffic_direction: 'OUTBOUND',
            filter_chains: [{ filters: [tcpProxy('outbound|5432||db.demo.svc.cluster.local', 'db')] }],
          },
        ],
        clusters: [
          { name: 'PassthroughCluster', type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '1s' },
          { name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '1s' },
          staticCluster('svc', svc.port),
          staticCluster('db', db.port),
        ],
      },
    },
    { originalDst: source },
  );
  t.teardown(() => p.close());
  await p.engine.initialized;

  source.next.push({ address: '10.96.0.20', port: 5432 });
  t.equal(await firstLine(vo), 'hello from db', 'a server-first TCP service by VIP: handed to 10.96.0.20_5432 without waiting for the client');

  source.next.push({ address: '127.0.0.1', port: outside.port });
  t.equal(await firstLine(vo), 'hello from outside', 'no listener owns the destination: the catch-all chain passes it through to it');

  source.next.push({ address: '10.96.0.10', port: 9080 });
  const byIp = await request(vo, '/by-ip', { host: '10.96.0.10:9080' });
  t.equal(byIp.body, 'svc /by-ip', 'HTTP to a VIP on a known port: the port listener routes it by its domains');

  // The destination decides, not the Host header: Host names a port nobody serves, the socket says 9080.
  source.next.push({ address: '10.96.0.99', port: 9080 });
  const r = await request(vo, '/x', { host: 'svc.demo:7777' });
  t.equal(r.body, 'svc /x', 'handed to 0.0.0.0_9080 by the original destination');

  source.next.push(undefined); // not redirected: the local address (virtualOutbound's own port) is the destination
  const loop = await request(vo, '/loop', { host: 'svc.demo:9080' }).catch((e: Error) => e);
  t.type(loop, Error, 'a connection straight to virtualOutbound is black-holed whatever its Host says');
  t.equal(svc.seen.filter((s) => s.url === '/loop').length, 0);

  t.notMatch(p.logs.join('\n'), /SO_ORIGINAL_DST cannot be read/, 'no degraded-mode warning with the source present');
});

t.test('virtualInbound with SO_ORIGINAL_DST: the filter chain of the original port, HTTP and opaque TCP', async (t) => {
  let peer = '';
  const app = await backend('app', (req, res) => {
    peer = req.socket.remoteAddress ?? '';
    res.end(`app ${req.url}`);
  });
  const raw = await greeter('raw');
  t.teardown(() => Promise.all([app.close(), raw.close()]).then(() => undefined));
  const vi = await freePort();
  const source = scripted();
  const inboundHttp = `inbound|${app.port}||`;
  const inboundTcp = `inbound|${raw.port}||`;
  const p = await startProxy(
    {
      node: { id: 'sidecar~127.0.0.1~app-1.demo~demo.svc.cluster.local' },
      admin: { address: sock('127.0.0.1', 0) },
      static_resources: {
        listeners: [
          virtualInbound(vi, [
            {
              name: `0.0.0.0_${app.port}`,
              filter_chain_match: { destination_port: app.port },
              filters: [
                hcm({
                  statPrefix: `inbound_0.0.0.0_${app.port}`,
                  routeConfig: {
                    name: inboundHttp,
                    virtual_hosts: [
                      {
                        name: 'inbound|http|x',
                        domains: ['*'],
                        routes: [{ match: { prefix: '/' }, route: { cluster: inboundHttp, timeout: '0s' } }],
                      },
                    ],
                  },
                }),
              ],
            },
            { name: `0.0.0.0_${raw.port}`, filter_chain_match: { destination_port: raw.port }, filters: [tcpProxy(inboundTcp, inboundTcp)] },
          ]),
        ],
        clusters: [
          { name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '1s' },
          {
            name: inboundHttp,
            type: 'ORIGINAL_DST',
            lb_policy: 'CLUSTER_PROVIDED',
            connect_timeout: '1s',
            upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } },
          },
          {
            name: inboundTcp,
            type: 'ORIGINAL_DST',
            lb_policy: 'CLUSTER_PROVIDED',
            connect_timeout: '1s',
            upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } },
          },
        ],
      },
    },
    { originalDst: source },
  );
  t.teardown(() => p.close());
  await p.engine.initialized;

  source.next.push({ address: '127.0.0.1', port: app.port });
  const r = await request(vi, '/in', { host: 'elsewhere:1' });
  t.equal(r.body, 'app /in', 'the chain of the original port served it, whatever the Host header says');
  t.equal(peer, '127.0.0.6', "the inbound cluster connects from Istio's inbound source address");

  source.next.push({ address: '127.0.0.1', port: raw.port });
  t.equal(await firstLine(vi), 'hello from raw', 'opaque TCP reaches the TCP chain of its port');
});

t.test('a transparent listener (TPROXY) needs IP_TRANSPARENT: a failure rejects the listener with the reason', async (t) => {
  const listener = async (port: number) => ({
    name: 'virtualInbound',
    address: sock('127.0.0.1', port),
    transparent: true,
    filter_chains: [{ filters: [tcpProxy('BlackHoleCluster', 'BlackHoleCluster')] }],
  });
  const boot = async () => ({
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners: [await listener(await freePort())],
      clusters: [{ name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '1s' }],
    },
  });
  const denied = { from: 'test', read: () => undefined, setTransparent: () => 'IP_TRANSPARENT: EPERM (needs CAP_NET_ADMIN)' };
  await t.rejects(
    startProxy(await boot(), { originalDst: denied }),
    /listener 'virtualInbound': cannot set transparent on '127\.0\.0\.1:\d+': IP_TRANSPARENT: EPERM \(needs CAP_NET_ADMIN\)/,
  );
  await t.rejects(
    startProxy(await boot(), { originalDst: false }),
    /cannot set transparent on '127\.0\.0\.1:\d+': the native addon is not loaded \(disabled for this engine\)/,
  );
  let asked: boolean | undefined;
  const granted = { from: 'test', read: () => undefined, setTransparent: (_s: net.Server, v6: boolean) => ((asked = v6), undefined) };
  const p = await startProxy(await boot(), { originalDst: granted });
  t.teardown(() => p.close());
  t.equal(asked, false, 'asked for IPv4 IP_TRANSPARENT on the bound socket');
});
