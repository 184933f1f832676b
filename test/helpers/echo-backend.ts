// An HTTP echo backend that answers as the Gateway API conformance suite's echo server does
// (sigs.k8s.io/gateway-api v1.3.0 conformance/echo-basic/echo-basic.go): a JSON body naming the request it received
// (path with query, host, method, proto, headers as name → values) and the pod it runs as (namespace, service, pod);
// `?delay=<duration>` waits before answering; `X-Echo-Set-Header: name:value,name:value` sets response headers.
// Differs on purpose: one server per Service on loopback (no pods), it keeps the requests it received so a test can
// check mirrored requests (the suite reads the mirror backend's log instead), and header names are as Node gives
// them (lower case; the suite compares them case-insensitively).
import http from 'node:http';
import https from 'node:https';
import type { Test } from 'tap';
import { serveForTest } from './ports';

export interface EchoPod {
  namespace: string;
  service: string;
  pod: string;
}

export interface EchoRequest {
  path: string;
  host: string;
  method: string;
  proto: string;
  headers: Record<string, string[]>;
  namespace: string;
  ingress: string;
  service: string;
  pod: string;
}

export interface EchoBackend {
  port: number;
  pod: EchoPod;
  /** Every request received, oldest first. */
  received: EchoRequest[];
}

/** Go's time.ParseDuration for the forms the suite uses (`1s`, `500ms`, `1.5s`). */
function durationMs(d: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(d);
  if (!m) return undefined;
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[m[2] as 'ms' | 's' | 'm'];
}

function headerValues(req: http.IncomingMessage): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) (out[req.rawHeaders[i]!.toLowerCase()] ??= []).push(req.rawHeaders[i + 1]!);
  return out;
}

/**
 * `tls`: serve HTTPS with this PEM key pair, as echo-basic does with TLS_SERVER_CERT/TLS_SERVER_PRIVKEY (the suite's
 * tls-backend, reached through TLS passthrough).
 */
export async function startEchoBackend(t: Test, pod: EchoPod, tls?: { cert: string; key: string }): Promise<EchoBackend> {
  const received: EchoRequest[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    req.resume();
    const seen: EchoRequest = {
      path: req.url ?? '',
      host: req.headers.host ?? '',
      method: req.method ?? '',
      proto: `HTTP/${req.httpVersion}`,
      headers: headerValues(req),
      ...pod,
      ingress: '',
    };
    received.push(seen);
    const delay = new URL(req.url ?? '/', 'http://x').searchParams.get('delay');
    const ms = delay === null ? 0 : durationMs(delay);
    if (ms === undefined) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: `invalid delay ${delay}` }));
      return;
    }
    setTimeout(() => {
      if (res.destroyed) return;
      const set: Record<string, string> = {};
      for (const kv of String(req.headers['x-echo-set-header'] ?? '').split(',')) {
        const [name, ...value] = kv.split(':');
        if (name) set[name.trim()] = value.join(':').trim();
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-content-type-options': 'nosniff', ...set });
      res.end(JSON.stringify(seen));
    }, ms);
  };
  const server = tls ? https.createServer({ cert: tls.cert, key: tls.key }, handler) : http.createServer(handler);
  const port = await serveForTest(t, server);
  return { port, pod, received };
}

// ---- gRPC ----
// The suite's gRPC echo server (conformance/echo-basic/grpc/grpc.go, service
// gateway_api_conformance.echo_basic.grpcecho.GrpcEcho of grpcecho.proto): Echo and EchoTwo answer an EchoResponse
// whose Assertions name the method, the request headers, :authority and the pod; EchoThree is not implemented
// (UNIMPLEMENTED), as there. The messages are few and flat, so they are written and read here in the protobuf wire
// format directly rather than through generated code.

export const GRPC_ECHO_SERVICE = 'gateway_api_conformance.echo_basic.grpcecho.GrpcEcho';

