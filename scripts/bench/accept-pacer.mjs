// What the accept pacer buys: 500 new connections opened at once beside 300 busy keep-alive ones, against an
// engine with the pacer off (Node's one accept per event-loop turn alone) and on, in the same run, as the
// machine's speed moves both. Prints the slowest first answer of the new connections for each, per round, and
// the median ratio off / on. Moved out of the parallel test suite, where two timed bursts raced each other
// (test/proxy/soak-limits.test.ts keeps the functional check: every new connection is answered).
//   node --import tsx scripts/bench/accept-pacer.mjs [--rounds 3] [--busy 300] [--fresh 500]
import { spawn } from 'node:child_process';
import { parseBootstrap } from '../../src/proxy/bootstrap.ts';
import { startEngine } from '../../src/proxy/engine/index.ts';
import { acceptPacer } from '../../src/proxy/common/accept.ts';
import { BURST_CHILD } from '../lib/burst-child.mjs';
import { median, parseOptions } from '../lib/bench.mjs';
import { freePort } from '../lib/ports.mjs';

const { rounds, busy, fresh } = parseOptions(
  'scripts/bench/accept-pacer.mjs',
  'New connections beside busy keep-alive ones, the accept pacer off and on, in the same run.',
  {
    rounds: { type: 'integer', min: 1, default: 3, help: 'rounds' },
    busy: { type: 'integer', min: 0, default: 300, help: 'busy keep-alive connections' },
    fresh: { type: 'integer', min: 1, default: 500, help: 'new connections opened at once' },
  },
);

async function burst() {
  const port = await freePort();
  const routes = {
    name: 'r',
    virtual_hosts: [
      { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'ok' } } }] },
    ],
  };
  const hcm = {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: 'ingress',
      route_config: routes,
      http_filters: [
        { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
      ],
    },
  };
  const bootstrap = {
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    static_resources: {
      listeners: [{ name: 'l', address: { socket_address: { address: '127.0.0.1', port_value: port } }, filter_chains: [{ filters: [hcm] }] }],
      clusters: [],
    },
  };
  const engine = await startEngine(parseBootstrap(bootstrap, 'bench-bootstrap'), { logWriter: () => {} });
  await engine.initialized;
  const child = spawn(process.execPath, ['-e', BURST_CHILD, String(port), String(busy), String(fresh)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await new Promise((r) => child.once('exit', r));
  await engine.close();
  return JSON.parse(out.trim());
}

const saved = acceptPacer.afterTurns;
const ratios = [];
for (let r = 1; r <= rounds; r++) {
  acceptPacer.afterTurns = Infinity;
  const off = await burst();
  acceptPacer.afterTurns = saved;
  const on = await burst();
  ratios.push(off.max / on.max);
  console.log(
    `round ${r}: slowest first answer of ${fresh} new beside ${busy} busy: pacer off ${off.max} ms (${off.done} answered), on ${on.max} ms (${on.done} answered), off/on ${(off.max / on.max).toFixed(2)}`,
  );
}
console.log(`median off/on: ${median(ratios).toFixed(2)} (the pacer's goal: at least 2)`);
process.exit(0);
