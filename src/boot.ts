// The executable's first script. The program itself is split into chunks (esbuild code splitting, each
// chunk a CommonJS module) so that a process compiles only the code it runs: `meshctl version` needs ~200 KB
// of the 7 MB, the Kubernetes client is compiled only where the orchestrator is used. Compiling the whole
// bundle at every start cost ~90 ms and ~15 MB of RSS per process.
//
// Chunks come from the single executable's assets (dist/mesh), or from dist/chunks/ beside this file when
// run as `node dist/mesh.cjs`. Each chunk has a V8 code cache made at build time by the same Node binary;
// V8 checks it (source length, V8 version and flags) and compiles from source when it does not fit.
import Module from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { seaAssets } from './lib/sea';

interface ChunkModule {
  exports: unknown;
}

const sea = seaAssets();
/** Where chunk files live (or would, for the executable): their __dirname and stack-trace names. */
const chunkDir = path.join(sea ? path.dirname(process.execPath) : __dirname, 'chunks');
const loaded = new Map<string, ChunkModule>();
const scripts = new Map<string, vm.Script>();
/** Set by build.mjs's training runs (scripts/code-cache-training.mjs) only. */
const trainingDir = process.env['MESH_BUILD_CODE_CACHE_DIR'];

function readChunk(name: string): { code: string; cache?: Buffer } {
  if (sea) {
    const code = sea.getAsset(`chunks/${name}`, 'latin1');
    let cache: Buffer | undefined;
    try {
      cache = Buffer.from(sea.getAsset(`chunks/${name}.cache`));
    } catch {
      cache = undefined;
    }
    return { code, cache };
  }
  const file = path.join(chunkDir, name);
  let cache: Buffer | undefined;
  try {
    cache = fs.readFileSync(`${file}.cache`);
  } catch {
    cache = undefined;
  }
  // The build writes ASCII only (non-ASCII escaped), so latin1 is exact and V8 keeps a one-byte string.
  return { code: fs.readFileSync(file, 'latin1'), cache };
}

function chunkRequire(id: string): unknown {
  if (id.startsWith('./')) return loadChunk(id.slice(2));
  // Everything else a chunk asks for is a Node built-in (all packages are bundled into the chunks).
  return require(id);
}

function loadChunk(name: string): unknown {
  const hit = loaded.get(name);
  if (hit) return hit.exports;
  const mod: ChunkModule = { exports: {} };
  loaded.set(name, mod);
  const { code, cache } = readChunk(name);
  const filename = path.join(chunkDir, name);
  const script = new vm.Script(Module.wrap(code), { filename, cachedData: cache });
  // Only training keeps the scripts: each holds its chunk's top-level bytecode, garbage once the chunk ran.
  if (trainingDir) scripts.set(name, script);
  const wrapper = script.runInThisContext() as (e: unknown, r: typeof chunkRequire, m: ChunkModule, f: string, d: string) => void;
  wrapper.call(mod.exports, mod.exports, chunkRequire, mod, filename, chunkDir);
  return mod.exports;
}

// Build-time training (build.mjs): the code cache V8 makes after a run holds every function the run compiled,
// not just each chunk's top level; the build keeps, per chunk, the largest one its training runs produced.
if (trainingDir) {
  process.on('exit', () => {
    for (const [name, script] of scripts) {
      const data = script.createCachedData();
      const file = path.join(trainingDir, `${name}.cache`);
      let have = 0;
      try {
        have = fs.statSync(file).size;
      } catch {
        have = 0;
      }
      if (data.length > have) fs.writeFileSync(file, data);
    }
  });
}

loadChunk('main.js');
