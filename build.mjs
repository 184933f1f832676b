// Builds the one executable: esbuild bundles src/ into dist/mesh.cjs, Node's single-executable support
// (blob + postject) turns it into dist/mesh, the four program links sit beside it, and a release
// tarball holds all of them with the README. Nothing is downloaded: @yao-pkg/pkg would fetch base
// binaries, so it is kept for cross-architecture release builds only (see README).
//   node build.mjs            everything
//   node build.mjs --bundle   only dist/mesh.cjs (fast, for development)
import { build, buildSync, transformSync } from 'esbuild';
import Module from 'node:module';
import vm from 'node:vm';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  chmodSync,
  cpSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  existsSync,
  statSync,
} from 'node:fs';
import path from 'node:path';
import { buildOriginalDstAddon } from './scripts/native-addon.mjs';
import { trainCodeCaches } from './scripts/code-cache-training.mjs';

const root = path.dirname(new URL(import.meta.url).pathname);
const dist = path.join(root, 'dist');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
export const PROGRAM_LINKS = ['pilot-discovery', 'pilot-agent', 'install-cni', 'mesh-cni', 'meshctl'];
const ADDON = path.join(dist, 'original_dst.node');
// the engine's worker threads run their own smaller bundle (only the engine), beside mesh.cjs and
// embedded in the executable as an asset (src/proxy/engine/worker/pool.ts)
const WORKER = path.join(dist, 'engine-worker.cjs');

function git(...args) {
  try {
    return execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return '';
  }
}

function buildInfo() {
  const revision = git('rev-parse', 'HEAD') || 'unknown';
  const dirty = git('status', '--porcelain', '--untracked-files=no');
  const tag = git('describe', '--tags', '--exact-match') || pkg.version;
  return { version: pkg.version, revision, status: revision === 'unknown' ? 'unknown' : dirty ? 'Modified' : 'Clean', tag };
}

// ws (pulled in by @kubernetes/client-node) tries `require('bufferutil')` and `require('utf-8-validate')`
// inside try/catch for optional native speed-ups. Left as runtime requires, the single executable prints
// Node's "require() ... only supports loading built-in modules" warning the moment the orchestrator
// client loads. They are native add-ons that cannot be bundled anyway, so they resolve to a module that
// throws, which ws catches exactly as when they are not installed.
const optionalNativeAddons = {
  name: 'optional-native-addons',
  setup(b) {
    b.onResolve({ filter: /^(bufferutil|utf-8-validate)$/ }, (a) => ({ path: a.path, namespace: 'absent-addon' }));
    b.onLoad({ filter: /.*/, namespace: 'absent-addon' }, (a) => ({
      contents: `throw new Error(${JSON.stringify(`${a.path} is not part of this build`)});`,
      loader: 'js',
    }));
  },
};

// The program is split into chunks (see src/boot.ts): esbuild's code splitting only exists for ES modules, so
// each chunk is bundled as ESM and then turned into a CommonJS module that src/boot.ts loads with its code cache.
const CHUNKS = path.join(dist, 'chunks');

async function bundle(info) {
  mkdirSync(dist, { recursive: true });
  const esmDir = path.join(dist, '.esm');
  rmSync(esmDir, { recursive: true, force: true });
  rmSync(CHUNKS, { recursive: true, force: true });
  const common = {
    bundle: true,
    platform: 'node',
    target: 'node20',
    minify: true,
    keepNames: false,
    legalComments: 'none',
    charset: 'ascii',
    logLevel: 'warning',
  };
  const result = await build({
    ...common,
    entryPoints: [path.join(root, 'src/main.ts')],
    outdir: esmDir,
    format: 'esm',
    splitting: true,
    chunkNames: 'c-[hash]',
    metafile: true,
    // import.meta.url only locates the worker's source when running from src/ (never in a bundle)
    define: { __MESH_BUILD__: JSON.stringify(info), 'import.meta.url': 'undefined' },
    plugins: [optionalNativeAddons],
  });
  // An engine worker thread runs its own small bundle (src/proxy/engine/worker/thread.ts), not the chunks.
  await build({
    ...common,
    format: 'cjs',
    define: { __MESH_BUILD__: JSON.stringify(info), 'import.meta.url': 'undefined' },
    plugins: [optionalNativeAddons],
    entryPoints: [path.join(root, 'src/proxy/engine/worker/thread.ts')],
    outfile: WORKER,
  });
  refuseSplitCommonJsImports(result.metafile);
  mkdirSync(CHUNKS);
  for (const file of readdirSync(esmDir)) {
    const esm = readFileSync(path.join(esmDir, file), 'utf8');
    // Only ESM syntax changes here (imports/exports → require/exports); the code was minified above.
    const { code } = transformSync(esm, {
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      charset: 'ascii',
      minifyWhitespace: true,
      minifySyntax: true,
      supported: { 'dynamic-import': false },
      logLevel: 'warning',
    });
    writeFileSync(path.join(CHUNKS, file), code, 'latin1');
    writeFileSync(path.join(CHUNKS, `${file}.cache`), codeCache(path.join(CHUNKS, file), code));
  }
  rmSync(esmDir, { recursive: true, force: true });
  await build({ ...common, entryPoints: [path.join(root, 'src/boot.ts')], outfile: path.join(dist, 'mesh.cjs'), format: 'cjs' });
  writeFileSync(path.join(dist, 'meta.json'), JSON.stringify(result.metafile));
  writeFileSync(path.join(dist, 'THIRD_PARTY_NOTICES'), thirdPartyNotices(result.metafile));
}

