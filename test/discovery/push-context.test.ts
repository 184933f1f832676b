// PushContext selection: gateways by labels, VirtualService binding, DestinationRule precedence,
// Sidecar egress scoping, exportTo, security policy selection, versions.
import t from 'tap';
import { initPushContext } from '../../src/discovery/push-context';
import { buildRegistries } from '../../src/discovery/registry';
import { cfg, ListStore, proxy } from './fixtures';

const svcEntry = (ns: string, name: string, host: string, exportTo?: string[]) =>
  cfg('ServiceEntry', ns, name, {
    hosts: [host],
    ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
    resolution: 'STATIC',
    location: 'MESH_INTERNAL',
    ...(exportTo ? { exportTo } : {}),
  });

function build(configs: ReturnType<typeof cfg>[], opts = {}) {
  const store = new ListStore(configs);
  return initPushContext(store, buildRegistries(store, []), opts);
}

t.test('gateways selected by labels, scoped to namespace when asked', async (t) => {
  const configs = [
    cfg('Gateway', 'mesh-system', 'public', {
      selector: { istio: 'ingressgateway' },
      servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    }),
    cfg('Gateway', 'apps', 'private', {
      selector: { istio: 'ingressgateway' },
      servers: [
        { port: { number: 443, name: 'https', protocol: 'HTTPS' }, hosts: ['a.example.com'], tls: { mode: 'SIMPLE', credentialName: 'a-cert' } },
      ],
    }),
    cfg('Gateway', 'apps', 'other', {
      selector: { istio: 'egress' },
      servers: [{ port: { number: 8080, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    }),
  ];
  const gw = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' });
  const m = build(configs).mergedGateway(gw);
  t.same([...m.gatewayNames].sort(), ['apps/private', 'mesh-system/public']);
  t.same(
    m.ports.map((p) => [p.port, p.kind]),
    [
      [80, 'http'],
      [443, 'tls'],
    ],
  );
  t.same([...m.serversByRouteName.keys()].sort(), ['http.80', 'https.443.https.private.apps']);
  const scoped = build(configs, { scopeGatewayToNamespace: true }).mergedGateway(gw);
  t.same([...scoped.gatewayNames], ['mesh-system/public']);
});

t.test('a gateway that gets no listener is told why: its labels and the selectors it missed', async (t) => {
  const gws = [
    cfg('Gateway', 'mesh-system', 'public', {
      selector: { istio: 'ingressgateway' },
      servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    }),
    cfg('Gateway', 'apps', 'other', {
      selector: { istio: 'egress', zone: 'a' },
      servers: [{ port: { number: 8080, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    }),
  ];
  const id = 'router~10.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local';
  const unlabelled = proxy(id, { NAMESPACE: 'mesh-system' });
  t.equal(
    build(gws).explainNoGatewayListeners(unlabelled),
    'gateway proxy gw-0.mesh-system with labels {} gets no listeners: no Gateway selects it; selectors not matched: mesh-system/public {istio: ingressgateway}; apps/other {istio: egress, zone: a}',
  );
  t.equal(
    build(gws, { scopeGatewayToNamespace: true }).explainNoGatewayListeners(proxy(id, { NAMESPACE: 'mesh-system', LABELS: { app: 'x' } })),
    'gateway proxy gw-0.mesh-system with labels {app: x} gets no listeners: no Gateway selects it; selectors not matched: mesh-system/public {istio: ingressgateway}',
    'with PILOT_SCOPE_GATEWAY_TO_NAMESPACE only its namespace counts',
  );
  t.equal(
    build([]).explainNoGatewayListeners(unlabelled),
    'gateway proxy gw-0.mesh-system with labels {} gets no listeners: there is no Gateway resource',
  );
  t.match(
    build(gws).explainNoGatewayListeners(proxy(id, { NAMESPACE: 'mesh-system', LABELS: { istio: 'ingressgateway' } })),
    /gets no listeners: the Gateways selecting it \(mesh-system\/public\) have no server it can serve/,
  );
});

t.test('VirtualServices bound to gateways by ns/name, short name and mesh', async (t) => {
  const push = build([
    cfg('VirtualService', 'apps', 'short', { hosts: ['a.example.com'], gateways: ['private'] }),
    cfg('VirtualService', 'apps', 'qualified', { hosts: ['b.example.com'], gateways: ['mesh-system/public', 'mesh'] }),
    cfg('VirtualService', 'apps', 'implicit-mesh', { hosts: ['reviews'] }),
    cfg('VirtualService', 'apps', 'hidden', { hosts: ['c.example.com'], gateways: ['mesh-system/public'], exportTo: ['.'] }),
  ]);
  t.same(
    push.virtualServicesForGateway('apps', 'apps/private').map((v) => v.name),
    ['short'],
  );
  t.same(
    push.virtualServicesForGateway('mesh-system', 'mesh-system/public').map((v) => v.name),
    ['qualified'],
    'exportTo . hides it from other namespaces',
  );
  t.same(
    push.virtualServicesForGateway('apps', 'mesh').map((v) => v.name),
    ['qualified', 'implicit-mesh'],
  );
  t.same(
    push.virtualServices().find((v) => v.name === 'implicit-mesh')!.hosts,
    ['reviews.apps.svc.cluster.local'],
    'short hosts resolve in the VS namespace',
  );
});

t.test('DestinationRule precedence: proxy namespace, service namespace, root namespace', async (t) => {
  const dr = (ns: string, name: string, host: string, subset: string, exportTo?: string[]) =>
    cfg('DestinationRule', ns, name, { host, subsets: [{ name: subset, labels: { v: subset } }], ...(exportTo ? { exportTo } : {}) });
  const push = build([
    svcEntry('svcns', 'svc', 'api.svcns.svc.cluster.local'),
    dr('mesh-system', 'root', '*.svcns.svc.cluster.local', 'root'),
    dr('svcns', 'owner', 'api.svcns.svc.cluster.local', 'owner'),
    dr('client', 'local', 'api.svcns.svc.cluster.local', 'local'),
    dr('svcns', 'private', 'api.svcns.svc.cluster.local', 'private', ['.']),
  ]);
  const client = proxy('sidecar~10.0.0.2~c.client~client.svc.cluster.local');
  const third = proxy('sidecar~10.0.0.3~t.third~third.svc.cluster.local');
  t.same(
    push.destinationRule(client, 'api.svcns.svc.cluster.local')!.subsets.map((s) => s.name),
    ['local'],
  );
  t.same(
    push.destinationRule(third, 'api.svcns.svc.cluster.local')!.subsets.map((s) => s.name),
    ['owner'],
    'exportTo . rule is not visible from third',
  );
  const owner = proxy('sidecar~10.0.0.4~o.svcns~svcns.svc.cluster.local');
  t.same(
    push
      .destinationRule(owner, 'api.svcns.svc.cluster.local')!
      .subsets.map((s) => s.name)
      .sort(),
    ['owner'],
    'local first; same-host rules merge only with equal exportTo',
  );
  t.same(
    push.destinationRule(third, 'other.svcns.svc.cluster.local')!.subsets.map((s) => s.name),
    ['root'],
    'root namespace wildcard rule',
  );
  t.same(push.subsetLabels(client, 'api.svcns.svc.cluster.local', 'local'), { v: 'local' });
  t.equal(push.subsetLabels(client, 'api.svcns.svc.cluster.local', 'nope'), undefined);
});

t.test('DestinationRule host match within a namespace: exact host, then the longest wildcard, among many rules', async (t) => {
  const dr = (name: string, host: string, subset: string, extra: Record<string, unknown> = {}) =>
    cfg('DestinationRule', 'mesh-system', name, { host, subsets: [{ name: subset, labels: { v: subset } }], ...extra } as never);
  const rules = [
    dr('any', '*', 'any'),
    dr('wide', '*.svc.cluster.local', 'wide'),
    dr('narrow', '*.shop.svc.cluster.local', 'narrow'),
    dr('mixed', 'Cart.Shop.svc.cluster.local', 'mixed'),
    dr('selected', 'pay.shop.svc.cluster.local', 'selected', { workloadSelector: { matchLabels: { app: 'nobody' } } }),
  ];
  // Many exact rules for other hosts: none of them may match a host they do not name.
  for (let i = 0; i < 50; i++) rules.push(dr(`n${i}`, `svc-${i}.shop.svc.cluster.local`, `s${i}`));
  const push = build(rules);
  const p = proxy('sidecar~10.0.0.2~c.client~client.svc.cluster.local');
  const subset = (host: string) => push.destinationRule(p, host)?.subsets.map((s) => s.name);
  t.same(subset('svc-7.shop.svc.cluster.local'), ['s7'], 'exact host');
  t.same(subset('other.shop.svc.cluster.local'), ['narrow'], 'the longest wildcard');
  t.same(subset('x.other.svc.cluster.local'), ['wide']);
  t.same(subset('example.com'), ['any'], '* matches anything');
  t.same(subset('cart.shop.svc.cluster.local'), ['mixed'], 'host names compare without case');
  t.same(subset('pay.shop.svc.cluster.local'), ['narrow'], 'a rule for other workloads falls back to the wildcard');
  t.same(subset('*.shop.svc.cluster.local'), ['narrow'], 'a wildcard host: its own rule');
});

t.test('Sidecar egress scoping and exportTo', async (t) => {
  const push = build([
    svcEntry('a', 'one', 'one.a.svc.cluster.local'),
    svcEntry('b', 'two', 'two.b.svc.cluster.local'),
    svcEntry('b', 'priv', 'priv.b.svc.cluster.local', ['.']),
    cfg('Sidecar', 'a', 'default', { egress: [{ hosts: ['./*', 'mesh-system/*'] }] }),
    cfg('Sidecar', 'a', 'special', {
      workloadSelector: { labels: { app: 'special' } },
      egress: [{ hosts: ['b/two.b.svc.cluster.local'] }],
      outboundTrafficPolicy: { mode: 'REGISTRY_ONLY' },
    }),
  ]);
  const plain = proxy('sidecar~10.0.0.5~p.a~a.svc.cluster.local');
  const special = proxy('sidecar~10.0.0.6~s.a~a.svc.cluster.local', { LABELS: { app: 'special' } });
  const other = proxy('sidecar~10.0.0.7~x.c~c.svc.cluster.local');
  t.same(
    push.servicesForProxy(plain).map((s) => s.hostname),
    ['one.a.svc.cluster.local'],
  );
  t.same(
    push.servicesForProxy(special).map((s) => s.hostname),
    ['two.b.svc.cluster.local'],
  );
  t.equal(push.sidecarScope(special).outboundTrafficPolicy, 'REGISTRY_ONLY');
  t.same(
    push.servicesForProxy(other).map((s) => s.hostname),
    ['one.a.svc.cluster.local', 'two.b.svc.cluster.local'],
    'no Sidecar: everything exported',
  );
});

t.test('a Sidecar selecting workloads by labels never applies to the rest of its namespace', async (t) => {
  const push = build([
    svcEntry('a', 'one', 'one.a.svc.cluster.local'),
    svcEntry('b', 'two', 'two.b.svc.cluster.local'),
    cfg('Sidecar', 'a', 'special', { workloadSelector: { labels: { app: 'special' } }, egress: [{ hosts: ['b/*'] }] }),
    cfg('Sidecar', 'mesh-system', 'default', { egress: [{ hosts: ['./*'] }] }),
  ]);
  const special = proxy('sidecar~10.0.0.6~s.a~a.svc.cluster.local', { LABELS: { app: 'special' } });
  const plain = proxy('sidecar~10.0.0.5~p.a~a.svc.cluster.local', { LABELS: { app: 'plain' } });
  t.same(
    push.servicesForProxy(special).map((s) => s.hostname),
    ['two.b.svc.cluster.local'],
    'the selected workload',
  );
  t.same(
    push.servicesForProxy(plain).map((s) => s.hostname),
    ['one.a.svc.cluster.local'],
    "others get the root namespace's default (egress ./* = their own namespace)",
  );
  t.not(push.sharedKey(plain), push.sharedKey(special), 'different Sidecars: different shared output');
});

t.test('security policies: root namespace applies mesh-wide, selectors narrow', async (t) => {
  const push = build([
    cfg('RequestAuthentication', 'mesh-system', 'jwt', { selector: { matchLabels: { istio: 'ingressgateway' } }, jwtRules: [{ issuer: 'i' }] }),
    cfg('AuthorizationPolicy', 'mesh-system', 'all', {}),
    cfg('AuthorizationPolicy', 'apps', 'ns', {}),
    cfg('AuthorizationPolicy', 'apps', 'web-only', { selector: { matchLabels: { app: 'web' } } }),
    cfg('AuthorizationPolicy', 'other', 'x', {}),
    cfg('PeerAuthentication', 'mesh-system', 'default', { mtls: { mode: 'STRICT' } }),
    cfg('PeerAuthentication', 'apps', 'web', { selector: { matchLabels: { app: 'web' } }, mtls: { mode: 'PERMISSIVE' } }),
  ]);
  const gw = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' } });
  const web = proxy('sidecar~10.0.0.8~w.apps~apps.svc.cluster.local', { LABELS: { app: 'web' } });
  t.same(
    push.requestAuthentications(gw).map((p) => p.meta.name),
    ['jwt'],
  );
  t.same(push.requestAuthentications(web), []);
  t.same(
    push.authorizationPolicies(web).map((p) => p.meta.name),
    ['all', 'ns', 'web-only'],
  );
  // mesh-wide STRICT, overridden by the workload's PERMISSIVE (Istio ComposePeerAuthentication)
  t.equal(push.mergedPeerAuthentication(web).mode, 'PERMISSIVE');
  t.equal(push.mergedPeerAuthentication(gw).mode, 'STRICT', 'the mesh-wide policy elsewhere');
});

t.test('versions change on every rebuild, pushVersion grows', async (t) => {
  const a = build([]);
  const b = build([]);
  t.not(a.version, b.version);
  t.ok(b.pushVersion > a.pushVersion);
});
