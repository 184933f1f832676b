// Istio's own analyzer test grid (analyzers_test.go, 1.26.8) run against mesh's analyzers: the same
// input files (renamed to mesh's names, see istio/cases.json) must produce exactly the messages
// Istio expects, by code and resource. Runs the analyzers in-process, with Istio's test setup: the
// default ingress stand-ins added, every namespace analyzed.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadEnvoyFilterTypes } from '../../src/config/validate';
import { ALL_ANALYZERS } from '../../src/analysis/analyzers';
import { defaultResources, loadResources } from '../../src/meshctl/analyze/load';
import { fullName, type Resource } from '../../src/analysis/model';
import { analyze, defaultMeshConfig, parseMeshConfig } from '../../src/analysis/run';

await loadEnvoyFilterTypes();
const DIR = path.join(import.meta.dirname, 'analyze', 'istio');
const grid = JSON.parse(fs.readFileSync(path.join(DIR, 'cases.json'), 'utf8')) as {
  cases: Array<{ name: string; analyzer: string; files: string[]; meshConfig: string | null; expected: Array<[string, string]> }>;
  /** Cases where mesh deliberately reports differently, with the reason. */
  meshDifferences: Record<string, { expected: Array<[string, string]>; why: string }>;
};
const CLUSTER_SCOPED = new Set(['Namespace', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);

/** Istio prints resources written without a namespace as `Kind name`; here they are in `default`. */
function expectedOrigin(origin: string): string {
  const [kind, name] = origin.split(' ') as [string, string];
  return !CLUSTER_SCOPED.has(kind) && !name.includes('/') ? `${kind} default/${name}` : origin;
}

const CODES: Record<string, string> = {};
import { MESSAGES } from '../../src/analysis/messages';
for (const [name, m] of Object.entries(MESSAGES)) CODES[name] = m.code;

for (const c of grid.cases) {
  t.test(c.name, async (t) => {
    const analyzer = ALL_ANALYZERS.find((a) => a.name === c.analyzer);
    t.ok(analyzer, `analyzer ${c.analyzer} exists`);
    if (!analyzer) return;
    const mesh = c.meshConfig ? parseMeshConfig(fs.readFileSync(path.join(DIR, c.meshConfig), 'utf8')) : defaultMeshConfig();
    const resources: Resource[] = [];
    for (const f of c.files) {
      const loaded = loadResources(fs.readFileSync(path.join(DIR, f), 'utf8'), f, 'default');
      t.same(loaded.errors, [], `${f} parses`);
      resources.push(...loaded.resources);
    }
    resources.push(...defaultResources(mesh, 'mesh-system'));
    const { messages } = analyze(resources, { analyzers: [analyzer], suppressions: [], mesh, meshNamespace: 'mesh-system' });
    const got = messages.map((m) => `${m.type.code} ${m.resource ? `${m.resource.kind} ${fullName(m.resource)}` : ''}`).sort();
    const expected = grid.meshDifferences[c.name]?.expected ?? c.expected;
    const want = expected.map(([name, origin]) => `${CODES[name] ?? `unknown message ${name}`} ${expectedOrigin(origin)}`).sort();
    t.same(got, want);
  });
}
