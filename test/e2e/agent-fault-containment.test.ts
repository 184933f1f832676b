// Fault containment in the agent (issue 31, item 2), from outside, with the built gateway (`pilot-agent proxy
// router` running our engine in its own process, its DNS proxy on, a health check, the workload identity over
// SDS): the test-only hook MESH_TEST_FAULT makes each SIGUSR2 throw inside the next subsystem of the list —
// at an entry point, or escaping from a timer of the subsystem — and the test shows, for every subsystem,
// that requests through the pod kept succeeding, that the fault was logged with its subsystem and counted
// (agent_subsystem_faults_total), that the subsystem came back, and that /healthz/ready (the agent's and the
// proxy's own :15021 listener) answers 200 as Istio's does: Istio's readiness (pilot-agent
// status/ready/probe.go) is Envoy's first config and LIVE state, cached once seen, plus the DNS name table
// having arrived once (Agent.Check) — none of these subsystems failing takes it back.
import dgram from 'node:dgram';
import t from 'tap';
import { built } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { gatewayConfig } from '../helpers/mesh-yaml';
import { metricValue } from '../helpers/prometheus';
import { summarize } from '../helpers/agent';
import { httpGet, startGateway, type GatewayPorts } from '../helpers/gateway';
import { decodeMessage, encodeMessage, query, RCODE, TYPE, type Message } from '../../src/dns/wire';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** The gateway routing to the rig's backend, and a name with an address (in the DNS name table). */
function config(p: GatewayPorts): string {
  // MESH_INTERNAL: its cluster is mesh mTLS, so the proxy reads the workload certificate over SDS
  const named = {
    hosts: ['db.example.com'],
    addresses: ['240.240.0.10'],
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    ports: [{ number: 5432, name: 'tcp', protocol: 'TCP' }],
    endpoints: [{ address: '127.0.0.1' }],
  };
  return `${gatewayConfig(p.gw, p.backend)}---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: mesh-system}\nspec: ${JSON.stringify(named)}\n`;
}

/** One A question over UDP; the decoded answer. */
async function resolveA(port: number, name: string): Promise<Message> {
  const sock = dgram.createSocket('udp4');
  try {
    const answer = new Promise<Buffer>((resolve, reject) => {
      sock.once('message', resolve);
      sock.once('error', reject);
      setTimeout(() => reject(new Error(`no DNS answer for ${name} within 5s`)), 5000).unref();
    });
    sock.send(encodeMessage(query(0x4d45, name, TYPE.A)), port, '127.0.0.1');
    return decodeMessage(await answer);
  } finally {
    sock.close();
  }
}

const addressOf = (m: Message) => m.answers.map((a) => (a.data.length === 4 ? [...a.data].join('.') : '')).filter(Boolean);

/** Each SIGUSR2 injects the next of these, in order (the agent's MESH_TEST_FAULT). */
const FAULTS = ['dns:entry', 'dns', 'sds', 'health', 'xds-proxy', 'status:entry', 'status', 'metrics:entry', 'metrics'];

