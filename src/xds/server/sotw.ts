// State-of-the-world ACK/NACK rules (Istio's ShouldRespond) and the choice of what a SotW response carries.
import { setDigest, type HashedResource } from './resources';
import { isWildcardType, TYPE_URL } from '../../lib/xds/type-urls';
import { newWatch, type NackRecord, type WatchState } from './watch';

export interface SotwRequestView {
  typeUrl: string;
  resourceNames: readonly string[];
  responseNonce: string;
  versionInfo: string;
  errorDetail?: { code: number; message: string };
}

export type SotwDecision =
  | { kind: 'nack'; nack: NackRecord }
  | { kind: 'unsubscribe' }
  | { kind: 'expired'; nonceSent: string }
  | { kind: 'ack' }
  /** `only`: answer just these newly requested names (non-wildcard types); otherwise everything watched. */
  | { kind: 'respond'; why: 'init' | 'warming' | 'subscription'; only?: ReadonlySet<string> };

function setWatchNames(w: WatchState, requested: readonly string[]): void {
  w.names = new Set(requested.filter((n) => n !== '*'));
  w.wildcard = isWildcardType(w.typeUrl) && (requested.length === 0 || requested.includes('*'));
}

/** Applies one request to the connection's watches and says whether and what to answer. */
export function sotwOnRequest(watches: Map<string, WatchState>, req: SotwRequestView, now: number): SotwDecision {
  const { typeUrl } = req;
  // A NACK: the previous response was rejected; the client keeps its last good config. Answering would
  // resend the same bad config, so don't.
  if (req.errorDetail) {
    const nack: NackRecord = {
      time: now,
      nonce: req.responseNonce,
      versionInfo: req.versionInfo,
      code: req.errorDetail.code,
      message: req.errorDetail.message,
    };
    const w = watches.get(typeUrl);
    if (w) w.lastNack = nack;
    return { kind: 'nack', nack };
  }
  // Naming nothing for a by-name type means the client lost interest (e.g. its last route went away).
  if (req.resourceNames.length === 0 && !isWildcardType(typeUrl)) {
    watches.delete(typeUrl);
    return { kind: 'unsubscribe' };
  }
  const previous = watches.get(typeUrl);
  // First request of the type, or a client that reconnected carrying a nonce of another server.
  if (req.responseNonce === '' || !previous) {
    const w = newWatch(typeUrl);
    setWatchNames(w, req.resourceNames);
    watches.set(typeUrl, w);
    if (typeUrl === TYPE_URL.cluster) {
      // Reconnect: Envoy re-warms the clusters it gets and waits for their endpoints even when its EDS
      // request looks like an ACK (envoyproxy/envoy#13009), so answer the next EDS request regardless.
      const eds = watches.get(TYPE_URL.endpoint);
      if (eds) eds.alwaysRespond = true;
    }
    return { kind: 'respond', why: 'init' };
  }
  // A nonce other than the last one sent: the client is answering an older response; a newer one is on
  // its way, so this request says nothing current.
  if (req.responseNonce !== previous.nonceSent) return { kind: 'expired', nonceSent: previous.nonceSent };

  const before = previous.names;
  const beforeWildcard = previous.wildcard;
  previous.nonceAcked = req.responseNonce;
  previous.versionAcked = req.versionInfo;
  previous.lastNack = undefined;
  setWatchNames(previous, req.resourceNames);
  const alwaysRespond = previous.alwaysRespond;
  previous.alwaysRespond = false;

  const added = new Set([...previous.names].filter((n) => !before.has(n)));
  const removed = [...before].filter((n) => !previous.names.has(n));
  for (const n of removed) previous.known.delete(n);
  if (alwaysRespond) return { kind: 'respond', why: 'warming' };
  const wildcardChanged = beforeWildcard !== previous.wildcard;
  if (added.size === 0 && removed.length === 0 && !wildcardChanged) return { kind: 'ack' };
  // Same nonce, different names: a new subscription (EDS/RDS names follow CDS/LDS changes).
  if (!isWildcardType(typeUrl)) {
    if (added.size === 0) return { kind: 'ack' };
    return { kind: 'respond', why: 'subscription', only: added };
  }
  return { kind: 'respond', why: 'subscription' };
}

/**
 * Resources to put in a SotW push for one watch, or undefined when nothing needs sending.
 * Wildcard types carry the complete set, sent when anything in it differs from what the client holds;
 * by-name types carry only resources whose content changed (Envoy accepts partial responses for those),
 * or all of them when `forceAll` (endpoints right after clusters were sent, for warming).
 */
export function sotwPushSelection(w: WatchState, generated: readonly HashedResource[], forceAll: boolean): readonly HashedResource[] | undefined {
  if (isWildcardType(w.typeUrl)) {
    if (!forceAll && w.digest !== '' && w.digest === setDigest(generated)) return undefined;
    return generated;
  }
  const out = forceAll ? [...generated] : generated.filter((r) => w.known.get(r.name) !== r.hash);
  return out.length > 0 ? out : undefined;
}

/** Records what a SotW response carried. `complete`: the generation covered every watched name. */
export function sotwRecordSent(w: WatchState, sent: readonly HashedResource[], complete: boolean, generated: readonly HashedResource[]): void {
  if (isWildcardType(w.typeUrl)) {
    w.digest = setDigest(sent);
    w.setSize = sent.length;
    return;
  }
  if (complete) {
    // A watched name the generator no longer produces: forget it so it is sent when it comes back.
    const present = new Set(generated.map((r) => r.name));
    for (const n of [...w.known.keys()]) if (!present.has(n)) w.known.delete(n);
  }
  for (const r of sent) w.known.set(r.name, r.hash);
}
