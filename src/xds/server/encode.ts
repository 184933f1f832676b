// Hand-rolled protobuf encoding (src/lib/protowire.ts) of the two response messages. Every proxy gets the same resources, so the
// wire bytes of each resource (its Any, or delta Resource) are encoded once and reused from a WeakMap; a
// response is then a few small fields plus byte copies instead of a full message serialization per proxy.
// The resources of one response, as a block, are reused too while the block lives: proxies of one kind are
// sent the same resource list (one shared delta diff, one cached generation), and a thousand of them
// connecting at once would otherwise each join the same thousands of chunks again.
// The output is byte-for-byte what toBinary would produce for the same message (tested).
import { toBinary } from '@bufbuild/protobuf';
import { ControlPlaneSchema, type ControlPlane } from '../../gen/envoy/config/core/v3/base_pb';
import type { HashedResource } from './resources';
import { concat, lengthDelimited, stringField } from '../../lib/protowire';

const utf8 = new TextEncoder();

function anyBytes(r: HashedResource): Buffer {
  const parts: Buffer[] = [];
  const t = stringField(1, r.resource.typeUrl);
  if (t) parts.push(t);
  if (r.resource.value.length > 0) parts.push(lengthDelimited(2, r.resource.value));
  return Buffer.concat(parts);
}

const sotwChunks = new WeakMap<HashedResource, Buffer>();
const deltaChunks = new WeakMap<HashedResource, Buffer>();

/** `resources` (field 2) entry of a DiscoveryResponse: the packed Any. */
function sotwChunk(r: HashedResource): Buffer {
  let c = sotwChunks.get(r);
  if (!c) {
    c = lengthDelimited(2, anyBytes(r));
    sotwChunks.set(r, c);
  }
  return c;
}

/** `resources` (field 2) entry of a DeltaDiscoveryResponse: Resource{version=1, resource=2, name=3}. */
function deltaChunk(r: HashedResource): Buffer {
  let c = deltaChunks.get(r);
  if (!c) {
    c = lengthDelimited(2, concat([stringField(1, r.hash), lengthDelimited(2, anyBytes(r)), stringField(3, r.name)]));
    deltaChunks.set(r, c);
  }
  return c;
}

/**
 * Encoded resource lists by list, held weakly: a block is reused by the responses written while it is alive
 * (the streams of one kind, answered one after another), and the collector may drop it any time after, so a
 * burst of distinct lists never stays in memory because of this cache. A list is never changed once sent.
 */
const sotwBlocks = new WeakMap<readonly HashedResource[], WeakRef<Buffer>>();
const deltaBlocks = new WeakMap<readonly HashedResource[], WeakRef<Buffer>>();

function block(
  blocks: WeakMap<readonly HashedResource[], WeakRef<Buffer>>,
  resources: readonly HashedResource[],
  chunk: (r: HashedResource) => Buffer,
): Buffer {
  const known = blocks.get(resources)?.deref();
  if (known) return known;
  const b = concat(resources.map(chunk));
  blocks.set(resources, new WeakRef(b));
  return b;
}

const controlPlanes = new WeakMap<ControlPlane, Uint8Array>();

function controlPlaneField(field: number, cp: ControlPlane | undefined): Buffer | undefined {
  if (!cp) return undefined;
  let b = controlPlanes.get(cp);
  if (!b) {
    b = toBinary(ControlPlaneSchema, cp);
    controlPlanes.set(cp, b);
  }
  return lengthDelimited(field, b);
}

// Fields are written in field-number order, as protobuf-es does.

/** envoy.service.discovery.v3.DiscoveryResponse. */
export function encodeDiscoveryResponse(m: {
  versionInfo: string;
  resources: readonly HashedResource[];
  typeUrl: string;
  nonce: string;
  controlPlane?: ControlPlane;
}): Buffer {
  return concat([
    stringField(1, m.versionInfo),
    block(sotwBlocks, m.resources, sotwChunk),
    stringField(4, m.typeUrl),
    stringField(5, m.nonce),
    controlPlaneField(6, m.controlPlane),
  ]);
}

/** envoy.service.discovery.v3.DeltaDiscoveryResponse. */
export function encodeDeltaDiscoveryResponse(m: {
  systemVersionInfo: string;
  resources: readonly HashedResource[];
  typeUrl: string;
  nonce: string;
  removedResources: readonly string[];
  controlPlane?: ControlPlane;
}): Buffer {
  return concat([
    stringField(1, m.systemVersionInfo),
    block(deltaBlocks, m.resources, deltaChunk),
    stringField(4, m.typeUrl),
    stringField(5, m.nonce),
    ...m.removedResources.map((r) => lengthDelimited(6, utf8.encode(r))),
    controlPlaneField(7, m.controlPlane),
  ]);
}
