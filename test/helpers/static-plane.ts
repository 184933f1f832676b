// One data plane on a static bootstrap the test wrote: our engine (the built `pilot-agent envoy -c`) or the
// real Envoy (test/helpers/envoy.ts) on the same file, so a test can compare their verdicts on the same config
// and the same bytes. JSON is YAML: both read the file as it is.
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { DIST } from './binary';
import { envoyPath, type DataPlane } from './envoy';
import { summarize } from './agent';
import { tempDir } from './temp';
import { httpGet, type Reply } from './gateway';
import { waitFor } from './wait';

export type StaticRun = { refused: string } | { get: (p: string, headers?: Record<string, string>) => Promise<Reply>; log: () => string };

/**
 * Starts `plane` on `bootstrap` (its listener on loopback `port`) and waits until either it exits (refused the
 * config: its output) or GET `ready` through the listener answers at all (or, for a listener that does not
 * speak HTTP, until the `ready` check says so).
 */
export async function runStatic(
  t: Test,
  plane: DataPlane,
  bootstrap: object,
  port: number,
  ready: string | (() => Promise<boolean>) = '/',
): Promise<StaticRun> {
  const dir = tempDir(t, `mesh-static-${plane}-`);
  const file = path.join(dir, 'bootstrap.yaml');
  fs.writeFileSync(file, JSON.stringify(bootstrap));
  const [cmd, args] =
    plane === 'engine'
      ? [path.join(DIST, 'pilot-agent'), ['envoy', '-c', file]]
      : [envoyPath()!, ['-c', file, '--base-id', String(randomInt(100_000, 1_000_000)), '--admin-address-path', path.join(dir, 'admin')]];
  const child = spawn(cmd, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env['PATH'], HOME: process.env['HOME'] } });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  let gone = false;
  const exited = new Promise<void>((r) => child.once('exit', () => ((gone = true), r())));
  t.teardown(async () => {
    if (!gone) child.kill('SIGKILL');
    await exited;
  });
  const get = (p: string, headers: Record<string, string> = {}) => httpGet(port, p, headers);
  await waitFor(
    () => `${plane} neither served nor exited:\n${summarize(out)}`,
    async () => gone || (typeof ready === 'string' ? (await get(ready).catch(() => undefined)) !== undefined : await ready().catch(() => false)),
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  if (gone) {
    await exited;
    return { refused: out };
  }
  return { get, log: () => out };
}

/** A STATIC cluster of one loopback endpoint. */
export function loopbackCluster(name: string, port: number): object {
  return {
    name,
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: loopback(port) } }] }] },
  };
}

export const loopback = (port: number) => ({ socket_address: { address: '127.0.0.1', port_value: port } });

/** A bootstrap with one HTTP listener on `port` (an HCM with `httpFilters` before the router, and `hcmExtra`) and `clusters`. */
export function httpBootstrap(o: {
  port: number;
  admin: number;
  routeConfig: object;
  httpFilters?: object[];
  clusters: object[];
  hcmExtra?: object;
}): object {
  const hcm = {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: 'ingress',
    ...o.hcmExtra,
    route_config: o.routeConfig,
    http_filters: [
      ...(o.httpFilters ?? []),
      { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
    ],
  };
  return {
    admin: { address: loopback(o.admin) },
    static_resources: {
      listeners: [
        {
          name: 'ingress',
          address: loopback(o.port),
          filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }] }],
        },
      ],
      clusters: o.clusters,
    },
  };
}
