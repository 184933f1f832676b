// The contract between the ADS server (src/xds/server) and the generators (src/xds/gen): what a push
// asks for and what a generator returns. Generators are pure functions of (proxy, watch, push).
import type { Any } from '@bufbuild/protobuf/wkt';
import type { Proxy } from '../discovery/model';

/** A named, packed xDS resource. */
export interface Resource {
  name: string;
  resource: Any;
}

/** What one proxy watches of one type. `wildcard` with no names means "everything" (LDS/CDS). */
export interface WatchedResource {
  typeUrl: string;
  resourceNames: ReadonlySet<string>;
  wildcard: boolean;
  /** VirtualHost watches: the RouteConfiguration names the proxy watches, whose virtual hosts these are. */
  routeConfigs?: ReadonlySet<string>;
}

/** Why and with what a push happens. `P` is the push context snapshot (src/discovery). */
export interface PushRequest<P> {
  /** Full push: everything may have changed. Otherwise only endpoints of `edsUpdates` hosts changed. */
  full: boolean;
  /** `Kind/namespace/name` of the configs that changed (empty = unknown, treat as all). */
  configsUpdated: ReadonlySet<string>;
  /** Hostnames whose endpoints changed (incremental EDS). */
  edsUpdates: ReadonlySet<string>;
  /** Reason → count, for `pilot_push_triggers{type=…}`. */
  reasons: ReadonlyMap<string, number>;
  push: P;
  /** When the first change of this push was seen (ms since epoch), for convergence time. */
  start: number;
  /**
   * Type URLs this push provably leaves as they were for every proxy (src/xds/gen/unchanged.ts): a full push
   * does not regenerate them. Absent: none.
   */
  unchangedTypes?: ReadonlySet<string>;
}

export interface GenerateResult {
  resources: Resource[];
  /** Names no longer present (delta xDS); SotW derives removals itself. */
  removed?: string[];
}

export interface Generator<P> {
  generate(proxy: Proxy, watched: WatchedResource, req: PushRequest<P>): GenerateResult;
}
