// What each change asks of the ADS server, as pure functions of the change and the push contexts. They follow
// where Istio builds its PushRequests: bootstrap/server.go initRegistryEventHandlers (a config event is a
// ConfigUpdate push naming the config; a service event an unnamed ServiceUpdate push), xds/eds.go EDSUpdate
// (endpoint-only: incremental EDS), serviceregistry/kube/controller/endpointslice.go (a headless service's
// endpoints are its DNS answers, so a full push naming it), serviceregistry/serviceentry/controller.go
// (workloadEntryHandler: a DNS ServiceEntry's endpoints are in its clusters, so a full push naming it) and
// bootstrap's secret handler (SecretTrigger).
import type { ConfigEvent } from '../../config/store';
import { configKey, type Kind } from '../../config/types';
import type { PushContext } from '../../discovery/push-context';
import { typesUnchanged } from '../gen/unchanged';
import type { PushRequestInit } from '../server';

/**
 * Kinds read only through the service registries: Services, EndpointSlices and Pods, and (as Istio's
 * initRegistryEventHandlers skips them: the ServiceEntry controller handles them) ServiceEntries,
 * WorkloadEntries and WorkloadGroups reach proxies through the registry's events — endpoint-only changes as
 * incremental EDS, service changes as a full push naming the services — never as configuration pushes.
 */
export const REGISTRY_ONLY_KINDS: ReadonlySet<Kind> = new Set<Kind>([
  'Service',
  'EndpointSlice',
  'Pod',
  'ServiceEntry',
  'WorkloadEntry',
  'WorkloadGroup',
]);

/** The configuration events a config push is for: all but the registry-only kinds. */
export function configEventsToPush(events: readonly ConfigEvent[]): readonly ConfigEvent[] {
  return events.filter((e) => !REGISTRY_ONLY_KINDS.has(e.config.kind));
}

/** Secrets are read live by the credentials generator: a change of Secrets alone changes no push context. */
export function secretsOnly(events: readonly ConfigEvent[]): boolean {
  return events.every((e) => e.config.kind === 'Secret');
}

/** A full push naming the changed Secrets (`Secret/ns/name`, or ALL_SECRETS_OF a namespace). */
export function secretPush(keys: readonly string[]): PushRequestInit {
  return { full: true, configsUpdated: keys, reasons: { secret: keys.length } };
}

/** A full push naming the changed configs; its push context is built when it is dispatched. */
export function configPush(events: readonly ConfigEvent[]): PushRequestInit {
  return { full: true, configsUpdated: new Set(events.map((e) => configKey(e.config))), reasons: { config: events.length } };
}

/** One build of the push context: the snapshot before it and the one it made. */
export interface PushContextStep {
  prev: PushContext;
  next: PushContext;
}

/**
 * The types a dispatched full push naming `configsUpdated` leaves as every proxy has them, given the builds since
 * the previous dispatch (usually one; more when a new connection or a debug page asked for the context in
 * between, and proxies may hold any of them): those each build provably left unchanged; undefined for none.
 */
export function unchangedAcross(steps: readonly PushContextStep[], configsUpdated: ReadonlySet<string>): ReadonlySet<string> | undefined {
  let out: Set<string> | undefined;
  for (const { prev, next } of steps) {
    const u = typesUnchanged(prev, next, configsUpdated);
    out = out ? new Set([...out].filter((t) => u.has(t))) : u;
  }
  return out && out.size > 0 ? out : undefined;
}

/** The kinds of configuration the events changed, for an incremental build of the push context. */
export function changedKinds(events: readonly ConfigEvent[]): Set<Kind> {
  return new Set(events.map((e) => e.config.kind));
}

/** Endpoints alone changed: incremental EDS for those hostnames. */
export function endpointPush(hostnames: ReadonlySet<string>): PushRequestInit {
  return { full: false, edsUpdates: hostnames, reasons: { endpoint: hostnames.size } };
}

/**
 * Services changed: a full push naming each as `ServiceEntry/namespace/hostname` (Istio's serviceHandler), or
 * naming nothing (everything) when some hostname's namespace is not known.
 */
export function servicePush(hostnames: ReadonlySet<string>, keys: readonly string[] | undefined): PushRequestInit {
  return { full: true, ...(keys ? { configsUpdated: keys } : {}), reasons: { service: hostnames.size } };
}

/**
 * `ServiceEntry/namespace/hostname` for every service of `hostnames` in any of the push contexts given (the one
 * before the change knows deleted services, the one after added ones); undefined when a hostname is in none.
 */
export function serviceKeys(hostnames: ReadonlySet<string>, contexts: readonly Pick<PushContext, 'servicesByHostname'>[]): string[] | undefined {
  const out = new Set<string>();
  for (const h of hostnames) {
    const before = out.size;
    for (const c of contexts) for (const s of c.servicesByHostname(h)) out.add(`ServiceEntry/${s.namespace}/${h}`);
    if (out.size === before && !contexts.some((c) => c.servicesByHostname(h).length > 0)) return undefined;
  }
  return [...out].sort();
}

/** A full push of everything for one reason: `global` (config synced), `unknown` (new JWKS keys), `debug`. */
export function fullPush(reason: 'global' | 'unknown' | 'debug'): PushRequestInit {
  return { full: true, reasons: { [reason]: 1 } };
}

const HTTP_PROTOCOLS = new Set(['HTTP', 'HTTP2', 'GRPC']);

/**
 * `DNSName/ns/host` (every port HTTP: only the name table changes) or `ServiceEntry/ns/host` (its listeners
 * change too) for each orchestrator headless service among `hostnames`.
 */
export function headlessUpdates(push: PushContext, hostnames: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const h of hostnames) {
    for (const s of push.servicesByHostname(h)) {
      if (s.registry !== 'Orchestrator' || s.resolution !== 'Passthrough') continue;
      const kind = s.ports.every((p) => HTTP_PROTOCOLS.has(p.protocol)) ? 'DNSName' : 'ServiceEntry';
      out.push(`${kind}/${s.namespace}/${h}`);
    }
  }
  return out;
}

/**
 * `ServiceEntry/ns/host` for each DNS-resolved service among `hostnames`: its endpoints are inlined in its
 * clusters (STRICT_DNS / LOGICAL_DNS load assignments), so an endpoint change is a full push naming it (Istio's
 * workloadEntryHandler for a DNS ServiceEntry).
 */
export function dnsEndpointUpdates(push: Pick<PushContext, 'servicesByHostname'>, hostnames: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const h of hostnames) {
    for (const s of push.servicesByHostname(h)) {
      if (s.resolution === 'DNS' || s.resolution === 'DNSRoundRobin') out.push(`ServiceEntry/${s.namespace}/${h}`);
    }
  }
  return out;
}

/** A full push naming the DNS-resolved services whose endpoints changed (Istio: reason EndpointUpdate). */
export function dnsEndpointPush(keys: readonly string[]): PushRequestInit {
  return { full: true, configsUpdated: keys, reasons: { endpoint: keys.length } };
}

/** A full push naming the headless services whose endpoints changed. */
export function headlessPush(keys: readonly string[]): PushRequestInit {
  return { full: true, configsUpdated: keys, reasons: { headlessendpoint: keys.length } };
}

/** pilot_inbound_updates' type for a changed hostname: `svc`, or `svcdelete` once no service has it (Istio's SvcUpdate). */
export function serviceUpdateType(liveHostnames: ReadonlySet<string>, hostname: string): 'svc' | 'svcdelete' {
  return liveHostnames.has(hostname) ? 'svc' : 'svcdelete';
}
