// What one proxy costs the daemon per full push, in-process and without the network: the config of
// ../xds-scale.mjs loaded through the daemon's own modules (FileConfigStore, registries, PushContext,
// generators), then each generator timed for a sidecar and a router.
//   node --import tsx scripts/bench/xds-scale/generate-cost.mjs [--services 1000] [--runs 5]
// "first" is the first proxy on a new push context (it fills the context's per-namespace memos), "next"
// the median of further proxies on the same context, which is what every other proxy of a push costs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { FileConfigStore } from '../../../src/config/file/index.ts';
import { buildRegistries } from '../../../src/discovery/registry/index.ts';
import { initPushContext } from '../../../src/discovery/push-context.ts';
import { proxyFromNode } from '../../../src/discovery/proxy.ts';
import { generatorsFor } from '../../../src/xds/gen/index.ts';
import { TYPE_URL } from '../../../src/lib/xds/type-urls.ts';
import { newPushRequest } from '../../../src/xds/server/index.ts';
import { hashResource } from '../../../src/xds/server/resources.ts';
import { ClusterSchema, Cluster_DiscoveryType } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb.ts';
import { ListenerSchema } from '../../../src/gen/envoy/config/listener/v3/listener_pb.ts';
import { HttpConnectionManagerSchema } from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.ts';
import { writeConfigDir } from './config.mjs';
import { nodeFor } from './nodes.mjs';
import { median, parseOptions } from '../../lib/bench.mjs';

const { services, runs } = parseOptions(
  'scripts/bench/xds-scale/generate-cost.mjs',
  'What one proxy costs the daemon per full push, in-process: each generator timed for a sidecar and a router.',
  {
    services: { type: 'integer', min: 1, default: 1000, help: 'services in the generated config' },
    runs: { type: 'integer', min: 1, default: 5, help: 'proxies timed after the first' },
  },
);
function time(fn) {
  const t0 = performance.now();
  const r = fn();
  return [performance.now() - t0, r];
}

const dir = mkdtempSync(path.join(tmpdir(), 'mesh-gen-cost-'));
try {
  writeConfigDir(dir, services);
  const store = new FileConfigStore({ dir });
  await store.whenSynced();
  const registry = buildRegistries(store, ['Orchestrator'], { domain: 'cluster.local', clusterId: 'Orchestrator' });
  for (let i = 0; i < 500 && !registry.hasSynced(); i++) await new Promise((r) => setTimeout(r, 10));
  const opts = {};
  const ctxTimes = [];
  for (let i = 0; i < runs; i++) ctxTimes.push(time(() => initPushContext(store, registry, opts))[0]);
  console.log(`${services} services: initPushContext ${median(ctxTimes).toFixed(1)} ms (median of ${runs})`);

  const edsNames = (resources) =>
    resources
      .map((r) => fromBinary(ClusterSchema, r.resource.value))
      .filter((c) => c.clusterDiscoveryType.case === 'type' && c.clusterDiscoveryType.value === Cluster_DiscoveryType.EDS)
      .map((c) => c.edsClusterConfig?.serviceName || c.name);
  const routeNames = (resources) => {
    const out = new Set();
    for (const r of resources) {
      const l = fromBinary(ListenerSchema, r.resource.value);
      for (const fc of [...l.filterChains, ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])]) {
        for (const f of fc.filters) {
          if (f.configType.case !== 'typedConfig' || !f.configType.value.typeUrl.endsWith('.HttpConnectionManager')) continue;
          const hcm = fromBinary(HttpConnectionManagerSchema, f.configType.value.value);
          if (hcm.routeSpecifier.case === 'rds') out.add(hcm.routeSpecifier.value.routeConfigName);
        }
      }
    }
    return [...out];
  };

  const rows = [];
  for (const [label, c] of [
    ['sidecar', 1],
    ['router', 0],
  ]) {
    // Two proxies of the same kind and namespace: the second one shows the per-proxy cost on a warm context.
    const a = proxyFromNode(nodeFor(c, services, 10));
    let b;
    for (let k = c + 1; k < c + 100_000 && !b; k++) {
      const p = proxyFromNode(nodeFor(k, services, 10));
      if (p.type === a.type && p.namespace === a.namespace && p.id !== a.id) b = p;
    }
    const proxies = [a, b ?? a];
    const gens = generatorsFor(proxies[0]);
    const watched = {
      [TYPE_URL.cluster]: { typeUrl: TYPE_URL.cluster, resourceNames: new Set(), wildcard: true },
      [TYPE_URL.listener]: { typeUrl: TYPE_URL.listener, resourceNames: new Set(), wildcard: true },
    };
    let push = initPushContext(store, registry, opts);
    let req = newPushRequest(push, { full: true });
    watched[TYPE_URL.endpoint] = {
      typeUrl: TYPE_URL.endpoint,
      resourceNames: new Set(edsNames(gens[TYPE_URL.cluster].generate(proxies[0], watched[TYPE_URL.cluster], req).resources)),
      wildcard: false,
    };
    watched[TYPE_URL.route] = {
      typeUrl: TYPE_URL.route,
      resourceNames: new Set(routeNames(gens[TYPE_URL.listener].generate(proxies[0], watched[TYPE_URL.listener], req).resources)),
      wildcard: false,
    };
    for (const [type, short] of [
      [TYPE_URL.cluster, 'CDS'],
      [TYPE_URL.endpoint, 'EDS'],
      [TYPE_URL.listener, 'LDS'],
      [TYPE_URL.route, 'RDS'],
    ]) {
      const first = [];
      const next = [];
      const hashing = [];
      let out;
      for (let i = 0; i < runs; i++) {
        push = initPushContext(store, registry, opts);
        req = newPushRequest(push, { full: true });
        first.push(time(() => gens[type].generate(proxies[0], watched[type], req))[0]);
        const [ms, r] = time(() => gens[type].generate(proxies[1], watched[type], req));
        next.push(ms);
        out = r.resources;
        hashing.push(time(() => out.map(hashResource))[0]);
      }
      const bytes = out.reduce((s, r) => s + r.resource.value.byteLength, 0);
      rows.push([label, short, out.length, bytes, median(first), median(next), median(hashing)]);
    }
  }
  console.log('proxy    type  resources      bytes   first ms    next ms   hash ms');
  for (const [label, t, n, b, f, x, h] of rows) {
    console.log(
      `${label.padEnd(8)} ${t}   ${String(n).padStart(9)} ${String(b).padStart(10)} ${f.toFixed(1).padStart(10)} ${x.toFixed(1).padStart(10)} ${h.toFixed(1).padStart(9)}`,
    );
  }
  const per = (label) => rows.filter((r) => r[0] === label).reduce((s, r) => s + r[5] + r[6], 0);
  console.log(`per proxy per full push (next + hash): sidecar ${per('sidecar').toFixed(1)} ms, router ${per('router').toFixed(1)} ms`);
  await store.close();
  registry.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
