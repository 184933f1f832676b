// A virtual host is compiled on its first request, once per thread (src/proxy/route/compile.ts): the route
// configuration is still validated whole on arrival on the main thread; a worker, fed the main thread's accepted
// responses by a relay mux, compiles nothing before a request; an RDS update drops what was compiled.
import t from 'tap';
import { toBinary, type JsonObject } from '@bufbuild/protobuf';
import { RouteConfigurationSchema } from '../../src/gen/envoy/config/route/v3/route_pb';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { compileRouteConfiguration, selectRoute, type VirtualHostSource } from '../../src/proxy/route/compile';
import { encodedVirtualHosts, virtualHostBytes } from '../../src/proxy/route/encoded';
import { RouteManager } from '../../src/proxy/route/rds';
import type { RouteRequest } from '../../src/proxy/route/types';
import { StatsStore } from '../../src/proxy/stats/store';
import { pb, relayRig, routeConfig } from './helpers';
import { waitForValue } from '../helpers/wait';

const noPerFilter = () => new Map();

function req(authority: string): RouteRequest {
  return {
    headers: new RequestHeaders('GET', '/', authority, 'http', {}),
    dynamicMetadata: undefined,
    tlsPresented: false,
    tlsValidated: false,
    random: 0.5,
  };
}

const vhost = (name: string, cluster: string): JsonObject => ({
  name,
  domains: [`${name}.example.com`],
  routes: [{ match: { prefix: '/' }, route: { cluster } }],
});

/** Sources over the encoded configuration that count how often each is decoded. */
function counted(json: JsonObject): { sources: VirtualHostSource[]; decodes: number[]; rc: ReturnType<typeof routeConfig> } {
  const rc = pb(RouteConfigurationSchema, json);
  const decodes = rc.virtualHosts.map(() => 0);
  const sources = encodedVirtualHosts(toBinary(RouteConfigurationSchema, rc), rc.virtualHosts).map((s, i) => ({
    domains: s.domains,
    message: () => {
      decodes[i]!++;
      return s.message();
    },
  }));
  return { sources, decodes, rc };
}

t.test('encoded virtual hosts are views of the route configuration, in order', async (t) => {
  const rc = routeConfig('r', [vhost('a', 'ca'), vhost('b', 'cb')], { request_headers_to_remove: ['x-drop'] });
  const bytes = toBinary(RouteConfigurationSchema, rc);
  const views = virtualHostBytes(bytes);
  t.equal(views.length, 2);
  t.ok(
    views.every((v) => v.buffer === bytes.buffer),
    'no copy',
  );
  t.same(
    encodedVirtualHosts(bytes, rc.virtualHosts).map((v) => [v.message().name, v.message().routes[0]!.action.value]),
    rc.virtualHosts.map((v) => [v.name, v.routes[0]!.action.value]),
  );
});

t.test('a virtual host is compiled on its first request only, and once', async (t) => {
  const { sources, decodes, rc } = counted({ name: 'r', virtual_hosts: [vhost('a', 'ca'), vhost('b', 'cb'), vhost('c', 'cc')] });
  const compiled = compileRouteConfiguration(rc, { parsePerFilter: noPerFilter, validate: false }, sources);
  t.equal(compiled.virtualHostCount, 3);
  t.equal(compiled.compiledVirtualHosts(), 0, 'none compiled before a request');
  t.same(decodes, [0, 0, 0], 'none decoded');
  const first = selectRoute(compiled, req('b.example.com'))!;
  t.equal(first.vhost.name, 'b');
  t.same(first.route.action.kind === 'route' && first.route.action.cluster, { kind: 'cluster', name: 'cb' });
  t.equal(selectRoute(compiled, req('B.example.com'))!.vhost, first.vhost, 'the same compiled virtual host again');
  t.same(decodes, [0, 1, 0], 'b decoded once; a and c not at all');
  t.equal(compiled.compiledVirtualHosts(), 1);
  t.equal(selectRoute(compiled, req('nowhere.example.com')), undefined, 'no virtual host: nothing compiled');
  t.equal(compiled.compiledVirtualHosts(), 1);
});

