// Compiles src/native/original_dst.c (the SO_ORIGINAL_DST addon) with the machine's C compiler against
// the Node headers npm is configured with. Nothing is downloaded: node-gyp would fetch headers unless
// told where they are, and one C file needs no gyp project. Used by build.mjs and by tests.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const ADDON_SOURCE = path.join(root, 'src/native/original_dst.c');
export const MEMORY_SOURCE = path.join(root, 'src/native/memory.cc');

/** Directories that may hold node_api.h: npm's nodedir, then the prefix of the running node. */
function headerDirs() {
  const dirs = [];
  const fromEnv = process.env.npm_config_nodedir;
  if (fromEnv) dirs.push(path.join(fromEnv, 'include/node'));
  dirs.push(path.resolve(path.dirname(process.execPath), '../include/node'));
  const npm = spawnSync('npm', ['config', 'get', 'nodedir'], { encoding: 'utf8', timeout: 20_000 });
  const configured = npm.status === 0 ? npm.stdout.trim() : '';
  if (configured && configured !== 'undefined' && configured !== 'null') dirs.push(path.join(configured, 'include/node'));
  return [...new Set(dirs)];
}

/**
 * Builds the addon into `out`: original_dst.c (C) and memory.cc (C++, for V8's memory-pressure call) in one
 * shared object. Returns `{ ok: true }` (with a `note` when only the C part could be built: no C++ compiler or
 * headers of another Node; the agent then does not give idle memory back) or `{ ok: false, reason }`; never throws,
 * so a machine without a compiler still builds everything else.
 */
export function buildOriginalDstAddon(out) {
  if (process.platform !== 'linux') return { ok: false, reason: `SO_ORIGINAL_DST is Linux-only (this is ${process.platform})` };
  const dirs = headerDirs();
  const include = dirs.find((d) => existsSync(path.join(d, 'node_api.h')));
  if (!include)
    return { ok: false, reason: `Node's C headers (node_api.h) were not found in ${dirs.join(', ')}; set npm's nodedir or install Node's headers` };
  const cc = process.env.CC || 'cc';
  const cxx = process.env.CXX || 'c++';
  mkdirSync(path.dirname(out), { recursive: true });
  const work = mkdtempSync(path.join(tmpdir(), 'mesh-addon-'));
  try {
    const warn = ['-O2', '-fPIC', '-Wall', '-Wextra', '-Werror', '-DNODE_GYP_MODULE_NAME=original_dst'];
    const step = (tool, language, debian, variable, args) => {
      const r = spawnSync(tool, args, { encoding: 'utf8', timeout: 120_000 });
      if (r.error) return `no ${language} compiler (${tool}: ${r.error.code ?? r.error.message}); install one (Debian: ${debian}) or set ${variable}`;
      if (r.status !== 0) return `${tool} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(0, 5).join('\n')}`;
      return undefined;
    };
    const c = path.join(work, 'original_dst.o');
    const failed = step(cc, 'C', 'gcc', 'CC', [...warn, `-I${include}`, '-c', '-o', c, ADDON_SOURCE]);
    if (failed) return { ok: false, reason: failed };
    // V8's C++ API has no stable ABI: its headers must be those of the Node the executable is made from. No
    // exceptions or RTTI (nothing here throws; Node's V8 is built without RTTI); V8's headers as system headers
    // (they do not build warning-free under -Wextra).
    const headerVersion = nodeVersionOf(include);
    const cxxFailed = !existsSync(path.join(include, 'v8.h'))
      ? `no v8.h in ${include}`
      : headerVersion && headerVersion !== process.version
        ? `the Node headers in ${include} are ${headerVersion}, this Node is ${process.version}`
        : (step(cxx, 'C++', 'g++', 'CXX', [
            ...warn,
            `-isystem${include}`,
            '-std=c++17',
            '-fno-exceptions',
            '-fno-rtti',
            '-c',
            '-o',
            path.join(work, 'memory.o'),
            MEMORY_SOURCE,
          ]) ?? step(cxx, 'C++', 'g++', 'CXX', ['-shared', '-o', out, c, path.join(work, 'memory.o')]));
    if (!cxxFailed) return { ok: true };
    const linked = step(cc, 'C', 'gcc', 'CC', ['-shared', '-o', out, c]);
    if (linked) return { ok: false, reason: linked };
    return { ok: true, note: `built without its memory functions (the agent does not give idle memory back): ${cxxFailed}` };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** `v20.20.2` from a header directory's node_version.h, or undefined when it cannot be read. */
function nodeVersionOf(include) {
  try {
    const h = readFileSync(path.join(include, 'node_version.h'), 'utf8');
    const n = (k) => new RegExp(`^#define NODE_${k}_VERSION (\\d+)`, 'm').exec(h)?.[1];
    const [ma, mi, pa] = ['MAJOR', 'MINOR', 'PATCH'].map(n);
    return ma && mi && pa ? `v${ma}.${mi}.${pa}` : undefined;
  } catch {
    return undefined;
  }
}
