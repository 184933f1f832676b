// Pod network namespaces on one machine, as a mesh runs them: each pod has its own network namespace, the
// capture rules of `pilot-agent mesh-iptables` (Istio's init container), an agent + engine running as uid 1337
// and an application running as another user; pilot-discovery runs in a "world" namespace that routes between
// the pods. The e2e tests (test/e2e/*), `npm run demo -- mesh` and scripts/bench/mesh.mjs all build their
// topology from here, so there is one way to start a sidecar outside a cluster.
//
// Plain ESM with no dependency: tests import it through tsx, the demo is bundled with it. Everything made
// (namespaces, processes, resolver files) is registered with an owner's `teardown(fn)`: a tap test, or a
// `Cleanup` that a script runs on exit. Names carry random suffixes so parallel runs never meet.
// Needs root, iproute2, iptables and util-linux's setpriv (openssl for `opensslIdentities`).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Exited, waitFor } from './wait.mjs';

/** The proxy's uid, which the capture rules exempt (Istio's default). */
export const PROXY_UID = 1337;
/** Applications run as this uid: their connections are captured. */
export const APP_UID = 4321;
/** Istio's injected init container: `istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -b '*' -d 15090,15021,15020`. */
export const CAPTURE_ARGS = [
  '-p',
  '15001',
  '-z',
  '15006',
  '-u',
  String(PROXY_UID),
  '-m',
  'REDIRECT',
  '-i',
  '*',
  '-x',
  '',
  '-b',
  '*',
  '-d',
  '15090,15021,15020',
];
/** The same in TPROXY mode (`sidecar.istio.io/interceptionMode: TPROXY`): `-m TPROXY`, the rest unchanged. */
export const TPROXY_CAPTURE_ARGS = CAPTURE_ARGS.map((a) => (a === 'REDIRECT' ? 'TPROXY' : a));
export const CHILD_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };

/** Why network namespaces cannot be made here, or false. */
export function netnsUnavailable() {
  if (process.getuid?.() !== 0) return 'needs root to create network namespaces';
  if (spawnSync('ip', ['-V']).status !== 0) return 'iproute2 (ip) is not installed';
  return false;
}

/** Why captured pods cannot run here, or false. */
export function meshPodsUnavailable({ openssl = false } = {}) {
  return (
    netnsUnavailable() ||
    (spawnSync('iptables', ['--version']).status !== 0 ? 'iptables is not installed' : false) ||
    (spawnSync('setpriv', ['--version']).status !== 0 ? 'setpriv (util-linux) is not installed' : false) ||
    (openssl && spawnSync('openssl', ['version']).status !== 0 ? 'openssl is not installed' : false)
  );
}

