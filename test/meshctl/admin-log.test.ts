// `meshctl admin log` (issue 28 item 7) with the built binary against a real daemon's ControlZ: with no
// cluster (the configured daemon's host), and with a real API server holding the daemon's pod (found by
// label or name, reached at its pod IP). Table header and reset values from istioctl 1.26
// istioctl/pkg/admin/istiodconfig.go; the effects are checked on ControlZ itself.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { kubeUnavailable, namespace, pod, podStatus, startKube } from '../helpers/kube';
import { freePort } from '../helpers/ports';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const meshctl = (args: string[], env: Record<string, string> = {}) => exec(MESHCTL, ['admin', 'log', ...args], { env: { ...ENV, ...env } });

t.test('admin log', async (t) => {
  const ctrlz = await freePort();
  const cfg = tempDir(t);
  mkdirSync(path.join(cfg, 'config'));
  const daemon = await startDaemon(['--configDir', path.join(cfg, 'config'), '--ctrlz_port', String(ctrlz)]);
  t.teardown(() => daemon.stop());
  const scope = async (name: string) => (await (await fetch(`http://127.0.0.1:${ctrlz}/scopej/${name}`)).json()) as Record<string, unknown>;
  const noCluster = { MESHCTL_XDS_ADDRESS: daemon.grpc };
  const port = ['--ctrlz_port', String(ctrlz)];

  t.test('no cluster: the configured daemon', async (t) => {
    let r = await meshctl(port, noCluster);
    t.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    t.match(lines[0], /^ACTIVE SCOPE {3,}DESCRIPTION {3,}LOG LEVEL {3,}STACK TRACE LEVEL$/);
    const ads = lines.find((l) => l.startsWith('ads '));
    t.match(ads, /^ads +\S.* {3}info {3,}none$/, 'the ads scope at its defaults');
    const names = lines.slice(1).map((l) => l.split(' ')[0]!);
    t.same(names, [...names].sort(), 'sorted by name');

    r = await meshctl([...port, '--level', 'ads:debug,default:warn', '--stack-trace-level', 'ads:error'], noCluster);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '');
    t.match(await scope('ads'), { output_level: 'debug', stack_trace_level: 'error' });
    t.match(await scope('default'), { output_level: 'warn' });

    r = await meshctl([...port, '-o', 'json'], noCluster);
    const json = JSON.parse(r.stdout) as Array<Record<string, string>>;
    t.same(Object.keys(json[0]!), ['scope_name', 'log_level', 'stack_trace_level', 'description']);
    t.match(
      json.find((s) => s.scope_name === 'ads'),
      { log_level: 'debug', stack_trace_level: 'error' },
    );
    r = await meshctl([...port, '-o', 'yaml'], noCluster);
    t.match(r.stdout, /^- description: .*\n {2}log_level: \w+\n {2}scope_name: \w/);

    r = await meshctl([...port, '--reset'], noCluster);
    t.equal(r.code, 0, r.stderr);
    t.match(await scope('ads'), { output_level: 'info', stack_trace_level: 'none' });
    t.match(await scope('default'), { output_level: 'info' });

    r = await meshctl([...port, '--level', 'ads:loud'], noCluster);
    t.equal(r.code, 1);
    t.equal(r.stderr, 'Error: pattern ads:loud did not match\n');
    r = await meshctl([...port, '--level', 'nosuchscope:debug'], noCluster);
    t.equal(r.code, 1);
    t.match(r.stderr, /^Error: failed updating Scope nosuchscope: cannot update resource nosuchscope, got status 400/);
    r = await meshctl([...port, '--reset', '--level', 'ads:debug'], noCluster);
    t.equal(r.stderr, 'Error: --level cannot be combined with --reset\n');
    const closed = await freePort();
    r = await meshctl(['--ctrlz_port', String(closed)], noCluster);
    t.equal(r.code, 1);
    t.equal(r.stderr, `Error: cannot reach meshd's ControlZ at http://127.0.0.1:${closed}/scopej: connection refused (nothing listens there)\n`);
  });

  t.test('with a cluster: the daemon pod by label or name', { skip: kubeUnavailable() }, async (t) => {
    const kube = await startKube(t, { crds: 'none', controllerManager: false });
    const env = { ORCHCONFIG: kube.kubeconfig };
    await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
    let r = await meshctl(port, env);
    t.equal(r.code, 1);
    t.equal(r.stderr, 'Error: no pods found\n');
    const p = pod('mesh-system', 'meshd-7d9c-abcde', { labels: { app: 'meshd', 'mesh.io/rev': 'default' } });
    await kube.api.create('/api/v1/namespaces/mesh-system/pods', p);
    await kube.api.merge('/api/v1/namespaces/mesh-system/pods/meshd-7d9c-abcde', podStatus('127.0.0.1'), 'status');

    r = await meshctl([...port, '--level', 'ads:debug'], env);
    t.equal(r.code, 0, r.stderr);
    t.match(await scope('ads'), { output_level: 'debug' });
    r = await meshctl(['meshd-7d9c-abcde', ...port], env);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /\nads +.* {3}debug {3,}none\n/);
    r = await meshctl([...port, '-r', 'canary'], env);
    t.equal(r.stderr, 'Error: no pods found\n', 'the revision label is part of the selector');
    r = await meshctl(['meshd-absent', ...port], env);
    t.equal(r.stderr, 'Error: pods "meshd-absent" not found\n');
    await meshctl([...port, '--reset'], env);
    t.match(await scope('ads'), { output_level: 'info' });
  });
});
