// An upstream endpoint of a cluster: address, weight, health as EDS/DNS gave it, outlier state and
// the per-host counters Envoy's /clusters shows. Connection pools hang off the host (upstream/pool.ts).
import type { JsonObject } from '@bufbuild/protobuf';
import type { UpstreamTransport } from './transport-socket';
import { joinHostPort } from '../../lib/hostport';

export type HealthStatus = 'unknown' | 'healthy' | 'unhealthy' | 'draining' | 'timeout' | 'degraded';

export interface Locality {
  region: string;
  zone: string;
  subZone: string;
}

export class HostStats {
  cxTotal = 0;
  cxActive = 0;
  cxConnectFail = 0;
  rqTotal = 0;
  rqActive = 0;
  rqSuccess = 0;
  rqError = 0;
  rqTimeout = 0;
}

export class Host {
  readonly stats = new HostStats();
  /** Outlier detection state. */
  consecutive5xx = 0;
  consecutiveGatewayFailure = 0;
  consecutiveLocalOriginFailure = 0;
  ejectedUntil = 0;
  ejections = 0;
  /** Opaque per-protocol pool handles owned by upstream/pool.ts. */
  pool: unknown;
  /** The transport socket chosen for this host by the cluster's transport_socket_matches. */
  transport: UpstreamTransport | undefined;

  constructor(
    readonly address: string,
    readonly port: number,
    /** EDS endpoint hostname or the DNS name a DNS cluster resolved (auto_host_rewrite uses it). */
    readonly hostname: string,
    public weight: number,
    public health: HealthStatus,
    public priority: number,
    public locality: Locality,
    public metadata: JsonObject | undefined,
    /** Unix socket path for pipe addresses. */
    readonly pipe?: string,
    /** Filter metadata of the endpoint's LocalityLbEndpoints (a second source for transport socket matches). */
    public localityMetadata?: JsonObject,
  ) {}

  get key(): string {
    return this.pipe ?? joinHostPort(this.address, this.port);
  }

  get ejected(): boolean {
    return this.ejectedUntil > 0;
  }

  /** Healthy for load balancing: EDS said so (or did not say) and outlier detection has not ejected it. */
  get healthyForLb(): boolean {
    return (this.health === 'unknown' || this.health === 'healthy') && this.ejectedUntil === 0;
  }

  get degraded(): boolean {
    return this.health === 'degraded' && this.ejectedUntil === 0;
  }

  /** Envoy's /clusters health_flags. */
  healthFlags(): string {
    const f: string[] = [];
    if (this.ejectedUntil > 0) f.push('/failed_outlier_check');
    if (this.health === 'unhealthy') f.push('/failed_eds_health');
    if (this.health === 'draining') f.push('/pending_dynamic_removal', '/eds_status_draining');
    if (this.health === 'degraded') f.push('/degraded_eds_health');
    if (this.health === 'timeout') f.push('/failed_eds_health');
    return f.length === 0 ? 'healthy' : f.join('');
  }
}
