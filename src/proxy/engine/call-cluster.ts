// A filter's own request through a cluster (remote JWKS and the like): buffered, one attempt, no router.
import type { UpstreamCall, UpstreamCallResult } from '../common/cluster-call';
import type { ClusterManager } from '../upstream/cluster-manager';
import { startUpstreamRequest } from '../upstream/pool';

/** A filter's request through a cluster (remote JWKS and the like): buffered, one attempt. */
export function callCluster(clusters: ClusterManager, name: string, call: UpstreamCall): Promise<UpstreamCallResult> {
  const c = clusters.get(name);
  if (!c) return Promise.reject(new Error(`cluster '${name}' not found`));
  const host = c.chooseHost({});
  if (!host) return Promise.reject(new Error(`no healthy upstream in cluster '${name}'`));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      h.abort();
      reject(new Error('upstream request timeout'));
    }, call.timeoutMs);
    const h = startUpstreamRequest(
      c,
      host,
      c.protocol === 'http2' ? 'http2' : 'http1',
      {
        method: call.method,
        path: call.path,
        authority: call.authority,
        scheme: c.transportFor(host).tls ? 'https' : 'http',
        headers: { ...(call.headers ?? {}) },
      },
      {
        onResponse: (r) => {
          const chunks: Buffer[] = [];
          r.body.read({
            onData: (d) => chunks.push(d),
            onEnd: () => {
              clearTimeout(timer);
              resolve({ status: r.status, headers: r.headers, body: Buffer.concat(chunks) });
            },
            onAbort: (detail) => {
              clearTimeout(timer);
              reject(new Error(detail));
            },
          });
        },
        onError: (_k, detail) => {
          clearTimeout(timer);
          reject(new Error(detail));
        },
      },
    );
    h.body.end(call.body);
  });
}
