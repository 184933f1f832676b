// Incremental (delta) xDS rules as the Envoy xDS protocol documents them: subscriptions change by
// resource_names_subscribe/unsubscribe; `*` subscribes to everything, and a client that never named anything
// is treated as subscribed to `*` ("legacy wildcard") until it names something; initial_resource_versions
// tells a reconnecting client's holdings; per-resource versions are content hashes, so only changed
// resources are sent and vanished ones are listed in removed_resources.
import { setDigest, type HashedResource } from './resources';
import { internName, internNameSet, newWatch, ownNameSet, type Held, type NackRecord, type WatchState } from './watch';

export interface DeltaRequestView {
  typeUrl: string;
  resourceNamesSubscribe: readonly string[];
  resourceNamesUnsubscribe: readonly string[];
  initialResourceVersions: Readonly<Record<string, string>>;
  responseNonce: string;
  errorDetail?: { code: number; message: string };
}

export interface DeltaDecision {
  /** Generate and answer now. */
  respond: boolean;
  /** The answer goes out even if it carries nothing (first request of a type, new subscriptions). */
  required: boolean;
  /** Names the client subscribed to in this request: sent even if the client seems to hold them. */
  force: ReadonlySet<string>;
  init: boolean;
  nack?: NackRecord;
  /** The request echoed a nonce other than the last one sent (it is not an ACK). */
  expired: boolean;
}

function applySubscriptions(w: WatchState, req: DeltaRequestView, force: Set<string>): { wildcardAdded: boolean; unsubscribed: string[] } {
  let wildcardAdded = false;
  const unsubscribed: string[] = [];
  let changed = false;
  for (const requested of req.resourceNamesSubscribe) {
    const name = internName(requested);
    w.explicitEver = true;
    if (name === '*') {
      if (!w.star) wildcardAdded = true;
      w.star = true;
    } else {
      if (!w.names.has(name)) {
        ownNameSet(w).add(name);
        changed = true;
      }
      force.add(name);
    }
  }
  for (const name of req.resourceNamesUnsubscribe) {
    if (name === '*') {
      w.explicitEver = true;
      w.star = false;
    } else if (w.names.has(name) && ownNameSet(w).delete(name)) {
      changed = true;
      // The client drops what it unsubscribes from; if `*` still covers it, it is sent again.
      w.held = w.held.with([], [name]);
      force.delete(name);
      unsubscribed.push(name);
    }
  }
  if (changed) w.names = internNameSet(w.names);
  const wasWildcard = w.wildcard;
  w.wildcard = w.star || !w.explicitEver;
  if (!wasWildcard && w.wildcard) wildcardAdded = true;
  if (wasWildcard && !w.wildcard) {
    // Leaving wildcard: the client keeps only what it named explicitly.
    w.held = w.held.filter((n) => w.names.has(n));
  }
  return { wildcardAdded, unsubscribed };
}

/** Applies one delta request to the connection's watches and says whether to answer. */
export function deltaOnRequest(watches: Map<string, WatchState>, req: DeltaRequestView, now: number): DeltaDecision {
  const nack: NackRecord | undefined = req.errorDetail
    ? { time: now, nonce: req.responseNonce, versionInfo: '', code: req.errorDetail.code, message: req.errorDetail.message }
    : undefined;
  const force = new Set<string>();
  let w = watches.get(req.typeUrl);
  if (!w) {
    w = newWatch(req.typeUrl);
    watches.set(req.typeUrl, w);
    // initial_resource_versions is only meaningful on the first request of a type on a stream.
    w.held = w.held.with(Object.entries(req.initialResourceVersions).map(([name, version]) => [internName(name), version] as const));
    applySubscriptions(w, req, force);
    if (nack) w.lastNack = nack;
    // A reconnecting client re-subscribes to what it holds; what it already holds unchanged is not resent.
    for (const name of [...force]) if (w.held.has(name)) force.delete(name);
    // Usually every name subscribed is forced: the watch's interned set stands for them (no second copy, and
    // one set for the streams of a kind, which deltaPushDiff's sharing keys on).
    const forced = force.size === w.names.size ? w.names : force;
    return { respond: true, required: true, force: forced, init: true, nack, expired: false };
  }
  let expired = false;
  if (req.responseNonce !== '') {
    if (req.responseNonce === w.nonceSent) {
      if (!nack) {
        w.nonceAcked = req.responseNonce;
        w.versionAcked = w.versionSent;
        w.lastNack = undefined;
      }
    } else {
      expired = true;
    }
  }
  if (nack) w.lastNack = nack;
  // Unlike SotW, subscription changes ride on any request (ACKs, NACKs, even stale ones), so apply them.
  const { wildcardAdded, unsubscribed } = applySubscriptions(w, req, force);
  const alwaysRespond = w.alwaysRespond;
  w.alwaysRespond = false;
  const required = force.size > 0 || wildcardAdded || alwaysRespond;
  const respond = required || (unsubscribed.length > 0 && w.wildcard);
  return { respond, required, force, init: false, nack, expired };
}

