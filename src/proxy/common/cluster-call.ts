// A request the engine makes itself through one of its clusters (Envoy's async HTTP client on the cluster
// manager): remote JWKS fetches, trace and access-log exports to their collectors.

export interface UpstreamCall {
  method: string;
  path: string;
  authority: string;
  headers?: Readonly<Record<string, string>>;
  body?: Buffer;
  timeoutMs: number;
}

export interface UpstreamCallResult {
  status: number;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: Buffer;
}

/** Fails when the cluster is unknown. */
export type ClusterCall = (cluster: string, call: UpstreamCall) => Promise<UpstreamCallResult>;
