// The MeshOperator path grammar and --set typing, as tables taken from Istio's operator/pkg/values/map_test.go
// (TestSetPath, TestGetPath, TestParseValue) plus the overlay rule of MergeFrom.
import t from 'tap';
import { getPath, mergeFrom, parseSetValue, setPath, setSpecPaths, splitPath, type Tree } from '../../src/manifest/tree';

t.test('setPath (Istio TestSetPath)', async (t) => {
  const cases: Array<{ name: string; base?: Tree; path: string; data: unknown; out: string }> = [
    { name: 'trivial', path: 'spec', data: 1, out: '{"spec":1}' },
    { name: 'simple create', path: 'spec.bar', data: 1, out: '{"spec":{"bar":1}}' },
    { name: 'simple merge', path: 'spec.bar', base: { spec: { foo: 'baz' } }, data: 1, out: '{"spec":{"foo":"baz","bar":1}}' },
    { name: 'array', path: 'top.[0]', data: 1, out: '{"top":[1]}' },
    { name: 'array flattened', path: 'top[0]', data: 1, out: '{"top":[1]}' },
    { name: 'array and values', path: 'top.[0].bar', data: 1, out: '{"top":[{"bar":1}]}' },
    { name: 'array and values merge', path: 'top.[0].bar', base: { top: [{ baz: 2 }] }, data: 1, out: '{"top":[{"baz":2,"bar":1}]}' },
    {
      name: 'kv set',
      path: 'env.[name:POD_NAME].value',
      base: { env: [{ name: 'POD_NAME' }] },
      data: 1,
      out: '{"env":[{"name":"POD_NAME","value":1}]}',
    },
    {
      name: 'escape kv',
      path: 'env.[name:foo\\.bar].value',
      base: { env: [{ name: 'foo.bar' }] },
      data: 'hi',
      out: '{"env":[{"name":"foo.bar","value":"hi"}]}',
    },
    {
      name: 'set kv',
      path: 'spec.ports.[name:https-dns].port',
      base: { spec: { ports: [{ name: 'https-dns' }] } },
      data: 11111,
      out: '{"spec":{"ports":[{"name":"https-dns","port":11111}]}}',
    },
    { name: 'set unmatched kv', path: 'spec.ports.[name:https-dns].port', data: 11111, out: '' },
  ];
  for (const c of cases) {
    const m: Tree = c.base ?? {};
    if (c.out === '') t.throws(() => setPath(m, c.path, c.data), /element \[name:https-dns\] not found/, c.name);
    else {
      setPath(m, c.path, c.data);
      t.same(m, JSON.parse(c.out), c.name);
    }
  }
});

t.test('getPath (Istio TestGetPath)', async (t) => {
  const cases: Array<[string, Tree, string, unknown]> = [
    ['trivial', { spec: 1 }, 'spec', 1],
    ['nested', { spec: { bar: 1 } }, 'spec.bar', 1],
    ['map', { spec: { bar: 1 } }, 'spec', { bar: 1 }],
    ['array', { top: [1] }, 'top.[0]', 1],
    ['array out of bounds', { top: [1] }, 'top.[9]', undefined],
    ['array and values', { top: [{ bar: 1 }] }, 'top.[0].bar', 1],
    ['kv', { env: [{ name: 'POD_NAME', value: 1 }] }, 'env.[name:POD_NAME].value', 1],
    ['escape kv', { env: [{ name: 'foo.bar', value: 'hi' }] }, 'env.[name:foo\\.bar].value', 'hi'],
  ];
  for (const [name, base, p, want] of cases) t.same(getPath(base, p)[0], want, name);
});

t.test('parseSetValue (Istio TestParseValue)', async (t) => {
  const cases: Array<[string, unknown]> = [
    ['', ''],
    ['true', true],
    ['false', false],
    ['1', 1],
    ['0', 0],
    ['12345678', 12345678],
    ['-12345678', -12345678],
    ['1.23456', 1.23456],
    ['0.00', 0],
    ['-1.23456', -1.23456],
    ['foo', 'foo'],
    ['foo\\,bar', 'foo,bar'],
    // Go's ParseBool forms beyond true/false, and a float form Atoi refuses.
    ['T', true],
    ['FALSE', false],
    ['1e3', 1000],
  ];
  for (const [input, want] of cases) t.same(parseSetValue(input), want, JSON.stringify(input));
});

t.test('splitPath: escaped dots and brackets', async (t) => {
  t.same(splitPath('values.sidecarInjectorWebhook.injectedAnnotations.container\\.apparmor\\.security\\.beta\\.orch\\.io/mesh-proxy'), [
    'values',
    'sidecarInjectorWebhook',
    'injectedAnnotations',
    'container.apparmor.security.beta.orch.io/mesh-proxy',
  ]);
  t.same(splitPath('components.ingressGateways[0].enabled'), ['components', 'ingressGateways', '[0]', 'enabled']);
  t.same(splitPath('.a.b.'), ['a', 'b']);
});

t.test('setSpecPaths: typed values, always-string paths', async (t) => {
  const m: Tree = {};
  setSpecPaths(m, [
    'values.global.tag=1.26',
    'tag=1.26',
    'values.pilot.traceSampling=1.5',
    'meshConfig.enableTracing=true',
    'values.global.proxy.statusPort=15020',
    'meshConfig.defaultConfig.proxyMetadata.X=1',
  ]);
  t.same(m, {
    spec: {
      values: { global: { tag: '1.26', proxy: { statusPort: 15020 } }, pilot: { traceSampling: 1.5 } },
      tag: '1.26',
      meshConfig: { enableTracing: true, defaultConfig: { proxyMetadata: { X: '1' } } },
    },
  });
});

t.test('mergeFrom: maps merge, lists and scalars replace (left to right overlays)', async (t) => {
  const base: Tree = { spec: { components: { ingressGateways: [{ name: 'a', enabled: true }] }, values: { global: { hub: 'x', tag: 'y' } } } };
  mergeFrom(base, { spec: { components: { ingressGateways: [{ name: 'b' }] }, values: { global: { hub: 'z' } } } });
  t.same(base, { spec: { components: { ingressGateways: [{ name: 'b' }] }, values: { global: { hub: 'z', tag: 'y' } } } });
});
