// `meshctl analyze` with the built binary: istioctl analyze's lines around the messages, its flags
// (thresholds, suppressions, formats, analyzer selection, namespaces, mesh config) and exit codes
// (79 for findings, 65 for input that does not parse, 1 for other failures), and the demo's configs
// analyzing clean.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { REPO } from '../helpers/spec';
import { built, DIST, exec } from '../helpers/binary';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');
const tmp = tempDir(t, 'meshctl-analyze-');

function file(name: string, text: string): string {
  const p = path.join(tmp, name);
  mkdirSync(path.dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
}

const analyze = (args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}) =>
  exec(MESHCTL, ['analyze', '--use-kube=false', ...args], { input: opts.input, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...opts.env } });

const FOUND = (target: string) =>
  `Error: Analyzers found issues when analyzing ${target}.\nSee https://mesh.io/v1.26/docs/reference/config/analysis for more information about causes and resolutions.\n`;

// Line 9 holds the destination host that does not exist.
const missingHost = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination:
        host: ratings
---
apiVersion: v1
kind: Service
metadata: {name: reviews}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 80}]
`;

t.test('the demo configurations analyze clean, in their namespaces and across all', async (t) => {
  for (const ex of ['gateway', 'claim-routing']) {
    const dir = path.join(REPO, 'examples', ex, 'config');
    for (const extra of [[], ['-A']]) {
      const r = await analyze([...extra, dir]);
      t.equal(r.code, 0, `${ex} ${extra.join(' ')}: ${r.stdout}${r.stderr}`);
      t.equal(r.stdout, '\n', 'no message at any level');
      t.match(r.stderr, /^\u2714 No validation issues found when analyzing:\n {2}- /);
    }
  }
});

t.test("a finding: the exact line on stdout, istioctl's closing error and exit 79", async (t) => {
  const f = file('missing-host.yaml', missingHost);
  const r = await analyze(['--color=false', f]);
  t.equal(r.code, 79);
  t.equal(r.stdout, `Error [IST0101] (VirtualService default/reviews ${f}:9) Referenced host not found: "ratings"\n`);
  t.equal(r.stderr, FOUND('namespace: default'));
});

t.test('no findings: the single file is named on stderr', async (t) => {
  const f = file('fine.yaml', missingHost.replace('host: ratings', 'host: reviews'));
  const r = await analyze([f]);
  t.equal(r.code, 0);
  t.equal(r.stdout, '\n');
  t.equal(r.stderr, `\u2714 No validation issues found when analyzing ${f}.\n`);
});

t.test('--failure-threshold and --output-threshold', async (t) => {
  // IST0118 (Info): a port name with no protocol prefix.
  const info = file('info.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - name: web\n    port: 8080\n');
  let r = await analyze(['--color=false', info]);
  t.equal(r.code, 0, 'Info is below the default failure threshold (Error)');
  t.equal(
    r.stdout,
    `Info [IST0118] (Service default/web ${info}:7) Port name web (port: 8080, targetPort: ) doesn't follow the naming convention of Mesh port.\n`,
  );
  r = await analyze(['--failure-threshold', 'Info', info]);
  t.equal(r.code, 79);
  r = await analyze(['--output-threshold', 'Warning', info]);
  t.equal(r.code, 0);
  t.equal(r.stdout, '\n', 'Info is not printed at Warning');
  t.equal(r.stderr, `\u2714 No validation issues found when analyzing ${info}.\n`);
  r = await analyze(['--output-threshold', 'Error', file('missing-host2.yaml', missingHost)]);
  t.equal(r.code, 79, 'the exit code follows every message, shown or not');
  r = await analyze(['--failure-threshold', 'Critical', info]);
  t.equal(r.code, 64, 'an unknown level does not parse');
});

t.test("--suppress with istioctl's name forms and wildcards; the suppress annotation", async (t) => {
  const f = file('missing-host3.yaml', missingHost);
  for (const s of ['IST0101=VirtualService reviews.default', 'IST0101=VirtualService *.default', 'IST0101=VirtualService default/*', 'IST0101=*']) {
    const r = await analyze(['-S', s, f]);
    t.equal(r.code, 0, s);
    t.equal(r.stdout, '\n', s);
  }
  let r = await analyze(['-S', 'IST0101=VirtualService other.default', f]);
  t.equal(r.code, 79, 'a suppression for another resource changes nothing');
  r = await analyze(['-S', 'IST9999=VirtualService *', f]);
  t.equal(r.code, 79);
  t.match(r.stderr, /^Warning: Supplied message code 'IST9999' is an unknown message code and will not have any effect\.\n/);
  r = await analyze(['-S', 'no-equals-sign', f]);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: no-equals-sign is not a valid suppression value. See meshctl analyze --help\n');
  const annotated = file(
    'annotated.yaml',
    missingHost.replace(
      'metadata: {name: reviews}\nspec:\n  hosts',
      'metadata:\n  name: reviews\n  annotations: {galley.mesh.io/analyze-suppress: IST0101}\nspec:\n  hosts',
    ),
  );
  r = await analyze([annotated]);
  t.equal(r.code, 0);
});

