// The keep-alive burst of issue 24, item 5, as one load run in its own process (raw sockets, exact bytes):
//   node burst.mjs '{"url":"http://127.0.0.1:8080/bench","connections":1000,"spacing":2,"batches":5,"timeout":15}'
// Opens `connections` keep-alive connections `spacing` ms apart; each sends `GET <path> HTTP/1.1` as soon as it is
// connected (batch 1, the one that timed out), or with "hold": true once every connection is open, all at once. Once every request of a batch is answered or timed out, every
// connection still open sends its next GET at once (batches 2..`batches`). A request not answered within `timeout` s
// is a time-out (its connection is closed, as autocannon does, and takes no part in later batches). Prints one JSON
// line with the fields ./load.mjs prints (so soak.mjs reports both alike) plus `batches`: per batch, requests,
// time-outs, errors, non-2xx and the slowest answer in ms.
import net from 'node:net';

const o = JSON.parse(process.argv[2] ?? '{}');
if (!o.url) throw new Error('burst.mjs: a JSON argument with "url" is required');
const url = new URL(o.url);
const connections = o.connections ?? 1000;
const spacing = o.spacing ?? 2;
const batchCount = o.batches ?? 5;
const timeoutMs = (o.timeout ?? 15) * 1000;
const slowMs = o.slowMs ?? 1000;
const hold = o.hold === true;
const request = Buffer.from(`GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\nuser-agent: mesh-bench-burst\r\n\r\n`, 'latin1');

const errorCodes = {};
const statusCodes = {};
const errorSeconds = {};
const slowSeconds = {};
const first = { count: 0, max: 0, slow: 0 };
const latencies = [];
let runStart = 0;
const countAt = (perSecond) => {
  const s = Math.floor((Date.now() - runStart) / 1000);
  perSecond[s] = (perSecond[s] ?? 0) + 1;
};

/** Length of one complete response at the start of `b` (content-length or chunked), or -1 when incomplete. */
function responseLength(b) {
  const end = b.indexOf('\r\n\r\n');
  if (end < 0) return -1;
  const head = b.toString('latin1', 0, end).toLowerCase();
  const cl = /\r\ncontent-length:\s*(\d+)/.exec(head);
  if (cl) return b.length >= end + 4 + Number(cl[1]) ? end + 4 + Number(cl[1]) : -1;
  if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) {
    const last = b.indexOf('\r\n0\r\n\r\n', end);
    return last < 0 ? -1 : last + 7;
  }
  return end + 4;
}

/** One keep-alive connection: send() resolves with 'ok', 'non2xx', 'timeout' or 'error'. */
class Conn {
  constructor() {
    this.buf = Buffer.alloc(0);
    this.waiting = undefined;
    this.open = true;
    this.answered = false;
    this.socket = net.connect({ host: url.hostname, port: Number(url.port || 80) });
    this.socket.setNoDelay(true);
    this.socket.on('data', (d) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      const n = responseLength(this.buf);
      if (n < 0 || !this.waiting) return;
      const status = Number(this.buf.toString('latin1', 9, 12));
      this.buf = this.buf.subarray(n);
      this.settle(status >= 200 && status < 300 ? 'ok' : 'non2xx', status);
    });
    const fail = (e) => {
      this.open = false;
      if (this.waiting) {
        const k = e?.code ?? e?.message ?? 'closed';
        errorCodes[k] = (errorCodes[k] ?? 0) + 1;
        this.settle('error');
      }
    };
    this.socket.on('error', fail);
    this.socket.on('close', () => fail({ code: 'closed by the gateway' }));
  }

  settle(kind, status) {
    const w = this.waiting;
    this.waiting = undefined;
    clearTimeout(w.timer);
    const ms = performance.now() - w.start;
    if (status !== undefined) {
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      latencies.push(ms);
      if (ms >= slowMs) countAt(slowSeconds);
      if (!this.answered) {
        this.answered = true;
        first.count++;
        first.max = Math.max(first.max, ms);
        if (ms >= slowMs) first.slow++;
      }
    }
    if (kind !== 'ok') countAt(errorSeconds);
    w.resolve({ kind, ms });
  }

  send() {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.open = false;
        this.settle('timeout');
        this.socket.destroy();
      }, timeoutMs);
      this.waiting = { resolve, timer, start: performance.now() };
      this.socket.write(request);
    });
  }
}

async function batch(sends) {
  const rs = await Promise.all(sends);
  const b = { requests: rs.length, timeouts: 0, errors: 0, non2xx: 0, slowestMs: 0 };
  for (const r of rs) {
    if (r.kind === 'timeout') b.timeouts++;
    else if (r.kind === 'error') b.errors++;
    else if (r.kind === 'non2xx') b.non2xx++;
    if (r.kind !== 'timeout') b.slowestMs = Math.max(b.slowestMs, Math.round(r.ms));
  }
  return b;
}

runStart = Date.now();
const t0 = performance.now();
const conns = [];
const firstSends = [];
for (let i = 0; i < connections; i++) {
  // on a schedule from the start, so a slow turn does not stretch the spacing of all later connections
  const wait = t0 + i * spacing - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const c = new Conn();
  conns.push(c);
  if (!hold) firstSends.push(c.send());
}
if (hold) {
  await Promise.all(conns.map((c) => (c.socket.connecting ? new Promise((r) => c.socket.once('connect', r).once('close', r)) : undefined)));
  for (const c of conns) if (c.open) firstSends.push(c.send());
}
const batches = [await batch(firstSends)];
for (let k = 1; k < batchCount; k++) batches.push(await batch(conns.filter((c) => c.open).map((c) => c.send())));
for (const c of conns) c.socket.destroy();

const seconds = (performance.now() - t0) / 1000;
const sorted = Float64Array.from(latencies).sort();
const q = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN);
const total = (k) => batches.reduce((s, b) => s + b[k], 0);
console.log(
  JSON.stringify({
    requests: sorted.length,
    seconds,
    rps: sorted.length / seconds,
    timeouts: total('timeouts'),
    connErrors: total('errors'),
    non2xx: total('non2xx'),
    errorCodes,
    statusCodes,
    errorSeconds,
    slowSeconds,
    first,
    batches,
    cpu: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    latency: { p50: q(0.5), p90: q(0.9), p99: q(0.99), max: sorted[sorted.length - 1] },
  }),
);