export interface GrpcAssertions {
  fullyQualifiedMethod: string;
  headers: Array<{ key: string; value: string }>;
  authority: string;
  context: { namespace: string; ingress: string; serviceName: string; pod: string };
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

function field(no: number, value: string | Buffer): Buffer {
  const b = typeof value === 'string' ? Buffer.from(value) : value;
  return Buffer.concat([varint((no << 3) | 2), varint(b.length), b]);
}

/** EchoResponse{assertions} in the wire format. */
export function encodeEchoResponse(a: GrpcAssertions): Buffer {
  const ctx = Buffer.concat([field(1, a.context.namespace), field(2, a.context.ingress), field(3, a.context.serviceName), field(4, a.context.pod)]);
  const assertions = Buffer.concat([
    field(1, a.fullyQualifiedMethod),
    ...a.headers.map((h) => field(2, Buffer.concat([field(1, h.key), field(2, h.value)]))),
    field(3, a.authority),
    field(4, ctx),
  ]);
  return field(1, assertions);
}

/** The length-delimited fields of a message: field number → values. */
function fields(b: Buffer): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let i = 0;
  const readVarint = () => {
    let n = 0;
    let shift = 0;
    for (;;) {
      const byte = b[i++]!;
      n += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return n;
      shift += 7;
    }
  };
  while (i < b.length) {
    const tag = readVarint();
    if ((tag & 7) === 0) {
      readVarint();
      continue;
    }
    const len = readVarint();
    const v = b.subarray(i, i + len);
    i += len;
    const list = out.get(tag >>> 3) ?? [];
    list.push(v);
    out.set(tag >>> 3, list);
  }
  return out;
}

export function decodeEchoResponse(b: Buffer): GrpcAssertions {
  const a = fields(fields(b).get(1)?.[0] ?? Buffer.alloc(0));
  const s = (m: Map<number, Buffer[]>, n: number) => m.get(n)?.[0]?.toString() ?? '';
  const ctx = fields(a.get(4)?.[0] ?? Buffer.alloc(0));
  return {
    fullyQualifiedMethod: s(a, 1),
    headers: (a.get(2) ?? []).map((h) => {
      const f = fields(h);
      return { key: s(f, 1), value: s(f, 2) };
    }),
    authority: s(a, 3),
    context: { namespace: s(ctx, 1), ingress: s(ctx, 2), serviceName: s(ctx, 3), pod: s(ctx, 4) },
  };
}

/** A gRPC echo backend (h2c) for a Service with appProtocol kubernetes.io/h2c; `port` as for the HTTP one. */
export async function startGrpcEchoBackend(t: Test, pod: EchoPod): Promise<EchoBackend> {
  const grpc = await import('@grpc/grpc-js');
  const received: EchoRequest[] = [];
  const server = new grpc.Server();
  const method = (name: string) => ({
    path: `/${GRPC_ECHO_SERVICE}/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  });
  const handler = (name: string) => (call: { metadata: { getMap(): Record<string, unknown> } }, cb: (e: null, r: Buffer) => void) => {
    const md = call.metadata.getMap();
    const headers = Object.entries(md).map(([key, value]) => ({ key, value: String(value) }));
    const authority = String(md[':authority'] ?? '');
    received.push({ path: `/${GRPC_ECHO_SERVICE}/${name}`, host: authority, method: 'POST', proto: 'HTTP/2.0', headers: {}, ...pod, ingress: '' });
    cb(
      null,
      encodeEchoResponse({
        fullyQualifiedMethod: `/${GRPC_ECHO_SERVICE}/${name}`,
        headers,
        authority,
        context: { ...pod, ingress: '', serviceName: pod.service },
      }),
    );
  };
  server.addService({ Echo: method('Echo'), EchoTwo: method('EchoTwo') }, { Echo: handler('Echo'), EchoTwo: handler('EchoTwo') });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  t.teardown(() => new Promise<void>((r) => server.tryShutdown(() => r())));
  return { port, pod, received };
}