/**
 * `await import('pkg')` of a CommonJS package becomes, once split, a chunk whose only export is `default`, and
 * esbuild then reads named exports off the namespace (`(await import('./c.js')).stringify` is undefined at
 * run time). Import such packages statically from a small ES module of ours and import() that instead.
 */
function refuseSplitCommonJsImports(metafile) {
  const bad = [];
  for (const [file, out] of Object.entries(metafile.outputs)) {
    for (const imp of out.imports) {
      if (imp.kind !== 'dynamic-import') continue;
      const target = metafile.outputs[imp.path];
      if (!target?.entryPoint || metafile.inputs[target.entryPoint]?.format !== 'cjs') continue;
      bad.push(`${path.basename(file)} imports ${target.entryPoint}`);
    }
  }
  if (bad.length)
    throw new Error(
      `dynamic import() of a CommonJS package loses its named exports when the bundle is split:\n  ${bad.join('\n  ')}\nimport the package from one of our ES modules and import() that module instead`,
    );
}

/** V8's code cache of a chunk as src/boot.ts compiles it (same wrapper, same Node binary as the executable). */
function codeCache(filename, code) {
  return new vm.Script(Module.wrap(code), { filename }).createCachedData();
}

/** The chunks as single-executable assets (`chunks/<file>`), code caches included. */
function chunkAssets() {
  return Object.fromEntries(readdirSync(CHUNKS).map((f) => [`chunks/${f}`, path.join(CHUNKS, f)]));
}

/** Every npm package the bundle took code from, with its version, license and license text. */
function thirdPartyNotices(metafile) {
  const dirs = new Map();
  for (const input of Object.keys(metafile.inputs)) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (m) dirs.set(m[1].replace(/^.*node_modules\//, ''), path.join(root, m[1]));
  }
  let out = 'Third-party software bundled into the mesh executable (from the esbuild metafile of this build).\n';
  for (const [name, dir] of [...dirs].sort(([a], [b]) => a.localeCompare(b))) {
    const p = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = file ? readFileSync(path.join(dir, file), 'utf8').trim() : `(no license file in the package; package.json says ${p.license})`;
    out += `\n${'='.repeat(100)}\n${name} ${p.version} — ${typeof p.license === 'string' ? p.license : JSON.stringify(p.license)}\n${'-'.repeat(100)}\n${text}\n`;
  }
  return out;
}

/**
 * The SO_ORIGINAL_DST addon beside the bundle (`node dist/mesh.cjs` loads it from there) and, when it
 * compiled, embedded in the executable. A machine that cannot compile it still gets a working build:
 * captured connections are then routed by Host / SNI, and the proxy warns about it at run time.
 */
function addon() {
  rmSync(ADDON, { force: true });
  const r = buildOriginalDstAddon(ADDON);
  if (r.ok && r.note) console.error(`warning: the native addon was ${r.note}`);
  if (!r.ok) {
    console.error(
      `warning: the original-destination addon was not built: ${r.reason}\n` +
        '  the build goes on without it; sidecars will route captured connections by HTTP Host / TLS SNI instead of SO_ORIGINAL_DST',
    );
  }
  return r.ok;
}

function sea(withAddon) {
  const cfg = path.join(dist, 'sea-config.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      main: path.join(dist, 'mesh.cjs'),
      output: path.join(dist, 'mesh.blob'),
      disableExperimentalSEAWarning: true,
      useCodeCache: true,
      assets: { ...chunkAssets(), 'engine-worker.cjs': WORKER, ...(withAddon ? { 'original_dst.node': ADDON } : {}) },
    }),
  );
  execFileSync(process.execPath, ['--experimental-sea-config', cfg], { stdio: ['ignore', 'ignore', 'inherit'] });
  const exe = path.join(dist, 'mesh');
  rmSync(exe, { force: true });
  copyFileSync(process.execPath, exe);
  chmodSync(exe, 0o755);
  const postject = path.join(root, 'node_modules/.bin/postject');
  const inject = spawnSync(
    postject,
    [exe, 'NODE_SEA_BLOB', path.join(dist, 'mesh.blob'), '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'],
    { encoding: 'utf8' },
  );
  // postject warns about ELF note sections it does not need; show anything else.
  const noise = /^warning: Can't find string offset for section name '\.note(\.\d+)?'$/;
  const said = `${inject.stdout}${inject.stderr}`
    .replace(/\x1b\[[0-9;]*m/g, '')
    .split('\n')
    .filter((l) => l.trim() && !noise.test(l) && !/(Start injection|Injection done)/.test(l));
  if (said.length) console.error(said.join('\n'));
  if (inject.status !== 0) throw new Error(`postject failed (exit ${inject.status})`);
  // The blob is inside dist/mesh now; a copy beside it is only 100 MB of clutter for whoever lists dist/.
  rmSync(path.join(dist, 'mesh.blob'), { force: true });
  for (const name of PROGRAM_LINKS) {
    const link = path.join(dist, name);
    rmSync(link, { force: true });
    symlinkSync('mesh', link);
  }
}

