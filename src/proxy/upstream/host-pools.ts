// A host's connection pools, one per transport socket, ALPN override and source (pool.ts keys and fills them):
// how many requests wait in them, and their release when the host leaves its cluster or changes transport.
import type http2 from 'node:http2';
import type { H1Pool } from '../codec/h1/client';
import type { Host } from './host';

export interface HostPools {
  h1?: H1Pool;
  h2?: http2.ClientHttp2Session;
  h2Connecting?: boolean;
  /** Set on per-source pools: called when one of their connections closed. */
  forget?: () => void;
}

/**
 * A per-source pool is dropped once it has no connection left (Envoy removes idle connection pools): there is
 * one per downstream address a host ever served, which would otherwise pile up for the life of the host.
 */
export function forgetWhenEmpty(all: Map<string, HostPools>, key: string, p: HostPools): void {
  // after every 'close' listener ran (the HTTP/1 pool counts the connection gone in its own)
  queueMicrotask(() => {
    if (p.h1 && (p.h1.connections > 0 || p.h1.pending > 0)) return;
    if (p.h2 && !p.h2.closed && !p.h2.destroyed) return;
    if (all.get(key) === p) all.delete(key);
  });
}

/** Requests queued in the host's HTTP/1 pool waiting for a connection (pending requests). */
export function pendingOn(host: Host): number {
  let n = 0;
  for (const p of (host.pool as Map<string, HostPools> | undefined)?.values() ?? []) n += p.h1?.pending ?? 0;
  return n;
}

/** Closes idle connections now and the rest when their requests finish. */
export function releaseHostPools(host: Host): void {
  const all = host.pool as Map<string, HostPools> | undefined;
  if (!all) return;
  // idle connections close now; busy ones are not reused after their response
  for (const p of all.values()) {
    p.h1?.close();
    p.h2?.close();
  }
  host.pool = undefined;
}
