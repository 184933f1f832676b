// Network namespaces made and deleted by a test, so programs that bind Istio's fixed ports (15000, 15010,
// 15021, …) run side by side with other tests. Needs root (CI runs as root).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';

export function netnsUnavailable(): string | false {
  if (process.getuid?.() !== 0) return 'needs root to create network namespaces';
  if (spawnSync('ip', ['-V']).status !== 0) return 'iproute2 (ip) is not installed';
  return false;
}

export function sh(args: readonly string[], o: { input?: string; env?: NodeJS.ProcessEnv } = {}): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: 'utf8', input: o.input, timeout: 30_000, env: o.env ?? { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' } });
  return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

export function must(args: readonly string[]): string {
  const r = sh(args);
  if (r.code !== 0) throw new Error(`${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** A new namespace with loopback up; deleted (with everything left in it) in teardown. */
export function createNetns(t: Test, prefix = 'mesh-t'): string {
  const ns = `${prefix}-${randomBytes(4).toString('hex')}`;
  must(['ip', 'netns', 'add', ns]);
  t.teardown(() => {
    // processes still inside keep it alive otherwise
    const pids = sh(['ip', 'netns', 'pids', ns]).stdout.split(/\s+/).filter(Boolean);
    for (const pid of pids) sh(['kill', '-9', pid]);
    sh(['ip', 'netns', 'del', ns]);
  });
  must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  return ns;
}

/** Runs a program inside the namespace (`ip netns exec` execs it, so the child's pid is the program's). */
export function spawnIn(ns: string, file: string, args: readonly string[], o: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ChildProcess {
  return spawn('ip', ['netns', 'exec', ns, file, ...args], { env: o.env ?? { PATH: process.env.PATH }, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** An HTTP GET made from inside the namespace (a node child there), as {status, body}. */
export function httpGetIn(ns: string, url: string, headers: Record<string, string> = {}): { status: number; body: string } {
  const script = `fetch(${JSON.stringify(url)}, { headers: ${JSON.stringify(headers)} }).then(async (r) => process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() })), (e) => { process.stderr.write(String(e)); process.exit(1); })`;
  const r = sh(['ip', 'netns', 'exec', ns, process.execPath, '-e', script]);
  if (r.code !== 0) return { status: 0, body: r.stderr };
  return JSON.parse(r.stdout) as { status: number; body: string };
}

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
