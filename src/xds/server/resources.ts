// Generated resources with a content hash: the hash is the per-resource version in delta xDS and what the
// server compares to skip resending unchanged resources.
import { hash } from 'node:crypto';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { Resource } from '../types';

export interface HashedResource {
  name: string;
  resource: Any;
  /** 16 hex digits of SHA-1 over the packed bytes (a change detector, not a security boundary). */
  hash: string;
  /** The two 32-bit halves of `hash`, for setDigest. */
  readonly h1: number;
  readonly h2: number;
  /** Bytes of the packed resource, for pilot_xds_config_size_bytes. */
  size: number;
}

// Generators hand the same Resource objects to every proxy that shares them (and across pushes when
// unchanged): the hash rides on the object itself, so a proxy's thousands of resources cost a property read
// each, not a hash or a map lookup.
const HASHED = Symbol('hashed');
type Carrier = Resource & { [HASHED]?: HashedResource };

export function hashResource(r: Resource): HashedResource {
  const known = (r as Carrier)[HASHED];
  if (known) return known;
  const digest = hash('sha1', r.resource.value, 'hex');
  const h: HashedResource = {
    name: r.name,
    resource: r.resource,
    hash: digest.slice(0, 16),
    h1: Number.parseInt(digest.slice(0, 8), 16),
    h2: Number.parseInt(digest.slice(8, 16), 16),
    size: r.resource.value.byteLength,
  };
  Object.defineProperty(r, HASHED, { value: h });
  return h;
}

/**
 * One order-independent digest of a set of resources, for "did anything change" checks that run per proxy
 * per push: the count plus two sums of 32-bit chunks of the content hashes (no sorting, no allocation per
 * resource). Envoy resources carry their name in their bytes, so content hashes cover renames too.
 */
export function setDigest(resources: readonly HashedResource[]): string {
  const memo = digests.get(resources);
  if (memo !== undefined) return memo;
  let a = 0;
  let b = 0;
  for (const r of resources) {
    a += r.h1;
    b += r.h2;
  }
  // Sums of fewer than 2^21 values below 2^32 stay exact in a double.
  const digest = `${resources.length}:${a.toString(36)}:${b.toString(36)}`;
  digests.set(resources, digest);
  return digest;
}

// Cached generations hand out the same (never mutated) array to every proxy: compute its digest once.
const digests = new WeakMap<readonly HashedResource[], string>();

export function totalSize(resources: readonly HashedResource[]): number {
  let n = 0;
  for (const r of resources) n += r.size;
  return n;
}
