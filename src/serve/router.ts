// A small path router with the matching rules of Go's http.ServeMux that the daemon's pages rely on:
// exact paths, and subtree prefixes ending in `/`. Unknown paths get Go's `404 page not found`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { registerScope } from '../lib/log';

const log = registerScope('default');

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;

export class Router {
  private readonly exact = new Map<string, RouteHandler>();
  private readonly prefixes: Array<{ prefix: string; handler: RouteHandler }> = [];

  /** Handles exactly `path`. */
  handle(path: string, handler: RouteHandler): this {
    this.exact.set(path, handler);
    return this;
  }

  /** Handles `prefix` (which ends in `/`) and everything below it; the longest prefix wins. */
  handlePrefix(prefix: string, handler: RouteHandler): this {
    this.prefixes.push({ prefix, handler });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
    return this;
  }

  find(path: string): RouteHandler | undefined {
    return this.exact.get(path) ?? this.prefixes.find((p) => path.startsWith(p.prefix))?.handler;
  }

  /** The request listener. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const handler = this.find(url.pathname);
    if (!handler) {
      notFound(res);
      return;
    }
    Promise.resolve()
      .then(() => handler(req, res, url))
      .catch((e: unknown) => {
        log.error(`serving ${req.method} ${url.pathname}: ${(e as Error).message ?? String(e)}`);
        if (!res.headersSent) writeText(res, 500, `${(e as Error).message ?? String(e)}\n`);
        else res.destroy();
      });
  };
}

export function writeText(res: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** Go's http.NotFound. */
export function notFound(res: ServerResponse): void {
  writeText(res, 404, '404 page not found\n');
}

/**
 * Istio's writeJSON for debug pages: compact JSON, or indented by four spaces when the query has `pretty`.
 */
export function writeJSON(res: ServerResponse, url: URL, value: unknown, status = 200): void {
  const body = url.searchParams.has('pretty') ? JSON.stringify(value, null, 4) : JSON.stringify(value);
  writeText(res, status, body, 'application/json');
}

/** Reads a request body up to `limit` bytes. */
export async function readBody(req: IncomingMessage, limit = 32 << 20): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error(`request body larger than ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
