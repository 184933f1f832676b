// Sidecar listeners where SO_ORIGINAL_DST cannot be read (no native addon: `originalDst: false`):
// connections to virtualOutbound (use_original_dst) are handed to the bind_to_port=false listener of
// the HTTP request's Host port; unknown destinations pass through (ORIGINAL_DST) and a connection to
// virtualOutbound's own port is black-holed like Istio configures it. DNS clusters too. With the addon,
// see original-dst.test.ts (in-process) and test/e2e/original-dst.test.ts (real iptables).
import t from 'tap';
import net from 'node:net';
import {
  backend,
  hcm,
  request,
  sock,
  startProxy,
  tcpProxy,
  virtualInbound,
  virtualOutbound,
  listenerJson,
  anyHost,
  staticBootstrap,
} from './helpers';
import { freePort } from '../helpers/ports';

t.test(
  'without the addon, virtualOutbound hands HTTP to the Host port listener, passes unknown destinations through, black-holes itself',
  async (t) => {
    const svc = await backend('svc');
    const other = await backend('other');
    t.teardown(() => Promise.all([svc.close(), other.close()]).then(() => undefined));
    const vo = await freePort();
    const p = await startProxy(
      {
        node: { id: 'sidecar~127.0.0.1~app-1.demo~demo.svc.cluster.local', cluster: 'app.demo' },
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
                          {
                            name: 'svc.demo.svc.cluster.local:9080',
                            domains: ['svc.demo.svc.cluster.local', 'svc', 'svc.demo'],
                            routes: [{ match: { prefix: '/' }, route: { cluster: 'outbound|9080||svc.demo.svc.cluster.local' } }],
                          },
                        ],
                        ignore_port_in_host_matching: true,
                      },
                    }),
                  ],
                },
              ],
            },
          ],
          clusters: [
            { name: 'PassthroughCluster', type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '1s' },
            { name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '1s' },
            {
              name: 'outbound|9080||svc.demo.svc.cluster.local',
              type: 'STATIC',
              connect_timeout: '1s',
              load_assignment: { cluster_name: 'x', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', svc.port) } }] }] },
            },
          ],
        },
      },
      { originalDst: false },
    );
    t.teardown(() => p.close());
    await p.engine.initialized;
    t.equal(p.engine.listenerPort('0.0.0.0_9080'), undefined, 'bind_to_port false: nothing is bound');
    const viaPort = await request(vo, '/hello', { host: 'svc.demo:9080' });
    t.equal(viaPort.body, 'svc /hello', 'routed by the 0.0.0.0_9080 listener');
    t.equal(svc.seen.at(-1)?.headers['x-forwarded-proto'], 'http');
    const passthrough = await request(vo, '/raw', { host: `127.0.0.1:${other.port}` });
    t.equal(passthrough.body, 'other /raw', 'no listener for the port: TCP passthrough to the original destination');
    const loop = await new Promise<string>((resolve) => {
      const c = net.connect(vo, '127.0.0.1', () => c.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1:${vo}\r\n\r\n`));
      let d = '';
      c.on('data', (x) => (d += x));
      c.on('close', () => resolve(d));
      c.on('error', () => resolve(d));
    });
    t.equal(loop, '', 'a connection to virtualOutbound itself is black-holed');
    t.match(
      p.logs.join('\n'),
      /listener 'virtualOutbound' restores original destinations, but SO_ORIGINAL_DST cannot be read: disabled for this engine; captured connections are routed by their HTTP Host or TLS SNI/,
      'the degraded mode is announced',
    );
  },
);

t.test('STRICT_DNS and LOGICAL_DNS clusters resolve names', async (t) => {
  const b = await backend('dns');
  t.teardown(() => b.close());
  const port = await freePort();
  const dnsCluster = (name: string, type: string) => ({
    name,
    type,
    connect_timeout: '1s',
    dns_lookup_family: 'V4_ONLY',
    dns_refresh_rate: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('localhost', b.port) } }] }] },
  });
  const p = await startProxy(
    staticBootstrap(
      { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local' },
      [
        listenerJson(
          'l',
          port,
          hcm({
            routeConfig: anyHost([
              { match: { prefix: '/strict' }, route: { cluster: 'strict', auto_host_rewrite: true } },
              { match: { prefix: '/logical' }, route: { cluster: 'logical' } },
            ]),
          }),
        ),
      ],
      [dnsCluster('strict', 'STRICT_DNS'), dnsCluster('logical', 'LOGICAL_DNS')],
    ),
  );
  t.teardown(() => p.close());
  await p.engine.initialized;
  t.equal((await request(port, '/strict', { host: 'front.example.com' })).body, 'dns /strict');
  t.equal(b.seen.at(-1)?.headers.host, 'localhost', 'auto_host_rewrite uses the DNS name');
  t.equal((await request(port, '/logical')).body, 'dns /logical');
});

t.test('virtualInbound (original_dst listener filter): chain by the requested port, inbound cluster bound to 127.0.0.6', async (t) => {
  let peer = '';
  const app = await backend('app', (req, res) => {
    peer = req.socket.remoteAddress ?? '';
    res.end(`app ${req.url}`);
  });
  t.teardown(() => app.close());
  const vi = await freePort();
  const inbound = `inbound|${app.port}||`;
  const p = await startProxy(
    {
      node: { id: 'sidecar~127.0.0.1~app-1.demo~demo.svc.cluster.local' },
      admin: { address: sock('127.0.0.1', 0) },
      static_resources: {
        listeners: [
          virtualInbound(
            vi,
            [
              {
                name: `0.0.0.0_${app.port}`,
                filter_chain_match: { destination_port: app.port, transport_protocol: 'raw_buffer' },
                filters: [
                  hcm({
                    statPrefix: `inbound_0.0.0.0_${app.port}`,
                    routeConfig: {
                      name: inbound,
                      virtual_hosts: [
                        { name: 'inbound|http|x', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: inbound, timeout: '0s' } }] },
                      ],
                    },
                  }),
                ],
              },
            ],
            { listener_filters_timeout: '0s', continue_on_listener_filters_timeout: true },
          ),
        ],
        clusters: [
          { name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '1s' },
          {
            name: inbound,
            type: 'ORIGINAL_DST',
            lb_policy: 'CLUSTER_PROVIDED',
            connect_timeout: '1s',
            upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } },
          },
        ],
      },
    },
    { originalDst: false },
  );
  t.teardown(() => p.close());
  await p.engine.initialized;
  const r = await request(vi, '/in', { host: `127.0.0.1:${app.port}` });
  t.equal(r.body, 'app /in', 'the chain for the requested port served it');
  t.equal(peer, '127.0.0.6', "Istio's inbound source address");
});
