// A workload's identity as Istio's telemetry sees it (istio/proxy release-1.26
// extensions/common/metadata_object.{h,cc}: WorkloadMetadataObject and its conversions): read from this
// proxy's node metadata (NAME, NAMESPACE, WORKLOAD_NAME, CLUSTER_ID, OWNER, LABELS), sent to peers as the
// base64 protobuf Struct of `x-envoy-peer-metadata`, read back from a peer's header, or from an endpoint's
// `istio.workload` metadata (`name;namespace;canonical;revision;cluster`).
// Differs on purpose: LABELS keys are read under both `service.mesh.io/*` (this mesh's pod labels) and
// Istio's `service.istio.io/*`; what we send carries the key the pod had (the mesh one when neither).
import { fromBinary, fromJson, toBinary, toJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { StructSchema } from '@bufbuild/protobuf/wkt';

export type WorkloadType = 'pod' | 'deployment' | 'job' | 'cronjob' | '';

export interface Workload {
  /** Instance (pod) name: NAME. */
  readonly name: string;
  readonly namespace: string;
  readonly workload: string;
  readonly cluster: string;
  /** Canonical service and revision (Istio's `service` and `revision` peer fields, as CEL reads them). */
  readonly service: string;
  readonly revision: string;
  readonly app: string;
  readonly version: string;
  readonly type: WorkloadType;
  /** SPIFFE identity, when the source knows it (never sent in headers). */
  readonly identity: string;
}

const OWNER_PREFIX = 'kubernetes://apis/apps/v1/namespaces/';
const TYPES: ReadonlySet<string> = new Set(['pod', 'deployment', 'job', 'cronjob']);
export const CANONICAL_NAME_LABELS = ['service.mesh.io/canonical-name', 'service.istio.io/canonical-name'] as const;
export const CANONICAL_REVISION_LABELS = ['service.mesh.io/canonical-revision', 'service.istio.io/canonical-revision'] as const;

function str(v: JsonValue | undefined): string {
  return typeof v === 'string' ? v : '';
}
function obj(v: JsonValue | undefined): JsonObject {
  return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
}
function firstOf(labels: JsonObject, keys: readonly string[]): string {
  for (const k of keys) if (typeof labels[k] === 'string') return labels[k];
  return '';
}

/** Istio parseOwner: the `<type>s/<workload>` tail of OWNER, when it names a known type. */
export function parseOwner(owner: string, workload: string): WorkloadType {
  if (owner.length <= workload.length + 2) return '';
  const head = owner.slice(0, owner.length - workload.length - 2);
  const t = head.slice(head.lastIndexOf('/') + 1);
  return TYPES.has(t) ? (t as WorkloadType) : '';
}

/** Istio convertStructToWorkloadMetadata over node metadata or a peer's exchanged Struct. */
export function workloadFromStruct(md: JsonObject, identity = ''): Workload {
  const labels = obj(md['LABELS']);
  const workload = str(md['WORKLOAD_NAME']);
  return {
    name: str(md['NAME']),
    namespace: str(md['NAMESPACE']),
    workload,
    cluster: str(md['CLUSTER_ID']),
    service: firstOf(labels, CANONICAL_NAME_LABELS),
    revision: firstOf(labels, CANONICAL_REVISION_LABELS),
    app: str(labels['app']),
    version: str(labels['version']),
    type: parseOwner(str(md['OWNER']), workload),
    identity,
  };
}

/** Istio convertEndpointMetadata: `workload;namespace;canonical;revision;cluster` (fewer than 5 parts: none). */
export function workloadFromEndpoint(encoded: string): Workload | undefined {
  const p = encoded.split(';');
  if (p.length < 5) return undefined;
  return {
    name: '',
    namespace: p[1]!,
    workload: p[0]!,
    cluster: p[4]!,
    service: p[2]!,
    revision: p[3]!,
    app: '',
    version: '',
    type: '',
    identity: '',
  };
}

/**
 * Istio convertWorkloadMetadataToStruct: what a proxy sends of itself (only these fields, empty ones left
 * out, OWNER rebuilt from the type). Keys in sorted order: protobuf maps serialise in insertion order here,
 * and Istio serialises deterministically (sorted).
 */
export function exchangeStruct(w: Workload, labelKeys: { canonicalName: string; canonicalRevision: string }): JsonObject {
  const labels: Record<string, string> = {};
  if (w.service) labels[labelKeys.canonicalName] = w.service;
  if (w.revision) labels[labelKeys.canonicalRevision] = w.revision;
  if (w.app) labels['app'] = w.app;
  if (w.version) labels['version'] = w.version;
  const out: Record<string, JsonValue> = {};
  if (w.cluster) out['CLUSTER_ID'] = w.cluster;
  out['LABELS'] = sortedObject(labels);
  if (w.name) out['NAME'] = w.name;
  if (w.namespace) out['NAMESPACE'] = w.namespace;
  if (w.type) out['OWNER'] = `${OWNER_PREFIX}${w.namespace}/${w.type}s/${w.workload}`;
  if (w.workload) out['WORKLOAD_NAME'] = w.workload;
  return out;
}

function sortedObject(o: Record<string, string>): JsonObject {
  const out: JsonObject = {};
  for (const k of Object.keys(o).sort()) out[k] = o[k]!;
  return out;
}

/** The label keys this proxy's own LABELS used, so that what it sends reads as its pod labels do. */
export function labelKeysOf(md: JsonObject): { canonicalName: string; canonicalRevision: string } {
  const labels = obj(md['LABELS']);
  return {
    canonicalName: CANONICAL_NAME_LABELS.find((k) => typeof labels[k] === 'string') ?? CANONICAL_NAME_LABELS[0],
    canonicalRevision: CANONICAL_REVISION_LABELS.find((k) => typeof labels[k] === 'string') ?? CANONICAL_REVISION_LABELS[0],
  };
}

/** base64 of the protobuf Struct (the `x-envoy-peer-metadata` value). */
export function encodeExchange(s: JsonObject): string {
  return Buffer.from(toBinary(StructSchema, fromJson(StructSchema, s))).toString('base64');
}

/** The Struct of an `x-envoy-peer-metadata` value; undefined when it is not base64 of a Struct. */
export function decodeExchange(value: string): JsonObject | undefined {
  try {
    const j = toJson(StructSchema, fromBinary(StructSchema, Buffer.from(value, 'base64')));
    return j && typeof j === 'object' && !Array.isArray(j) ? j : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Decoded peers by header value (Istio keeps an LRU keyed by the peer id): the same few peers send the same
 * header on every request, so a request decodes nothing and the stats filter sees the same object (its
 * label strings are cached per object).
 */
export class PeerCache {
  private readonly byValue = new Map<string, Workload | null>();
  constructor(private readonly max = 1000) {}
  lookup(value: string): Workload | undefined {
    let w = this.byValue.get(value);
    if (w === undefined) {
      const s = decodeExchange(value);
      w = s ? workloadFromStruct(s) : null;
      if (this.byValue.size >= this.max) {
        // drop the oldest quarter, as Istio's cache does
        let n = this.max >> 2;
        for (const k of this.byValue.keys()) {
          if (n-- <= 0) break;
          this.byValue.delete(k);
        }
      }
      this.byValue.set(value, w);
    }
    return w ?? undefined;
  }
}

/** Filter state keys Istio's filters share (istio/proxy metadata_object.h). */
export const DOWNSTREAM_PEER = 'downstream_peer';
export const UPSTREAM_PEER = 'upstream_peer';
