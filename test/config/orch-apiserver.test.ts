// The API server double against the list/watch semantics the Kubernetes API documents
// ("Efficient detection of changes", "Watch bookmarks", JSON merge patch), so that the source's
// tests stand on documented behaviour rather than on the double's quirks.
import http from 'node:http';
import t from 'tap';
import { FakeApiServer, meshCrds, mergePatch } from '../helpers/apiserver';

interface WatchEvent {
  type: string;
  object: { kind?: string; apiVersion?: string; metadata: { name?: string; resourceVersion?: string }; code?: number; reason?: string };
}

async function getJson(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const r = await fetch(url, init);
  return { status: r.status, body: await r.json() };
}

/** Opens a watch and collects its events until `until` says stop or the stream ends. */
function watch(url: string): {
  events: WatchEvent[];
  status: Promise<number>;
  ended: Promise<void>;
  close: () => void;
  next: (n: number) => Promise<WatchEvent[]>;
} {
  const events: WatchEvent[] = [];
  let waiters: Array<() => void> = [];
  let resolveStatus!: (n: number) => void;
  let resolveEnded!: () => void;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<void>((r) => (resolveEnded = r));
  const req = http.get(url, (res) => {
    resolveStatus(res.statusCode ?? 0);
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) events.push(JSON.parse(line) as WatchEvent);
      }
      for (const w of waiters) w();
    });
    res.on('end', () => {
      if (buf.trim()) events.push(JSON.parse(buf) as WatchEvent);
      resolveEnded();
      for (const w of waiters) w();
    });
    res.on('close', resolveEnded);
  });
  req.on('error', () => resolveEnded());
  const next = async (n: number): Promise<WatchEvent[]> => {
    const deadline = Date.now() + 5000;
    while (events.length < n) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} events, have ${JSON.stringify(events)}`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 100);
      });
      waiters = [];
    }
    return events.slice(0, n);
  };
  return { events, status, ended, close: () => req.destroy(), next };
}

const svc = (name: string, ns = 'default', labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: ns, labels },
  spec: { ports: [{ port: 80 }] },
});

t.test('list: items without apiVersion/kind for built-ins, the collection resourceVersion, namespaces', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create(svc('a', 'ns1'));
  api.create(svc('b', 'ns2'));
  const all = await getJson(`${api.url}/api/v1/services`);
  t.equal(all.status, 200);
  t.equal(all.body.kind, 'ServiceList');
  t.equal(all.body.metadata.resourceVersion, String(api.resourceVersion));
  t.same(
    all.body.items.map((i: any) => i.metadata.name),
    ['a', 'b'],
  );
  t.equal(all.body.items[0].kind, undefined, 'typed lists omit item kind');
  const ns1 = await getJson(`${api.url}/api/v1/namespaces/ns1/services`);
  t.same(
    ns1.body.items.map((i: any) => i.metadata.name),
    ['a'],
  );
  const one = await getJson(`${api.url}/api/v1/namespaces/ns2/services/b`);
  t.equal(one.body.kind, 'Service');
  t.equal(one.body.apiVersion, 'v1');
});

t.test('resourceVersion is global and grows with every write', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const a = api.create(svc('a'));
  const p = api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' }, spec: {} });
  const a2 = api.patch('v1', 'Service', 'default', 'a', { metadata: { labels: { x: 'y' } } });
  t.ok(Number(a.metadata.resourceVersion) < Number(p.metadata.resourceVersion));
  t.ok(Number(p.metadata.resourceVersion) < Number(a2.metadata.resourceVersion));
  t.equal(a2.metadata.uid, a.metadata.uid, 'uid survives updates');
});

t.test('watch from N replays what happened after N, then streams live events', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create(svc('a'));
  const rv = api.resourceVersion;
  api.create(svc('b'));
  api.patch('v1', 'Service', 'default', 'a', { spec: { ports: [{ port: 81 }] } });
  const w = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${rv}`);
  t.teardown(w.close);
  t.equal(await w.status, 200);
  const first = await w.next(2);
  t.same(
    first.map((e) => [e.type, e.object.metadata.name]),
    [
      ['ADDED', 'b'],
      ['MODIFIED', 'a'],
    ],
  );
  t.equal(first[0]!.object.kind, 'Service', 'watch events carry kind');
  api.delete('v1', 'Service', 'default', 'b');
  const all = await w.next(3);
  t.equal(all[2]!.type, 'DELETED');
  t.equal(all[2]!.object.metadata.resourceVersion, String(api.resourceVersion), 'DELETED carries the deletion resourceVersion');
});

