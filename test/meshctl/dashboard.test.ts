// `meshctl dashboard metrics-ui` (istioctl 1.26 `dashboard prometheus`): the built binary forwards a local
// port to Prometheus (here a real one, named by MESH_PROMETHEUS_URL as with no cluster), prints the URL and,
// with --browser=false, istioctl's "skipping opening a browser"; the UI and API answer through the forward on
// both loopbacks of `localhost`; --port wins over --ui-port; SIGTERM ends it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { prometheusUnavailable, startPrometheus } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';
import { openBrowser } from '../../src/meshctl/dashboard';
import { kubeUnavailable, objectPath, pod, podStatus, startKube } from '../helpers/kube';
import { program, run } from '../helpers/programs';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function dashboard(t: Test, args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(path.join(DIST, 'meshctl'), ['dashboard', 'metrics-ui', ...args], {
    env: { PATH: process.env.PATH, HOME: tempDir(t), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => void child.kill('SIGKILL'));
  return { child, out: () => out, exited };
}

t.test('openBrowser: the URL, then the browser or why not (istioctl words)', async (t) => {
  let out = '';
  const w = { write: (s: string) => ((out += s), true) } as unknown as NodeJS.WritableStream;
  openBrowser('http://localhost:9090', w, false);
  t.equal(out, 'http://localhost:9090\nskipping opening a browser');
  out = '';
  openBrowser('http://localhost:9090', w, true, 'plan9' as NodeJS.Platform);
  t.equal(out, 'http://localhost:9090\nUnsupported platform "plan9"; open http://localhost:9090 in your browser.\n');
});

t.test('forwards to Prometheus until interrupted', { skip: prometheusUnavailable(), timeout: 90_000 }, async (t) => {
  const prom = await startPrometheus(t, { dir: tempDir(t), port: await freePort(), targets: [] });
  const uiPort = await freePort();
  const d = dashboard(t, ['--browser=false', '--ui-port', String(uiPort)], { MESH_PROMETHEUS_URL: prom.url });
  const url = await waitForValue(
    () => `no URL from meshctl dashboard metrics-ui: ${d.out()}`,
    () => /^(http:\/\/localhost:\d+)\nskipping opening a browser/.exec(d.out())?.[1],
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  t.equal(url, `http://localhost:${uiPort}`, 'the --ui-port first');
  const info = (await (await fetch(`http://127.0.0.1:${uiPort}/api/v1/status/buildinfo`)).json()) as { data: { version: string } };
  t.match(info.data.version, /^2\./, "Prometheus's API through the forward");
  const ui = await fetch(`http://127.0.0.1:${uiPort}/graph`);
  t.equal(ui.status, 200, 'and its web UI');
  try {
    const v6 = await fetch(`http://[::1]:${uiPort}/-/ready`);
    t.equal(v6.status, 200, 'on ::1 too');
  } catch (e) {
    t.pass('::1', { skip: `no IPv6 loopback here: ${(e as Error).message}` });
  }
  d.child.kill('SIGTERM');
  t.equal(await d.exited, 0, 'SIGTERM ends it');

  const listen = await freePort();
  const d2 = dashboard(t, ['--browser=false', '--address', '127.0.0.1', '-p', String(listen)], { MESH_PROMETHEUS_URL: prom.url });
  const url2 = await waitForValue(
    () => `no URL: ${d2.out()}`,
    () => /^(http:\S+)\n/.exec(d2.out())?.[1],
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  t.equal(url2, `http://127.0.0.1:${listen}`, '--port and --address');
  t.equal((await fetch(`${url2}/-/ready`)).status, 200);
  d2.child.kill('SIGINT');
  t.equal(await d2.exited, 0);
});

t.test('a Prometheus address on this machine at --ui-port: another local port, never a loop to itself', async (t) => {
  const port = await freePort();
  const d = dashboard(t, ['--browser=false', '--address', '127.0.0.1', '--ui-port', String(port)], {
    MESH_PROMETHEUS_URL: `http://localhost:${port}`,
  });
  const url = await waitForValue(
    () => `no URL: ${d.out()}`,
    () => /^(http:\S+)\n/.exec(d.out())?.[1],
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  t.not(url, `http://127.0.0.1:${port}`, `a free port instead: ${url}`);
  d.child.kill('SIGTERM');
  t.equal(await d.exited, 0);
  const explicit = dashboard(t, ['--browser=false', '--address', '127.0.0.1', '-p', String(port)], {
    MESH_PROMETHEUS_URL: `http://127.0.0.1:${port}`,
  });
  t.equal(await explicit.exited, 1);
  t.match(explicit.out(), new RegExp(`Error: --port ${port} is where Prometheus itself listens`));
});

t.test(
  "with a cluster: the mesh namespace's app.kubernetes.io/name=prometheus pod, at its IP and --ui-port",
  { skip: prometheusUnavailable() || kubeUnavailable(), timeout: 180_000 },
  async (t) => {
    const kube = await startKube(t, { crds: 'none', controllerManager: false });
    const none = await run(program('meshctl'), ['x', 'metrics', 'b.b', '--orchconfig', kube.kubeconfig], { HOME: tempDir(t) });
    t.equal(none.code, 1);
    t.match(none.stderr, /Error: no Prometheus pods found/, "x metrics: istioctl's words");
    const noDash = dashboard(t, ['--browser=false', '--orchconfig', kube.kubeconfig], {});
    t.equal(await noDash.exited, 1);
    t.match(noDash.out(), /Error: no pods found with selector app\.kubernetes\.io\/name=prometheus/, "dashboard: istioctl's words");

    const promPort = await freePort();
    const prom = await startPrometheus(t, { dir: tempDir(t), port: promPort, targets: [] });
    await kube.api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } });
    const p = pod('mesh-system', 'prometheus-0', { labels: { 'app.kubernetes.io/name': 'prometheus' } });
    await kube.api.create('/api/v1/namespaces/mesh-system/pods', p);
    await kube.api.merge(objectPath(p), podStatus('127.0.0.1'), 'status');

    const d = dashboard(t, ['--browser=false', '--address', '127.0.0.1', '--ui-port', String(promPort), '--orchconfig', kube.kubeconfig], {});
    const url = await waitForValue(
      () => `no URL: ${d.out()}`,
      () => /^(http:\S+)\n/.exec(d.out())?.[1],
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // the pod's port is taken here by Prometheus itself, so the forward listens on another
    t.not(url, `http://127.0.0.1:${promPort}`);
    const info = (await (await fetch(`${url}/api/v1/status/buildinfo`)).json()) as { data: { version: string } };
    t.match(info.data.version, /^2\./, `${prom.url} reached through the pod's IP and --ui-port`);
    d.child.kill('SIGTERM');
    t.equal(await d.exited, 0);
  },
);