function tarball(info) {
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch] ?? process.arch;
  const name = `mesh-${info.version}-linux-${arch}`;
  const stage = path.join(dist, name);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage);
  copyFileSync(path.join(dist, 'mesh'), path.join(stage, 'mesh'));
  chmodSync(path.join(stage, 'mesh'), 0o755);
  for (const l of PROGRAM_LINKS) symlinkSync('mesh', path.join(stage, l));
  for (const f of ['README.md', 'LICENSE', 'NOTICE']) copyFileSync(path.join(root, f), path.join(stage, f));
  copyFileSync(path.join(dist, 'THIRD_PARTY_NOTICES'), path.join(stage, 'THIRD_PARTY_NOTICES'));
  cpSync(path.join(root, 'examples'), path.join(stage, 'examples'), { recursive: true });
  // The demo and the example token issuer need jose: bundled, they run with a plain `node`, no npm install.
  const standalone = { bundle: true, platform: 'node', target: 'node20', format: 'esm', legalComments: 'none', logLevel: 'warning' };
  buildSync({ ...standalone, entryPoints: [path.join(root, 'scripts/demo.mjs')], outfile: path.join(stage, 'demo.mjs') });
  buildSync({
    ...standalone,
    entryPoints: [path.join(root, 'examples/claim-routing/issuer.mjs')],
    outfile: path.join(stage, 'examples/claim-routing/issuer.mjs'),
    allowOverwrite: true,
  });
  execFileSync('tar', ['-czf', path.join(dist, `${name}.tar.gz`), '-C', dist, name]);
  rmSync(stage, { recursive: true, force: true });
  return `${name}.tar.gz`;
}

const info = buildInfo();
const t0 = Date.now();
await bundle(info);
const withAddon = addon();
if (!process.argv.includes('--bundle')) {
  // Releases start faster with caches of what a run compiles; `--bundle` (development) skips the ~7 s this takes.
  try {
    await trainCodeCaches(dist);
  } catch (e) {
    console.error(
      `warning: the code-cache training run failed; chunks keep their compile-time caches (slower start-up):\n  ${String(e.message).split('\n').join('\n  ')}`,
    );
  }
  sea(withAddon);
  const tgz = existsSync(path.join(root, 'README.md')) ? tarball(info) : '(no README.md, no tarball)';
  const mb = (statSync(path.join(dist, 'mesh')).size / 1048576).toFixed(1);
  console.log(
    `built dist/mesh (${mb} MiB, ${info.version} ${info.revision.slice(0, 12)} ${info.status}), links ${PROGRAM_LINKS.join(', ')}, ${withAddon ? 'original-destination addon embedded' : 'NO original-destination addon'}, dist/${tgz} in ${Date.now() - t0} ms`,
  );
} else {
  console.log(`bundled dist/mesh.cjs and dist/chunks/${withAddon ? ' and dist/original_dst.node' : ''} in ${Date.now() - t0} ms`);
}
