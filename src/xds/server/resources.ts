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
  /** Bytes of the packed resource, for pilot_xds_config_size_bytes. */
  size: number;
}

export function hashResource(r: Resource): HashedResource {
  // Generators hand the same packed Any to every proxy that shares it: hash (and later encode) it once.
  const known = hashed.get(r.resource);
  if (known && known.name === r.name) return known;
  const digest = hash('sha1', r.resource.value, 'hex');
  const h = { name: r.name, resource: r.resource, hash: digest.slice(0, 16), size: r.resource.value.byteLength };
  hashed.set(r.resource, h);
  return h;
}

const hashed = new WeakMap<Any, HashedResource>();

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
    a += Number.parseInt(r.hash.slice(0, 8), 16);
    b += Number.parseInt(r.hash.slice(8, 16), 16);
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
