// One small HTTP client for the agent's local calls (proxy admin API, readiness URL, `request` command),
// with Go net/http's error wording (`Get "http://…": dial tcp 127.0.0.1:15000: connect: connection refused`)
// because Istio users read these messages in logs and scripts.
import * as http from 'node:http';
import { joinHostPort } from '../lib/hostport';

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export class HttpCallError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** Go's url.Error operation word: `Get`, `Post`. */
function op(method: string): string {
  return method ? method[0]!.toUpperCase() + method.slice(1).toLowerCase() : 'Get';
}

function hostPort(address: string | undefined, port: number | undefined): string {
  return address ? joinHostPort(address, port ?? '') : '';
}

function detail(err: NodeJS.ErrnoException & { address?: string; port?: number }, url: URL): string {
  const target = hostPort(err.address, err.port) || url.host;
  switch (err.code) {
    case 'ECONNREFUSED':
      return `dial tcp ${target}: connect: connection refused`;
    case 'ECONNRESET':
      return `read tcp ${target}: connection reset by peer`;
    case 'EHOSTUNREACH':
      return `dial tcp ${target}: connect: no route to host`;
    case 'ENOTFOUND':
      return `dial tcp: lookup ${url.hostname}: no such host`;
    case 'TIMEOUT':
      return 'context deadline exceeded (Client.Timeout exceeded while awaiting headers)';
    default:
      return err.message;
  }
}

export interface HttpCallOptions {
  method?: string;
  body?: string;
  timeoutMs: number;
  headers?: Record<string, string>;
  /** Abort the call (the error reads as a cancellation). */
  signal?: AbortSignal;
}

/** A response whose body is still to be read (a large /stats/prometheus passed on as it comes). */
export interface HttpStreamResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Emits 'error' when the transfer fails or outlasts the call's timeout (then an HttpCallError). */
  body: http.IncomingMessage;
}

/**
 * Makes one request and resolves at the response's headers; rejects with HttpCallError on transport failures.
 * The timeout covers the body too (Go's Client.Timeout does): a body still arriving then fails.
 */
export function httpStream(rawUrl: string, o: HttpCallOptions): Promise<HttpStreamResult> {
  const method = (o.method ?? 'GET').toUpperCase();
  return new Promise((resolve, reject) => {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      reject(new HttpCallError(`parse ${JSON.stringify(rawUrl)}: invalid URL`));
      return;
    }
    if (url.protocol !== 'http:') {
      reject(
        new HttpCallError(`${op(method)} ${JSON.stringify(rawUrl)}: unsupported protocol scheme ${JSON.stringify(url.protocol.replace(/:$/, ''))}`),
      );
      return;
    }
    const failure = (err: NodeJS.ErrnoException) => new HttpCallError(`${op(method)} ${JSON.stringify(rawUrl)}: ${detail(err, url)}`, err.code);
    let response: http.IncomingMessage | undefined;
    const timer = setTimeout(() => {
      const err = Object.assign(new Error('timeout'), { code: 'TIMEOUT' });
      if (response) response.destroy(failure(err));
      else req.destroy(err);
    }, o.timeoutMs);
    const headers: Record<string, string | number> = { ...(o.headers ?? {}) };
    if (o.body) headers['Content-Length'] = Buffer.byteLength(o.body);
    const req = http.request(url, { method, headers, agent: false, signal: o.signal });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (response) return;
      clearTimeout(timer);
      reject(failure(err));
    });
    req.on('response', (res) => {
      response = res;
      res.on('close', () => clearTimeout(timer));
      // the reader listens for the body's errors; none may go unheard before it does
      res.on('error', () => undefined);
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
    });
    req.end(o.body || undefined);
  });
}

/** Makes one request; rejects with HttpCallError on transport failures, resolves with any HTTP status. */
export async function httpCall(rawUrl: string, o: HttpCallOptions): Promise<HttpResult> {
  const r = await httpStream(rawUrl, o);
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    r.body.on('data', (c: Buffer) => chunks.push(c));
    r.body.on('error', (e) =>
      reject(e instanceof HttpCallError ? e : new HttpCallError(`${op(o.method ?? 'GET')} ${JSON.stringify(rawUrl)}: ${e.message}`)),
    );
    r.body.on('end', resolve);
  });
  return { status: r.status, headers: r.headers, body: Buffer.concat(chunks).toString('utf8') };
}
