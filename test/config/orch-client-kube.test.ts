// The orchestrator client against the real kube-apiserver (../shared/kube, with --audit): a kubeconfig's bearer
// token is what authenticates (a wrong one is 401 Unauthorized with the Status reason), MESH_ORCH_CLIENT_CONTENT_TYPE
// is logged as Istio's client would serve it, and --orchApiQPS/--orchApiBurst space the requests as the server's
// audit log records their arrival.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { createOrchClient, OrchApiError } from '../../src/config/orch/client';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { kubeUnavailable, startKube, tokenKubeconfig, type Kube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';

const logSink = new MemorySink();
configure(parseLogOptions({}), { sinks: [logSink] });

interface AuditEvent {
  requestURI: string;
  user: { username: string };
  responseStatus?: { code: number };
  requestReceivedTimestamp: string;
}

async function audit(kube: Kube, uriPrefix: string): Promise<AuditEvent[]> {
  const text = await readFile(join(kube.dir, 'audit.log'), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.includes(uriPrefix))
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => e.requestURI.startsWith(uriPrefix));
}

t.test('against the real API server', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { audit: true, controllerManager: false, crds: 'none' });
  const dir = tempDir(t, 'orch-client-kube-');

  t.test('the kubeconfig token is what authenticates; a wrong one is 401 with the Status reason', async (t) => {
    const goodFile = join(dir, 'good');
    await writeFile(goodFile, tokenKubeconfig(kube));
    const good = await createOrchClient({ orchconfig: goodFile });
    t.teardown(() => good.close());
    const list = (await good.getJson('/api/v1/namespaces/token-check/services')) as { kind: string };
    t.equal(list.kind, 'ServiceList', 'the token alone (no client certificate in this kubeconfig) is accepted');
    const badFile = join(dir, 'bad');
    await writeFile(badFile, tokenKubeconfig(kube, undefined, 'not-the-token'));
    const bad = await createOrchClient({ orchconfig: badFile });
    t.teardown(() => bad.close());
    const err = await bad.getJson('/api/v1/namespaces/token-check/services').catch((e: unknown) => e);
    t.ok(err instanceof OrchApiError, 'a typed error');
    t.equal((err as OrchApiError).statusCode, 401);
    t.equal((err as OrchApiError).reason, 'Unauthorized');
    const missing = await good.getJson('/api/v1/namespaces/default/services/nope').catch((e: unknown) => e);
    t.equal((missing as OrchApiError).statusCode, 404);
    t.match((missing as OrchApiError).message, /GET \/api\/v1\/namespaces\/default\/services\/nope: 404 NotFound/, 'a Status answer: its reason');
    const unserved = await good.getJson('/apis/nope.io/v1/things').catch((e: unknown) => e);
    t.equal((unserved as OrchApiError).statusCode, 404);
    t.equal(
      (unserved as OrchApiError).message,
      'GET /apis/nope.io/v1/things: 404: 404 page not found',
      'a plain-text answer (an API group nobody serves): its text',
    );
    const seen = await audit(kube, '/api/v1/namespaces/token-check/services');
    t.same(
      seen.map((e) => e.responseStatus?.code),
      [200, 401],
      'the server saw both requests, the first authenticated, the second refused',
    );
  });

  t.test('MESH_ORCH_CLIENT_CONTENT_TYPE=protobuf is logged at info as served in JSON; json is silent', async (t) => {
    const lines = (mark: number) =>
      logSink.text
        .slice(mark)
        .split('\n')
        .filter((l) => l.includes('MESH_ORCH_CLIENT_CONTENT_TYPE'));
    let mark = logSink.text.length;
    const a = await createOrchClient({ orchconfig: kube.kubeconfig, contentType: 'protobuf' });
    t.equal(((await a.getJson('/api/v1/namespaces/default')) as { kind: string }).kind, 'Namespace', 'answers decoded as JSON');
    a.close();
    t.equal(lines(mark).length, 1);
    t.match(lines(mark)[0]!, /\tinfo\torch\t.*protobuf.*JSON/);
    mark = logSink.text.length;
    const b = await createOrchClient({ orchconfig: kube.kubeconfig, contentType: 'json' });
    b.close();
    t.same(lines(mark), []);
  });

  t.test('--orchApiQPS/--orchApiBurst: requests reach the server no faster than the bucket allows', async (t) => {
    const fire = async (qps: number, burst: number, ns: string): Promise<number[]> => {
      const c = await createOrchClient({ orchconfig: kube.kubeconfig, qps, burst });
      await Promise.all(Array.from({ length: 8 }, () => c.getJson(`/api/v1/namespaces/${ns}/pods`)));
      c.close();
      const times = (await audit(kube, `/api/v1/namespaces/${ns}/pods`)).map((e) => Date.parse(e.requestReceivedTimestamp));
      return times.sort((x, y) => x - y);
    };
    const qps = 5;
    const burst = 2;
    const times = await fire(qps, burst, 'throttled');
    t.equal(times.length, 8, 'the audit log holds the 8 requests');
    // The i-th request (0-based) leaves no earlier than (i + 1 - burst) / qps after the first. The first
    // arrivals carry their connection's TLS handshake, which makes the later ones look early (30-40 ms at load
    // 24 on two cores), so the bound allows 100 ms, half an interval at 5 per second (a bucket twice as fast
    // puts request 7 at +600 ms, not +1200 ms, and fails).
    for (let i = burst; i < times.length; i++) {
      const earliest = ((i + 1 - burst) / qps) * 1000;
      t.ok(times[i]! - times[0]! >= earliest - 100, `request ${i} at +${times[i]! - times[0]!}ms, not before +${earliest}ms`);
    }
    // Control: unthrottled, the same requests are not spread out, so the checks above can fail.
    const free = await fire(-1, 0, 'free');
    t.ok(free[7]! - free[0]! < 600, `unthrottled spread ${free[7]! - free[0]!}ms`);
  });
});
