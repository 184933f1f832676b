// `/debug/pprof/` for --profile. Istio serves Go's net/http/pprof there; a Node.js process can give the
// equivalent data in V8's formats instead: a CPU profile (`.cpuprofile`, opened by Chrome DevTools, VS Code
// or speedscope) and a heap snapshot (`.heapsnapshot`). Go-runtime-only profiles answer 404 saying so.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Session } from 'node:inspector/promises';
import { getHeapSnapshot } from 'node:v8';
import { pipeline } from 'node:stream/promises';
import { writeText } from '../../serve/router';

let cpuProfiling = false;

const GO_ONLY = new Set(['goroutine', 'allocs', 'block', 'mutex', 'threadcreate', 'symbol', 'trace']);

const INDEX = `<html>
<head><title>/debug/pprof/</title></head>
<body>
<p>/debug/pprof/ of a Node.js process: the profiles V8 can produce, in V8's formats.</p>
<table>
<tr><td><a href="profile?seconds=30">profile</a></td><td>CPU profile. Query <code>seconds</code> (default 30).
Format: <code>.cpuprofile</code> JSON (Chrome DevTools, VS Code, speedscope).</td></tr>
<tr><td><a href="heap">heap</a></td><td>Heap snapshot. Format: <code>.heapsnapshot</code> JSON (Chrome DevTools
Memory tab). Taking it pauses the process.</td></tr>
<tr><td><a href="cmdline">cmdline</a></td><td>The command line, arguments separated by NUL bytes.</td></tr>
</table>
<p>goroutine, allocs, block, mutex, threadcreate, symbol and trace are Go runtime profiles and are not available.</p>
</body>
</html>
`;

/** Serves everything under `/debug/pprof/`. */
export async function pprofHandler(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const name = url.pathname.slice('/debug/pprof/'.length);
  switch (name) {
    case '':
      writeText(res, 200, INDEX, 'text/html; charset=utf-8');
      return;
    case 'cmdline':
      writeText(res, 200, process.argv.join('\u0000'));
      return;
    case 'profile':
      await cpuProfile(req, res, url);
      return;
    case 'heap':
      res.writeHead(200, {
        'Content-Type': 'application/json',
        'Content-Disposition': 'attachment; filename="heap.heapsnapshot"',
        'X-Content-Type-Options': 'nosniff',
      });
      await pipeline(getHeapSnapshot(), res);
      return;
    default:
      if (GO_ONLY.has(name)) {
        writeText(
          res,
          404,
          `Unknown profile: ${name} is a Go runtime profile; this daemon runs on Node.js. ` +
            `Use /debug/pprof/profile (CPU, .cpuprofile) or /debug/pprof/heap (.heapsnapshot).\n`,
        );
      } else {
        writeText(res, 404, 'Unknown profile\n');
      }
  }
}

/** The route when --profile is off: a 404 that says how to turn it on. */
export function pprofDisabledHandler(_req: IncomingMessage, res: ServerResponse): void {
  writeText(res, 404, 'profiling is off: start pilot-discovery discovery with --profile to serve /debug/pprof/\n');
}

async function cpuProfile(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  // Go's pprof.Profile: a missing, malformed or non-positive `seconds` means 30.
  const raw = url.searchParams.get('seconds') ?? '';
  const parsed = /^\d+$/.test(raw) ? Number(raw) : 0;
  const seconds = parsed > 0 ? parsed : 30;
  if (cpuProfiling) {
    writeText(res, 500, 'Could not enable CPU profiling: cpu profiling already in use\n');
    return;
  }
  cpuProfiling = true;
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    await new Promise<void>((resolve) => {
      // A client that goes away ends the profile early; there is nobody to send it to.
      const onClose = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        req.socket.off('close', onClose);
        resolve();
      }, seconds * 1000);
      req.socket.once('close', onClose);
    });
    const { profile } = await session.post('Profiler.stop');
    if (res.destroyed) return;
    const body = JSON.stringify(profile);
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Content-Disposition': 'attachment; filename="profile.cpuprofile"',
      'X-Content-Type-Options': 'nosniff',
      'Content-Length': Buffer.byteLength(body),
    });
    res.end(body);
  } finally {
    session.disconnect();
    cpuProfiling = false;
  }
}