t.test('-o json and -o yaml: the message fields, exit 0 even with findings', async (t) => {
  const f = file('missing-host4.yaml', missingHost);
  let r = await analyze(['-o', 'json', f]);
  t.equal(r.code, 0);
  t.same(JSON.parse(r.stdout), [
    {
      code: 'IST0101',
      documentationUrl: 'https://mesh.io/v1.26/docs/reference/config/analysis/ist0101/?ref=meshctl-analyze',
      level: 'Error',
      message: 'Referenced host not found: "ratings"',
      origin: 'VirtualService default/reviews',
      reference: `${f}:9`,
    },
  ]);
  t.match(r.stdout, /^\[\n\t\{\n\t\t"code": "IST0101",\n/, 'tab-indented, keys sorted');
  r = await analyze(['-o', 'yaml', f]);
  t.equal(r.code, 0);
  t.equal(
    r.stdout,
    `- code: IST0101\n  documentationUrl: https://mesh.io/v1.26/docs/reference/config/analysis/ist0101/?ref=meshctl-analyze\n  level: Error\n  message: 'Referenced host not found: "ratings"'\n  origin: VirtualService default/reviews\n  reference: ${f}:9\n\n`,
  );
  r = await analyze(['-o', 'json', file('fine2.yaml', missingHost.replace('host: ratings', 'host: reviews'))]);
  t.equal(r.stdout, '[]\n');
});

t.test('--list-analyzers, --analyzer, --verbose', async (t) => {
  let r = await analyze(['-L']);
  t.equal(r.code, 0);
  t.match(r.stdout, /^\* annotations\.K8sAnalyzer:\n {4}Checks for misplaced and invalid Mesh annotations in Kubernetes resources\n/);
  t.match(r.stdout, /\n\* virtualservice\.GatewayAnalyzer:\n {4}Checks the gateways associated with each virtual service\n/);
  t.match(r.stdout, /\n\* mesh\.ClaimRouteAnalyzer:\n/);
  const f = file('missing-host5.yaml', missingHost);
  r = await analyze(['--analyzer', 'virtualservice.GatewayAnalyzer', f]);
  t.equal(r.code, 0, 'only the named analyzer runs');
  r = await analyze(['--analyzer', 'virtualservice.DestinationHostAnalyzer', '-v', f]);
  t.equal(r.code, 79);
  t.match(r.stderr, /^Analyzed resources in namespace: default\nExecuted analyzers:\n\t virtualservice\.DestinationHostAnalyzer\n\n/);
});

t.test('namespaces: the default one, -n, -A', async (t) => {
  const f = file('other-ns.yaml', missingHost.replace(/metadata: \{name: reviews\}/g, 'metadata: {name: reviews, namespace: shop}'));
  let r = await analyze([f]);
  t.equal(r.code, 0, 'messages about other namespaces are not shown');
  r = await analyze(['-n', 'shop', f]);
  t.equal(r.code, 79);
  t.match(r.stdout, /\(VirtualService shop\/reviews /);
  t.equal(r.stderr, FOUND('namespace: shop'));
  r = await analyze(['-A', f]);
  t.equal(r.code, 79);
  t.equal(r.stderr, FOUND('all namespaces'));
});

t.test('stdin, directories, files with other extensions', async (t) => {
  let r = await analyze(['-'], { input: missingHost });
  t.equal(r.code, 79);
  t.equal(r.stdout, 'Error [IST0101] (VirtualService default/reviews -:9) Referenced host not found: "ratings"\n');
  const dir = path.join(tmp, 'tree');
  file('tree/a/one.yaml', missingHost.replace('host: ratings', 'host: reviews'));
  file(
    'tree/b/two.json',
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'injected', labels: { 'mesh-injection': 'enabled' } } }),
  );
  file('tree/readme.md', '# not a manifest');
  r = await analyze([dir]);
  t.equal(r.code, 0);
  t.equal(
    r.stderr,
    `Skipping file ${path.join(dir, 'readme.md')}, recognized file extensions are: [.json .yaml .yml]\n` +
      `\u2714 No validation issues found when analyzing:\n  - ${path.join(dir, 'a', 'one.yaml')}\n  - ${path.join(dir, 'b', 'two.json')}\n`,
  );
  r = await analyze(['-R', dir]);
  t.equal(r.code, 0);
  t.equal(r.stdout, 'The recursive flag has been removed and is hardcoded to true without explicitly specifying it.\n');
});

