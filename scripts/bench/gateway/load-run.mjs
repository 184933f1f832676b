// Runs ./load.mjs (one autocannon run), or another generator printing the same JSON (`script`, e.g. ./burst.mjs), in
// a fresh process, optionally pinned (`prefix`, e.g. taskset -c 0), and resolves with the JSON it prints.
import { spawn } from 'node:child_process';
import path from 'node:path';

const LOAD = path.join(path.dirname(new URL(import.meta.url).pathname), 'load.mjs');

/** `o`: connections, duration, warmup, overallRate, headers (see load.mjs). */
export function runLoad(url, o, prefix = [], script = LOAD) {
  return new Promise((resolve, reject) => {
    const argv = [...prefix, process.execPath, script, JSON.stringify({ url, ...o })];
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator exited ${code}: ${err}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()));
      } catch {
        reject(new Error(`load generator output is not JSON: ${out}${err}`));
      }
    });
  });
}
