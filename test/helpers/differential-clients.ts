// The differential harness's protocol clients and backends beyond plain HTTP/1.1 (test/helpers/differential.ts):
// HTTPS with SNI, ALPN and a client certificate; HTTP/2 (h2c by prior knowledge, h2 over TLS by ALPN); gRPC over
// HTTP/2 (a raw client and server, so a trailers-only answer is told from headers + trailers); WebSockets (RFC 6455
// handshake and frames, written out here); raw TCP. Each client turns what it saw into an Observation as
// differential.ts's `observe` does, plus what the protocol adds (the TLS handshake's ALPN and the certificate
// presented, gRPC trailers, WebSocket frames, TCP bytes). Follows no Istio source: what is observed is what Envoy's
// docs say a client or upstream sees (TLS inspector/filter-chain match on SNI, HCM codecs and upgrades, tcp_proxy,
// the gRPC HTTP/2 protocol's trailers-only form).
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import type { Test } from 'tap';
import { openssl } from '../ca/helpers';
import { EC_P256_KEY, signWith } from './openssl';
import { echoHandler, observe, type EchoRecord, type Observation } from './differential';
import { serveForTest } from './ports';
import { REPO } from './spec';

/**
 * The documents of a demo's config directory (`examples/<example>/config`, what `npm run demo -- <example>` serves),
 * with the demo's fixed ports and addresses replaced (`{'18080': '<gateway port>', …}`), as one YAML stream.
 */
export function exampleConfig(example: string, replace: Record<string, string>): string {
  const dir = path.join(REPO, 'examples', example, 'config');
  const docs = fs
    .readdirSync(dir)
    .sort()
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))
    .join('---\n');
  return Object.entries(replace).reduce((s, [from, to]) => s.replaceAll(from, to), docs);
}

/** A started backend: its port and what it saw (HTTP backends; empty for gRPC, WebSocket and TCP backends). */
export interface Backend {
  port: number;
  seen: EchoRecord[];
}