t.test('a fault in each side subsystem is contained: logged, counted, restarted, and the pod keeps serving and stays ready', async (t) => {
  const dnsPort = await freePort();
  const proxyConfig: Record<string, unknown> = {};
  const gw = await startGateway(t, {
    config: (p) => {
      // the application's health check probes the backend (Istio's readinessProbe of a workload)
      proxyConfig['readinessProbe'] = { periodSeconds: 1, tcpSocket: { port: p.backend } };
      return config(p);
    },
    proxyConfig,
    agentEnv: { MESH_META_ENABLE_DNS_SERVER: 'true', DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`, MESH_TEST_FAULT: FAULTS.join(',') },
  });
  const status = `http://127.0.0.1:${gw.ports.status}`;
  const log = () => summarize(gw.agentOut());
  const occurrences = (s: string) => gw.agentOut().split(s).length - 1;
  await waitFor(log, async () => (await gw.get('/')).status === 200, { timeoutMs: 30_000, intervalMs: 50 });
  await waitFor(
    () => `no name table answer\n${log()}`,
    async () => addressOf(await resolveA(dnsPort, 'db.example.com')).includes('240.240.0.10'),
    { timeoutMs: 20_000, intervalMs: 50 },
  );

  // Requests through the pod all along: one at a time, every one must succeed.
  let sent = 0;
  const failures: string[] = [];
  let stop = false;
  const traffic = (async () => {
    while (!stop) {
      const r = await gw.get('/').catch((e: Error) => ({ status: 0, body: e.message }));
      sent++;
      if (r.status !== 200) failures.push(`${r.status} ${r.body.slice(0, 100)}`);
      await new Promise((res) => setTimeout(res, 20));
    }
  })();

  const faultCount = async (name: string) =>
    metricValue(await (await fetch(`${status}/stats/prometheus`)).text(), 'agent_subsystem_faults_total', `subsystem="${name}"`) ?? 0;
  const counted = new Map<string, number>();

  for (const fault of FAULTS) {
    const [name, at = 'escape'] = fault.split(':') as [string, string?];
    await t.test(`${name} (${at})`, async (t) => {
      const restartedBefore = occurrences(`${name} restarted`);
      const sdsPushes = occurrences('SDS: PUSH');
      const upstreamConnects = occurrences('connected to upstream XDS server');
      const healthStarts = occurrences('starting health check');
      const injected = `injecting a fault into ${name} (${at})`;
      const injectedBefore = occurrences(injected);
      process.kill(gw.agentPid, 'SIGUSR2');
      await waitFor(log, () => occurrences(injected) > injectedBefore, { timeoutMs: 5000, intervalMs: 50 });
      // an entry-point fault needs the entry: the next query, request or scrape fails (and only that one)
      if (fault === 'dns:entry')
        t.equal((await resolveA(dnsPort, 'db.example.com')).header.rcode, RCODE.SERVFAIL, 'the query that faulted is answered SERVFAIL');
      if (fault === 'status:entry')
        t.equal((await httpGet(gw.ports.status, '/healthz/ready')).status, 500, 'the request that faulted is answered 500');
      if (fault === 'metrics:entry') {
        const r = await httpGet(gw.ports.status, '/stats/prometheus');
        t.equal(r.status, 500, 'the scrape that faulted is answered 500');
        t.match(r.body, /failed to merge metrics: fault injected into metrics/);
      }
      await waitFor(
        () => `${name} not restarted\n${log()}`,
        () => occurrences(`${name} restarted`) > restartedBefore,
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      t.match(gw.agentOut(), new RegExp(`${name} failed: InjectedFault: fault injected into ${name}`), 'logged with its subsystem');
      counted.set(name, (counted.get(name) ?? 0) + 1);
      t.equal(await faultCount(name), counted.get(name), `agent_subsystem_faults_total{subsystem="${name}"} counts it`);

      // the subsystem is back
      if (name === 'dns')
        t.same(addressOf(await resolveA(dnsPort, 'db.example.com')), ['240.240.0.10'], 'the DNS proxy answers from the name table again');
      if (name === 'sds')
        await waitFor(
          () => `the proxy got no secret from the restarted SDS server\n${log()}`,
          () => occurrences('SDS: PUSH') > sdsPushes,
          { timeoutMs: 15_000, intervalMs: 50 },
        );
      if (name === 'xds-proxy')
        await waitFor(
          () => `no new upstream stream\n${log()}`,
          () => occurrences('connected to upstream XDS server') > upstreamConnects,
          { timeoutMs: 15_000, intervalMs: 50 },
        );
      if (name === 'health') t.ok(occurrences('starting health check') > healthStarts, 'the health checker started again');

      // readiness as Istio's: still ready (the agent's status server, and through the proxy's :15021 listener)
      await waitFor(log, async () => (await httpGet(gw.ports.status, '/healthz/ready').catch(() => ({ status: 0 }))).status === 200, {
        timeoutMs: 5000,
        intervalMs: 50,
      });
      t.equal((await httpGet(gw.proxyStatusPort, '/healthz/ready')).status, 200, "the proxy's readiness listener answers 200");
      t.same(failures, [], `requests through the pod kept succeeding (${sent} so far)`);
    });
  }
  stop = true;
  await traffic;
  t.ok(sent > 50, `${sent} requests went through the pod during the faults`);
  t.same(failures, [], 'no request through the pod failed');
  t.notMatch(gw.agentOut(), /disabled; the proxy keeps serving/, 'one fault each: restarted, not disabled');
});
