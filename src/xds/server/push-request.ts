// Building and merging push requests. Merging follows Istio's PushRequest.Merge: full wins, the later push
// context wins, the earliest start is kept, reasons add up, and an empty "changed" set means "everything"
// so it absorbs the other side.
import type { PushRequest } from '../types';

/** Istio's trigger reason for a push with no reason given. */
export const UNKNOWN_TRIGGER = 'unknown';
/** Istio's reason for generation answering a proxy's own request. */
export const PROXY_REQUEST_TRIGGER = 'proxyrequest';

export interface PushRequestInit {
  full?: boolean;
  configsUpdated?: Iterable<string>;
  edsUpdates?: Iterable<string>;
  reasons?: Iterable<readonly [string, number]> | Record<string, number>;
  start?: number;
  unchangedTypes?: Iterable<string>;
}

/** A PushRequest with defaults: full, nothing listed (= everything), reason `unknown`, start now. */
export function newPushRequest<P>(push: P, init: PushRequestInit = {}, now: () => number = Date.now): PushRequest<P> {
  const reasons = new Map<string, number>(
    init.reasons === undefined
      ? []
      : Symbol.iterator in init.reasons
        ? (init.reasons as Iterable<readonly [string, number]>)
        : Object.entries(init.reasons as Record<string, number>),
  );
  return {
    full: init.full ?? true,
    configsUpdated: new Set(init.configsUpdated ?? []),
    edsUpdates: new Set(init.edsUpdates ?? []),
    reasons,
    push,
    start: init.start ?? now(),
    ...(init.unchangedTypes ? { unchangedTypes: new Set(init.unchangedTypes) } : {}),
  };
}

function unionOrAll(a: ReadonlySet<string>, b: ReadonlySet<string>): ReadonlySet<string> {
  if (a.size === 0 || b.size === 0) return new Set();
  return new Set([...a, ...b]);
}

/** Types both requests leave unchanged: each one's push context is compared with the one before it. */
function unchangedByBoth(a: PushRequest<unknown>, b: PushRequest<unknown>): ReadonlySet<string> | undefined {
  if (!a.unchangedTypes || !b.unchangedTypes) return undefined;
  const both = [...a.unchangedTypes].filter((t) => b.unchangedTypes!.has(t));
  return both.length > 0 ? new Set(both) : undefined;
}

/** `b` is the later request. Neither input is modified. */
export function mergePushRequests<P>(a: PushRequest<P>, b: PushRequest<P>): PushRequest<P> {
  const reasons = new Map(a.reasons);
  for (const [r, n] of b.reasons) reasons.set(r, (reasons.get(r) ?? 0) + n);
  const full = a.full || b.full;
  // For incremental EDS an empty edsUpdates means "all endpoints"; a full push regenerates everything
  // anyway, so its hostname list is kept only as information.
  const edsUpdates = full ? new Set([...a.edsUpdates, ...b.edsUpdates]) : unionOrAll(a.edsUpdates, b.edsUpdates);
  const unchangedTypes = unchangedByBoth(a, b);
  return {
    full,
    configsUpdated: unionOrAll(a.configsUpdated, b.configsUpdated),
    edsUpdates,
    reasons,
    push: b.push,
    start: Math.min(a.start, b.start),
    ...(unchangedTypes ? { unchangedTypes } : {}),
  };
}

/** Reasons with `unknown` filled in when the request named none (Istio records those as unknown). */
export function reasonsOrUnknown(req: PushRequest<unknown>): ReadonlyMap<string, number> {
  return req.reasons.size > 0 ? req.reasons : new Map([[UNKNOWN_TRIGGER, 1]]);
}
