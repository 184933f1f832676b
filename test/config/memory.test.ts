// MemoryConfigStore: batches of events per call, add/update/delete diffs on replaceAll, owners,
// resourceVersion bumps only on real changes; AggregateConfigStore reading several stores.
import t from 'tap';
import { AggregateConfigStore } from '../../src/config/aggregate';
import { MemoryConfigStore } from '../../src/config/memory';
import type { ConfigEvent } from '../../src/config/store';
import { configKey } from '../../src/config/types';
import { mk } from './helpers';

const se = (name: string, host: string, namespace = 'default') => mk('ServiceEntry', { hosts: [host] }, { name, namespace });
const summary = (events: readonly ConfigEvent[]) => events.map((e) => `${e.type} ${configKey(e.config)}`);

t.test('apply and delete publish one batch per call', async (t) => {
  const s = new MemoryConfigStore();
  const batches: string[][] = [];
  s.subscribe((ev) => batches.push(summary(ev)));
  s.apply([se('a', 'a.com'), se('b', 'b.com')]);
  s.apply(se('a', 'a2.com'));
  s.apply(se('a', 'a2.com')); // unchanged: no event, no batch
  s.delete([
    { kind: 'ServiceEntry', namespace: 'default', name: 'b' },
    { kind: 'ServiceEntry', namespace: 'default', name: 'missing' },
  ]);
  t.same(batches, [
    ['add ServiceEntry/default/a', 'add ServiceEntry/default/b'],
    ['update ServiceEntry/default/a'],
    ['delete ServiceEntry/default/b'],
  ]);
  t.same(s.list('ServiceEntry').map(configKey), ['ServiceEntry/default/a']);
  t.equal(s.get('ServiceEntry', 'default', 'a')!.spec.hosts[0], 'a2.com');
  t.equal(s.get('ServiceEntry', 'default', 'b'), undefined);
});

t.test('updates carry the old version; resourceVersion moves only on change', async (t) => {
  const s = new MemoryConfigStore();
  const seen: ConfigEvent[] = [];
  s.subscribe((ev) => seen.push(...ev));
  s.apply(se('a', 'a.com'));
  const v1 = s.get('ServiceEntry', 'default', 'a')!.meta.resourceVersion;
  s.apply({ ...se('a', 'a.com'), meta: { ...se('a', 'a.com').meta, resourceVersion: '999' } });
  t.equal(s.get('ServiceEntry', 'default', 'a')!.meta.resourceVersion, v1, 'same content, different input resourceVersion: unchanged');
  s.apply(se('a', 'b.com'));
  const v2 = s.get('ServiceEntry', 'default', 'a')!.meta.resourceVersion;
  t.not(v2, v1);
  t.ok(Number(v2) > Number(v1), 'versions increase');
  t.equal(seen.length, 2);
  t.equal(seen[1]!.type, 'update');
  t.equal((seen[1]!.old as (typeof seen)[1]['config']).meta.resourceVersion, v1);
  t.same((seen[1]!.old!.spec as { hosts: string[] }).hosts, ['a.com']);
  s.delete({ kind: 'ServiceEntry', namespace: 'default', name: 'a' });
  t.equal(seen[2]!.type, 'delete');
  t.equal(seen[2]!.config.meta.resourceVersion, v2, 'a delete carries the last version');
});

t.test('replaceAll computes the diff of one source and leaves others alone', async (t) => {
  const s = new MemoryConfigStore();
  const batches: string[][] = [];
  s.subscribe((ev) => batches.push(summary(ev)));
  s.replaceAll('files', [se('a', 'a.com'), se('b', 'b.com'), se('c', 'c.com')]);
  s.apply(se('x', 'x.com'), 'orch');
  const events = s.replaceAll('files', [se('a', 'a.com'), se('b', 'b2.com'), se('d', 'd.com')]);
  t.same(summary(events), ['update ServiceEntry/default/b', 'add ServiceEntry/default/d', 'delete ServiceEntry/default/c']);
  t.same(batches.at(-1), summary(events), 'the returned events are the published batch');
  t.same(
    s.list('ServiceEntry').map((c) => c.meta.name),
    ['a', 'b', 'd', 'x'],
    'orch resource untouched',
  );
  s.replaceAll('files', []);
  t.same(
    s.list('ServiceEntry').map((c) => c.meta.name),
    ['x'],
  );
  t.same(s.replaceAll('files', []), [], 'nothing to do: no events');
  t.equal(batches.length, 4);
});

t.test('list is sorted and filters by namespace; sync state', async (t) => {
  const s = new MemoryConfigStore({ synced: false });
  t.equal(s.hasSynced(), false);
  let resolved = false;
  const p = s.whenSynced().then(() => (resolved = true));
  s.apply([se('b', 'b.com', 'ns2'), se('z', 'z.com', 'ns1'), se('a', 'a.com', 'ns2')]);
  t.same(s.list('ServiceEntry').map(configKey), ['ServiceEntry/ns1/z', 'ServiceEntry/ns2/a', 'ServiceEntry/ns2/b']);
  t.same(
    s.list('ServiceEntry', 'ns2').map((c) => c.meta.name),
    ['a', 'b'],
  );
  t.same(s.list('VirtualService'), []);
  t.equal(resolved, false);
  s.markSynced();
  await p;
  t.equal(s.hasSynced(), true);
});

t.test('a throwing subscriber does not stop the others', async (t) => {
  const s = new MemoryConfigStore();
  let got = 0;
  s.subscribe(() => {
    throw new Error('boom');
  });
  const off = s.subscribe(() => got++);
  s.apply(se('a', 'a.com'));
  t.equal(got, 1);
  off();
  s.apply(se('b', 'b.com'));
  t.equal(got, 1, 'unsubscribed');
});

t.test('AggregateConfigStore', async (t) => {
  const files = new MemoryConfigStore({ synced: false });
  const orch = new MemoryConfigStore({ synced: false });
  const agg = new AggregateConfigStore([files, orch]);
  const batches: string[][] = [];
  agg.subscribe((ev) => batches.push(summary(ev)));
  files.apply([se('a', 'from-files.com'), se('b', 'b.com')]);
  orch.apply([se('a', 'from-orch.com'), se('c', 'c.com')]);
  t.same(
    agg.list('ServiceEntry').map((c) => `${c.meta.name}:${c.spec.hosts[0]}`),
    ['a:from-files.com', 'b:b.com', 'c:c.com'],
    'first store wins',
  );
  t.equal(agg.get('ServiceEntry', 'default', 'a')!.spec.hosts[0], 'from-files.com');
  t.equal(agg.get('ServiceEntry', 'default', 'c')!.spec.hosts[0], 'c.com');
  t.same(batches, [
    ['add ServiceEntry/default/a', 'add ServiceEntry/default/b'],
    ['add ServiceEntry/default/a', 'add ServiceEntry/default/c'],
  ]);
  t.equal(agg.hasSynced(), false);
  files.markSynced();
  t.equal(agg.hasSynced(), false, 'synced only when all are');
  const p = agg.whenSynced();
  orch.markSynced();
  await p;
  t.equal(agg.hasSynced(), true);
  await agg.close();
  files.apply(se('z', 'z.com'));
  t.equal(batches.length, 2, 'closed stores publish nothing');
});
