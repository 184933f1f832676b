// Auto-registration with no cluster (--configDir only): Istio needs a writable store for it; mesh has none to
// write the WorkloadEntry to, so the proxy is served as any other and the daemon says once why no entry appears.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { CDS, sidecarNode, XdsWatch } from '../helpers/xds';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

t.test('a proxy asking to be registered is served and told about in the log', async (t) => {
  const dir = tempDir(t, 'mesh-wle-files-');
  fs.writeFileSync(
    path.join(dir, 'group.yaml'),
    `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: { name: vm-app, namespace: vm }
spec:
  template: { labels: { app: vm-app } }
`,
  );
  const daemon = await startDaemon(['--configDir', dir]);
  t.teardown(() => daemon.stop());
  const node = sidecarNode('vm', '10.88.0.5', 'vm-1');
  const open = () => new XdsWatch(daemon.grpc, { ...node, metadata: { ...node.metadata, AUTO_REGISTER_GROUP: 'vm-app' } }, CDS);
  const first = open();
  t.teardown(() => first.close());
  await first.until((w) => w.responses > 0, 'a CDS answer');
  t.equal(first.ended, undefined, 'the stream is not refused');
  const line =
    /vm-1\.vm asks for WorkloadGroup vm\/vm-app: WorkloadEntry auto-registration and health checks write to the orchestrator API, and this daemon has none \(--configDir only\)/;
  await waitFor(
    () => daemon.log(),
    () => line.test(daemon.log()),
    { timeoutMs: 10_000 },
  );
  first.close();
  const second = open();
  t.teardown(() => second.close());
  await second.until((w) => w.responses > 0, 'a CDS answer on reconnect');
  t.equal(
    daemon
      .log()
      .split('\n')
      .filter((l) => line.test(l)).length,
    1,
    'said once per workload',
  );
});
