// One GET of a key-server document over HTTP or HTTPS, as Istio's JWKS resolver does it: a timeout per
// request, no keep-alive, system roots plus an extra CA bundle for HTTPS, and certificate checks that
// JWKS_RESOLVER_INSECURE_SKIP_VERIFY turns off.
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import { rootCertificates } from 'node:tls';

/** Istio reads extra roots for key servers from here (jwksExtraRootCABundlePath). */
export const EXTRA_CA_BUNDLE_PATH = '/cacerts/extra.pem';

/** Key sets are small; a larger body is a misconfigured URI, not keys. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface FetchOptions {
  timeoutMs: number;
  insecureSkipVerify: boolean;
  /** Trusted roots for HTTPS; undefined uses Node's defaults (bundled roots and NODE_EXTRA_CA_CERTS). */
  ca?: readonly string[];
  signal?: AbortSignal;
}

/** Node's roots plus the PEM files that exist among `paths`; undefined when none adds anything. */
export function loadTrustedRoots(paths: readonly string[]): string[] | undefined {
  const extra: string[] = [];
  for (const p of paths) {
    try {
      const pem = readFileSync(p, 'utf8');
      if (pem.includes('-----BEGIN CERTIFICATE-----')) extra.push(pem);
    } catch {
      // absent bundles are normal
    }
  }
  return extra.length > 0 ? [...rootCertificates, ...extra] : undefined;
}

export class FetchError extends Error {}

/** The body of a 2xx answer; anything else is a FetchError with Istio's wording. */
export function fetchDocument(uri: string, o: FetchOptions): Promise<string> {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return Promise.reject(new FetchError(`failed to parse ${JSON.stringify(uri)}`));
  }
  const secure = url.protocol === 'https:';
  if (!secure && url.protocol !== 'http:')
    return Promise.reject(new FetchError(`unsupported URI scheme ${JSON.stringify(url.protocol.slice(0, -1))} in ${uri}`));
  return new Promise<string>((resolveP, rejectP) => {
    // Istio's http.Client Timeout bounds the whole exchange, not just idle time.
    const timer = setTimeout(() => req.destroy(new FetchError(`timeout after ${o.timeoutMs}ms fetching ${uri}`)), o.timeoutMs);
    const resolve = (b: string) => {
      clearTimeout(timer);
      resolveP(b);
    };
    const reject = (e: Error) => {
      clearTimeout(timer);
      rejectP(e);
    };
    const opts: https.RequestOptions = {
      method: 'GET',
      agent: false,
      headers: { accept: 'application/json', connection: 'close' },
      ...(o.signal ? { signal: o.signal } : {}),
    };
    if (secure) {
      opts.rejectUnauthorized = !o.insecureSkipVerify;
      if (o.ca) opts.ca = [...o.ca];
    }
    const req = (secure ? https : http).request(url, opts, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) {
          req.destroy(new FetchError(`response of ${uri} exceeds ${MAX_BODY_BYTES} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('error', (e) => reject(e instanceof FetchError ? e : new FetchError(e.message)));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          // Istio quotes the body and cuts it at 100 characters.
          const quoted = JSON.stringify(body);
          reject(
            new FetchError(
              quoted.length > 100 ? `status ${status}, message ${quoted.slice(0, 100)}(truncated)` : `status ${status}, message ${quoted}`,
            ),
          );
          return;
        }
        resolve(body);
      });
    });
    req.on('error', (e) => reject(e instanceof FetchError ? e : new FetchError(e.message)));
    req.end();
  });
}
