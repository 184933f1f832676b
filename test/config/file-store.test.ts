// FileConfigStore against a real directory: initial load, add/edit/delete/rename, editors that
// write through a rename, new sub-directories, invalid edits that keep the last good version and
// are counted in pilot_total_rejected_configs, duplicates, and one-shot loadConfigDir.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { FileConfigStore, loadConfigDir } from '../../src/config/file';
import type { ConfigEvent } from '../../src/config/store';
import { configKey } from '../../src/config/types';
import { registry } from '../../src/lib/metrics';
import { setOutputLevel } from '../../src/lib/log';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

// Rejections are logged by design; keep the test output readable.
setOutputLevel('file', 'none');
setOutputLevel('validation', 'none');

async function rejectedCount(type: string, name: string): Promise<number> {
  const m = registry.getSingleMetric('pilot_total_rejected_configs');
  if (!m) return 0;
  const v = (await m.get()).values.find((x) => x.labels.type === type && x.labels.name === name);
  return v?.value ?? 0;
}

const vs = (name: string, host: string, weight = 100, extra = '') => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ${name}
spec:
  hosts: [${host}]
  http:
  - route:
    - destination: {host: ${host}}
      weight: ${weight}${extra}
`;
const se = (name: string, host: string) => `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ns1}
spec:
  hosts: [${host}]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`;

function open(dir: string): { store: FileConfigStore; events: ConfigEvent[] } {
  const store = new FileConfigStore({ dir, debounceMs: 20 });
  const events: ConfigEvent[] = [];
  store.subscribe((ev) => events.push(...ev));
  return { store, events };
}

const seen = (events: readonly ConfigEvent[], type: ConfigEvent['type'], key: string) =>
  events.find((e) => e.type === type && configKey(e.config) === key);

t.test('initial load, then add, edit, rename, delete', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.mkdir(path.join(dir, 'sub'));
  await fs.writeFile(path.join(dir, 'reviews.yaml'), vs('reviews', 'reviews'));
  await fs.writeFile(path.join(dir, 'sub', 'ext.yml'), se('ext', 'api.example.com'));
  await fs.writeFile(path.join(dir, '.hidden.yaml'), vs('hidden', 'hidden'));
  await fs.writeFile(path.join(dir, 'notes.txt'), 'not config');
  await fs.writeFile(path.join(dir, 'reviews.yaml~'), vs('backup', 'backup'));
  const { store, events } = open(dir);
  t.teardown(() => store.close());
  t.equal(store.hasSynced(), false);
  await store.whenSynced();
  t.equal(store.hasSynced(), true);
  t.same(store.list('VirtualService').map(configKey), ['VirtualService/default/reviews'], 'hidden and temp files are ignored');
  t.same(store.list('ServiceEntry').map(configKey), ['ServiceEntry/ns1/ext']);
  t.equal(store.get('VirtualService', 'default', 'reviews')!.source, path.join(dir, 'reviews.yaml') + '[0]');

  // add
  await fs.writeFile(
    path.join(dir, 'ratings.json'),
    JSON.stringify({
      apiVersion: 'networking.istio.io/v1',
      kind: 'VirtualService',
      metadata: { name: 'ratings' },
      spec: { hosts: ['ratings'], http: [{ route: [{ destination: { host: 'ratings' } }] }] },
    }),
  );
  await waitForValue('add of ratings', () => seen(events, 'add', 'VirtualService/default/ratings'), { timeoutMs: 10_000, intervalMs: 10 });

  // edit
  await fs.writeFile(path.join(dir, 'reviews.yaml'), vs('reviews', 'reviews', 100, '\n    timeout: 5s'));
  const upd = await waitForValue('update of reviews', () => seen(events, 'update', 'VirtualService/default/reviews'), {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  t.equal((upd.config.spec as { http: Array<{ timeout?: string }> }).http[0]!.timeout, '5s');
  t.equal((upd.old!.spec as { http: Array<{ timeout?: string }> }).http[0]!.timeout, undefined);

  // rename: same resources, no delete; the source follows the file
  const before = events.length;
  await fs.rename(path.join(dir, 'sub', 'ext.yml'), path.join(dir, 'sub', 'external.yaml'));
  await waitForValue('source moved', () => store.get('ServiceEntry', 'ns1', 'ext')?.source?.endsWith('external.yaml[0]'), {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  t.equal(events.slice(before).filter((e) => e.type === 'delete').length, 0, 'a rename deletes nothing');

  // delete
  await fs.rm(path.join(dir, 'ratings.json'));
  await waitForValue('delete of ratings', () => seen(events, 'delete', 'VirtualService/default/ratings'), { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(store.get('VirtualService', 'default', 'ratings'), undefined);
});

t.test('an invalid edit is rejected, counted, and the previous version keeps serving', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  const file = path.join(dir, 'vs.yaml');
  await fs.writeFile(file, vs('canary', 'canary', 100) + '---\n' + vs('stable', 'stable'));
  const { store, events } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();
  const good = store.get('VirtualService', 'default', 'canary')!;
  t.equal(events.length, 2, 'the initial load adds both');
  const rejectedBefore = await rejectedCount('virtualservice', 'default/canary');

  // A negative weight is invalid; the other document of the file is still read.
  await fs.writeFile(file, vs('canary', 'canary', -5) + '---\n' + vs('stable', 'stable', 100, '\n    timeout: 2s'));
  await waitForValue('update of stable', () => seen(events, 'update', 'VirtualService/default/stable'), { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(await rejectedCount('virtualservice', 'default/canary'), rejectedBefore + 1, 'pilot_total_rejected_configs counts the rejection');
  t.equal(store.get('VirtualService', 'default', 'canary'), good, 'the last good version is still served');
  t.notOk(
    events.slice(2).find((e) => configKey(e.config) === 'VirtualService/default/canary'),
    'no event for the rejected resource',
  );

  // A resource that never was valid is absent.
  await fs.writeFile(path.join(dir, 'bad.yaml'), vs('never', 'never', -1));
  await waitForValue('rejection of never', async () => (await rejectedCount('virtualservice', 'default/never')) > 0, {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  await waitForValue('count', () => store.reloadCount() >= 3, { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(store.get('VirtualService', 'default', 'never'), undefined);

  // A YAML syntax error keeps the file's resources (they may be in the broken document).
  await fs.writeFile(file, 'apiVersion: [\n');
  const reloads = store.reloadCount();
  await waitForValue('reload after syntax error', () => store.reloadCount() > reloads, { timeoutMs: 10_000, intervalMs: 10 });
  t.ok(store.get('VirtualService', 'default', 'stable'), 'kept after a syntax error');
  t.ok(store.get('VirtualService', 'default', 'canary'), 'kept after a syntax error');

  // Fixed: the new valid version replaces the old.
  await fs.writeFile(file, vs('canary', 'canary', 50));
  await waitForValue(
    'canary updated',
    () => {
      const c = store.get('VirtualService', 'default', 'canary');
      return c && c.spec.http![0]!.route![0]!.weight === 50;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
  await waitForValue('stable deleted', () => seen(events, 'delete', 'VirtualService/default/stable'), { timeoutMs: 10_000, intervalMs: 10 });
});

t.test('editors that write through a rename, new sub-directories', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.writeFile(path.join(dir, 'a.yaml'), vs('a', 'a'));
  const { store, events } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();

  // vim/IntelliJ style: write a temp file, rename it over the original.
  await fs.writeFile(path.join(dir, '.a.yaml.swp'), vs('a', 'a', 100, '\n    timeout: 3s'));
  await fs.rename(path.join(dir, '.a.yaml.swp'), path.join(dir, 'a.yaml'));
  const upd = await waitForValue('update through rename', () => seen(events, 'update', 'VirtualService/default/a'), {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  t.equal((upd.config.spec as { http: Array<{ timeout?: string }> }).http[0]!.timeout, '3s');

  // A new directory, then files in it (and deeper).
  await fs.mkdir(path.join(dir, 'team', 'deep'), { recursive: true });
  await fs.writeFile(path.join(dir, 'team', 'b.yaml'), vs('b', 'b'));
  await waitForValue('add of b', () => seen(events, 'add', 'VirtualService/default/b'), { timeoutMs: 10_000, intervalMs: 10 });
  await fs.writeFile(path.join(dir, 'team', 'deep', 'c.yaml'), vs('c', 'c'));
  await waitForValue('add of c', () => seen(events, 'add', 'VirtualService/default/c'), { timeoutMs: 10_000, intervalMs: 10 });
  // Removing the directory deletes its resources.
  await fs.rm(path.join(dir, 'team'), { recursive: true });
  await waitForValue(
    'delete of b and c',
    () => seen(events, 'delete', 'VirtualService/default/b') && seen(events, 'delete', 'VirtualService/default/c'),
    { timeoutMs: 10_000, intervalMs: 10 },
  );
});

t.test('duplicates: the file loaded last wins', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.writeFile(path.join(dir, '10-first.yaml'), vs('dup', 'first'));
  await fs.writeFile(path.join(dir, '20-second.yaml'), vs('dup', 'second'));
  const { store } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();
  t.same(store.get('VirtualService', 'default', 'dup')!.spec.hosts, ['second']);
  const once = await loadConfigDir(dir);
  t.same(
    once.configs.map((c) => c.spec),
    [store.get('VirtualService', 'default', 'dup')!.spec],
  );
  t.equal(once.warnings.length, 1);
  t.match(
    once.warnings[0]!.message,
    /^duplicate resource: also defined in .*10-first\.yaml\[0\]; the definition loaded last \(.*20-second\.yaml\[0\]\) is used$/,
  );
});

t.test('an edit in a large tree reads only the file it names; other events rescan the tree', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  for (let i = 0; i < 300; i++) await fs.writeFile(path.join(dir, `svc-${i}.yaml`), vs(`svc-${i}`, `svc-${i}`));
  // A ConfigMap mount: the visible file is a link through `..data`, which the kubelet swaps atomically.
  await fs.mkdir(path.join(dir, '..2026_01'));
  await fs.writeFile(path.join(dir, '..2026_01', 'cm.yaml'), vs('cm', 'cm-v1'));
  await fs.symlink('..2026_01', path.join(dir, '..data'));
  await fs.symlink(path.join('..data', 'cm.yaml'), path.join(dir, 'cm.yaml'));
  const { store, events } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();
  t.equal(store.filesRead(), 301, 'the initial load reads every file');
  t.same(store.get('VirtualService', 'default', 'cm')!.spec.hosts, ['cm-v1']);

  await fs.writeFile(path.join(dir, 'svc-7.yaml'), vs('svc-7', 'svc-7', 100, '\n    timeout: 7s'));
  await waitForValue('update of svc-7', () => seen(events, 'update', 'VirtualService/default/svc-7'), { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(store.filesRead(), 302, 'the edit read one file');
  t.equal(events.filter((e) => e.type !== 'add').length, 1, 'and changed one resource');

  await fs.rm(path.join(dir, 'svc-8.yaml'));
  await waitForValue('delete of svc-8', () => seen(events, 'delete', 'VirtualService/default/svc-8'), { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(store.filesRead(), 302, 'a deletion reads nothing');

  // The swap changes no visible name: the `..data` event makes a rescan find the link's new target.
  await fs.mkdir(path.join(dir, '..2026_02'));
  await fs.writeFile(path.join(dir, '..2026_02', 'cm.yaml'), vs('cm', 'cm-v2'));
  await fs.symlink('..2026_02', path.join(dir, '..data_tmp'));
  await fs.rename(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  await waitForValue('ConfigMap swap', () => store.get('VirtualService', 'default', 'cm')?.spec.hosts?.[0] === 'cm-v2', {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  t.equal(store.filesRead(), 303, 'the rescan read only the file whose target changed');
});

t.test('duplicates follow edits of either file; a resource moving between files is not deleted', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.writeFile(path.join(dir, '10-first.yaml'), vs('dup', 'first'));
  await fs.writeFile(path.join(dir, '20-second.yaml'), vs('dup', 'second'));
  const { store, events } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();
  const hosts = () => store.get('VirtualService', 'default', 'dup')?.spec.hosts?.[0];
  t.equal(hosts(), 'second');

  // The losing definition changes: what is served does not.
  const reloads = store.reloadCount();
  await fs.writeFile(path.join(dir, '10-first.yaml'), vs('dup', 'first-v2'));
  await waitForValue('reload', () => store.reloadCount() > reloads, { timeoutMs: 10_000, intervalMs: 10 });
  t.equal(hosts(), 'second', 'the file loaded last still wins');
  t.equal(events.filter((e) => e.type === 'update').length, 0, 'no event');

  // The winning file goes: the other definition takes over (an update, not a delete).
  await fs.rm(path.join(dir, '20-second.yaml'));
  await waitForValue('first takes over', () => hosts() === 'first-v2', { timeoutMs: 10_000, intervalMs: 10 });
  t.notOk(seen(events, 'delete', 'VirtualService/default/dup'));

  // Moved to another file in one burst: never deleted on the way.
  const before = events.length;
  await fs.writeFile(path.join(dir, '30-third.yaml'), vs('dup', 'first-v2'));
  await fs.rm(path.join(dir, '10-first.yaml'));
  await waitForValue('source moved', () => store.get('VirtualService', 'default', 'dup')?.source?.includes('30-third.yaml'), {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  t.equal(events.slice(before).filter((e) => e.type === 'delete').length, 0, 'no delete');
  t.equal(hosts(), 'first-v2');
});

t.test('a missing directory fails the initial sync', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  const store = new FileConfigStore({ dir: path.join(dir, 'nope') });
  t.teardown(() => store.close());
  await t.rejects(store.whenSynced(), /cannot read config directory .*nope/);
  t.equal(store.hasSynced(), false);
});

t.test('close stops watching', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  const { store, events } = open(dir);
  await store.whenSynced();
  await store.close();
  // A live store on the same directory shows when the change has been seen.
  const control = open(dir);
  t.teardown(() => control.store.close());
  await control.store.whenSynced();
  await fs.writeFile(path.join(dir, 'late.yaml'), vs('late', 'late'));
  await waitForValue('the control store sees the file', () => seen(control.events, 'add', 'VirtualService/default/late'), {
    timeoutMs: 10_000,
    intervalMs: 10,
  });
  await waitForValue('a further debounce period', () => control.store.reloadCount() >= 2, { timeoutMs: 10_000, intervalMs: 10 });
  t.same(events, [], 'the closed store saw nothing');
  t.same(store.list('VirtualService'), []);
});

t.test('loadConfigDir reports errors with file, document, resource and field', async (t) => {
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.writeFile(path.join(dir, 'x.yaml'), vs('ok', 'ok') + '---\n' + vs('bad', 'bad', -1));
  const r = await loadConfigDir(dir);
  t.same(r.configs.map(configKey), ['VirtualService/default/ok']);
  t.same(r.errors, [
    {
      source: path.join(dir, 'x.yaml'),
      document: '[1]',
      resource: 'VirtualService/default/bad',
      field: 'spec.http[0].route[0].weight',
      message: 'weight -1 < 0',
    },
  ]);
  const unvalidated = await loadConfigDir(dir, { validate: false });
  t.equal(unvalidated.configs.length, 2);
});

t.test('the --configDir store keeps every Istio CRD kind: EnvoyFilter, ProxyConfig, Telemetry, WasmPlugin stored, bad ones rejected', async (t) => {
  const { loadEnvoyFilterTypes } = await import('../../src/config/validate');
  await loadEnvoyFilterTypes();
  const dir = tempDir(t, 'mesh-cfg-');
  await fs.writeFile(
    path.join(dir, 'extensions.yaml'),
    [
      'apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ef, namespace: ns1}\nspec:\n  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: MERGE, value: {connect_timeout: 5s}}\n',
      'apiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig\nmetadata: {name: pc, namespace: ns1}\nspec: {concurrency: 2}\n',
      'apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: tel, namespace: ns1}\nspec: {accessLogging: [{providers: [{name: envoy}], filter: {expression: "response.code >= 400"}}]}\n',
      'apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: wasm, namespace: ns1}\nspec: {url: "oci://registry.example.com/filters/auth:1.0"}\n',
      'apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: bad, namespace: ns1}\nspec: {url: "ftp://example.com/x.wasm"}\n',
    ].join('---\n'),
  );
  const { store } = open(dir);
  t.teardown(() => store.close());
  await store.whenSynced();
  t.same(store.list('EnvoyFilter').map(configKey), ['EnvoyFilter/ns1/ef']);
  t.same(store.list('ProxyConfig').map(configKey), ['ProxyConfig/ns1/pc']);
  t.same(store.list('Telemetry').map(configKey), ['Telemetry/ns1/tel']);
  t.same(store.list('WasmPlugin').map(configKey), ['WasmPlugin/ns1/wasm'], 'the invalid WasmPlugin is not served');
  t.equal(await rejectedCount('wasmplugin', 'ns1/bad'), 1);
});