t.test('validation compiles every virtual host on arrival and keeps none', async (t) => {
  const { sources, decodes, rc } = counted({ name: 'r', virtual_hosts: [vhost('a', 'ca'), vhost('b', 'cb')] });
  const compiled = compileRouteConfiguration(rc, { parsePerFilter: noPerFilter }, sources);
  t.same(decodes, [1, 1], 'each decoded to be checked');
  t.equal(compiled.compiledVirtualHosts(), 0, 'what the check compiled is dropped');
  t.equal(selectRoute(compiled, req('a.example.com'))!.vhost.name, 'a');
  t.same(decodes, [2, 1], 'a compiled again on its first request');

  const bad = {
    name: 'bad',
    virtual_hosts: [vhost('a', 'ca'), { name: 'b', domains: ['b'], routes: [{ match: { safe_regex: { regex: '(x' } }, route: { cluster: 'c' } }] }],
  };
  const invalid = counted(bad);
  t.throws(
    () => compileRouteConfiguration(invalid.rc, { parsePerFilter: noPerFilter }, invalid.sources),
    /route_config 'bad'\.virtual_hosts\[1\]\.routes\[0\]\.match\.safe_regex: invalid regex/,
    'an invalid virtual host nobody requested still rejects the configuration',
  );
  const errors: string[] = [];
  const unchecked = counted(bad);
  const lazy = compileRouteConfiguration(
    unchecked.rc,
    { parsePerFilter: noPerFilter, validate: false, onLazyError: (e) => errors.push(e.message) },
    unchecked.sources,
  );
  t.equal(selectRoute(lazy, req('a.example.com'))!.vhost.name, 'a', 'unvalidated (a worker): the valid virtual host serves');
  t.equal(selectRoute(lazy, req('b')), undefined, 'the invalid one matches nothing');
  t.equal(selectRoute(lazy, req('b')), undefined);
  t.equal(errors.length, 1, 'and is reported once');
  t.match(errors[0], /virtual_hosts\[1\]\.routes\[0\]\.match\.safe_regex/);
});

t.test('RDS on the main thread and in a worker: compiled per thread on first request, dropped by an update', async (t) => {
  const { ads, loggers, mux } = await relayRig(t, 'sidecar~10.0.0.1~app-0.demo~demo.svc.cluster.local', 'ca', 'cb');
  const first = routeConfig('80', [vhost('a', 'ca'), vhost('b', 'cb')]);
  ads.update({ routes: [first] });
  const mainMux = mux({ relay: false });
  const relay = mux({ relay: true });
  mainMux.onRelay = (r) => relay.receive(r);
  const manager = (validate: boolean, m: typeof mainMux) => {
    const rm = new RouteManager(() => ({ parsePerFilter: noPerFilter, validate }), loggers.get('router'), new StatsStore());
    rm.setMux(m);
    return rm.provider('80');
  };
  const main = manager(true, mainMux);
  const worker = manager(false, relay);
  t.teardown(() => {
    main.release();
    worker.release();
  });
  relay.start();
  mainMux.start();
  await Promise.all([main.ready, worker.ready]);

  const w1 = worker.current()!;
  t.equal(w1.virtualHostCount, 2);
  t.equal(w1.compiledVirtualHosts(), 0, 'the worker compiled nothing');
  t.equal(main.current()!.compiledVirtualHosts(), 0, 'the main thread validated and kept nothing');
  t.equal(selectRoute(w1, req('a.example.com'))!.vhost.name, 'a');
  selectRoute(w1, req('a.example.com'));
  t.equal(w1.compiledVirtualHosts(), 1, 'a request compiles its virtual host, once');
  t.equal(main.current()!.compiledVirtualHosts(), 0, "the other thread's table is its own");

  ads.update({ routes: [routeConfig('80', [vhost('a', 'ca2'), vhost('b', 'cb'), vhost('c', 'cc')])] });
  await waitForValue('the worker has the update', () => worker.current() !== w1 && worker.current()!.virtualHostCount === 3, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  const w2 = worker.current()!;
  t.equal(w2.compiledVirtualHosts(), 0, 'the update dropped what was compiled');
  const a = selectRoute(w2, req('a.example.com'))!.route.action;
  t.same(a.kind === 'route' && a.cluster, { kind: 'cluster', name: 'ca2' }, "compiled again from the update's bytes");
  t.equal(selectRoute(w2, req('c.example.com'))!.vhost.name, 'c');
  t.equal(w2.compiledVirtualHosts(), 2);
});