export function sh(args, o = {}) {
  const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8', input: o.input, timeout: o.timeoutMs ?? 30_000, env: o.env ?? CHILD_ENV });
  return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

export function must(args, o = {}) {
  const r = sh(args, o);
  if (r.code !== 0) throw new Error(`${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** A teardown list for scripts, run last-in first-out (processes before the namespaces they live in). */
export class Cleanup {
  #fns = [];
  teardown(fn) {
    this.#fns.push(fn);
  }
  async run() {
    for (let fn = this.#fns.pop(); fn; fn = this.#fns.pop()) {
      try {
        await fn();
      } catch (e) {
        process.stderr.write(`cleanup: ${e?.message ?? e}\n`);
      }
    }
  }
}

/**
 * A new namespace `<prefix>-<random>` with loopback up; deleted (with every process left in it) in teardown.
 * `resolvConf` is mounted over /etc/resolv.conf for programs started with `ip netns exec` (iproute2 does so
 * for /etc/netns/<name>/).
 */
export function createNetns(owner, prefix = 'mesh-t', o = {}) {
  const ns = `${prefix}-${randomBytes(4).toString('hex')}`;
  must(['ip', 'netns', 'add', ns]);
  owner.teardown(() => {
    // processes still inside keep it alive otherwise
    for (const pid of sh(['ip', 'netns', 'pids', ns]).stdout.split(/\s+/).filter(Boolean)) sh(['kill', '-9', pid]);
    sh(['ip', 'netns', 'del', ns]);
  });
  must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  if (o.resolvConf !== undefined) {
    const etc = path.join('/etc/netns', ns);
    fs.mkdirSync(etc, { recursive: true });
    owner.teardown(() => fs.rmSync(etc, { recursive: true, force: true }));
    fs.writeFileSync(path.join(etc, 'resolv.conf'), o.resolvConf);
  }
  return ns;
}

/** Whether a namespace of that name exists. */
export function netnsExists(ns) {
  return sh(['ip', 'netns', 'list'])
    .stdout.split('\n')
    .some((l) => l.split(' ')[0] === ns);
}

/**
 * Joins `pod` to `world` with a veth pair: `<hostIf>` with `hostIp` in the world, `eth0` with `podIp` in the pod,
 * the pod's default route through the world (which forwards between its pods).
 */
export function linkPod(world, pod, { hostIf, hostIp, podIp, prefixLength = 24 }) {
  must(['ip', '-n', world, 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod]);
  must(['ip', '-n', world, 'addr', 'add', `${hostIp}/${prefixLength}`, 'dev', hostIf]);
  must(['ip', '-n', pod, 'addr', 'add', `${podIp}/${prefixLength}`, 'dev', 'eth0']);
  must(['ip', '-n', world, 'link', 'set', hostIf, 'up']);
  must(['ip', '-n', pod, 'link', 'set', 'eth0', 'up']);
  must(['ip', '-n', pod, 'route', 'add', 'default', 'via', hostIp]);
  must(['ip', 'netns', 'exec', world, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
}

/** `argv` run as another user (setpriv: no shell, no PAM). */
export function asUser(uid, argv) {
  return ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', ...argv];
}

/** Runs a program inside the namespace (`ip netns exec` execs it, so the child's pid is the program's). */
export function spawnIn(ns, file, args, o = {}) {
  return spawn('ip', ['netns', 'exec', ns, file, ...args], { env: o.env ?? CHILD_ENV, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Starts `argv` in a namespace and waits until its output matches `ready`; killed in teardown. Fails at once
 * when the program exits first. `onOutput` sees every chunk (the demo prefixes and prints them).
 */
export async function startIn(owner, ns, argv, o) {
  const child = spawnIn(ns, argv[0], argv.slice(1), { env: o.env, cwd: o.cwd });
  let out = '';
  for (const s of [child.stdout, child.stderr]) {
    s.on('data', (d) => {
      out += d;
      o.onOutput?.(String(d));
    });
  }
  const exited = new Promise((r) => child.once('exit', () => r()));
  owner.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(o.stopSignal ?? 'SIGKILL');
      const force = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(force);
    }
  });
  const deadline = Date.now() + (o.timeoutMs ?? 30_000);
  while (!o.ready.test(out)) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${o.what} exited ${child.exitCode ?? child.signalCode}:\n${out}`);
    if (Date.now() > deadline) throw new Error(`${o.what} did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, out: () => out };
}

/** An HTTP GET made from inside the namespace (a node child there), as {status, body}. */
export function httpGetIn(ns, url, headers = {}) {
  const script = `fetch(${JSON.stringify(url)}, { headers: ${JSON.stringify(headers)} }).then(async (r) => process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() })), (e) => { process.stderr.write(String(e)); process.exit(1); })`;
  const r = sh(['ip', 'netns', 'exec', ns, process.execPath, '-e', script]);
  if (r.code !== 0) return { status: 0, body: r.stderr };
  return JSON.parse(r.stdout);
}

/**
 * Istio's capture rules in the pod (`mesh-iptables`); `dns` adds the DNS redirect (MESH_META_DNS_CAPTURE),
 * `tproxy` captures inbound with TPROXY instead of REDIRECT.
 */
export function capture(ns, dist, { dns = false, tproxy = false } = {}) {
  const args = tproxy ? TPROXY_CAPTURE_ARGS : CAPTURE_ARGS;
  return sh(['ip', 'netns', 'exec', ns, path.join(dist, 'pilot-agent'), 'mesh-iptables', ...args], {
    env: dns ? { ...CHILD_ENV, MESH_META_DNS_CAPTURE: 'true' } : CHILD_ENV,
  });
}

/** pilot-discovery in `ns` serving `configDir`, xDS on `grpcAddr`, its other ports on the namespace's loopback. */
export function startDiscovery(owner, { ns, dist, configDir, grpcAddr, home, env = {}, onOutput, stopSignal, meshConfig }) {
  const meshArgs = [];
  if (meshConfig !== undefined) {
    fs.writeFileSync(path.join(home, 'mesh-config.yaml'), meshConfig);
    meshArgs.push('--meshConfig', path.join(home, 'mesh-config.yaml'));
  }
  const host = grpcAddr.slice(0, grpcAddr.lastIndexOf(':'));
  return startIn(
    owner,
    ns,
    [
      path.join(dist, 'pilot-discovery'),
      'discovery',
      '--configDir',
      configDir,
      '--grpcAddr',
      grpcAddr,
      '--httpAddr',
      '127.0.0.1:18080',
      '--monitoringAddr',
      '127.0.0.1:15014',
      '--httpsAddr',
      '127.0.0.1:15017',
      '--secureGRPCAddr',
      '127.0.0.1:15012',
      '--ctrlz_address',
      '127.0.0.1',
      '--ctrlz_port',
      '9876',
      '--shutdownDuration',
      '1s',
      ...meshArgs,
    ],
    {
      ready: new RegExp(`listening on ${host === '0.0.0.0' ? '.*' : host.replace(/\./g, '\\.')}:${grpcAddr.slice(grpcAddr.lastIndexOf(':') + 1)}`),
      what: 'pilot-discovery',
      env: { ...CHILD_ENV, HOME: home, PILOT_DEBOUNCE_AFTER: '10ms', ...env },
      onOutput,
      stopSignal,
    },
  );
}

/**
 * The sidecar of a pod: `pilot-agent proxy sidecar` as uid 1337 in `home` (its working directory, owned by
 * 1337), with the pod's metadata as the injector sets it. `certs` ({cert, key, root} PEM) are mounted as
 * ./etc/certs files (FILE_MOUNTED_CERTS); without them the agent has no workload certificate. Resolves once
 * the agent printed something; `waitSidecarReady` waits for its readiness. `command` replaces `<dist>/pilot-agent`
 * (e.g. `node --cpu-prof dist/mesh.cjs pilot-agent` to profile it). `tproxy` runs it as Istio's injector does for
 * `sidecar.istio.io/interceptionMode: TPROXY`: uid 0 in group 1337 (the capture rules exempt the group; IP_TRANSPARENT
 * and SO_MARK need the NET_ADMIN capability), with the interception mode in its metadata. `binaryPath`: a real Envoy
 * the agent runs as its data plane instead of its engine. `router`: `proxy router`, a gateway.
 */
export function startSidecar(
  owner,
  {
    ns,
    dist,
    home,
    discoveryAddress,
    pod,
    certs,
    allStats = false,
    env = {},
    onOutput,
    stopSignal,
    command,
    concurrency,
    tproxy = false,
    binaryPath,
    router = false,
  },
) {
  fs.mkdirSync(home, { recursive: true });
  fs.writeFileSync(path.join(home, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${discoveryAddress}\n  controlPlaneAuthPolicy: NONE\n`);
  if (certs) {
    fs.mkdirSync(path.join(home, 'etc', 'certs'), { recursive: true });
    fs.writeFileSync(path.join(home, 'etc/certs/cert-chain.pem'), certs.cert);
    fs.writeFileSync(path.join(home, 'etc/certs/key.pem'), certs.key);
    fs.writeFileSync(path.join(home, 'etc/certs/root-cert.pem'), certs.root);
  }
  must(['chown', '-R', `${PROXY_UID}:${PROXY_UID}`, home]);
  const proxyConfig = {
    binaryPath: binaryPath ?? path.join(home, 'no-envoy-here'),
    terminationDrainDuration: '1s',
    ...(concurrency !== undefined ? { concurrency } : {}),
  };
  // Istio keeps only a few stats unless told otherwise; tests read cluster, listener and chain stats
  if (allStats) proxyConfig.proxyStatsMatcher = { inclusionRegexps: ['.*'] };
  const argv = [...(command ?? [path.join(dist, 'pilot-agent')]), 'proxy', router ? 'router' : 'sidecar', '--meshConfig', 'mesh.yaml'];
  return startIn(owner, ns, tproxy ? ['setpriv', '--reuid=0', `--regid=${PROXY_UID}`, '--clear-groups', ...argv] : asUser(PROXY_UID, argv), {
    ready: /./,
    what: `pilot-agent ${pod.name}`,
    cwd: home,
    onOutput,
    stopSignal,
    env: {
      ...CHILD_ENV,
      HOME: home,
      POD_NAME: pod.name,
      POD_NAMESPACE: pod.namespace,
      ...(pod.serviceAccount ? { SERVICE_ACCOUNT: pod.serviceAccount } : {}),
      INSTANCE_IP: pod.ip,
      ...(certs ? { FILE_MOUNTED_CERTS: 'true' } : {}),
      ...(pod.labels ? { MESH_METAJSON_LABELS: JSON.stringify(pod.labels) } : {}),
      PROXY_CONFIG: JSON.stringify(proxyConfig),
      ...(tproxy ? { MESH_META_INTERCEPTION_MODE: 'TPROXY' } : {}),
      ...env,
    },
  });
}

