// One load run with autocannon, in its own process (the benchmark pins it to a core of its own):
//   node load.mjs '{"url":"http://127.0.0.1:8080/","connections":50,"duration":10,"overallRate":0,"warmup":2,"headers":{}}'
// prints one JSON line: completed requests per second, errors, non-2xx, and latency percentiles in ms.
// autocannon's own latency histogram counts whole milliseconds; sub-millisecond figures matter here
// (the goal is < 1 ms added), so each response time is also kept at full precision and the
// percentiles are computed from those.
import autocannon from 'autocannon';

const o = JSON.parse(process.argv[2] ?? '{}');
if (!o.url) throw new Error('load.mjs: a JSON argument with "url" is required');

function run(opts, record) {
  return new Promise((resolve, reject) => {
    const inst = autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
    if (record) inst.on('response', (_client, _status, _bytes, ms) => record(ms));
  });
}

const base = { url: o.url, connections: o.connections ?? 50, pipelining: 1, timeout: 10, ...(o.overallRate > 0 ? { overallRate: o.overallRate } : {}), ...(o.headers ? { headers: o.headers } : {}) };
if (o.warmup > 0) await run({ ...base, duration: o.warmup });
let latencies = new Float64Array(1 << 16);
let n = 0;
const t0 = process.hrtime.bigint();
const result = await run({ ...base, duration: o.duration ?? 10 }, (ms) => {
  if (n === latencies.length) {
    const grown = new Float64Array(latencies.length * 2);
    grown.set(latencies);
    latencies = grown;
  }
  latencies[n++] = ms;
});
const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
const sorted = latencies.subarray(0, n).sort();
const q = (p) => (n === 0 ? NaN : sorted[Math.min(n - 1, Math.ceil(p * n) - 1)]);
let sum = 0;
for (let i = 0; i < n; i++) sum += sorted[i];
console.log(
  JSON.stringify({
    requests: n,
    seconds: elapsed,
    rps: result.requests.total / result.duration,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    latency: { mean: sum / n, p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: sorted[n - 1] },
  }),
);