t.test('watch without resourceVersion starts with the current state as ADDED', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create(svc('a'));
  api.create(svc('b'));
  const w = watch(`${api.url}/api/v1/services?watch=1`);
  t.teardown(w.close);
  t.same(
    (await w.next(2)).map((e) => e.type + ' ' + e.object.metadata.name),
    ['ADDED a', 'ADDED b'],
  );
});

t.test('410 when the resourceVersion is older than the retained history, both ways', async (t) => {
  for (const mode of ['error-event', 'http-410'] as const) {
    const api = await FakeApiServer.start({ historyLimit: 2, expiredWatch: mode });
    t.teardown(() => api.close());
    api.create(svc('a'));
    const old = api.resourceVersion;
    api.create(svc('b'));
    api.create(svc('c'));
    api.create(svc('d')); // history now holds c and d only: b, after `old`, is gone
    const w = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${old}`);
    t.teardown(w.close);
    if (mode === 'http-410') {
      t.equal(await w.status, 410, mode);
      await w.ended;
      t.equal((w.events[0] as any).code, 410);
      t.equal((w.events[0] as any).kind, 'Status');
    } else {
      t.equal(await w.status, 200, mode);
      const [ev] = await w.next(1);
      t.equal(ev!.type, 'ERROR');
      t.equal(ev!.object.code, 410);
      t.equal(ev!.object.reason, 'Expired');
      await w.ended;
    }
    // One past the compaction point still resumes.
    const ok = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${api.resourceVersion - 2}`);
    t.teardown(ok.close);
    t.equal(await ok.status, 200);
    t.same(
      (await ok.next(2)).map((e) => e.object.metadata.name),
      ['c', 'd'],
    );
  }
});

t.test('bookmarks only when allowed; timeoutSeconds ends the stream', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const plain = watch(`${api.url}/api/v1/pods?watch=true&resourceVersion=${api.resourceVersion}`);
  const bm = watch(`${api.url}/api/v1/pods?watch=true&resourceVersion=${api.resourceVersion}&allowWatchBookmarks=true`);
  t.teardown(plain.close);
  t.teardown(bm.close);
  await Promise.all([plain.status, bm.status]);
  api.create(svc('x')); // moves the global resourceVersion without a pod event
  api.sendBookmarks();
  const [ev] = await bm.next(1);
  t.equal(ev!.type, 'BOOKMARK');
  t.equal(ev!.object.metadata.resourceVersion, String(api.resourceVersion));
  t.equal(ev!.object.kind, 'Pod');
  api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' } });
  const [first] = await plain.next(1);
  t.equal(first!.type, 'ADDED', 'no bookmark on a watch that did not ask');

  const started = Date.now();
  const timed = watch(`${api.url}/api/v1/pods?watch=true&resourceVersion=${api.resourceVersion}&timeoutSeconds=1`);
  await timed.ended;
  const took = Date.now() - started;
  t.ok(took >= 900 && took < 4000, `stream ended after ${took}ms`);
});