/** A certificate and key as PEM, and the files they were written to (for configs that name files). */
export interface Pem {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

/**
 * A CA (`<name>`, self-signed) or a leaf signed by `ca`, ECDSA P-256, written under `dir`; `san` is an
 * openssl subjectAltName value (`DNS:a.example,URI:spiffe://…`).
 */
export function issue(dir: string, name: string, o: { ca?: Pem; san?: string } = {}): Pem {
  const base = path.join(dir, name);
  const ext = o.san ? ['-addext', `subjectAltName=${o.san}`] : [];
  if (!o.ca) {
    openssl(['req', '-x509', ...EC_P256_KEY, '-subj', `/CN=${name}`, ...ext, '-days', '2', '-keyout', `${base}.key`, '-out', `${base}.crt`]);
  } else {
    openssl(['req', ...EC_P256_KEY, '-subj', `/CN=${name}`, '-keyout', `${base}.key`, '-out', `${base}.csr`]);
    if (o.san) fs.writeFileSync(`${base}.ext`, `subjectAltName=${o.san}\n`);
    openssl([
      ...signWith(`${base}.csr`, o.ca.certFile, o.ca.keyFile),
      '-days',
      '2',
      '-out',
      `${base}.crt`,
      ...(o.san ? ['-extfile', `${base}.ext`] : []),
    ]);
  }
  return {
    cert: fs.readFileSync(`${base}.crt`, 'utf8'),
    key: fs.readFileSync(`${base}.key`, 'utf8'),
    certFile: `${base}.crt`,
    keyFile: `${base}.key`,
  };
}

/** The CN of a certificate's subject, or undefined. */
function cnOf(c: { subject?: Record<string, unknown> } | undefined): string | undefined {
  const cn = c?.subject?.['CN'];
  return typeof cn === 'string' ? cn : undefined;
}

/**
 * The echo backend behind TLS: `cert` presented; with `ca`, a client certificate from it is required. Its
 * answers add `tls`: the SNI it was asked for, the ALPN agreed and the CN of the client's certificate.
 */
export async function startTlsEchoBackend(t: Test, instance: string, o: { cert: Pem; ca?: Pem }): Promise<Backend> {
  const seen: EchoRecord[] = [];
  const server = https.createServer(
    { cert: o.cert.cert, key: o.cert.key, ...(o.ca ? { ca: o.ca.cert, requestCert: true, rejectUnauthorized: true } : {}) },
    echoHandler(instance, seen, (req) => {
      const s = req.socket as tls.TLSSocket & { servername?: string | false };
      return { tls: { sni: s.servername || null, alpn: s.alpnProtocol || null, client: cnOf(s.getPeerCertificate()) ?? null } };
    }),
  );
  const port = await serveForTest(t, server);
  return { port, seen };
}

/** How a client connects: TLS options (SNI, ALPN offered, client certificate, trusted CA) or plaintext. */
export interface ClientTls {
  servername?: string;
  alpn?: string[];
  cert?: Pem;
  ca?: Pem;
}

/** The request a protocol client sends (a DiffRequest's fields that matter to it). */
export interface ClientRequest {
  method?: string;
  path: string;
  host?: string;
  headers?: Record<string, string>;
  body?: string;
}

const tlsOptions = (o: ClientTls): tls.ConnectionOptions => ({
  host: '127.0.0.1',
  // always given: Node would otherwise send the Host header's name as SNI; '' sends none
  servername: o.servername ?? '',
  ...(o.alpn ? { ALPNProtocols: o.alpn } : {}),
  ...(o.cert ? { cert: o.cert.cert, key: o.cert.key } : {}),
  ...(o.ca ? { ca: o.ca.cert } : {}),
  rejectUnauthorized: false,
});

/** What the handshake showed the client: ALPN agreed and the CN of the certificate presented. */
function handshake(s: tls.TLSSocket): Record<string, unknown> {
  return { alpn: s.alpnProtocol || null, server: cnOf(s.getPeerCertificate()) ?? null };
}

const errorOf = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/** One HTTPS/1.1 request on its own TLS connection: the reply observed, plus `tls` (the handshake). */
export function httpsRequest(port: number, r: ClientRequest, o: ClientTls, timeoutMs = 15_000): Promise<Observation> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { host: r.host ?? 'gw.example', ...r.headers };
    if (r.body !== undefined) headers['content-length'] = String(Buffer.byteLength(r.body));
    let shook: Record<string, unknown> | undefined;
    const req = https.request({ ...tlsOptions(o), port, method: r.method ?? 'GET', path: r.path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ ...observe({ status: res.statusCode ?? 0, headers: res.headers, body }), tls: shook }));
      res.on('error', (e) => resolve({ error: errorOf(e), tls: shook }));
    });
    req.on('socket', (s) => (s as tls.TLSSocket).once('secureConnect', () => (shook = handshake(s as tls.TLSSocket))));
    req.on('error', (e) => resolve({ error: errorOf(e), ...(shook ? { tls: shook } : {}) }));
    req.setTimeout(timeoutMs, () => req.destroy(new Error('client time-out')));
    req.end(r.body);
  });
}

/** An HTTP/2 session: h2c by prior knowledge, or h2 over TLS (ALPN `h2` offered unless `o.alpn` says otherwise). */
function h2Session(port: number, o?: ClientTls): http2.ClientHttp2Session {
  if (!o) return http2.connect(`http://127.0.0.1:${port}`);
  return http2.connect(`https://127.0.0.1:${port}`, { ...tlsOptions(o), ALPNProtocols: o.alpn ?? ['h2'] } as http2.SecureClientSessionOptions);
}

/** Response headers without HTTP/2's pseudo-headers (`:status` is the observation's status). */
function plain(h: http2.IncomingHttpHeaders): http.IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(h).filter(([k]) => !k.startsWith(':')));
}

