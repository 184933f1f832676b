// The injector's half of Istio's metrics merge (pkg/kube/inject/inject.go applyPrometheusMerge, Istio 1.26): a
// pod's prometheus.io/scrape|port|path annotations move into the sidecar's MESH_METRICS_ANNOTATIONS (the
// specification's name for ISTIO_PROMETHEUS_ANNOTATIONS) and the annotations then name the agent's merged
// endpoint, 15020 and /stats/prometheus; `prometheus.mesh.io/merge-metrics: "false"`, mesh config
// enablePrometheusMerge false or `prometheus.io/scrape: "false"` leave the pod as it was. The variable's value is
// what the agent reads back (parseAppScrapeConfig).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { parseAllDocuments } from 'yaml';
import { parseAppScrapeConfig } from '../../src/agent/metrics-merge';
import { program, run } from '../helpers/programs';
import { tempDir } from '../helpers/temp';

function podYaml(annotations: Record<string, string>): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: shop
  namespace: shop
  annotations: ${JSON.stringify(annotations)}
spec:
  containers:
  - name: app
    image: shop:1
`;
}

async function inject(t: Test, annotations: Record<string, string>, mesh = 'defaultConfig: {}\n') {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'pod.yaml'), podYaml(annotations));
  writeFileSync(path.join(dir, 'mesh.yaml'), mesh);
  const r = await run(program('meshctl'), ['orch-inject', '-f', path.join(dir, 'pod.yaml'), '--meshConfigFile', path.join(dir, 'mesh.yaml')]);
  t.equal(r.code, 0, r.stderr);
  const pod = parseAllDocuments(r.stdout)[0]!.toJS() as {
    metadata: { annotations: Record<string, string> };
    spec: { containers: Array<{ name: string; env?: Array<{ name: string; value?: string }> }> };
  };
  const proxy = pod.spec.containers.find((c) => c.name === 'mesh-proxy')!;
  return { annotations: pod.metadata.annotations, env: proxy.env?.find((e) => e.name === 'MESH_METRICS_ANNOTATIONS')?.value };
}

const APP = { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '8080', 'prometheus.io/path': '/app-metrics' };

t.test('the annotations move into MESH_METRICS_ANNOTATIONS and point at the merged endpoint', async (t) => {
  const { annotations, env } = await inject(t, APP);
  t.equal(annotations['prometheus.io/scrape'], 'true');
  t.equal(annotations['prometheus.io/port'], '15020');
  t.equal(annotations['prometheus.io/path'], '/stats/prometheus');
  t.equal(env, '{"scrape":"true","path":"/app-metrics","port":"8080"}');
  t.same(parseAppScrapeConfig('MESH_METRICS_ANNOTATIONS', env!, 15020), { port: '8080', path: '/app-metrics' }, 'what the agent scrapes');
});

t.test('a pod without annotations gets the merged endpoint and no variable', async (t) => {
  const { annotations, env } = await inject(t, {});
  t.equal(annotations['prometheus.io/port'], '15020');
  t.equal(annotations['prometheus.io/path'], '/stats/prometheus');
  t.equal(env, undefined);
});

t.test('merge turned off: the pod keeps its own annotations', async (t) => {
  for (const [why, annos, mesh] of [
    ['prometheus.mesh.io/merge-metrics: "false"', { ...APP, 'prometheus.mesh.io/merge-metrics': 'false' }, undefined],
    ['enablePrometheusMerge: false', APP, 'enablePrometheusMerge: false\ndefaultConfig: {}\n'],
    ['prometheus.io/scrape: "false"', { ...APP, 'prometheus.io/scrape': 'false' }, undefined],
  ] as const) {
    const { annotations, env } = await inject(t, annos, mesh);
    t.equal(annotations['prometheus.io/port'], '8080', why);
    t.equal(annotations['prometheus.io/path'], '/app-metrics', why);
    t.equal(env, undefined, why);
  }
});