t.test('bad input: missing file, unreadable YAML, unknown kind, --use-kube, timeout', async (t) => {
  let r = await analyze([path.join(tmp, 'nope.yaml')]);
  t.equal(r.code, 1);
  t.equal(r.stdout, '');
  t.equal(r.stderr, `Error: stat ${path.join(tmp, 'nope.yaml')}: no such file or directory\n`);

  const broken = file('broken.yaml', 'apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\nkind: [unclosed\n');
  r = await analyze([broken]);
  t.equal(r.code, 65, "istioctl's FileParseError");
  t.match(
    r.stderr,
    new RegExp(
      `^Error\\(s\\) adding files: 1 error occurred:\\n\\t\\* errors parsing content "${broken.replace(/\./g, '\\.')}": error processing ${broken.replace(/\./g, '\\.')}\\[1\\] \\(line 5\\): error converting YAML to JSON: yaml: line \\d+: `,
    ),
  );
  t.match(
    r.stderr,
    /\nNo validation issues found when analyzing namespace: default \(but 1 file could not be parsed\)\.\nError: Some files couldn't be parsed\.\n$/,
  );
  r = await analyze(['--ignore-unknown', broken]);
  t.equal(r.code, 0, '--ignore-unknown keeps the exit code clean');

  const kind = file(
    'kind.yaml',
    'apiVersion: networking.istio.io/v1\nkind: VirtualServic\nmetadata: {name: x}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: y}\n',
  );
  r = await analyze([kind]);
  t.equal(r.code, 65);
  t.match(r.stderr, `error processing ${kind}[0] (line 1): failed finding schema for group/version/kind: networking.istio.io/v1/VirtualServic\n`);
  t.notMatch(r.stderr, 'Widget', "kinds of other API groups are not mesh's to judge");

  // No cluster configured: files given are analyzed, with one line saying so (istioctl fails here).
  const noCluster = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
  r = await exec(MESHCTL, ['analyze', '--color=false', file('x.yaml', missingHost)], { env: noCluster });
  t.equal(r.code, 79, r.stderr);
  t.match(r.stderr, /^No cluster configured \(no --orchconfig, ORCHCONFIG, KUBECONFIG or ~\/\.kube\/config\): analyzing the files only\.\n/);
  t.match(r.stdout, /\[IST0101\]/);
  r = await exec(MESHCTL, ['analyze', '--use-kube=true', file('x.yaml', missingHost)], { env: noCluster });
  t.equal(r.code, 1);
  t.equal(
    r.stderr,
    'Error: analyze (--use-kube=true, the default) needs the orchestrator API: no client configuration (give --orchconfig, or set ORCHCONFIG or KUBECONFIG)\n',
  );

  r = await analyze(['--timeout', '1ns', file('t.yaml', missingHost)]);
  t.equal(r.code, 1);
  t.match(r.stderr, /^Error: analysis timed out after 1ns: analysis did not finish: stopped before /);
});

t.test('--meshConfigFile: the mesh config analysis assumes', async (t) => {
  const gw = file(
    'gw.yaml',
    'apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: mesh-system}\nspec:\n  selector:\n    mesh: ingressgateway\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]\n',
  );
  let r = await analyze(['-A', gw]);
  t.equal(r.code, 0, 'the default ingress stand-in matches the selector');
  const off = file('mesh-off.yaml', 'ingressControllerMode: "OFF"\n');
  r = await analyze(['-A', '--color=false', '--meshConfigFile', off, gw]);
  t.equal(r.code, 79);
  t.match(r.stdout, `Error [IST0101] (Gateway mesh-system/gw ${gw}:6) Referenced selector not found: "mesh=ingressgateway"\n`);
  r = await analyze(['--meshConfigFile', path.join(tmp, 'absent.yaml'), gw]);
  t.equal(r.code, 1);
  t.equal(r.stderr, `Error: --meshConfigFile: open ${path.join(tmp, 'absent.yaml')}: no such file or directory\n`);
});

t.test('--color: level names coloured as istioctl colours them', async (t) => {
  const f = file('missing-host6.yaml', missingHost);
  let r = await analyze(['--color', f]);
  t.equal(r.stdout, `\x1b[1;31mError\x1b[0m [IST0101] (VirtualService default/reviews ${f}:9) Referenced host not found: "ratings"\n`);
  r = await analyze([f], { env: { TERM: 'xterm' } });
  t.notMatch(r.stdout, '\x1b[', 'not a terminal: no colour by default');
});