/** One HTTP/2 request on its own session: the reply observed, plus `tls` when over TLS. */
export function h2Request(port: number, r: ClientRequest, o?: ClientTls, timeoutMs = 15_000): Promise<Observation> {
  return new Promise((resolve) => {
    const session = h2Session(port, o);
    let done = false;
    const finish = (v: Observation) => {
      if (done) return;
      done = true;
      session.destroy();
      resolve(o && session.socket ? { ...v, tls: handshake(session.socket as tls.TLSSocket) } : v);
    };
    session.on('error', (e) => finish({ error: errorOf(e) }));
    const headers = { ':method': r.method ?? 'GET', ':path': r.path, ':authority': r.host ?? 'gw.example', ...r.headers };
    const req = session.request(headers, { endStream: r.body === undefined });
    let status = 0;
    let got: http.IncomingHttpHeaders = {};
    let body = '';
    req.on('response', (h) => ((status = Number(h[':status'])), (got = plain(h))));
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => finish(observe({ status, headers: got, body })));
    req.on('error', (e) => finish({ error: errorOf(e) }));
    req.setTimeout(timeoutMs, () => finish({ error: 'client time-out' }));
    if (r.body !== undefined) req.end(r.body);
  });
}

// ---- gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md): a message is a 0 flag byte, a 4-byte length, the bytes.

function grpcFrame(payload: string): Buffer {
  const b = Buffer.from(payload);
  const head = Buffer.alloc(5);
  head.writeUInt32BE(b.length, 1);
  return Buffer.concat([head, b]);
}

function grpcMessages(data: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at + 5 <= data.length;) {
    const n = data.readUInt32BE(at + 1);
    out.push(data.subarray(at + 5, at + 5 + n).toString());
    at += 5 + n;
  }
  return out;
}

/**
 * A gRPC backend (h2c) for the method names of `/test.Echo/<m>`: `Say` answers one message echoing what it
 * received (instance, path, request headers, message) and grpc-status 0; `Fail` answers headers, no message and
 * trailers grpc-status 5 / grpc-message `no such thing`; `Deny` answers trailers-only (one HEADERS frame ending
 * the stream) with grpc-status 7 / grpc-message `denied`.
 */
export async function startGrpcBackend(t: Test, instance: string): Promise<Backend> {
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', () => {
      const method = String(headers[':path']).split('/').pop();
      const base = { ':status': 200, 'content-type': 'application/grpc' };
      if (method === 'Deny') {
        stream.respond({ ...base, 'grpc-status': '7', 'grpc-message': 'denied' }, { endStream: true });
        return;
      }
      stream.respond(base, { waitForTrailers: true });
      stream.on('wantTrailers', () =>
        stream.sendTrailers(method === 'Say' ? { 'grpc-status': '0' } : { 'grpc-status': '5', 'grpc-message': 'no such thing' }),
      );
      if (method === 'Say') {
        const received = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== ':scheme'));
        stream.write(grpcFrame(JSON.stringify({ instance, headers: received, messages: grpcMessages(Buffer.concat(chunks)) })));
      }
      stream.end();
    });
  });
  const port = await serveForTest(t, server as unknown as net.Server, () => sessions.forEach((s) => s.destroy()));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => (sessions.add(s), s.on('close', () => sessions.delete(s))));
  return { port, seen: [] };
}

function asGrpcEcho(m: string): Observation | undefined {
  try {
    const v = JSON.parse(m) as { instance: string; headers: http.IncomingHttpHeaders; messages: string[] };
    return { instance: v.instance, messages: v.messages, headers: observe({ status: 0, headers: v.headers, body: '' })['headers'] };
  } catch {
    return undefined;
  }
}

/**
 * One unary gRPC call over its own HTTP/2 session (h2c, or TLS when `o`): status, response headers, trailers
 * (absent for a trailers-only answer, whose grpc-status is among the headers), and the messages, JSON-decoded.
 */
