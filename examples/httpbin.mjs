// An httpbin-like sample workload for the demos: GET /headers and /get echo the request as JSON.
//   node examples/httpbin.mjs [port=19090]
import http from 'node:http';

const port = Number(process.argv[2] ?? 19090);
http
  .createServer((req, res) => {
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.replace(/(^|-)(\w)/g, (m) => m.toUpperCase()), String(v)]));
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/headers' || path === '/get') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(path === '/headers' ? { headers } : { headers, url: req.url, method: req.method }, null, 2) + '\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  })
  .listen(port, '127.0.0.1', () => console.log(`httpbin sample listening on 127.0.0.1:${port}`));
