// Every `meshctl dashboard` page but metrics-ui (dashboard.test.ts), run as the built binary: with no cluster,
// ControlZ and a proxy's admin page reached through the command's printed URL in headless Chromium; the addon
// UIs mesh does not run refused with what was looked for; with the test API server (no kubelet), the
// port-forward upgrade is sent and its refusal told in one line, exit 1.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST } from '../helpers/binary';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';
import { startControlZ } from '../../src/serve/ctrlz/server';
import { Cdp, findChromium } from '../meshd/cdp';
import { startGateway } from '../helpers/gateway';
import { prefixRouteConfig } from '../helpers/mesh-yaml';
import { kubeUnavailable, objectPath, pod, podStatus, startKube } from '../helpers/kube';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const chromium = findChromium();
const noChromium = chromium ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

/** A home whose ~/.meshctl/config.yaml points meshctl at the daemon's plaintext xDS port (no cluster). */
function homeFor(t: Test, xds: string): string {
  const home = tempDir(t);
  fs.mkdirSync(path.join(home, '.meshctl'));
  fs.writeFileSync(path.join(home, '.meshctl', 'config.yaml'), `xds-address: ${xds}\nplaintext: true\n`);
  return home;
}

function dashboard(t: Test, args: string[], home = tempDir(t)) {
  const child = spawn(path.join(DIST, 'meshctl'), ['dashboard', ...args], {
    env: { PATH: process.env.PATH, HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => void child.kill('SIGKILL'));
  const url = () =>
    waitForValue(
      () => `no URL from meshctl dashboard ${args.join(' ')}: ${out}${err}`,
      () => /^(http:\S+)\nskipping opening a browser/.exec(out)?.[1],
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  return { child, out: () => out, err: () => err, exited, url };
}

async function pageText(t: Test, url: string): Promise<{ title: string; text: string }> {
  const cdp = Cdp.launch(chromium!);
  t.teardown(() => cdp.close());
  const session = await cdp.open(url);
  return waitForValue(
    `the page at ${url}`,
    async () => {
      const text = await cdp.evaluate<string>(session, 'document.body ? document.body.innerText : ""');
      return text ? { title: await cdp.evaluate<string>(session, 'document.title'), text } : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

t.test('controlz with no cluster: the daemon’s ControlZ, in Chromium', { skip: noChromium, timeout: 120_000 }, async (t) => {
  const ctrlz = await startControlZ({ address: '127.0.0.1', port: 0, onExit: () => {} });
  t.teardown(() => ctrlz.drain(Date.now() + 1000));
  const port = Number(/:(\d+)$/.exec(ctrlz.bound.address)![1]);
  const d = dashboard(t, ['controlz', '--ctrlz_port', String(port), '--address', '127.0.0.1', '--browser=false'], homeFor(t, '127.0.0.1:15010'));
  const url = await d.url();
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, 'a local URL');
  t.not(url, `http://127.0.0.1:${port}`, 'never the ControlZ port itself (it is on this machine)');
  const page = await pageText(t, `${url}/scopez/`);
  t.match(page.title, /^ControlZ/, `the ControlZ page: ${page.title}`);
  t.match(page.text, /default/, 'the log scopes are listed');
  d.child.kill('SIGINT');
  t.equal(await d.exited, 0, 'Ctrl-C ends it');
});

t.test(
  'proxy and proxy-legacy with no cluster: the admin page of a proxy found over xDS, in Chromium',
  { skip: noChromium, timeout: 180_000 },
  async (t) => {
    const gw = await startGateway(t, { config: (p) => prefixRouteConfig(p, '/app') });
    const home = homeFor(t, `127.0.0.1:${gw.ports.grpc}`);
    const xds = ['--address', '127.0.0.1', '--browser=false'];
    const d = dashboard(t, ['proxy', 'gateway-0.mesh-system', ...xds], home);
    const url = await d.url();
    const page = await pageText(t, url);
    t.match(page.text, /config_dump/, 'the admin page lists its endpoints');
    const info = (await (await fetch(`${url}/server_info`)).json()) as { node: { id: string } };
    t.match(info.node.id, /gateway-0\.mesh-system/, 'the proxy asked for');
    d.child.kill('SIGTERM');
    t.equal(await d.exited, 0);

    const legacy = dashboard(t, ['proxy-legacy', 'gateway-0.mesh-system', ...xds], home);
    t.equal((await fetch(`${await legacy.url()}/ready`)).status, 200, 'proxy-legacy opens the same page');
    legacy.child.kill('SIGTERM');
    t.equal(await legacy.exited, 0);

    const missing = dashboard(t, ['proxy', 'nobody.default', ...xds], home);
    t.equal(await missing.exited, 1);
    t.match(missing.err(), /^Error: pod "nobody" not found in namespace "default"/);
    const none = dashboard(t, ['proxy', ...xds], home);
    t.equal(await none.exited, 1);
    t.match(none.err(), /^Error: specify a pod or --selector\n$/, "istioctl's words");
  },
);

t.test('the UIs mesh does not run, with no cluster: what was looked for', async (t) => {
  for (const [cmd, product, selector] of [
    ['graphs', 'Grafana', 'app.kubernetes.io/name=grafana'],
    ['topology-ui', 'Kiali', 'app=kiali'],
    ['trace-ui-a', 'Jaeger', 'app=jaeger'],
    ['trace-ui-b', 'SkyWalking', 'app=skywalking-ui'],
    ['trace-ui-c', 'Zipkin', 'app=zipkin'],
  ] as const) {
    const d = dashboard(t, [cmd, '--browser=false']);
    t.equal(await d.exited, 1, `${cmd} exits 1`);
    t.equal(d.err().split('\n').length, 2, 'one line');
    t.match(d.err(), `Error: mesh does not run ${product}: with a cluster, "meshctl dashboard ${cmd}" forwards to the pod labelled ${selector}`);
  }
});

t.test(
  'with a cluster: the port-forward upgrade, refused by an API server with no kubelet',
  { skip: kubeUnavailable(), timeout: 180_000 },
  async (t) => {
    const kube = await startKube(t, { crds: 'none', controllerManager: false });
    const cfg = ['--orchconfig', kube.kubeconfig, '--browser=false'];
    await kube.api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } });
    const p = pod('mesh-system', 'meshd-1', { labels: { app: 'meshd' } });
    await kube.api.create('/api/v1/namespaces/mesh-system/pods', p);
    await kube.api.merge(objectPath(p), podStatus('127.0.0.1'), 'status');

    for (const args of [
      ['controlz', 'meshd-1.mesh-system'],
      ['controlz', '-l', 'app=meshd'],
      ['meshd-debug', 'meshd-1'],
      ['proxy', 'meshd-1.mesh-system'],
    ]) {
      const d = dashboard(t, [...args, ...cfg]);
      t.equal(await d.exited, 1, `${args.join(' ')} exits 1`);
      t.equal(d.out(), '', 'no URL printed');
      t.match(
        d.err(),
        /^Error: failure running port forward process: pod meshd-1\.mesh-system port \d+ through https?:\/\/\S+: error upgrading connection: \d{3}(: .+)?\n$/,
        `one line: ${d.err()}`,
      );
    }
    const gone = dashboard(t, ['controlz', 'meshd-9.mesh-system', ...cfg]);
    t.equal(await gone.exited, 1);
    t.match(gone.err(), /error upgrading connection: 404: pods "meshd-9" not found\n$/, 'the API server’s own words');
    const graphs = dashboard(t, ['graphs', ...cfg]);
    t.equal(await graphs.exited, 1);
    t.match(graphs.err(), /^Error: no pods found with selector app\.kubernetes\.io\/name=grafana\n$/, "istioctl's words");
    const sel = dashboard(t, ['controlz', 'meshd-1', '-l', 'app=meshd', ...cfg]);
    t.equal(await sel.exited, 1);
    t.match(sel.err(), /^Error: name cannot be provided when a selector is specified\n$/);
  },
);