export function grpcCall(port: number, method: string, message: string, o: { host?: string; tls?: ClientTls } = {}): Promise<Observation> {
  return new Promise((resolve) => {
    const session = h2Session(port, o.tls);
    let done = false;
    const finish = (v: Observation) => {
      if (done) return;
      done = true;
      session.destroy();
      resolve(v);
    };
    session.on('error', (e) => finish({ error: errorOf(e) }));
    const req = session.request({
      ':method': 'POST',
      ':path': method,
      ':authority': o.host ?? 'grpc.example',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = 0;
    let headers: http.IncomingHttpHeaders = {};
    let trailers: http.IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    req.on('response', (h) => ((status = Number(h[':status'])), (headers = plain(h))));
    req.on('trailers', (h) => (trailers = plain(h)));
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const base = observe({ status, headers, body: '' });
      delete base['body'];
      const messages = grpcMessages(Buffer.concat(chunks));
      // the backend's one echo message: what it received, compared field by field as an echo backend's
      const echo = messages.length === 1 ? asGrpcEcho(messages[0]!) : undefined;
      finish({
        ...base,
        ...(trailers ? { trailers: observe({ status: 0, headers: trailers, body: '' })['headers'] } : {}),
        ...(echo ? { backend: echo } : { messages }),
      });
    });
    req.on('error', (e) => finish({ error: errorOf(e) }));
    req.setTimeout(15_000, () => finish({ error: 'client time-out' }));
    req.end(grpcFrame(message));
  });
}

// ---- WebSockets (RFC 6455): the handshake and unfragmented text frames.

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

function wsFrame(text: string, mask: boolean): Buffer {
  const payload = Buffer.from(text);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x81, len]) : Buffer.from([0x81, 126, len >> 8, len & 0xff]);
  if (!mask) return Buffer.concat([head, payload]);
  head[1]! |= 0x80;
  const key = crypto.randomBytes(4);
  return Buffer.concat([head, key, Buffer.from(payload.map((b, i) => b ^ key[i % 4]!))]);
}

/** The complete frames at the start of `buf` (text or close; the opcode and payload) and what is left. */
function wsFrames(buf: Buffer): { frames: Array<{ op: number; text: string }>; rest: Buffer } {
  const frames: Array<{ op: number; text: string }> = [];
  let at = 0;
  while (at + 2 <= buf.length) {
    const masked = (buf[at + 1]! & 0x80) !== 0;
    let len = buf[at + 1]! & 0x7f;
    let head = 2;
    if (len === 126) {
      if (at + 4 > buf.length) break;
      len = buf.readUInt16BE(at + 2);
      head = 4;
    }
    const keyAt = at + head;
    const dataAt = keyAt + (masked ? 4 : 0);
    if (dataAt + len > buf.length) break;
    const data = Buffer.from(buf.subarray(dataAt, dataAt + len));
    if (masked) for (let i = 0; i < len; i++) data[i]! ^= buf[keyAt + (i % 4)]!;
    frames.push({ op: buf[at]! & 0x0f, text: data.toString() });
    at = dataAt + len;
  }
  return { frames, rest: buf.subarray(at) };
}

/**
 * A WebSocket backend: it accepts the upgrade, first sends a frame with what it received (instance, path,
 * request headers), then answers each text frame with `<instance> echoes <text>`.
 */
export async function startWebSocketBackend(t: Test, instance: string): Promise<Backend> {
  const server = http.createServer((_req, res) => res.writeHead(426).end('upgrade required'));
  const sockets = new Set<net.Socket>();
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const accept = crypto
      .createHash('sha1')
      .update(`${String(req.headers['sec-websocket-key'])}${WS_GUID}`)
      .digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
    socket.write(wsFrame(JSON.stringify({ instance, path: req.url, headers: req.headers }), false));
    let buf: Buffer = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => {
      const { frames, rest } = wsFrames(Buffer.concat([buf, d]));
      buf = rest;
      for (const f of frames) {
        if (f.op === 8) socket.end(Buffer.from([0x88, 0]));
        else socket.write(wsFrame(`${instance} echoes ${f.text}`, false));
      }
    });
  });
  const port = await serveForTest(t, server, () => sockets.forEach((s) => s.destroy()));
  return { port, seen: [] };
}

/**
 * A WebSocket exchange through `port`: the upgrade request for `r.path`, then `send` as text frames one by
 * one, each awaiting one answer. Observed: the handshake's status and headers (the accept key checked, not
 * shown), the backend's first frame (what it received) and the answers; over TLS (`o`: wss) also the TLS
 * handshake (ALPN, the certificate's CN).
 */
