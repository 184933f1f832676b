// What one connection watches of one type, and what it was sent and acknowledged: the state behind ACK/NACK
// detection, resend suppression and the debug views.
import type { WatchedResource } from '../types';
import { WeakInterner } from '../../lib/intern';

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
  /** SotW by-name types: resource name → content hash the client holds, as far as the server knows. */
  known: Map<string, string>;
  /** Delta: what the client holds, shared with every stream that holds the same (see Held). */
  held: Held;
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
    held: Held.EMPTY,
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
    resourceCount: w.digest !== '' ? w.setSize : Math.max(w.known.size, w.held.size),
    lastNack: w.lastNack ? { ...w.lastNack } : undefined,
    lastError: w.lastNack?.message,
  };
}

// ---- names shared between streams -----------------------------------------------------------------------

/**
 * One string per resource name. Every request decodes its names into fresh strings, so a thousand proxies
 * subscribed to the same thousand clusters would keep a million copies in their watches; they keep one.
 * The table is forgotten when it grows past a bound (only the deduplication is lost).
 */
const names = new Map<string, string>();
const MAX_NAMES = 500_000;
export function internName(name: string): string {
  const known = names.get(name);
  if (known !== undefined) return known;
  if (names.size >= MAX_NAMES) names.clear();
  names.set(name, name);
  return name;
}

/** Interned name sets (see internNameSet); the shared ones are copied before a change. */
const nameSets = new WeakInterner<Set<string>>();
const sharedNameSets = new WeakSet<ReadonlySet<string>>();

/**
 * One set for equal sets of subscribed names: proxies of one kind subscribe to the same thousand endpoint
 * names. A shared set is never changed: whoever changes a watch's names copies it first (ownNameSet).
 */
export function internNameSet(set: Set<string>): Set<string> {
  if (sharedNameSets.has(set) || set.size === 0) return set;
  let a = 0;
  let b = 0;
  for (const n of set) {
    const [x, y] = entryHash(n, '');
    a += x;
    b += y;
  }
  const fp = `${set.size}:${a}:${b}`;
  return nameSets.intern(
    fp,
    set,
    (known) => known.size === set.size && [...set].every((n) => known.has(n)),
    (v) => sharedNameSets.add(v),
  );
}

/** The watch's names, copied first when they are a shared set, to be changed. */
export function ownNameSet(w: WatchState): Set<string> {
  if (sharedNameSets.has(w.names)) w.names = new Set(w.names);
  return w.names;
}

// ---- what a delta client holds, shared ---------------------------------------------------------------

/** Two 32-bit FNV-1a hashes (different offset bases) of a held entry, summed into a Held's fingerprint. */
function entryHash(name: string, version: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  const mix = (c: number): void => {
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x01000193) >>> 0;
  };
  for (let i = 0; i < name.length; i++) mix(name.charCodeAt(i));
  mix(0);
  for (let i = 0; i < version.length; i++) mix(version.charCodeAt(i));
  return [a, b];
}

/** Interned Helds by fingerprint; entries go when no stream holds their Held any more. */
const interned = new WeakInterner<Held>();

/**
 * What a delta client holds of one type (resource name → version), as far as the server knows: immutable
 * and interned by content, so the thousand streams of proxies that get the same configuration share one
 * table instead of a thousand equal copies, and work that depends only on it (the diff against a push's
 * resources, see deltaPushDiff) is done once per distinct table. A change makes (or finds) another Held.
 */
export class Held {
  static readonly EMPTY = new Held(new Map(), 0, 0);
  /** Memo of callers keyed by this table (delta.ts keeps its diffs here); dropped with the table. */
  readonly memo = new Map<string, unknown>();

  private constructor(
    private readonly versions: ReadonlyMap<string, string>,
    private readonly sumA: number,
    private readonly sumB: number,
  ) {}

  get size(): number {
    return this.versions.size;
  }

  get(name: string): string | undefined {
    return this.versions.get(name);
  }

  has(name: string): boolean {
    return this.versions.has(name);
  }

  keys(): IterableIterator<string> {
    return this.versions.keys();
  }

  entries(): IterableIterator<[string, string]> {
    return this.versions.entries();
  }

  /** This table with `set` entries added or replaced and `removed` names dropped (interned). */
  with(set: Iterable<readonly [string, string]>, removed: Iterable<string> = []): Held {
    let next: Map<string, string> | undefined;
    let a = this.sumA;
    let b = this.sumB;
    const own = (): Map<string, string> => (next ??= new Map(this.versions));
    for (const name of removed) {
      const v = (next ?? this.versions).get(name);
      if (v === undefined) continue;
      const [x, y] = entryHash(name, v);
      a -= x;
      b -= y;
      own().delete(name);
    }
    for (const [name, version] of set) {
      const v = (next ?? this.versions).get(name);
      if (v === version) continue;
      if (v !== undefined) {
        const [x, y] = entryHash(name, v);
        a -= x;
        b -= y;
      }
      const [x, y] = entryHash(name, version);
      a += x;
      b += y;
      own().set(name, version);
    }
    if (!next) return this;
    return Held.intern(next, a, b);
  }

  /** This table keeping only the names `keep` accepts. */
  filter(keep: (name: string) => boolean): Held {
    const drop: string[] = [];
    for (const name of this.versions.keys()) if (!keep(name)) drop.push(name);
    return drop.length === 0 ? this : this.with([], drop);
  }

  /** Same entries. */
  equals(o: Held): boolean {
    if (o === this) return true;
    if (o.size !== this.size || o.sumA !== this.sumA || o.sumB !== this.sumB) return false;
    for (const [name, v] of this.versions) if (o.versions.get(name) !== v) return false;
    return true;
  }

  private static intern(versions: Map<string, string>, a: number, b: number): Held {
    if (versions.size === 0) return Held.EMPTY;
    // Sums of fewer than 2^21 values below 2^32 stay exact in a double; differences too.
    const fp = `${versions.size}:${a}:${b}`;
    const fresh = new Held(versions, a, b);
    // On a fingerprint collision the fresh table stays unshared (correct, only not deduplicated).
    return interned.intern(fp, fresh, (known) => known.equals(fresh));
  }
}