/** Waits for the sidecar's readiness probe (:15021/healthz/ready inside the pod). */
export function waitSidecarReady(ns, timeoutMs, why) {
  return waitFor(why, () => httpGetIn(ns, 'http://127.0.0.1:15021/healthz/ready').status === 200, { timeoutMs, intervalMs: 50 });
}

// The workload and the plain client of a pod, run with `node -e` so they need no file (the bundled demo has
// none beside it). Only `require` and `process` inside: the text is all a child gets.
function podProgram() {
  const http = require('node:http');
  const http2 = require('node:http2');
  const net = require('node:net');
  const [mode, a1, a2, a3] = process.argv.slice(1);
  // gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md): each message is a 1-byte compressed flag, a 4-byte
  // big-endian length and the message; the status goes in the trailers (grpc-status, grpc-message)
  const grpcFrame = (msg) => {
    const b = Buffer.alloc(5 + msg.length);
    b.writeUInt32BE(msg.length, 1);
    msg.copy(b, 5);
    return b;
  };
  const grpcMessages = (buf) => {
    const out = [];
    for (let i = 0; i + 5 <= buf.length;) {
      const n = buf.readUInt32BE(i + 1);
      out.push(buf.subarray(i + 5, i + 5 + n).toString());
      i += 5 + n;
    }
    return out;
  };
  const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  if (mode === 'app') {
    // HTTP on :8080 echoing what it saw (the caller's identity as the sidecar forwards it), TCP echo on :9000,
    // gRPC (HTTP/2 without TLS, as a sidecar forwards it) on :7070
    const name = a1;
    const ports = 3;
    let n = 0;
    const me = { server: name };
    // the differential harness's steering (test/helpers/differential.ts): `x-echo-fail: <n>` answers 503 to the
    // first n requests with the same `x-echo-key`; `x-echo-headers` adds the method and every request header
    const attempts = new Map();
    // what Istio asks an application to pass on so that its hops join one trace (istio.io "Distributed Tracing")
    const traceHeaders = [
      'x-request-id',
      'x-b3-traceid',
      'x-b3-spanid',
      'x-b3-parentspanid',
      'x-b3-sampled',
      'x-b3-flags',
      'b3',
      'traceparent',
      'tracestate',
    ];
    http
      .createServer((req, res) => {
        // /status/<code> answers that code; /call/<host>/<rest> calls http://<host>:8080/<rest> (through the
        // sidecar: the app is captured) with the trace headers and answers what it got
        const status = /^\/status\/(\d{3})$/.exec(req.url ?? '');
        const call = /^\/call\/([^/]+)(\/.*)?$/.exec(req.url ?? '');
        if (call) {
          const headers = { host: call[1] };
          for (const h of traceHeaders) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
          const up = http.request({ host: call[1], port: 8080, path: call[2] || '/', headers, agent: false }, (r) => {
            res.writeHead(r.statusCode ?? 502, { 'content-type': r.headers['content-type'] ?? 'text/plain' });
            r.pipe(res);
          });
          up.setTimeout(8000, () => up.destroy(new Error('timeout')));
          up.on('error', (e) => {
            res.writeHead(502);
            res.end(`${name} could not call ${call[1]}: ${e.code ?? e.message}`);
          });
          up.end();
          return;
        }
        if (status) res.statusCode = Number(status[1]);
        const key = String(req.headers['x-echo-key'] ?? '');
        attempts.set(key, (attempts.get(key) ?? 0) + 1);
        if (attempts.get(key) <= Number(req.headers['x-echo-fail'] ?? 0)) res.statusCode = 503;
        const all = req.headers['x-echo-headers'] !== undefined ? { method: req.method, headers: req.headers } : {};
        res.setHeader('content-type', 'application/json');
        // `x-echo-delay-ms: <ms>` answers that late (time-outs at the caller's sidecar)
        setTimeout(
          () =>
            res.end(
              JSON.stringify({
                ...me,
                path: req.url,
                host: req.headers.host ?? '',
                xfcc: req.headers['x-forwarded-client-cert'] ?? null,
                peer: req.socket.remoteAddress,
                ...all,
              }),
            ),
          Number(req.headers['x-echo-delay-ms'] ?? 0),
        );
      })
      .listen(Number(a2 || 8080), '0.0.0.0', () => ++n === ports && out({ listening: name }));
    net
      .createServer((c) => {
        c.on('error', () => undefined);
        // `peer` asks who the connection came from (TPROXY source preservation); anything else is echoed
        c.on('data', (d) => c.write(String(d) === 'peer\n' ? `${name} peer ${c.remoteAddress}\n` : `${name} echo ${d}`));
      })
      .listen(Number(a3 || 9000), '0.0.0.0', () => ++n === ports && out({ listening: name }));
    // HTTP/2 without TLS, as a sidecar forwards it. gRPC (content-type application/grpc), service `mesh.test.Echo`:
    // Echo answers `<name>: <message>` with status 0 (OK); Stream answers each message as it arrives (so a proxy
    // that waited for the whole request would stall the caller), then status 0; Deny answers trailers-only (one
    // HEADERS frame) with status 7; any other method answers no message and status 5 (NOT_FOUND) in the trailers,
    // still with HTTP status 200. Any other request gets the HTTP server's JSON, `:authority` as its host.
    // `x-echo-delay-ms` delays the response headers.
    const grpc = http2.createServer();
    grpc.on('stream', (stream, headers) => {
      const body = [];
      const method = String(headers[':path']).replace('/mesh.test.Echo/', '');
      const delay = Number(headers['x-echo-delay-ms'] ?? 0);
      const isGrpc = String(headers['content-type'] ?? '').startsWith('application/grpc');
      stream.on('error', () => undefined);
      if (isGrpc && method === 'Stream') {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        let pending = Buffer.alloc(0);
        stream.on('data', (d) => {
          pending = Buffer.concat([pending, d]);
          while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
            const n = pending.readUInt32BE(1);
            stream.write(grpcFrame(Buffer.from(`${name}: ${pending.subarray(5, 5 + n)}`)));
            pending = pending.subarray(5 + n);
          }
        });
        stream.on('end', () => stream.end());
        return;
      }
      stream.on('data', (d) => body.push(d));
      stream.on('end', () =>
        setTimeout(() => {
          if (stream.destroyed) return;
          if (!isGrpc) {
            const all = headers['x-echo-headers'] !== undefined ? { method: headers[':method'], headers: { ...headers } } : {};
            for (const k of Object.keys(all.headers ?? {})) if (k.startsWith(':')) delete all.headers[k];
            stream.respond({ ':status': 200, 'content-type': 'application/json' });
            const xfcc = headers['x-forwarded-client-cert'] ?? null;
            const peer = stream.session?.socket?.remoteAddress;
            stream.end(JSON.stringify({ ...me, path: headers[':path'], host: headers[':authority'] ?? '', xfcc, peer, ...all }));
            return;
          }
          if (method === 'Deny') {
            stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '7', 'grpc-message': 'denied' }, { endStream: true });
            return;
          }
          const [msg = ''] = grpcMessages(Buffer.concat(body));
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.on('wantTrailers', () =>
            stream.sendTrailers(method === 'Echo' ? { 'grpc-status': '0' } : { 'grpc-status': '5', 'grpc-message': `${name} has no ${msg}` }),
          );
          if (method === 'Echo') stream.write(grpcFrame(Buffer.from(`${name}: ${msg}`)));
          stream.end();
        }, delay),
      );
    });
    grpc.listen(Number(process.argv[5] || 7070), '0.0.0.0', () => ++n === ports && out({ listening: name }));
  } else if (mode === 'grpc') {
    // one unary call (method Echo or Fail, the third argument) with the message `ping` → {"status", "grpcStatus",
    // "messages"} or {"error"}; the fourth argument is the :authority
    const client = http2.connect(`http://${a1}:${a2}`);
    const finish = (o) => {
      out(o);
      client.close();
    };
    client.on('error', (e) => finish({ error: e.code ?? e.message }));
    const req = client.request({
      ':method': 'POST',
      ':path': `/mesh.test.Echo/${a3 || 'Echo'}`,
      ':authority': process.argv[5] || `${a1}:${a2}`,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = 0;
    let grpcStatus;
    const body = [];
    req.setTimeout(8000, () => req.close(http2.constants.NGHTTP2_CANCEL));
    req.on('response', (h) => {
      status = h[':status'];
      if (h['grpc-status'] !== undefined) grpcStatus = h['grpc-status'];
    });
    req.on('trailers', (t) => (grpcStatus = t['grpc-status']));
    req.on('data', (d) => body.push(d));
    req.on('error', (e) => finish({ error: e.code ?? e.message }));
    req.on('end', () => finish({ status, grpcStatus, messages: grpcMessages(Buffer.concat(body)) }));
    req.end(grpcFrame(Buffer.from('ping')));
  } else if (mode === 'h2') {
    // one HTTP/2 exchange (h2c by prior knowledge): the third argument, JSON {authority, path, method, headers,
    // body, grpc: [messages], stream}, says what to send; gRPC messages go one by one, and with `stream` each
    // waits for the answer to the one before → {status, headers, trailers, body | messages} or {error}
    const r = JSON.parse(a3);
    const client = http2.connect(`http://${a1}:${a2}`);
    const finish = (o) => {
      out(o);
      client.close();
    };
    client.on('error', (e) => finish({ error: e.code ?? e.message }));
    const grpcCall = Array.isArray(r.grpc);
    const req = client.request({
      ':method': r.method ?? (grpcCall ? 'POST' : 'GET'),
      ':path': r.path ?? '/',
      ':authority': r.authority ?? `${a1}:${a2}`,
      ...(grpcCall ? { 'content-type': 'application/grpc', te: 'trailers' } : {}),
      ...r.headers,
    });
    let headers = {};
    let trailers;
    const body = [];
    req.setTimeout(8000, () => req.close(http2.constants.NGHTTP2_CANCEL));
    req.on('response', (h) => (headers = { ...h }));
    req.on('trailers', (t) => (trailers = { ...t }));
    const toSend = grpcCall ? [...r.grpc] : [];
    let got = 0;
    req.on('data', (d) => {
      body.push(d);
      const n = grpcMessages(Buffer.concat(body)).length;
      if (r.stream && n > got) {
        got = n;
        if (toSend.length > 0) req.write(grpcFrame(Buffer.from(toSend.shift())));
        if (toSend.length === 0 && !req.writableEnded) req.end();
      }
    });
    req.on('error', (e) => finish({ error: e.code ?? e.message }));
    req.on('end', () => {
      const data = Buffer.concat(body);
      const status = headers[':status'];
      delete headers[':status'];
      finish({ status, headers, trailers, ...(grpcCall ? { messages: grpcMessages(data) } : { body: data.toString() }) });
    });
    if (r.stream) req.write(grpcFrame(Buffer.from(toSend.shift())));
    else {
      for (const m of toSend) req.write(grpcFrame(Buffer.from(m)));
      req.end(r.body);
    }
  } else if (mode === 'http') {
    // one GET (of /hello, or the fourth argument) → {"status", "body"} or {"error"}; a fifth argument, JSON
    // {method, headers}, sets those and adds the response's headers to what is printed
    const a4 = process.argv[5];
    const more = process.argv[6] ? JSON.parse(process.argv[6]) : undefined;
    const headers = { ...(a3 ? { host: a3 } : {}), ...more?.headers };
    const req = http.request({ host: a1, port: Number(a2), method: more?.method ?? 'GET', path: a4 || '/hello', headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => out({ status: res.statusCode, body, ...(more ? { headers: res.headers } : {}) }));
    });
    req.setTimeout(8000, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => out({ error: e.code ?? e.message }));
    req.end();
  } else if (mode === 'tcp') {
    // sends "ping" (or its third argument) → {"line"} or {"closed": true}
    const c = net.connect(Number(a2), a1);
    let d = '';
    let done = false;
    const finish = (o) => {
      if (done) return;
      done = true;
      out(o);
      c.destroy();
    };
    c.setTimeout(8000, () => finish(d ? { line: d.trim() } : { timeout: true }));
    c.on('connect', () => c.write(`${a3 || 'ping'}\n`));
    c.on('data', (x) => {
      d += x;
      if (d.includes('\n')) finish({ line: d.trim() });
    });
    c.on('error', () => finish(d ? { line: d.trim() } : { closed: true }));
    c.on('close', () => finish(d ? { line: d.trim() } : { closed: true }));
  } else {
    process.stderr.write(`unknown mode ${mode}\n`);
    process.exit(2);
  }
}
const POD_PROGRAM = `(${podProgram.toString()})()`;