export function webSocketExchange(port: number, r: ClientRequest, send: string[], o?: ClientTls, timeoutMs = 10_000): Promise<Observation> {
  return new Promise((resolve) => {
    // the same key on every run (RFC 6455's example nonce), so both data planes forward the same bytes
    const key = 'dGhlIHNhbXBsZSBub25jZQ==';
    const want = crypto.createHash('sha1').update(`${key}${WS_GUID}`).digest('base64');
    const socket = o ? tls.connect({ ...tlsOptions(o), port }) : net.connect(port, '127.0.0.1');
    const out: Observation = {};
    if (o) socket.once('secureConnect', () => (out['tls'] = handshake(socket as tls.TLSSocket)));
    const answers: string[] = [];
    let buf: Buffer = Buffer.alloc(0);
    let upgraded = false;
    const finish = (extra: Observation = {}) => {
      socket.destroy();
      resolve({ ...out, ...(upgraded ? { answers } : {}), ...extra });
    };
    const timer = setTimeout(() => finish({ error: 'client time-out' }), timeoutMs);
    socket.on('error', (e) => (clearTimeout(timer), finish({ error: errorOf(e) })));
    socket.on('close', () => (clearTimeout(timer), finish()));
    const next = () => {
      const m = send[answers.length];
      if (m === undefined) return (clearTimeout(timer), finish());
      socket.write(wsFrame(m, true));
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const [statusLine, ...lines] = buf.subarray(0, end).toString().split('\r\n');
        const headers: http.IncomingHttpHeaders = {};
        for (const l of lines) {
          const i = l.indexOf(':');
          headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
        }
        const status = Number(statusLine!.split(' ')[1]);
        buf = buf.subarray(end + 4);
        if (status !== 101) {
          out['status'] = status;
          return; // the body follows; the observation is the status and headers
        }
        upgraded = true;
        const accepted = headers['sec-websocket-accept'] === want;
        delete headers['sec-websocket-accept'];
        Object.assign(out, observe({ status, headers, body: '' }), { accepted });
        delete out['body'];
      }
      const { frames, rest } = wsFrames(buf);
      buf = rest;
      for (const f of frames) {
        if (out['backend'] === undefined) {
          const v = JSON.parse(f.text) as { instance: string; path: string; headers: http.IncomingHttpHeaders };
          out['backend'] = { instance: v.instance, path: v.path, headers: observe({ status: 0, headers: v.headers, body: '' })['headers'] };
          next();
        } else {
          answers.push(f.text);
          next();
        }
      }
    });
    const headers = {
      host: r.host ?? 'gw.example',
      upgrade: 'websocket',
      connection: 'Upgrade',
      'sec-websocket-key': key,
      'sec-websocket-version': '13',
      ...r.headers,
    };
    socket.write(
      `GET ${r.path} HTTP/1.1\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`,
    );
  });
}

// ---- TCP

/** A TCP backend: it answers everything a client sends with `<instance> got <bytes>` and closes when the client does. */
export async function startTcpBackend(t: Test, instance: string): Promise<Backend> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let got = '';
    s.on('data', (d) => (got += d));
    s.on('end', () => s.end(`${instance} got ${got}`));
  });
  const port = await serveForTest(t, server, () => sockets.forEach((s) => s.destroy()));
  return { port, seen: [] };
}

/** Sends `bytes` on a TCP (or, with `o`, TLS) connection, half-closes, and observes what came back until close. */
export function tcpExchange(port: number, bytes: string, o?: ClientTls, timeoutMs = 10_000): Promise<Observation> {
  return new Promise((resolve) => {
    const socket = o ? tls.connect({ ...tlsOptions(o), port }) : net.connect(port, '127.0.0.1');
    let got = '';
    let shook: Record<string, unknown> | undefined;
    let done = false;
    const finish = (extra: Observation = {}) => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve({ received: got, ...(shook ? { tls: shook } : {}), ...extra });
    };
    const start = () => socket.end(bytes);
    if (o) socket.once('secureConnect', () => ((shook = handshake(socket as tls.TLSSocket)), start()));
    else socket.once('connect', start);
    socket.setEncoding('utf8');
    socket.on('data', (d) => (got += d));
    socket.on('error', (e) => finish({ error: errorOf(e) }));
    socket.on('close', () => finish());
    setTimeout(() => finish({ error: 'client time-out' }), timeoutMs).unref();
  });
}
