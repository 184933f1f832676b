// Fixtures for the security tests: a real key server on loopback (HTTP or HTTPS) serving JWKS documents
// made from freshly generated keys, JSON views of generated protos, and small config builders.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { create, toJson, type DescMessage, type MessageInitShape, type JsonValue } from '@bufbuild/protobuf';
import { MemorySink, setSinks } from '../../src/lib/log/index';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';

/** Log output of the code under test stays out of the TAP stream. */
export const quiet = new MemorySink();
setSinks([quiet]);

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  /** The public JWK with kid/alg/use, as a key server publishes it. */
  jwk: Record<string, unknown>;
}

export function rsaKey(kid: string): SigningKey {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' } };
}

export function jwksDocument(...keys: SigningKey[]): string {
  return JSON.stringify({ keys: keys.map((k) => k.jwk) });
}

export interface KeyServer {
  url: (path?: string) => string;
  port: number;
  /** What GET answers: status and body, for one path or (without a path) for every other path. */
  serve(body: string, status?: number, path?: string): void;
  hits(): number;
  close(): Promise<void>;
}

/** A key server on 127.0.0.1:0; `tls` makes it HTTPS with that certificate. */
export async function startKeyServer(initial: string, tls?: { cert: string; key: string }): Promise<KeyServer> {
  let fallback = { body: initial, status: 200 };
  const byPath = new Map<string, { body: string; status: number }>();
  let hits = 0;
  const handler: http.RequestListener = (req, res) => {
    hits++;
    const a = byPath.get(new URL(req.url ?? '/', 'http://x').pathname) ?? fallback;
    res.writeHead(a.status, { 'content-type': 'application/json' });
    res.end(a.body);
  };
  const server = tls ? https.createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const scheme = tls ? 'https' : 'http';
  return {
    url: (p = '/jwks') => `${scheme}://127.0.0.1:${port}${p}`,
    port,
    serve(body, status = 200, path) {
      if (path === undefined) fallback = { body, status };
      else byPath.set(path, { body, status });
    },
    hits: () => hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (bound, then released). */
export async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Envoy's JSON form of a message built from an init shape (Any fields resolved through the xDS registry). */
export function json<D extends DescMessage>(schema: D, init: MessageInitShape<D>): JsonValue {
  return toJson(schema, create(schema, init), { registry: envoyTypeRegistry() });
}
