// What one connection watches of one type, and what it was sent and acknowledged: the state behind ACK/NACK
// detection, resend suppression and the debug views.
import type { WatchedResource } from '../types';

export interface NackRecord {
  /** ms since epoch. */
  time: number;
  /** Nonce of the rejected response, as echoed. */
  nonce: string;
  /** Version the client still runs (SotW version_info; empty in delta). */
  versionInfo: string;
  /** gRPC code of error_detail. */
  code: number;
  message: string;
}

export interface WatchState {
  typeUrl: string;
  /** Explicitly requested names (`*` is not kept here). */
  names: Set<string>;
  /** Everything of the type is watched (explicit `*`, or a request naming nothing for a wildcard type). */
  wildcard: boolean;
  /** Delta: `*` explicitly subscribed. */
  star: boolean;
  /** Delta: some name (or `*`) was ever subscribed explicitly; until then an empty subscription is wildcard. */
  explicitEver: boolean;
  /** Resource name → content hash the client holds, as far as the server knows (delta; SotW by-name types). */
  known: Map<string, string>;
  /** SotW wildcard types: digest of the complete set last sent (one string instead of a map per proxy). */
  digest: string;
  /** Resources in the last complete set sent (SotW wildcard types). */
  setSize: number;
  nonceSent: string;
  versionSent: string;
  /** ms since epoch of the last response. */
  lastSendTime?: number;
  nonceAcked: string;
  versionAcked: string;
  /** The last NACK, until a later ACK clears it. */
  lastNack?: NackRecord;
  /** Answer the next request even if it looks like an ACK (warming after CDS on reconnect). */
  alwaysRespond: boolean;
}

export function newWatch(typeUrl: string): WatchState {
  return {
    typeUrl,
    names: new Set(),
    wildcard: false,
    star: false,
    explicitEver: false,
    known: new Map(),
    digest: '',
    setSize: 0,
    nonceSent: '',
    versionSent: '',
    nonceAcked: '',
    versionAcked: '',
    alwaysRespond: false,
  };
}

/**
 * The contract's view of a watch, optionally restricted to some names (non-wildcard then). The name set is
 * shared, not copied: generation is synchronous and generators only read it.
 */
export function watchedResource(w: WatchState, only?: ReadonlySet<string>): WatchedResource {
  if (only) return { typeUrl: w.typeUrl, resourceNames: only, wildcard: false };
  return { typeUrl: w.typeUrl, resourceNames: w.names, wildcard: w.wildcard };
}

/** Debug view of a watch (adsz/syncz). */
export interface WatchInfo {
  typeUrl: string;
  resourceNames: string[];
  wildcard: boolean;
  versionSent: string;
  nonceSent: string;
  versionAcked: string;
  nonceAcked: string;
  lastSendTime?: number;
  /** Resources the client holds according to the server. */
  resourceCount: number;
  lastNack?: NackRecord;
  /** error_detail message of lastNack (Istio's LastError). */
  lastError?: string;
}

export function watchInfo(w: WatchState): WatchInfo {
  return {
    typeUrl: w.typeUrl,
    resourceNames: [...w.names].sort(),
    wildcard: w.wildcard,
    versionSent: w.versionSent,
    nonceSent: w.nonceSent,
    versionAcked: w.versionAcked,
    nonceAcked: w.nonceAcked,
    lastSendTime: w.lastSendTime,
    resourceCount: w.digest !== '' ? w.setSize : w.known.size,
    lastNack: w.lastNack ? { ...w.lastNack } : undefined,
    lastError: w.lastNack?.message,
  };
}
