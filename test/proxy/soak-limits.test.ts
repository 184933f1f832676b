// What 1000 keep-alive connections opened at once need from the engine's listeners (issue 16, item 7): a listen
// backlog as Envoy's (tcp_backlog_size, else net.core.somaxconn; Node's default 511 makes the kernel drop SYNs and
// clients retry after 1, 3, 7 s).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import type { JsonObject } from '@bufbuild/protobuf';
import { kernelSomaxconn, listenBacklog } from '../../src/proxy/listener/accept';
import { freePort, hcm, sock, startProxy } from './helpers';

const routes = { name: 'r', virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'ok' } } }] }] };

async function proxy(t: { teardown(f: () => unknown): void }, listeners: Array<{ port: number; extra?: JsonObject }>) {
  const p = await startProxy({
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners: listeners.map((l, i) => ({ name: `l${i}`, address: sock('127.0.0.1', l.port), filter_chains: [{ filters: [hcm({ routeConfig: routes })] }], ...(l.extra ?? {}) })),
      clusters: [],
    },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  return p;
}

t.test('listen backlog: tcp_backlog_size, else the kernel somaxconn (Envoy), not Node 511', async (t) => {
  t.equal(listenBacklog(64), 64);
  t.equal(listenBacklog(undefined), kernelSomaxconn());
  t.equal(listenBacklog(0), kernelSomaxconn(), '0 is "not set"');
  const ss = spawnSync('ss', ['-V']);
  if (ss.status !== 0) {
    t.comment('ss (iproute2) is not installed: the listening sockets\' backlog is not read');
    return;
  }
  const [a, b] = [await freePort(), await freePort()];
  await proxy(t, [{ port: a }, { port: b, extra: { tcp_backlog_size: 64 } }]);
  // ss shows a listening socket's backlog in Send-Q
  const backlog = (port: number) => {
    const out = spawnSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).stdout.trim().split(/\s+/);
    return Number(out[2]);
  };
  t.equal(backlog(a), kernelSomaxconn(), `the default listener's backlog is somaxconn (${kernelSomaxconn()})`);
  t.equal(backlog(b), 64, 'tcp_backlog_size is honoured');
});
