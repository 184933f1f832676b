// The annotations and status condition of WorkloadEntries that auto-registration and health checks write
// (Istio's annotation.IoIstio* and model/status), read by the registry and written by the daemon. Renamed
// as everywhere in mesh: `istio.io/<x>` is written `mesh.io/<x>`; Istio's names are still read.

/** Istio's annotation.IoIstioAutoRegistrationGroup: the WorkloadGroup an entry was registered from. */
export const AUTO_REGISTRATION_GROUP = 'mesh.io/autoRegistrationGroup';
/** Istio's annotation.IoIstioWorkloadController: the daemon instance the workload is connected to. */
export const WORKLOAD_CONTROLLER = 'mesh.io/workloadController';
/** Istio's annotation.IoIstioConnectedAt. */
export const CONNECTED_AT = 'mesh.io/connectedAt';
/** Istio's annotation.IoIstioDisconnectedAt. */
export const DISCONNECTED_AT = 'mesh.io/disconnectedAt';
/** Istio's status.WorkloadEntryHealthCheckAnnotation (`proxy.istio.io/health-checks-enabled`). */
export const HEALTH_CHECKS_ENABLED = 'proxy.mesh.io/health-checks-enabled';
/** Istio's status.ConditionHealthy. */
export const CONDITION_HEALTHY = 'Healthy';
/** Istio's spelling of each annotation we write, still read. */
export const ISTIO_NAME: Readonly<Record<string, string>> = {
  [AUTO_REGISTRATION_GROUP]: 'istio.io/autoRegistrationGroup',
  [WORKLOAD_CONTROLLER]: 'istio.io/workloadController',
  [CONNECTED_AT]: 'istio.io/connectedAt',
  [DISCONNECTED_AT]: 'istio.io/disconnectedAt',
  [HEALTH_CHECKS_ENABLED]: 'proxy.istio.io/health-checks-enabled',
};

type Annotations = Readonly<Record<string, string>> | undefined;

/** An annotation under our name, else Istio's; undefined when neither is set. */
export function annotation(a: Annotations, name: string): string | undefined {
  const ours = a?.[name];
  if (ours !== undefined) return ours;
  const istio = ISTIO_NAME[name];
  return istio !== undefined ? a?.[istio] : undefined;
}

/**
 * Istio's serviceentry isHealthy: an entry whose health-checks annotation parses as true is healthy only
 * with a `Healthy` condition that is True (a new entry is unhealthy until a probe succeeds); any other entry
 * is healthy.
 */
export function workloadEntryHealthy(annotations: Annotations, conditions: ReadonlyArray<{ type: string; status: string }> | undefined): boolean {
  if (!goParseBool(annotation(annotations, HEALTH_CHECKS_ENABLED))) return true;
  const c = conditions?.find((x) => x.type === CONDITION_HEALTHY);
  // Istio's GetBoolCondition: exactly "True"; "False", anything else or no condition is the default, false.
  return c?.status === 'True';
}

/** Go's strconv.ParseBool, false for anything it rejects. */
function goParseBool(s: string | undefined): boolean {
  return s === '1' || s === 't' || s === 'T' || s === 'true' || s === 'TRUE' || s === 'True';
}
