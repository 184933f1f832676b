// The benchmarks' open-loop load generator (scripts/lib/loadgen.go through scripts/lib/loadgen.mjs) against a server
// in this process. What is checked is the method, as wrk2 and HdrHistogram's "corrected" latency define it: requests
// leave on the schedule (rate × duration of them, whatever the answers do) and a request held back by a stalled
// answer counts from when it was due, so one stall shows in every request it delayed (a closed-loop generator would
// report the one slow answer only: coordinated omission). Needs a Go toolchain to build the generator once.
import net from 'node:net';
import t from 'tap';
import { loadgenBinary, loadgenMissing, runLoadgen } from '../../scripts/lib/loadgen.mjs';

/** A keep-alive HTTP/1.1 server answering request n (from 1) with `answer(n)`; `hold(n)` ms before answering. */
async function server(answer: (n: number) => string, hold: (n: number) => number = () => 0) {
  let n = 0;
  const srv = net.createServer((s) => {
    s.setNoDelay(true);
    let buf = '';
    let chain = Promise.resolve();
    s.on('data', (d) => {
      buf += d.toString('latin1');
      let end;
      while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
        buf = buf.slice(end + 4);
        const i = ++n;
        const wait = hold(i);
        // answers on one connection leave in order, each after its own hold
        chain = chain.then(async () => {
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const text = answer(i);
          s.write(text);
          if (/\r\nconnection: close\r\n/i.test(text)) s.end();
        });
      }
    });
    s.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  return { port, requests: () => n, close: () => new Promise((r) => srv.close(r)) };
}

const OK = 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello';

const missing = loadgenMissing();
t.test('open loop over one connection: a 300 ms stall counts in every request it held back', { skip: missing }, async (t) => {
  const bin = loadgenBinary();
  // 500 rps for 1 s: request 100 (due at 198 ms) is answered 300 ms late; those due meanwhile wait on the one connection
  const s = await server(
    () => OK,
    (n) => (n === 100 ? 300 : 0),
  );
  t.teardown(s.close);
  const r = await runLoadgen(bin, { host: '127.0.0.1', port: s.port, rate: 500, duration: 1, connections: 1, maxConnections: 1 });
  t.equal(r.sent, 500, 'rate × duration requests were sent');
  t.equal(r.ok, 500, 'every one answered 200');
  t.equal(r.errors + r.non2xx + r.unanswered, 0, 'no failures');
  t.equal(r.connections, 1, 'one connection');
  // due in [198, 498] ms: about 150 requests queue behind the stalled one
  t.ok(r.queued >= 100, `requests waited for the busy connection (${r.queued})`);
  // the server's stall is a Node timer, which may fire up to a millisecond early by the generator's clock
  t.ok((r.max ?? 0) >= 299, `the stalled request took its 300 ms (max ${r.max} ms)`);
  // the k-th request due after the stall waits about 300 − 2k ms: the slowest 50 (10 %) all took ≥ 200 ms
  t.ok((r.p90 ?? 0) >= 100, `p90 carries the held-back requests (${r.p90} ms), not only the one slow answer`);
});

t.test('open loop with room to grow: a request finding every connection busy opens another', { skip: missing }, async (t) => {
  const bin = loadgenBinary();
  const s = await server(
    () => OK,
    (n) => (n === 100 ? 300 : 0),
  );
  t.teardown(s.close);
  const r = await runLoadgen(bin, { host: '127.0.0.1', port: s.port, rate: 500, duration: 1, connections: 1, maxConnections: 8 });
  t.equal(r.sent, 500, 'rate × duration requests were sent');
  t.equal(r.ok, 500, 'every one answered 200');
  t.ok(r.connections >= 2 && r.connections <= 8, `a second connection was opened during the stall (${r.connections})`);
  // how many connections a loaded machine needs varies; that a request waits only when none more may open does not
  t.ok(r.queued === 0 || r.connections === 8, `requests waited (${r.queued}) only once all 8 connections were open (${r.connections})`);
  // the server's stall is a Node timer, which may fire up to a millisecond early by the generator's clock
  t.ok((r.max ?? 0) >= 299, `the stalled request took its 300 ms (max ${r.max} ms)`);
  t.equal(s.requests(), 500, 'the server saw each request once');
});

t.test('responses are read as far as their framing: length, chunked with trailers, no body, connection close', { skip: missing }, async (t) => {
  const bin = loadgenBinary();
  const s = await server(
    (n) =>
      [
        OK,
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n',
        'HTTP/1.1 204 No Content\r\n\r\n',
        'HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\nconnection: close\r\n\r\nno\n',
      ][n % 4]!,
  );
  t.teardown(s.close);
  const r = await runLoadgen(bin, {
    host: '127.0.0.1',
    port: s.port,
    path: '/x',
    rate: 400,
    duration: 1,
    warmup: 0.5,
    connections: 2,
    maxConnections: 16,
  });
  t.equal(r.sent, 400, 'rate × duration requests measured (the warm-up apart)');
  t.equal(r.errors, 0, 'no framing errors');
  t.equal(r.unanswered, 0, 'every request answered');
  t.equal(r.non2xx, 100, 'one answer in four was the 404');
  t.equal(r.ok, 300, 'the others were 2xx');
  t.equal(s.requests(), 600, 'the warm-up and the measured part on the same schedule');
});
