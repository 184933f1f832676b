// Which resource types a full push has to regenerate for a proxy, from the kinds of the configs that
// changed: Istio 1.26's cdsNeedsPush / edsNeedsPush / ldsNeedsPush / rdsNeedsPush skip lists. A push that
// names no configs (a registry change, a proxy's own request) regenerates every type.
import { TYPE_URL } from '../../lib/xds/type-urls';

const set = (...kinds: string[]): ReadonlySet<string> => new Set(kinds);

const SKIPPED_CDS = set(
  'Gateway',
  'WorkloadEntry',
  'WorkloadGroup',
  'AuthorizationPolicy',
  'RequestAuthentication',
  'Secret',
  'Telemetry',
  'WasmPlugin',
  'ProxyConfig',
  'DNSName',
);
const SKIPPED_EDS = set(
  'Gateway',
  'VirtualService',
  'WorkloadGroup',
  'AuthorizationPolicy',
  'RequestAuthentication',
  'Secret',
  'Telemetry',
  'WasmPlugin',
  'ProxyConfig',
  'DNSName',
  'Sidecar',
);
const SKIPPED_LDS_ROUTER = set('WorkloadGroup', 'WorkloadEntry', 'Secret', 'ProxyConfig', 'DNSName');
const SKIPPED_LDS_SIDECAR = set('Gateway', 'WorkloadGroup', 'WorkloadEntry', 'Secret', 'ProxyConfig', 'DNSName');
// Istio's skippedNdsConfigs: kinds that cannot change which names a proxy sees or their addresses.
const SKIPPED_NDS = set(
  'Gateway',
  'VirtualService',
  'DestinationRule',
  'Secret',
  'Telemetry',
  'EnvoyFilter',
  'WorkloadEntry',
  'WorkloadGroup',
  'AuthorizationPolicy',
  'RequestAuthentication',
  'PeerAuthentication',
  'WasmPlugin',
  'ProxyConfig',
  'MeshConfig',
);
const SKIPPED_RDS = set('WorkloadEntry', 'WorkloadGroup', 'AuthorizationPolicy', 'RequestAuthentication', 'PeerAuthentication', 'Secret');

function skippedFor(typeUrl: string, proxyType: string): ReadonlySet<string> | undefined {
  switch (typeUrl) {
    case TYPE_URL.cluster:
      return SKIPPED_CDS;
    case TYPE_URL.endpoint:
      return SKIPPED_EDS;
    case TYPE_URL.listener:
      return proxyType === 'router' ? SKIPPED_LDS_ROUTER : SKIPPED_LDS_SIDECAR;
    case TYPE_URL.route:
    case TYPE_URL.virtualHost:
      // virtual hosts are the content of route configurations: the same kinds change them
      return SKIPPED_RDS;
    case TYPE_URL.nameTable:
      return SKIPPED_NDS;
    default:
      return undefined;
  }
}

/** `configsUpdated` holds `Kind/namespace/name` keys. Types without a skip list always push. */
export function typeNeedsFullPush(typeUrl: string, proxyType: string, configsUpdated: ReadonlySet<string>): boolean {
  if (configsUpdated.size === 0) return true;
  // Istio sdsNeedsPush: credentials change only with Secrets (ConfigMap credentials are not served).
  if (typeUrl === TYPE_URL.secret) return [...configsUpdated].some((k) => k.startsWith('Secret/'));
  const skipped = skippedFor(typeUrl, proxyType);
  if (!skipped) return true;
  for (const key of configsUpdated) {
    const slash = key.indexOf('/');
    if (!skipped.has(slash < 0 ? key : key.slice(0, slash))) return true;
  }
  return false;
}

/**
 * Istio's canSendPartialFullPushes: when every config a full push names that EDS does not skip is a service
 * (`ServiceEntry/namespace/hostname`), only those hostnames' load assignments can have changed, so only they are
 * regenerated. undefined: every watched load assignment (a push naming nothing, or other kinds).
 */
export function partialEdsHosts(configsUpdated: ReadonlySet<string>): ReadonlySet<string> | undefined {
  if (configsUpdated.size === 0) return undefined;
  const hosts = new Set<string>();
  for (const key of configsUpdated) {
    const [kind = '', , name] = key.split('/');
    if (SKIPPED_EDS.has(kind)) continue;
    if (kind !== 'ServiceEntry' || name === undefined) return undefined;
    hosts.add(name);
  }
  return hosts;
}
