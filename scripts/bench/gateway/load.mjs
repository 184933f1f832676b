// One load run with autocannon, in its own process (the benchmark pins it to a core of its own):
//   node load.mjs '{"url":"http://127.0.0.1:8080/","connections":50,"duration":10,"overallRate":0,"warmup":2,"headers":{}}'
// prints one JSON line: completed requests per second, errors, time-outs, non-2xx, and latency percentiles in ms.
// Optional fields: "timeout" (s, autocannon's per-request time-out, default 10). The output also breaks the
// failures down: `connErrors` (errors that are not time-outs: autocannon counts time-outs in `errors` too),
// `errorCodes` (count per error code or message), `statusCodes` (count per status), `errorSeconds` (failures
// per second of the run, to tell a start-up burst from stalls later on), `slowSeconds` (responses slower than
// "slowMs", default 1000, per second of the run in which they were answered), `first` (the first answer on each
// connection: how many, the slowest, and how many took "slowMs" or more — connection set-up, accept queues), and `cpu` (this process's own CPU
// seconds, so a caller can tell the load generator's share of a shared core).
// autocannon's own latency histogram counts whole milliseconds; sub-millisecond figures matter here
// (the goal is < 1 ms added), so each response time is also kept at full precision and the
// percentiles are computed from those.
import autocannon from 'autocannon';

const o = JSON.parse(process.argv[2] ?? '{}');
if (!o.url) throw new Error('load.mjs: a JSON argument with "url" is required');

const errorCodes = {};
const errorSeconds = [];
const slowSeconds = [];
const slowMs = o.slowMs ?? 1000;
let runStart = 0;
function countAt(perSecond) {
  const s = Math.floor((Date.now() - runStart) / 1000);
  perSecond[s] = (perSecond[s] ?? 0) + 1;
}
const failedAt = () => countAt(errorSeconds);
/** Connections that had their first answer, and the first answers' figures. */
const answered = new WeakSet();
const first = { count: 0, max: 0, slow: 0 };

function run(opts, record) {
  return new Promise((resolve, reject) => {
    const inst = autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
    if (record) {
      inst.on('response', (client, status, _bytes, ms) => {
        record(ms);
        if (status < 200 || status > 299) failedAt();
        if (ms >= slowMs) countAt(slowSeconds);
        if (!answered.has(client)) {
          answered.add(client);
          first.count++;
          if (ms > first.max) first.max = ms;
          if (ms >= slowMs) first.slow++;
        }
      });
      inst.on('reqError', (e) => {
        const k = e?.code ?? e?.message ?? String(e);
        errorCodes[k] = (errorCodes[k] ?? 0) + 1;
        failedAt();
      });
    }
  });
}

const base = {
  url: o.url,
  connections: o.connections ?? 50,
  pipelining: 1,
  timeout: o.timeout ?? 10,
  ...(o.overallRate > 0 ? { overallRate: o.overallRate } : {}),
  ...(o.headers ? { headers: o.headers } : {}),
};
if (o.warmup > 0) await run({ ...base, duration: o.warmup });
let latencies = new Float64Array(1 << 16);
let n = 0;
const t0 = process.hrtime.bigint();
runStart = Date.now();
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
    connErrors: result.errors - result.timeouts,
    errorCodes,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([k, v]) => [k, v.count])),
    errorSeconds: Object.fromEntries(errorSeconds.map((n, i) => [i, n]).filter(([, n]) => n)),
    slowSeconds: Object.fromEntries(slowSeconds.map((n, i) => [i, n]).filter(([, n]) => n)),
    first,
    cpu: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    latency: { mean: sum / n, p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: sorted[n - 1] },
  }),
);
