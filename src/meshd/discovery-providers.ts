// What the discovery daemon's shell reads (MeshdProviders) from the composed parts: readiness from the
// config sources and registries, the debug pages' views of the current push context, admission validation,
// the injector and identity, and shutdown through the closer stack.
import type { Config } from '../config/types';
import { MESH_KINDS } from '../config/schemas';
import { validateObject } from '../config/validate/object';
import type { Endpoint } from '../discovery/model';
import type { Closers } from '../lib/closers';
import type { PushController } from '../xds/push/controller';
import type { ConfigSources } from './config-sources';
import type { DaemonIdentity } from './identity';
import type { MeshdProviders, ValidationResult, XdsServerHandle } from './providers';
import type { Writers } from './writers';

/** Validation for the webhook: the object as Kubernetes sends it, through the config model's one check. */
function validateAdmission(obj: Readonly<Record<string, unknown>>): ValidationResult {
  const v = validateObject(obj, { origin: { source: 'admission review' } });
  return v.unknownType ? { errors: [], unknownType: true } : { errors: v.messages, warnings: v.warnings };
}

export interface DiscoveryParts extends ConfigSources {
  pushes: PushController;
  xds: XdsServerHandle;
  identity: DaemonIdentity;
  writers: Writers;
  closers: Closers;
}

export function discoveryProviders(p: DiscoveryParts): MeshdProviders {
  const { store, orchestrator, registry, pushes, identity } = p;
  return {
    synced: () => {
      if (!store.hasSynced()) return { ready: false, reason: 'config not synced' };
      if (orchestrator && !orchestrator.hasSynced()) return { ready: false, reason: 'remote clusters not synced' };
      if (!registry.hasSynced()) return { ready: false, reason: 'service registries not synced' };
      return { ready: true };
    },
    configs: () => MESH_KINDS.flatMap((k) => store.list(k) as readonly Config[]),
    services: () => pushes.current().allServices(),
    ...(p.gatewayApi ? { gatewayStatus: () => p.gatewayApi!.statusObjects() } : {}),
    ...(orchestrator ? { clusters: () => orchestrator.clusters() } : {}),
    endpoints: () =>
      pushes
        .current()
        .allServices()
        .flatMap((s) => registry.endpoints(s.hostname, s.namespace) as readonly Endpoint[]),
    pushStatus: () => pushes.current().status.toJSON(),
    xds: p.xds,
    validate: validateAdmission,
    ...(p.writers.inject ? { inject: p.writers.inject.handler() } : {}),
    identity,
    authenticateDebug: (req) => identity.authenticateDebug(req),
    close: () => p.closers.close(),
  };
}
