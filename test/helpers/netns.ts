// Network namespaces made and deleted by a test, so programs that bind Istio's fixed ports (15000, 15010,
// 15021, …) run side by side with other tests. Needs root (CI runs as root).
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import { spawnIn } from '../../scripts/lib/mesh-pods.mjs';

// one implementation for tests, the demo and the benchmark
export { createNetns, httpGetIn, must, netnsUnavailable, sh, spawnIn } from '../../scripts/lib/mesh-pods.mjs';

/**
 * Makes 127.0.0.1:<port> of the host reachable as 127.0.0.1:<port> inside the namespace (for a program
 * there that must reach a server of the test, such as the API server of ../shared/kube): a forwarder in
 * the namespace hands each connection over a unix socket (file system, not network) to the host side.
 */
export async function forwardIntoNetns(t: Test, ns: string, port: number): Promise<void> {
  const net = await import('node:net');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const sock = path.join(tmpdir(), `mesh-fwd-${randomBytes(4).toString('hex')}.sock`);
  const server = net.createServer((c) => {
    const up = net.connect(port, '127.0.0.1');
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  });
  await new Promise<void>((r) => server.listen(sock, r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const script = `const net=require('net');net.createServer((c)=>{const u=net.connect(${JSON.stringify(sock)});c.pipe(u).pipe(c);c.on('error',()=>u.destroy());u.on('error',()=>c.destroy())}).listen(${port},'127.0.0.1',()=>process.stdout.write('READY\\n'))`;
  const child = spawnIn(ns, process.execPath, ['-e', script]);
  t.teardown(() => void child.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('READY')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`forwarder in ${ns} exited with ${code}`)));
  });
}

/** The command prefix that runs what follows inside `ns` as user `uid` and group `gid`, with no supplementary groups. */
export function asUserIn(ns: string, uid: number | string, gid: number | string = uid): string[] {
  return ['ip', 'netns', 'exec', ns, 'setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups'];
}