t.test('selectors: an object leaving the selection is DELETED, one entering is ADDED', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create(svc('a', 'default', { app: 'x' }));
  const w = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${api.resourceVersion}&labelSelector=app%3Dx`);
  t.teardown(w.close);
  await w.status;
  api.patch('v1', 'Service', 'default', 'a', { metadata: { labels: { app: 'y' } } });
  api.patch('v1', 'Service', 'default', 'a', { metadata: { labels: { app: 'x' } } });
  t.same(
    (await w.next(2)).map((e) => e.type),
    ['DELETED', 'ADDED'],
  );
  const byName = await getJson(`${api.url}/api/v1/namespaces?fieldSelector=metadata.name%3Dnope`);
  t.same(byName.body.items, []);
});

t.test('discovery and 404 for groups that are not installed', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  t.equal((await getJson(`${api.url}/apis/networking.istio.io`)).status, 404);
  t.equal((await getJson(`${api.url}/apis/networking.istio.io/v1/virtualservices`)).status, 404);
  api.install(...meshCrds('networking.istio.io', ['v1', 'v1beta1', 'v1alpha3']));
  const g = await getJson(`${api.url}/apis/networking.istio.io`);
  t.same(
    g.body.versions.map((v: any) => v.version),
    ['v1', 'v1beta1', 'v1alpha3'],
  );
  t.equal(g.body.preferredVersion.version, 'v1');
  const rl = await getJson(`${api.url}/apis/networking.istio.io/v1beta1`);
  t.ok(rl.body.resources.some((r: any) => r.name === 'virtualservices' && r.kind === 'VirtualService'));
  // One stored object, served at whichever version is asked for.
  api.create({
    apiVersion: 'networking.istio.io/v1beta1',
    kind: 'VirtualService',
    metadata: { name: 'vs', namespace: 'default' },
    spec: { hosts: ['a'] },
  });
  const v1 = await getJson(`${api.url}/apis/networking.istio.io/v1/namespaces/default/virtualservices`);
  t.equal(v1.body.items[0].apiVersion, 'networking.istio.io/v1', 'custom resource list items carry apiVersion');
  t.equal((await getJson(`${api.url}/apis/security.istio.io/v1/authorizationpolicies`)).status, 404);
});

t.test('HTTP writes: create, conflict on stale update, merge patch, delete; bearer token required', async (t) => {
  const api = await FakeApiServer.start({ token: 's3cret' });
  t.teardown(() => api.close());
  const auth = { authorization: 'Bearer s3cret', 'content-type': 'application/json' };
  t.equal((await fetch(`${api.url}/api/v1/services`)).status, 401);
  const created = await getJson(`${api.url}/api/v1/namespaces/web/services`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify(svc('a', 'web')),
  });
  t.equal(created.status, 201);
  t.equal(created.body.metadata.namespace, 'web');
  const dup = await getJson(`${api.url}/api/v1/namespaces/web/services`, { method: 'POST', headers: auth, body: JSON.stringify(svc('a', 'web')) });
  t.equal(dup.status, 409);
  t.equal(dup.body.reason, 'AlreadyExists');
  const stale = { ...created.body, metadata: { ...created.body.metadata, resourceVersion: '1' } };
  const conflict = await getJson(`${api.url}/api/v1/namespaces/web/services/a`, { method: 'PUT', headers: auth, body: JSON.stringify(stale) });
  t.equal(conflict.status, 409);
  t.equal(conflict.body.reason, 'Conflict');
  const patched = await getJson(`${api.url}/api/v1/namespaces/web/services/a`, {
    method: 'PATCH',
    headers: { ...auth, 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ metadata: { labels: { a: 'b' } }, spec: { ports: null, type: 'ClusterIP' } }),
  });
  t.equal(patched.status, 200);
  t.same(patched.body.metadata.labels, { a: 'b' });
  t.equal(patched.body.spec.ports, undefined, 'null removes a key');
  t.equal(patched.body.spec.type, 'ClusterIP');
  const gone = await getJson(`${api.url}/api/v1/namespaces/web/services/a`, { method: 'DELETE', headers: auth });
  t.equal(gone.status, 200);
  t.equal((await getJson(`${api.url}/api/v1/namespaces/web/services/a`, { headers: auth })).status, 404);
});

t.test('merge patch follows RFC 7386 examples', async (t) => {
  // RFC 7386 appendix A, a selection.
  t.same(mergePatch({ a: 'b' }, { a: 'c' }), { a: 'c' });
  t.same(mergePatch({ a: 'b' }, { b: 'c' }), { a: 'b', b: 'c' });
  t.same(mergePatch({ a: 'b' }, { a: null }), {});
  t.same(mergePatch({ a: [{ b: 'c' }] }, { a: [1] }), { a: [1] });
  t.same(mergePatch({ e: null }, { a: 1 }), { e: null, a: 1 });
  t.same(mergePatch([1, 2], { a: 'b', c: null }), { a: 'b' });
  t.same(mergePatch({}, { a: { bb: { ccc: null } } }), { a: { bb: {} } });
});

t.test('held watches wait until released; closeWatches ends open streams', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const open = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${api.resourceVersion}`);
  await open.status;
  api.closeWatches();
  await open.ended;
  api.holdWatches();
  const held = watch(`${api.url}/api/v1/services?watch=true&resourceVersion=${api.resourceVersion}`);
  t.teardown(held.close);
  let answered = false;
  void held.status.then(() => (answered = true));
  await new Promise((r) => setTimeout(r, 150));
  t.equal(answered, false, 'no answer while held');
  api.releaseWatches();
  t.equal(await held.status, 200);
});