/**
 * The pod's application as APP_UID: HTTP on `httpPort` (8080) answering JSON {server, path, host, xfcc, peer}
 * (`/status/<code>` with that code; `/call/<host>/<path>` calls <host>:8080/<path> passing the trace headers on;
 * `x-echo-fail: <n>` answers 503 to the first n requests of one `x-echo-key`; `x-echo-headers` adds {method, headers}),
 * TCP on `tcpPort` (9000) echoing lines prefixed with its name (the line `peer` is answered with the caller's address),
 * HTTP/2 on `grpcPort` (7070): gRPC `mesh.test.Echo/Echo` answers `<name>: <message>` (grpc-status 0), `Stream`
 * answers each message as it comes, `Deny` answers trailers-only grpc-status 7, any other method grpc-status 5
 * (NOT_FOUND) and no message; a request that is not gRPC gets the HTTP server's JSON. `x-echo-delay-ms` delays
 * the answer on both HTTP ports.
 */
export function startApp(owner, ns, name, { httpPort = 8080, tcpPort = 9000, grpcPort = 7070 } = {}) {
  return startIn(
    owner,
    ns,
    asUser(APP_UID, [process.execPath, '-e', POD_PROGRAM, 'app', name, String(httpPort), String(tcpPort), String(grpcPort)]),
    {
      ready: /listening/,
      what: `app ${name}`,
    },
  );
}

