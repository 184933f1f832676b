// Cost of configured regexes on the route hot path: the engine's RE2 matcher (src/lib/re2.ts, linear time)
// against JavaScript's backtracking RegExp on the same patterns, in one run, as a ratio; then the
// catastrophic pattern of issue #16 against both.
//   node --import tsx scripts/bench/regex.mjs [--rounds 5] [--requests 200000]
// The route table is the one `scripts/bench/gateway.mjs --routes regex` configures: ten routes that do not
// match `/bench` and one that does, evaluated in order as the router does. A second path matches the
// shared literal prefix of the ten, so every one of them runs the engine.
import { fullMatcher } from '../../src/lib/re2.ts';
import { median, parseOptions } from '../lib/bench.mjs';

const { rounds, requests } = parseOptions('scripts/bench/regex.mjs', 'RE2 against JavaScript RegExp on a route table, in one run, as a ratio.', {
  rounds: { type: 'integer', min: 1, default: 5, help: 'rounds' },
  requests: { type: 'integer', min: 1, default: 200_000, help: 'matches per round' },
});

const patterns = [];
for (let i = 0; i < 10; i++) patterns.push(`/api/v[0-9]+/item-${i}/[a-z0-9-]+(/.*)?`);
patterns.push('/(bench|test)(/[a-z]+)*');
const re2 = patterns.map((p) => fullMatcher(p));
const js = patterns.map((p) => {
  const re = new RegExp(`^(?:${p})$`);
  return (s) => re.test(s);
});

function perRequestUs(table, path) {
  let hits = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < requests; i++) {
    for (const m of table) {
      if (m(path)) {
        hits++;
        break;
      }
    }
  }
  const us = Number(process.hrtime.bigint() - t0) / 1000 / requests;
  if (hits !== requests) throw new Error(`${path}: expected every request to match`);
  return us;
}

console.log(`regex route table: ${patterns.length} routes, ${requests} requests × ${rounds} rounds, node ${process.version}`);
for (const path of ['/bench', '/api/v2/item-9/abc-1/x']) {
  const r = [];
  const j = [];
  for (let k = 0; k < rounds; k++) {
    j.push(perRequestUs(js, path));
    r.push(perRequestUs(re2, path));
  }
  const mr = median(r);
  const mj = median(j);
  console.log(
    `${path.padEnd(24)} RE2 ${mr.toFixed(3)} µs/request  RegExp ${mj.toFixed(3)} µs/request  ratio ${(mr / mj).toFixed(2)}×  (+${(mr - mj).toFixed(3)} µs)`,
  );
}

// The denial-of-service pattern: RE2 only (RegExp would take minutes beyond ~30 characters).
const evil = fullMatcher('/x(a+)+b');
for (const n of [30, 1000, 100_000]) {
  const input = `/x${'a'.repeat(n)}c`;
  const ts = [];
  for (let k = 0; k < rounds; k++) {
    const t0 = process.hrtime.bigint();
    evil(input);
    ts.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  console.log(`/x(a+)+b on ${String(n).padStart(6)} characters: RE2 ${median(ts).toFixed(3)} ms`);
}
const t0 = process.hrtime.bigint();
new RegExp('^(?:/x(a+)+b)$').test(`/x${'a'.repeat(22)}c`);
console.log(`/x(a+)+b on     22 characters: RegExp ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1)} ms (doubles per character)`);
