// `meshctl waypoint generate` (istioctl waypoint generate): the Gateway API object of a waypoint as YAML.
import { CommandError, flagString, type Handler } from '../cli/context';
import { jsonToGoYaml } from '../lib/goyaml';

export const WAYPOINT_GATEWAY_CLASS = 'mesh-waypoint';
export const WAYPOINT_FOR_LABEL = 'mesh.io/waypoint-for';
export const REV_LABEL = 'mesh.io/rev';
const TRAFFIC_TYPES = ['all', 'none', 'service', 'workload'];
/** The HBONE port every waypoint listens on. */
const HBONE_PORT = 15008;

export interface WaypointOptions {
  name: string;
  /** Empty: the object carries no namespace (generate without --namespace). */
  namespace: string;
  trafficType: string;
  revision: string;
}

/** The waypoint Gateway; throws for a reserved name or an unknown traffic type, with istioctl's texts. */
export function waypointGateway(o: WaypointOptions): Record<string, unknown> {
  const name = o.name === '' ? 'waypoint' : o.name;
  if (name === 'none') throw new Error("invalid name provided for waypoint, 'none' is a reserved value");
  const labels: Record<string, string> = {};
  if (o.trafficType !== '') {
    if (!TRAFFIC_TYPES.includes(o.trafficType)) {
      throw new Error(`invalid traffic type: ${o.trafficType}. Valid options are: [${TRAFFIC_TYPES.join(' ')}]`);
    }
    labels[WAYPOINT_FOR_LABEL] = o.trafficType;
  }
  if (o.revision !== '') labels[REV_LABEL] = o.revision;
  const metadata: Record<string, unknown> = { name };
  if (o.namespace) metadata.namespace = o.namespace;
  if (Object.keys(labels).length) metadata.labels = labels;
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata,
    spec: {
      gatewayClassName: WAYPOINT_GATEWAY_CLASS,
      listeners: [{ name: 'mesh', port: HBONE_PORT, protocol: 'HBONE' }],
    },
  };
}

export const generate: Handler = async (ctx) => {
  let gw: Record<string, unknown>;
  try {
    gw = waypointGateway({
      name: flagString(ctx, 'name'),
      namespace: flagString(ctx, 'namespace'),
      trafficType: flagString(ctx, 'for'),
      revision: flagString(ctx, 'revision'),
    });
  } catch (e) {
    throw new CommandError(`failed to create gateway: ${(e as Error).message}`);
  }
  ctx.stdout.write(jsonToGoYaml(gw));
  return 0;
};