export interface DeltaDiff {
  send: HashedResource[];
  removed: string[];
}

/**
 * What to send a delta client: resources that are new or changed against what it holds (or forced), and
 * names it holds that no longer exist. `scope` limits the comparison to some names (incremental EDS);
 * forced names that do not exist are reported removed so the client stops waiting for them.
 */
export function deltaDiff(
  known: Pick<ReadonlyMap<string, string>, 'get' | 'keys'>,
  desired: readonly HashedResource[],
  force: ReadonlySet<string> | 'all',
  scope?: ReadonlySet<string>,
): DeltaDiff {
  const send = desired.filter((r) => force === 'all' || force.has(r.name) || known.get(r.name) !== r.hash);
  const present = new Set(desired.map((r) => r.name));
  const removed = new Set<string>();
  for (const name of known.keys()) {
    if (scope && !scope.has(name)) continue;
    if (!present.has(name)) removed.add(name);
  }
  if (force !== 'all') for (const name of force) if (!present.has(name)) removed.add(name);
  return { send, removed: [...removed].sort() };
}

/** Records what a delta response carried. */
export function deltaRecordSent(w: WatchState, diff: DeltaDiff): void {
  w.held = heldAfter(w.held, diff);
}

// ---- diffs shared between streams ----------------------------------------------------------------------

interface SharedDiff {
  generated: readonly HashedResource[];
  diff: DeltaDiff;
  /** What the client holds once it got `diff` (weak: a stream left behind must not keep every later table alive). */
  after?: WeakRef<Held>;
}

/**
 * Diffs kept per held table: one per kind of proxy, type and forced set holding it (every stream starts from
 * the empty table, so its memo sees every kind's first answers of every type).
 */
const DIFFS_PER_HELD = 256;

function sameResources(a: readonly HashedResource[], b: readonly HashedResource[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x !== y && (x.name !== y.name || x.hash !== y.hash)) return false;
  }
  return true;
}

/** Ids of interned forced-name sets, for memo keys. */
const forceIds = new WeakMap<ReadonlySet<string>, number>();
let nextForceId = 0;

/** The memo key part of a forced set: equal sets (interned) get one id. */
function forceKey(force: ReadonlySet<string> | 'all'): string {
  if (force === 'all') return 'all';
  if (force.size === 0) return '';
  const set = internNameSet(force as Set<string>);
  let id = forceIds.get(set);
  if (id === undefined) forceIds.set(set, (id = nextForceId++));
  return `f${id}`;
}

/**
 * deltaDiff for a push or an answer. The diff depends only on what the client holds, what it is due and the
 * names forced on it, so streams that hold the same table (Held is interned), are due the same resources and
 * have equal forced names (proxies of one kind connecting subscribe to the same names) share one diff, worked
 * out once, and then share the table they hold after it. Scoped (incremental EDS) diffs are per-stream and
 * are worked out directly. `force` must not change afterwards (it may be shared).
 */
export function deltaPushDiff(
  w: WatchState,
  generated: readonly HashedResource[],
  force: ReadonlySet<string> | 'all',
  scope?: ReadonlySet<string>,
): DeltaDiff {
  if (scope) return deltaDiff(w.held, generated, force, scope);
  const key = `diff|${forceKey(force)}|${setDigest(generated)}`;
  const memo = w.held.memo;
  const hit = memo.get(key) as SharedDiff | undefined;
  // Equal digests of different resource lists are possible in principle: the lists are compared.
  if (hit && sameResources(hit.generated, generated)) return hit.diff;
  const diff = deltaDiff(w.held, generated, force);
  if (memo.size >= DIFFS_PER_HELD) memo.delete(memo.keys().next().value as string);
  memo.set(key, { generated, diff } satisfies SharedDiff);
  sharedDiffs.set(diff, key);
  return diff;
}

/** Diffs made by deltaPushDiff → their memo key on the table they were made from. */
const sharedDiffs = new WeakMap<DeltaDiff, string>();

/** The table a client holds after `diff`; a shared diff's is worked out once. */
function heldAfter(held: Held, diff: DeltaDiff): Held {
  const key = sharedDiffs.get(diff);
  const shared = key !== undefined ? (held.memo.get(key) as SharedDiff | undefined) : undefined;
  const known = shared && shared.diff === diff ? shared.after?.deref() : undefined;
  if (known) return known;
  const after = held.with(
    diff.send.map((r) => [r.name, r.hash] as const),
    diff.removed,
  );
  if (shared && shared.diff === diff) shared.after = new WeakRef(after);
  return after;
}
