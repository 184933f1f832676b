// A burst against an HTTP/1 listener on loopback, run as its own process so that its clients do not share the
// measured engine's event loop: `busy` keep-alive connections each sending a request as soon as the previous one
// was answered, then, once they run, `fresh` new connections at once, each sending one request. Prints
// {max, done}: the slowest first answer of the new ones (ms) and how many had one within 20 s.
// Used by scripts/bench/accept-pacer.mjs and test/proxy/soak-limits.test.ts.
export const BURST_CHILD = `
const net = require('net');
const [port, busy, fresh] = process.argv.slice(1).map(Number);
const REQ = 'GET /x HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n';
let running = true;
for (let i = 0; i < busy; i++) {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  s.on('data', () => { if (running) s.write(REQ); });
  s.write(REQ);
}
setTimeout(() => {
  const t0 = Date.now();
  let done = 0, max = 0;
  for (let i = 0; i < fresh; i++) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.once('data', () => {
      max = Math.max(max, Date.now() - t0);
      if (++done === fresh) { running = false; console.log(JSON.stringify({ max, done })); process.exit(0); }
    });
    s.write(REQ);
  }
  setTimeout(() => { console.log(JSON.stringify({ max: Date.now() - t0, done })); process.exit(0); }, 20000);
}, 1500);
`;
