// Compiles src/native/original_dst.c (the SO_ORIGINAL_DST addon) with the machine's C compiler against
// the Node headers npm is configured with. Nothing is downloaded: node-gyp would fetch headers unless
// told where they are, and one C file needs no gyp project. Used by build.mjs and by tests.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const ADDON_SOURCE = path.join(root, 'src/native/original_dst.c');

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
 * Builds the addon into `out`. Returns `{ ok: true }` or `{ ok: false, reason }`; never throws, so a
 * machine without a compiler still builds everything else.
 */
export function buildOriginalDstAddon(out) {
  if (process.platform !== 'linux') return { ok: false, reason: `SO_ORIGINAL_DST is Linux-only (this is ${process.platform})` };
  const dirs = headerDirs();
  const include = dirs.find((d) => existsSync(path.join(d, 'node_api.h')));
  if (!include) return { ok: false, reason: `Node's C headers (node_api.h) were not found in ${dirs.join(', ')}; set npm's nodedir or install Node's headers` };
  const cc = process.env.CC || 'cc';
  mkdirSync(path.dirname(out), { recursive: true });
  const args = ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${include}`, '-DNODE_GYP_MODULE_NAME=original_dst', '-o', out, ADDON_SOURCE];
  const r = spawnSync(cc, args, { encoding: 'utf8', timeout: 120_000 });
  if (r.error) return { ok: false, reason: `no C compiler (${cc}: ${r.error.code ?? r.error.message}); install one (Debian: gcc) or set CC` };
  if (r.status !== 0) return { ok: false, reason: `${cc} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(0, 5).join('\n')}` };
  return { ok: true };
}
