// The bug-report selection grammar over every case of ../shared/conformance/bugreport (Istio's config_test.go
// and filter_test.go), Go's filepath.Match rules, and the flag handling around the grammar.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { parseBugReportConfig } from '../../src/meshctl/bugreport/config';
import { formatSelector, globMatch, matchingPaths, parseSelector, selectorsFromFlags, type ClusterTree } from '../../src/meshctl/bugreport/filter';
import { SHARED } from '../helpers/spec';

const cases = parseYaml(readFileSync(path.join(SHARED, 'conformance', 'bugreport', 'cases.yaml'), 'utf8'));

t.test('parse', async (t) => {
  for (const c of cases.parse) {
    if (c.error) t.throws(() => parseSelector(c.selector), { message: c.error }, c.name);
    else t.same(parseSelector(c.selector), c.want, c.name);
  }
  t.throws(() => parseSelector('a/b/c/d=1/e=2/f/g'), /at most 6/);
});

t.test('marshal', async (t) => {
  for (const c of cases.marshal) t.ok(c.wantAnyOf.includes(JSON.stringify(formatSelector(c.spec))), JSON.stringify(c.spec));
});

t.test('config file', async (t) => {
  const got = parseBugReportConfig(cases.configFile.text, 'bug-report.yaml');
  const want = cases.configFile.want;
  t.equal(got.orchConfigPath, want.orchConfigPath);
  t.equal(got.context, want.context);
  t.equal(got.meshNamespace, want.meshNamespace);
  t.equal(got.dryRun, want.dryRun);
  t.equal(got.fullSecrets, want.fullSecrets);
  t.equal(got.commandTimeoutMs, 5 * 60_000, want.commandTimeout);
  t.same(got.include, want.include);
  t.same(got.exclude, want.exclude);
  t.equal(got.startTime, want.startTime);
  t.equal(got.endTime, want.endTime);
  t.equal(got.sinceMs, 60_000, want.since);
  t.same(got.criticalErrors, want.criticalErrors);
  t.same(got.ignoredErrors, want.ignoredErrors);
  // Istio's own key names are read too.
  const istio = parseBugReportConfig('istioNamespace: x\nkubeConfigPath: k\n', 'f');
  t.equal(istio.meshNamespace, 'x');
  t.equal(istio.orchConfigPath, 'k');
  t.throws(
    () => parseBugReportConfig('include: ["ns1///l*=v"]\n', 'f.yaml'),
    /f\.yaml: include\[0\]: bad label\/annotation selection l\*=v, key cannot have '\*' wildcards/,
  );
  t.throws(() => parseBugReportConfig('commandTimeout: soon\n', 'f.yaml'), /f\.yaml: commandTimeout: /);
});

t.test('select', async (t) => {
  const cluster: ClusterTree = cases.cluster;
  t.equal(cases.select.length, 38);
  for (const c of cases.select) {
    const got = matchingPaths(c.include.map(parseSelector), c.exclude.map(parseSelector), cluster);
    t.same(got, c.want, `${c.test}: ${c.name}`);
  }
});

t.test('filepath.Match', async (t) => {
  const rows: [string, string, boolean][] = [
    ['abc', 'abc', true],
    ['*', 'abc', true],
    ['*c', 'abc', true],
    ['a*', 'a', true],
    ['a*', 'ab/c', false],
    ['a*/b', 'abc/b', true],
    ['a*b*c*d*e*/f', 'axbxcxdxe/f', true],
    ['a*b*c*d*e*/f', 'axbxcxdxexxx/fff', false],
    ['ab[c]', 'abc', true],
    ['ab[b-d]', 'abc', true],
    ['ab[^c]', 'abc', false],
    ['ab[^b-d]', 'abe', true],
    ['a?b', 'a☺b', true],
    ['a\\*b', 'a*b', true],
    ['a\\*b', 'ab', false],
    ['[a-ζ]*', 'α', true],
    ['*x', 'xxx', true],
  ];
  for (const [p, s, want] of rows) t.equal(globMatch(p, s), want, `${p} ~ ${s}`);
  for (const bad of ['[', '[^', '[a-', 'a[', '\\']) t.throws(() => globMatch(bad, 'x'), /syntax error in pattern/, bad);
});

t.test('flags: the system namespaces are always excluded', async (t) => {
  const cluster: ClusterTree = {
    tree: { 'kube-system': { d: { p: ['c'] } }, app: { d: { p: ['c'] } }, other: { d: { p: ['c'] } } },
    labels: {},
    annotations: {},
  };
  const sel = (inc: string[], exc: string[]) => {
    const s = selectorsFromFlags(inc, exc);
    return matchingPaths(s.include, s.exclude, cluster);
  };
  t.same(sel([''], []), ['app/d/p/c', 'other/d/p/c']);
  t.same(sel([], ['other']), ['app/d/p/c']);
  // an exclude naming only system namespaces is dropped, not turned into "exclude everything"
  t.same(sel([], ['kube-system']), ['app/d/p/c', 'other/d/p/c']);
  t.same(sel(['kube-system,app'], []), ['app/d/p/c']);
});
