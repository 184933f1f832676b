// The benchmark's backend: an HTTP/1.1 server with one small fixed response, in its own process.
//   node backend.mjs [--kind raw|node] [--port 0] [--size <bytes>]     prints `listening <port>` once it listens
// `raw` (default) answers each request head with a prebuilt keep-alive response straight from a net
// server: it costs a fraction of Node's http module, so the core it shares with the load generator
// limits the proxies under test as little as possible. It reads Content-Length bodies and honours
// `Connection: close`; chunked request bodies are not expected (the benchmark only sends GETs) and get
// a 501 and a closed connection. `node` is the same response from node:http, for comparison.
import http from 'node:http';
import net from 'node:net';
import { parseOptions } from '../../lib/bench.mjs';

const { kind, port, size } = parseOptions(
  'scripts/bench/gateway/backend.mjs',
  'The benchmark backend: one small fixed HTTP/1.1 response; prints `listening <port>`.',
  {
    kind: { type: 'string', oneOf: ['raw', 'node'], default: 'raw', help: 'a prebuilt response from a net server, or node:http' },
    port: { type: 'integer', min: 0, default: 0, help: 'the port (0: any)' },
    size: { type: 'number', min: 0, help: 'a body of exactly this many bytes' },
  },
);
// --size: a body of exactly that many bytes (footprint.mjs measures with 1 KB responses).
const BODY = size === undefined ? 'hello from the benchmark backend\n' : 'x'.repeat(Math.max(0, Number(size) - 1)) + (Number(size) > 0 ? '\n' : '');
const HEAD = `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\n`;
const KEEP = Buffer.from(`${HEAD}\r\n${BODY}`);
const CLOSE = Buffer.from(`${HEAD}connection: close\r\n\r\n${BODY}`);
const NOT_IMPLEMENTED = Buffer.from('HTTP/1.1 501 Not Implemented\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');

function rawConnection(socket) {
  socket.setNoDelay(true);
  let pending = null; // bytes of an incomplete request head
  let skip = 0; // body bytes of the current request still to discard
  socket.on('data', (chunk) => {
    let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = null;
    let off = 0;
    const out = [];
    let close = false;
    while (off < buf.length && !close) {
      if (skip > 0) {
        const n = Math.min(skip, buf.length - off);
        skip -= n;
        off += n;
        continue;
      }
      const end = buf.indexOf(CRLFCRLF, off);
      if (end < 0) {
        pending = buf.subarray(off);
        if (pending.length > 64 * 1024) socket.destroy();
        break;
      }
      const head = buf.toString('latin1', off, end).toLowerCase();
      off = end + 4;
      const cl = /\r\ncontent-length:\s*(\d+)/.exec(head);
      if (cl) skip = Number(cl[1]);
      if (/\r\ntransfer-encoding:/.test(head)) {
        out.push(NOT_IMPLEMENTED);
        close = true;
        break;
      }
      close = /\r\nconnection:[^\r]*\bclose\b/.test(head) || head.includes(' http/1.0\r\n');
      out.push(close ? CLOSE : KEEP);
    }
    if (out.length === 1) socket.write(out[0]);
    else if (out.length > 1) socket.write(Buffer.concat(out));
    if (close) socket.end();
  });
  socket.on('error', () => socket.destroy());
}

const server =
  kind === 'node'
    ? http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(BODY) });
        res.end(BODY);
      })
    : net.createServer(rawConnection);
if (kind !== 'node' && kind !== 'raw') throw new Error(`--kind: expected raw or node, got ${kind}`);
// A backlog as large as the kernel allows (it caps it at net.core.somaxconn): with Node's default of 511, a gateway
// opening hundreds of upstream connections at once overflows the accept queue and waits out SYN retries (1 s, 3 s, 7 s).
server.listen({ port, host: '127.0.0.1', backlog: 65535 }, () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
