// HTTP/1.1 requests as exact bytes on a raw socket (no client library to tidy the request line or merge
// repeated headers), and the answer read to the server's close; plus the echo backend those tests forward
// to, which reports the request-target and every header field as received.
import http from 'node:http';
import net from 'node:net';
import type { Test } from 'tap';
import { serveForTest } from './ports';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** `GET <target>` with `Connection: close` and these header fields, one line each, in order. */
export function rawRequest(target: string, fields: ReadonlyArray<readonly [string, string]> = [], method = 'GET'): string {
  return `${method} ${target} HTTP/1.1\r\nHost: gw.example\r\nConnection: close\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}

/** Sends the bytes and reads until the server closes; a chunked body is decoded. */
export function rawExchange(port: number, bytes: string, timeoutMs = 10_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(Buffer.from(bytes, 'latin1')));
    const chunks: Buffer[] = [];
    c.on('data', (d) => chunks.push(d));
    c.on('error', reject);
    c.setTimeout(timeoutMs, () => c.destroy(new Error(`no answer to ${JSON.stringify(bytes.slice(0, 60))}`)));
    c.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const head = parseHead(text);
      if (!head) return reject(new Error(`no response head for ${JSON.stringify(bytes.slice(0, 60))}: ${JSON.stringify(text)}`));
      let body = text.slice(head.end);
      if (/chunked/i.test(head.headers['transfer-encoding'] ?? '')) body = dechunk(body);
      resolve({ status: head.status, headers: head.headers, body });
    });
  });
}

/**
 * Sends the bytes and resolves with the response head as soon as it has arrived, then closes the connection
 * itself: for keep-alive requests, whose connection the server leaves open.
 */
export function rawHead(port: number, bytes: string, timeoutMs = 10_000): Promise<Omit<RawAnswer, 'body'>> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(Buffer.from(bytes, 'latin1')));
    let text = '';
    c.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const head = parseHead(text);
      if (!head) return;
      c.destroy();
      resolve({ status: head.status, headers: head.headers });
    });
    c.on('error', reject);
    c.setTimeout(timeoutMs, () => c.destroy(new Error(`no response head to ${JSON.stringify(bytes.slice(0, 60))}`)));
  });
}

/** Status and lower-cased header fields of a response head, and where the body starts; undefined until complete. */
function parseHead(text: string): { status: number; headers: Record<string, string>; end: number } | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [line, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(line!.split(' ')[1]), headers, end: end + 4 };
}

function dechunk(s: string): string {
  let out = '';
  let i = 0;
  for (;;) {
    const eol = s.indexOf('\r\n', i);
    if (eol < 0) return out;
    const n = parseInt(s.slice(i, eol), 16);
    if (!(n > 0)) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    i = eol + 2 + n + 2;
  }
}

export interface EchoSeen {
  path: string;
  /** rawHeaders as [name lower-cased, value] pairs. */
  fields: Array<[string, string]>;
}

/** A backend answering 200 with JSON {path, fields}: the target and each header field as it arrived. */
export async function startEchoBackend(t: Test): Promise<number> {
  const srv = http.createServer((req, res) => {
    const fields: Array<[string, string]> = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) fields.push([req.rawHeaders[i]!.toLowerCase(), req.rawHeaders[i + 1]!]);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url ?? '', fields } satisfies EchoSeen));
  });
  const port = await serveForTest(t, srv);
  return port;
}

/** What the echo backend saw, or undefined when the answer did not come from it. */
export function echoed(a: RawAnswer): EchoSeen | undefined {
  if (a.status !== 200) return undefined;
  try {
    const v = JSON.parse(a.body) as EchoSeen;
    return typeof v.path === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}
