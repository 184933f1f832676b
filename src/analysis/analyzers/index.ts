// Every analyzer (`meshctl analyze` and the daemon's analysis controller run them all), Istio's first (its analyzers.All order), then mesh's own.
import type { Analyzer } from '../model';
import { annotations } from './annotations';
import { claimRoutes, denyHosts } from './claims';
import { certificates, conflictingGateways, ingressGatewayPort, secrets } from './gateway';
import {
  authorizationPolicies,
  caCertificates,
  deprecation,
  envoyFilterPatches,
  serviceEntryAddresses,
  sidecarSelector,
  telemetryDefaultSelector,
  telemetryLightstep,
  telemetryProviders,
  telemetrySelector,
} from './policy';
import { schemaAnalyzers } from './schema';
import { conflictingMeshGatewayHosts, destinationHosts, destinationRules, gateways, jwtClaimRoute } from './virtualservice';
import { applicationUID, externalControlPlane, image, imageAuto, injection, multiService, portName, webhook } from './workloads';

export const ALL_ANALYZERS: readonly Analyzer[] = [
  annotations,
  authorizationPolicies,
  multiService,
  applicationUID,
  deprecation,
  externalControlPlane,
  ingressGatewayPort,
  certificates,
  secrets,
  conflictingGateways,
  injection,
  image,
  imageAuto,
  portName,
  sidecarSelector,
  conflictingMeshGatewayHosts,
  destinationHosts,
  destinationRules,
  gateways,
  jwtClaimRoute,
  caCertificates,
  serviceEntryAddresses,
  webhook,
  envoyFilterPatches,
  telemetryProviders,
  telemetrySelector,
  telemetryDefaultSelector,
  telemetryLightstep,
  ...schemaAnalyzers,
  claimRoutes,
  denyHosts,
];

/** analyzers.NamedCombined: the named ones, or all when none of the names is known. */
export function selectAnalyzers(names: readonly string[]): readonly Analyzer[] {
  if (names.length === 0) return ALL_ANALYZERS;
  const set = new Set(names);
  const picked = ALL_ANALYZERS.filter((a) => set.has(a.name));
  return picked.length > 0 ? picked : ALL_ANALYZERS;
}

/** `--list-analyzers`: `* name:` and the indented description, sorted by name (AnalyzersAsString). */
export function analyzersAsString(analyzers: readonly Analyzer[]): string {
  return [...analyzers]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((a) => `* ${a.name}:\n` + (a.description ? `    ${a.description}\n` : ''))
    .join('');
}