/**
 * One call of a plain client in `ns` (as APP_UID when `asApp`, so that capture applies), as parsed JSON:
 * `http <host> <port> [Host] [path] [{method, headers}]` → {status, body[, headers]} | {error};
 * `tcp <host> <port> [line]` → {line} | {closed: true};
 * `grpc <host> <port> Echo|Fail [authority]` → {status, grpcStatus, messages} | {error};
 * `h2 <host> <port> <{authority, path, method, headers, body, grpc, stream}>` → {status, headers, trailers, body | messages} | {error}.
 */
export function callIn(ns, asApp, ...args) {
  const argv = [process.execPath, '-e', POD_PROGRAM, ...args];
  return JSON.parse(must(['ip', 'netns', 'exec', ns, ...(asApp ? asUser(APP_UID, argv) : argv)]).trim());
}

/**
 * One workload certificate per SPIFFE id, made with openssl in `dir`, under a throwaway root or under `root`
 * ({cert, key} PEM) when given: scripts cannot load our CA's TypeScript, and tests use it so that at least one
 * identity in a mesh comes from a CA other than ours (a CA bug our engine also accepts would cancel out).
 * Returns {root, certs: {id: {cert, key}}}.
 */
export function opensslIdentities(dir, ids, root) {
  fs.mkdirSync(dir, { recursive: true });
  const f = (n) => path.join(dir, n);
  if (root) {
    fs.writeFileSync(f('root.pem'), root.cert);
    fs.writeFileSync(f('root.key'), root.key, { mode: 0o600 });
  } else {
    must([
      'openssl',
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      f('root.key'),
      '-out',
      f('root.pem'),
      '-days',
      '2',
      '-subj',
      '/O=cluster.local',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  }
  const certs = {};
  ids.forEach((id, i) => {
    const ext = f(`w${i}.ext`);
    fs.writeFileSync(
      ext,
      `subjectAltName=critical,URI:${id}\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=critical,CA:FALSE\n`,
    );
    must([
      'openssl',
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      f(`w${i}.key`),
      '-out',
      f(`w${i}.csr`),
      '-subj',
      '/',
    ]);
    must([
      'openssl',
      'x509',
      '-req',
      '-in',
      f(`w${i}.csr`),
      '-CA',
      f('root.pem'),
      '-CAkey',
      f('root.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      ext,
      '-out',
      f(`w${i}.pem`),
    ]);
    certs[id] = { cert: fs.readFileSync(f(`w${i}.pem`), 'utf8'), key: fs.readFileSync(f(`w${i}.key`), 'utf8') };
  });
  return { root: fs.readFileSync(f('root.pem'), 'utf8'), certs };
}

/** Addresses of `startMesh`'s pods (index i from 1): pod 10.89.i.2, its gateway in the world 10.89.i.1, service VIP 10.89.9.1i. */
export const meshAddr = {
  pod: (i) => `10.89.${i}.2`,
  gateway: (i) => `10.89.${i}.1`,
  vip: (i) => `10.89.9.${10 + i}`,
};
export const spiffeOf = (name) => `spiffe://cluster.local/ns/${name}/sa/${name}`;

/**
 * The registry of `startMesh`: pod `<name>` (namespace and service account `<name>`, label app=<name>) backs
 * the service <name>.<name>.svc.cluster.local on its VIP (HTTP 8080, TCP 9000, gRPC 7070). A meshed pod's workload
 * carries the tlsMode label (auto-mTLS sends it mutual TLS); a bare pod's does not.
 */
export function meshRegistry(pods) {
  return pods
    .map((p, k) => {
      const i = k + 1;
      // a gateway is selected by its labels (Gateway.selector), it backs no service of its own here
      if (p.gateway) return undefined;
      const labels = p.mesh === false ? `{app: ${p.name}}` : `{app: ${p.name}, security.istio.io/tlsMode: istio}`;
      return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${p.name}, namespace: ${p.name}}
spec:
  hosts: [${p.name}.${p.name}.svc.cluster.local]
  addresses: [${meshAddr.vip(i)}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}, {number: 7070, name: grpc, protocol: GRPC}]
  workloadSelector: {labels: {app: ${p.name}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ${p.name}-1, namespace: ${p.name}}
spec:
  address: ${meshAddr.pod(i)}
  serviceAccount: ${p.name}
  labels: ${labels}
`;
    })
    .filter((y) => y !== undefined)
    .join('---\n');
}

/**
 * A whole mesh on this machine: a world namespace running pilot-discovery (xDS on :15010 of every pod's
 * gateway address) and, for each of `pods` ({name, mesh, labels, env}: extra pod labels and sidecar env), a pod namespace `<prefix>-<name>-<random>` with
 * its app; a meshed pod (mesh !== false) also gets capture rules with DNS capture (its resolv.conf names
 * the cluster's search list; `tproxy`: inbound captured in TPROXY mode, see `startSidecar`), a workload certificate (openssl, `opensslIdentities`) and a sidecar;
 * a `gateway` pod gets only its certificate and `pilot-agent proxy router` (no capture, no app). `config`
 * maps file names to YAML served beside the registry (the caller may rewrite them: discovery watches the
 * directory); `meshConfig` is the daemon's mesh config file text (else its defaults). Output of the programs goes to `<dir>/logs/<program>.log`. Resolves when every sidecar is ready.
 * `sidecarCommand(name)` gives the argv that replaces `<dist>/pilot-agent` for that pod's sidecar (profiling).
 */
export async function startMesh(
  owner,
  {
    dist,
    dir,
    pods,
    config = {},
    meshConfig,
    prefix = 'mesh',
    stopSignal,
    timeoutMs = 90_000,
    progress = () => undefined,
    sidecarCommand,
    sidecarConcurrency,
  },
) {
  const configDir = path.join(dir, 'config');
  const logs = path.join(dir, 'logs');
  fs.mkdirSync(configDir, { recursive: true });
  fs.mkdirSync(logs, { recursive: true });
  fs.writeFileSync(path.join(configDir, 'registry.yaml'), meshRegistry(pods));
  for (const [file, yaml] of Object.entries(config)) fs.writeFileSync(path.join(configDir, file), yaml);
  const logTo = (name) => {
    const fd = fs.openSync(path.join(logs, `${name}.log`), 'a');
    let open = true;
    owner.teardown(() => {
      open = false;
      fs.closeSync(fd);
    });
    // a stopped program's last output may arrive after its log is closed
    return (chunk) => open && fs.writeSync(fd, chunk);
  };
  const meshed = pods.filter((p) => p.mesh !== false).map((p) => p.name);
  progress(`making workload certificates for ${meshed.join(', ')}`);
  const identities = opensslIdentities(path.join(dir, 'identities'), meshed.map(spiffeOf));
  meshed.forEach((name) => {
    fs.writeFileSync(path.join(dir, 'identities', `${name}.pem`), identities.certs[spiffeOf(name)].cert);
    fs.writeFileSync(path.join(dir, 'identities', `${name}.key`), identities.certs[spiffeOf(name)].key);
  });

  progress('making network namespaces');
  const world = createNetns(owner, `${prefix}-world`);
  const ns = {};
  pods.forEach((p, k) => {
    const i = k + 1;
    // kube's resolver settings; the agent answers the mesh's names (DNS capture), nothing else is asked
    ns[p.name] = createNetns(owner, `${prefix}-${p.name}`, {
      resolvConf: `nameserver ${meshAddr.gateway(i)}\nsearch ${p.name}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:1 attempts:1\n`,
    });
    linkPod(world, ns[p.name], { hostIf: `veth-${p.name}`, hostIp: meshAddr.gateway(i), podIp: meshAddr.pod(i) });
  });
  progress('starting pilot-discovery');
  const discovery = await startDiscovery(owner, {
    ns: world,
    dist,
    configDir,
    grpcAddr: '0.0.0.0:15010',
    home: dir,
    onOutput: logTo('discovery'),
    stopSignal,
    meshConfig,
  });
  const sidecars = {};
  const apps = {};
  for (const [k, p] of pods.entries()) {
    const i = k + 1;
    progress(`starting pod ${p.name}`);
    if (p.mesh !== false && !p.gateway) {
      const r = capture(ns[p.name], dist, { dns: true, tproxy: p.tproxy === true });
      if (r.code !== 0) throw new Error(`mesh-iptables in ${ns[p.name]} failed (${r.code}): ${r.stderr}`);
    }
    if (!p.gateway) apps[p.name] = await startApp(owner, ns[p.name], p.name);
    if (p.mesh === false) continue;
    sidecars[p.name] = await startSidecar(owner, {
      ns: ns[p.name],
      dist,
      home: path.join(dir, `proxy-${p.name}`),
      discoveryAddress: `${meshAddr.gateway(i)}:15010`,
      pod: {
        name: `${p.name}-1`,
        namespace: p.name,
        serviceAccount: p.name,
        ip: meshAddr.pod(i),
        labels: { app: p.name, ...(p.gateway ? {} : { 'security.istio.io/tlsMode': 'istio' }), ...p.labels },
      },
      certs: { ...identities.certs[spiffeOf(p.name)], root: identities.root },
      env: { ...(p.gateway ? {} : { MESH_META_DNS_CAPTURE: 'true' }), ...p.env },
      router: p.gateway === true,
      onOutput: logTo(`sidecar-${p.name}`),
      stopSignal,
      command: sidecarCommand?.(p.name),
      concurrency: sidecarConcurrency,
      tproxy: p.tproxy === true,
      binaryPath: p.binaryPath,
    });
  }
  for (const name of meshed) {
    progress(`waiting for sidecar ${name}`);
    const agent = sidecars[name].child;
    await waitFor(
      () => `the sidecar of ${name} is not ready:\n${sidecars[name].out().slice(-3000)}\n--- discovery:\n${discovery.out().slice(-3000)}`,
      () => {
        if (agent.exitCode !== null || agent.signalCode !== null)
          throw new Exited(`the sidecar of ${name} exited (${agent.exitCode ?? agent.signalCode}):\n${sidecars[name].out().slice(-3000)}`);
        return httpGetIn(ns[name], 'http://127.0.0.1:15021/healthz/ready').status === 200;
      },
      { timeoutMs, intervalMs: 50 },
    );
  }
  return { world, ns, configDir, identitiesDir: path.join(dir, 'identities'), logs, discovery, sidecars, apps };
}

/** The pids of a pod's proxy (agent and engine: the processes of uid 1337 in its namespace). */
export function proxyPids(ns) {
  return sh(['ip', 'netns', 'pids', ns])
    .stdout.split(/\s+/)
    .filter(Boolean)
    .filter((pid) => {
      try {
        return /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] === String(PROXY_UID);
      } catch {
        return false;
      }
    })
    .map(Number);
}
