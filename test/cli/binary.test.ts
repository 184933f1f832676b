// The packaged executable: dispatch by link name and by first word, version shapes, and bash
// completion sourced into a real bash.
import t from 'tap';
import { existsSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { DIST, MESH, built, exec } from '../helpers/binary';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first (npm test does)');

const LINKS = ['pilot-discovery', 'pilot-agent', 'install-cni', 'meshctl'] as const;

t.test('dispatch through each link in dist/, through a link elsewhere, and by first word', async (t) => {
  const tmp = tempDir(t, 'mesh-links-');
  for (const name of LINKS) {
    const own = await exec(path.join(DIST, name), ['--help']);
    t.equal(own.code, 0, `${name} --help`);
    t.match(own.stdout, new RegExp(`^  ${name} \\[command\\]$`, 'm'), `${name} is the program`);
    // A link in another folder, to the binary by absolute path: the link's own name decides.
    const link = path.join(tmp, name);
    symlinkSync(MESH, link);
    const other = await exec(link, ['version', '--short']);
    t.equal(other.code, 0, `${link} version --short`);
    t.match(other.stdout, /^client version: \d+\.\d+\.\d+/);
  }
  for (const [word, prog] of [
    ['discovery', 'pilot-discovery'],
    ['agent', 'pilot-agent'],
    ['cni', 'install-cni'],
    ['meshctl', 'meshctl'],
    ['pilot-agent', 'pilot-agent'],
  ]) {
    const r = await exec(MESH, [word!, '--help']);
    t.equal(r.code, 0, `mesh ${word} --help`);
    t.match(r.stdout, new RegExp(`^  ${prog} \\[command\\]$`, 'm'), `mesh ${word} is ${prog}`);
  }
  const def = await exec(path.join(DIST, 'meshctl'), ['version', '--remote=false']);
  t.match(def.stdout, /^client version: \d+\.\d+\.\d+\S*\n$/, 'meshctl version is short by default');
  const top = await exec(MESH, []);
  t.equal(top.code, 0);
  for (const w of ['discovery', 'agent', 'cni', 'meshctl']) t.match(top.stdout, new RegExp(`^  ${w} `, 'm'));
  const bad = await exec(MESH, ['frobnicate']);
  t.equal(bad.code, 1);
  t.match(bad.stderr, 'Error: unknown program "frobnicate" for "mesh"');
});

t.test("Istio's program names, and any other link name, as Istio users will link it", async (t) => {
  const tmp = tempDir(t, 'mesh-istio-links-');
  for (const [istio, ours] of [
    ['istioctl', 'meshctl'],
    ['istiod', 'pilot-discovery'],
    ['istio-cni', 'install-cni'],
  ] as const) {
    const link = path.join(tmp, istio);
    symlinkSync(MESH, link);
    const r = await exec(link, ['--help']);
    t.equal(r.code, 0, `${istio} --help`);
    t.match(r.stdout, new RegExp(`^  ${ours} \\[command\\]$`, 'm'), `${istio} is ${ours}`);
  }
  const v = await exec(path.join(tmp, 'istioctl'), ['version', '--remote=false']);
  t.match(v.stdout, /^client version: \d+\.\d+\.\d+/, 'istioctl version');
  // Another name falls back to the first word, and says so when the word is no program either.
  const other = path.join(tmp, 'mymesh');
  symlinkSync(MESH, other);
  const byWord = await exec(other, ['meshctl', 'version', '--remote=false']);
  t.equal(byWord.code, 0, 'mymesh meshctl version');
  t.match(byWord.stdout, /^client version: /);
  const bad = await exec(other, ['version']);
  t.equal(bad.code, 1);
  t.match(
    bad.stderr,
    /^Error: unknown program "version" for "mesh" \(invoked as "mymesh", which is not a program name: link as pilot-discovery, pilot-agent, install-cni, meshctl or istiod, istio-cni, istioctl, or give the program as the first word\)/,
  );
});

t.test('version output shapes', async (t) => {
  for (const name of LINKS) {
    const bin = path.join(DIST, name);
    // meshctl's version is short unless --short=false (spec doc 3 §9); the daemons' is long by default.
    const long = await exec(bin, name === 'meshctl' ? ['version', '--remote=false', '--short=false'] : ['version']);
    t.equal(long.code, 0);
    t.match(
      long.stdout,
      /^client version: version\.BuildInfo\{Version:"[^"]+", GitRevision:"[0-9a-f]{40}|unknown", GolangVersion:"node\d+\.\d+\.\d+", BuildStatus:"(Clean|Modified|unknown)", GitTag:"[^"]+"\}\n$/,
      `${name} version`,
    );
    const short = await exec(bin, ['version', '-s']);
    t.match(short.stdout, /^client version: \d+\.\d+\.\d+\S*\n$/, `${name} version -s`);
    const json = await exec(bin, ['version', '-o', 'json']);
    t.equal(json.code, 0);
    const doc = JSON.parse(json.stdout);
    t.same(Object.keys(doc), ['clientVersion']);
    t.same(Object.keys(doc.clientVersion), ['version', 'revision', 'golang_version', 'status', 'tag'], `${name} json keys in Istio's order`);
    t.equal(doc.clientVersion.golang_version, `node${process.versions.node}`, 'runtime field reports Node.js');
    const yaml = await exec(bin, ['version', '--output=yaml']);
    t.match(yaml.stdout, /^clientVersion:\n  golang_version: node[\d.]+\n  revision: \S+\n  status: \S+\n  tag: \S+\n  version: \S+\n/);
    const bad = await exec(bin, ['version', '-o', 'xml']);
    t.not(bad.code, 0);
    t.match(bad.stderr, "Error: --output must be 'yaml' or 'json'");
  }
});

t.test(
  "error exit codes are Istio's: 255 for the daemons, 1 for install-cni, 64 (EX_USAGE) for a meshctl command line that does not parse",
  async (t) => {
    const codes: Record<string, number> = { 'pilot-discovery': 255, 'pilot-agent': 255, 'install-cni': 1, meshctl: 64 };
    for (const name of LINKS) {
      const r = await exec(path.join(DIST, name), ['version', '--bogus']);
      t.equal(r.code, codes[name], name);
      t.match(r.stderr, 'Error: unknown flag: --bogus');
    }
  },
);

t.test('remote-clusters, the last command that was "not available", runs: with nothing configured it says what it needs', async (t) => {
  const r = await exec(path.join(DIST, 'meshctl'), ['remote-clusters'], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' } });
  t.equal(r.code, 1);
  t.equal(
    r.stderr,
    'Error: remote-clusters needs the orchestrator API (give --orchconfig, or set ORCHCONFIG or KUBECONFIG) or the address of a daemon ' +
      '(set MESHCTL_XDS_ADDRESS, or put xds-address in $HOME/.meshctl/config.yaml)\n',
  );
  t.notMatch(r.stderr, /not available in this build/);
});

function bashComplete(program: string, line: string, extra = ''): Promise<string[]> {
  const script = `
set -e
source <("${path.join(DIST, program)}" completion bash ${extra})
COMP_LINE=${JSON.stringify(line)}
COMP_POINT=\${#COMP_LINE}
COMP_WORDS=(${line
    .split(' ')
    .map((w) => JSON.stringify(w))
    .join(' ')})
COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
__${program.replace(/-/g, '_')}_complete
printf '%s\\n' "\${COMPREPLY[@]}"
`;
  return exec('bash', ['-c', script], { env: { PATH: `${DIST}:${process.env.PATH}`, HOME: '/tmp' } }).then((r) => {
    if (r.code !== 0) throw new Error(`bash failed: ${r.stderr}`);
    return r.stdout.split('\n').filter(Boolean);
  });
}

t.test('bash completion, sourced into a real bash', async (t) => {
  t.same(await bashComplete('meshctl', 'meshctl proxy-c'), ['proxy-config']);
  t.same(await bashComplete('meshctl', 'meshctl proxy-config rou'), ['route']);
  t.ok((await bashComplete('meshctl', 'meshctl ')).includes('analyze'));
  t.same(await bashComplete('pilot-discovery', 'pilot-discovery discovery --grpc'), ['--grpcAddr']);
  t.same(await bashComplete('pilot-discovery', 'pilot-discovery discovery --registries '), ['Orchestrator', 'Mock']);
  t.same(await bashComplete('pilot-discovery', 'pilot-discovery discovery --registries=M'), ['Mock']);
  t.same(await bashComplete('pilot-agent', 'pilot-agent version --sh'), ['--short']);
  t.same(await bashComplete('install-cni', 'install-cni --repair-d'), ['--repair-delete-pods']);
  t.same(await bashComplete('pilot-agent', 'pilot-agent completion '), ['bash', 'fish', 'powershell', 'zsh']);
  t.same(await bashComplete('meshctl', 'meshctl x ps', '--no-descriptions'), []);
});

t.test('completion scripts for every shell are generated from the tables', async (t) => {
  for (const name of LINKS) {
    for (const shell of ['bash', 'fish', 'powershell', 'zsh']) {
      const r = await exec(path.join(DIST, name), ['completion', shell]);
      t.equal(r.code, 0, `${name} completion ${shell}`);
      t.match(r.stdout, / __complete /, `${name} ${shell} script calls back into the program`);
      t.notMatch(r.stdout, /__completeNoDesc/);
      t.match(
        r.stdout,
        new RegExp(`(complete -F \\S+ ${name}$|compdef \\S+ ${name}$|-CommandName '${name}'|complete -c ${name} )`, 'm'),
        `${name} ${shell} registers for ${name}`,
      );
      const nd = await exec(path.join(DIST, name), ['completion', shell, '--no-descriptions']);
      t.match(nd.stdout, / __completeNoDesc /);
    }
  }
  const desc = await exec(path.join(DIST, 'meshctl'), ['__complete', 'proxy-config', '']);
  t.match(desc.stdout, /^route\t.+$/m, 'candidates carry descriptions');
  t.match(desc.stdout, /:4\n$/, 'ends with the directive');
});

t.test('dist/ holds the mesh-cni link the README lists, and no build intermediates', async (t) => {
  // The container runtime runs the plugin by its file name, with CNI_* variables and no arguments.
  const r = await exec(path.join(DIST, 'mesh-cni'), [], { env: { PATH: process.env.PATH, CNI_COMMAND: 'VERSION' } });
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { cniVersion: String, supportedVersions: Array });
  t.notOk(existsSync(path.join(DIST, 'mesh.blob')), 'the SEA blob is removed once injected');
});
