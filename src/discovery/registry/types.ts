// What every service registry offers the aggregate and the push context.
import type { Endpoint, Service } from '../model';

/** Which hostnames changed, and whether only their endpoints did (incremental EDS is then enough). */
export interface RegistryEvent {
  registry: string;
  /** Hostnames whose service or endpoints changed (added, updated, removed). */
  hostnames: ReadonlySet<string>;
  /** True when no service definition changed, only endpoints of the named hosts. */
  endpointsOnly: boolean;
}

export type RegistryHandler = (event: RegistryEvent) => void;

export interface ServiceRegistry {
  /** Registry identity: `Orchestrator` (`Orchestrator/<cluster>` for a remote cluster), `External` (ServiceEntry), `Mock`. */
  readonly id: string;
  /**
   * `Orchestrator` for the registry of a cluster's Services: the same hostname in several clusters is one
   * service whose endpoints are those of every cluster (Istio's multicluster merge by hostname).
   */
  readonly provider?: 'Orchestrator';
  services(): readonly Service[];
  /** Endpoints of every port of the service with this hostname (in the given namespace when known). */
  endpoints(hostname: string, namespace?: string): readonly Endpoint[];
  subscribe(handler: RegistryHandler): () => void;
  hasSynced(): boolean;
  close(): void;
}

export interface RegistryOptions {
  /** DNS domain suffix (`--domain`, default cluster.local). */
  domain?: string;
  /** Cluster ID (`--clusterID`, default Orchestrator). */
  clusterId?: string;
  /** SPIFFE trust domain for service-account identities (default cluster.local). */
  trustDomain?: string;
}

export const DEFAULT_DOMAIN = 'cluster.local';
export const DEFAULT_CLUSTER_ID = 'Orchestrator';
