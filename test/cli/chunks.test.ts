// The program ships as chunks that src/boot.ts compiles on demand with a code cache made at build time.
// These tests hold the two promises that make it worth it: every cache is one V8 accepts (a rejected cache
// silently costs a full compile at every start), and a small command compiles a small part of the program.
import t from 'tap';
import Module from 'node:module';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { tempDir } from '../helpers/temp';
import { DIST } from '../helpers/binary';

const CHUNKS = path.join(DIST, 'chunks');
const built = existsSync(path.join(CHUNKS, 'main.js'));

t.test('every chunk has a code cache this Node accepts', { skip: built ? false : 'dist/chunks is not built' }, async (t) => {
  const chunks = readdirSync(CHUNKS).filter((f) => f.endsWith('.js'));
  t.ok(chunks.length > 10, `the program is split (${chunks.length} chunks)`);
  const rejected: string[] = [];
  for (const f of chunks) {
    const code = readFileSync(path.join(CHUNKS, f), 'latin1');
    t.notOk(/[^\x00-\x7f]/.test(code), `${f} is ASCII (V8 keeps it as a one-byte string)`);
    const s = new vm.Script(Module.wrap(code), { filename: f, cachedData: readFileSync(path.join(CHUNKS, `${f}.cache`)) });
    if (s.cachedDataRejected) rejected.push(f);
  }
  t.same(rejected, [], 'no chunk cache is rejected');
});

// `meshctl version` with its default remote check and no daemon configured (HOME without ~/.meshctl) must answer
// without compiling the gRPC transport: that alone tripled its start-up.
for (const args of [['--remote=false'], []]) {
  t.test(
    `meshctl version --short ${args.join(' ')} compiles only a small part of the program`,
    { skip: built ? false : 'dist/chunks is not built' },
    async (t) => {
      const dir = tempDir(t);
      const trace = path.join(dir, 'trace.cjs');
      const out = path.join(dir, 'compiled.json');
      // Records what src/boot.ts compiles: it goes through vm.Script for every chunk.
      writeFileSync(
        trace,
        `const vm = require('node:vm'); const fs = require('node:fs'); const Orig = vm.Script; const seen = [];
       vm.Script = function (code, o) { seen.push(o.filename); return new Orig(code, o); };
       process.on('exit', () => fs.writeFileSync(${JSON.stringify(out)}, JSON.stringify(seen)));`,
      );
      const env = { PATH: process.env.PATH, HOME: dir };
      const said = execFileSync(process.execPath, ['--require', trace, path.join(DIST, 'mesh.cjs'), 'meshctl', 'version', '--short', ...args], {
        encoding: 'utf8',
        env,
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      t.match(said, /^client version: \d+\.\d+\.\d+/);
      const compiled = (JSON.parse(readFileSync(out, 'utf8')) as string[]).map((f) => path.basename(f));
      t.ok(compiled.includes('main.js'), 'the entry chunk is compiled');
      const size = (fs: string[]) => fs.reduce((n, f) => n + statSync(path.join(CHUNKS, f)).size, 0);
      const all = size(readdirSync(CHUNKS).filter((f) => f.endsWith('.js')));
      const used = size(compiled);
      t.ok(used < all / 10, `meshctl version compiled ${compiled.length} chunks, ${used} of ${all} bytes`);
      // esbuild's metafile says which chunks hold grpc-js's modules.
      const meta = JSON.parse(readFileSync(path.join(DIST, 'meta.json'), 'utf8')) as { outputs: Record<string, { inputs: Record<string, unknown> }> };
      const grpcChunks = Object.entries(meta.outputs)
        .filter(([, o]) => Object.keys(o.inputs).some((i) => i.includes('node_modules/@grpc/grpc-js/')))
        .map(([name]) => path.basename(name));
      t.ok(grpcChunks.length > 0, 'the metafile names the chunks of grpc-js');
      const grpcChunk = compiled.find((f) => grpcChunks.includes(f));
      t.notOk(grpcChunk, 'no chunk holding the gRPC transport was compiled');
    },
  );
}

// A full build (dist/mesh newer than the chunks) trains the caches; `node build.mjs --bundle` does not.
const trained =
  built && existsSync(path.join(DIST, 'mesh')) && statSync(path.join(DIST, 'mesh')).mtimeMs >= statSync(path.join(CHUNKS, 'main.js')).mtimeMs;

t.test(
  'a full build ships caches of what its training runs compiled',
  { skip: trained ? false : 'no full build (dist/mesh) after the chunks' },
  async (t) => {
    // The proxy command's chunk: compiled only when an agent runs, and trained by the agent's run.
    const meta = JSON.parse(readFileSync(path.join(DIST, 'meta.json'), 'utf8')) as { outputs: Record<string, { inputs: Record<string, unknown> }> };
    const chunk = Object.entries(meta.outputs).find(([, o]) => Object.keys(o.inputs).some((i) => i.endsWith('src/agent/proxy-command.ts')))?.[0];
    t.ok(chunk, 'the bundle has a chunk holding src/agent/proxy-command.ts');
    for (const name of ['main.js', path.basename(chunk!)]) {
      const code = readFileSync(path.join(CHUNKS, name), 'latin1');
      const compileTime = new vm.Script(Module.wrap(code), { filename: name }).createCachedData().length;
      const shipped = statSync(path.join(CHUNKS, `${name}.cache`)).size;
      t.ok(
        shipped > compileTime,
        `${name}: shipped cache ${shipped} bytes > compile-time cache ${compileTime} bytes (functions the training compiled)`,
      );
    }
  },
);
