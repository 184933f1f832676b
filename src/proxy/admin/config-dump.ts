// /config_dump in Envoy's shape: envoy.admin.v3.ConfigDump built from the generated admin messages and
// rendered with proto field names, so istioctl and people read it as they read Envoy's.
// `?resource=<field>` returns the items of that repeated field; `?include_eds` adds endpoints; private
// keys in secrets are redacted as Envoy does.
import { clone, create, toJson, type DescMessage, type JsonValue, type Message, type MessageShape, type Registry } from '@bufbuild/protobuf';
import { anyPack, timestampFromMs, type Any } from '@bufbuild/protobuf/wkt';
import { BootstrapConfigDumpSchema, ConfigDumpSchema, SecretsConfigDumpSchema } from '../../gen/envoy/admin/v3/config_dump_pb';
import {
  ClustersConfigDumpSchema,
  EndpointsConfigDumpSchema,
  ListenersConfigDumpSchema,
  RoutesConfigDumpSchema,
} from '../../gen/envoy/admin/v3/config_dump_shared_pb';
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { ClusterSchema } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { HealthStatus } from '../../gen/envoy/config/core/v3/health_check_pb';
import { ListenerSchema } from '../../gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { SecretSchema, type Secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import type { ClusterManager } from '../upstream/cluster-manager';
import type { ListenerManager } from '../listener/manager';
import type { RouteManager } from '../route/rds';
import type { SecretManager } from '../tls/secrets';

export interface DumpSources {
  bootstrap: Bootstrap;
  startTime: number;
  clusters: ClusterManager;
  listeners: ListenerManager;
  routes: RouteManager;
  secrets: SecretManager;
}

const ts = (ms: number) => timestampFromMs(ms);

function redact(s: Secret): Secret {
  if (s.type.case !== 'tlsCertificate') return s;
  // a deep copy: create() hands back the very message it is given, and redacting the engine's own secret
  // left it a key of '[redacted]' for every TLS context built after the first config dump
  const copy = clone(SecretSchema, s);
  if (copy.type.case === 'tlsCertificate' && copy.type.value.privateKey) {
    copy.type.value.privateKey = { ...copy.type.value.privateKey, specifier: { case: 'inlineString', value: '[redacted]' } };
  }
  return copy;
}

function build(src: DumpSources, includeEds: boolean): Message[] {
  const out: Message[] = [];
  out.push(create(BootstrapConfigDumpSchema, { bootstrap: src.bootstrap, lastUpdated: ts(src.startTime) }));
  const c = src.clusters.dump();
  out.push(
    create(ClustersConfigDumpSchema, {
      versionInfo: c.version,
      staticClusters: c.statics.map((x) => ({ cluster: anyPack(ClusterSchema, x.cluster), lastUpdated: ts(x.lastUpdated) })),
      dynamicActiveClusters: c.active.map((x) => ({
        versionInfo: x.versionInfo,
        cluster: anyPack(ClusterSchema, x.cluster),
        lastUpdated: ts(x.lastUpdated),
      })),
      dynamicWarmingClusters: c.warming.map((x) => ({
        versionInfo: x.versionInfo,
        cluster: anyPack(ClusterSchema, x.cluster),
        lastUpdated: ts(x.lastUpdated),
      })),
    }),
  );
  const l = src.listeners.dump();
  out.push(
    create(ListenersConfigDumpSchema, {
      versionInfo: l.version,
      staticListeners: l.statics.map((x) => ({ listener: anyPack(ListenerSchema, x.proto), lastUpdated: ts(x.lastUpdated) })),
      dynamicListeners: l.dynamic.map((d) => ({
        name: d.name,
        ...(d.active
          ? {
              activeState: {
                versionInfo: d.active.version,
                listener: anyPack(ListenerSchema, d.active.proto),
                lastUpdated: ts(d.active.lastUpdated),
              },
            }
          : {}),
        ...(d.warming
          ? {
              warmingState: {
                versionInfo: d.warming.version,
                listener: anyPack(ListenerSchema, d.warming.proto),
                lastUpdated: ts(d.warming.lastUpdated),
              },
            }
          : {}),
        ...(d.error
          ? {
              errorState: {
                ...(d.error.any ? { failedConfiguration: d.error.any } : {}),
                lastUpdateAttempt: ts(d.error.when),
                details: d.error.details,
              },
            }
          : {}),
      })),
    }),
  );
  const r = src.routes.dump();
  out.push(
    create(RoutesConfigDumpSchema, {
      staticRouteConfigs: r.statics.map((x) => ({ routeConfig: anyPack(RouteConfigurationSchema, x.proto), lastUpdated: ts(src.startTime) })),
      dynamicRouteConfigs: r.dynamic.map((x) => ({
        versionInfo: x.version,
        routeConfig: anyPack(RouteConfigurationSchema, x.proto),
        lastUpdated: ts(x.lastUpdated),
      })),
    }),
  );
  const s = src.secrets.dump();
  out.push(
    create(SecretsConfigDumpSchema, {
      staticSecrets: s.statics.map((x) => ({ name: x.name, secret: anyPack(SecretSchema, redact(x)), lastUpdated: ts(src.startTime) })),
      dynamicActiveSecrets: s.dynamic.filter((x) => x.secret).map((x) => ({ name: x.name, secret: anyPack(SecretSchema, redact(x.secret!)) })),
      dynamicWarmingSecrets: s.dynamic.filter((x) => !x.secret).map((x) => ({ name: x.name })),
    }),
  );
  if (includeEds) {
    const e = src.clusters.endpointsDump();
    out.push(
      create(EndpointsConfigDumpSchema, {
        staticEndpointConfigs: e
          .filter((x) => x.isStatic)
          .map((x) => ({ endpointConfig: anyPack(ClusterLoadAssignmentSchema, asHosts(x.cla)), lastUpdated: ts(x.lastUpdated) })),
        dynamicEndpointConfigs: e
          .filter((x) => !x.isStatic)
          .map((x) => ({ endpointConfig: anyPack(ClusterLoadAssignmentSchema, asHosts(x.cla)), lastUpdated: ts(x.lastUpdated) })),
      }),
    );
  }
  return out;
}

/**
 * Envoy dumps endpoints from its hosts, not from the config it was given (ClusterManagerImpl::addLbEndpoint):
 * every endpoint carries its coarse health (a configured UNKNOWN or HEALTHY is HEALTHY; UNHEALTHY, DRAINING and
 * TIMEOUT are UNHEALTHY; DEGRADED stays) and its weight (1 when the config gave none).
 */
export function asHosts(cla: ClusterLoadAssignment): ClusterLoadAssignment {
  const out = clone(ClusterLoadAssignmentSchema, cla);
  for (const l of out.endpoints)
    for (const e of l.lbEndpoints) {
      e.healthStatus = coarseHealth(e.healthStatus);
      e.loadBalancingWeight ||= 1;
    }
  return out;
}

export function coarseHealth(h: HealthStatus): HealthStatus {
  switch (h) {
    case HealthStatus.UNHEALTHY:
    case HealthStatus.DRAINING:
    case HealthStatus.TIMEOUT:
      return HealthStatus.UNHEALTHY;
    case HealthStatus.DEGRADED:
      return HealthStatus.DEGRADED;
    default:
      return HealthStatus.HEALTHY;
  }
}

function pack(m: Message, registry: Registry): Any {
  const schema = registry.getMessage(m.$typeName) as DescMessage;
  return anyPack(schema, m as MessageShape<typeof schema>);
}

export class ConfigDumpError extends Error {}

/** Envoy prints `@type` first in every Any; protobuf-es appends it. Key order is all this changes. */
export function typeFirst(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(typeFirst);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, JsonValue> = {};
  if ('@type' in v) out['@type'] = v['@type']!;
  for (const [k, x] of Object.entries(v)) if (k !== '@type') out[k] = typeFirst(x);
  return out;
}

/** The JSON body of /config_dump. Throws ConfigDumpError for an unknown `resource`. */
export function configDump(
  src: DumpSources,
  registry: Registry,
  opts: { includeEds: boolean; resource?: string; nameRegex?: (name: string) => boolean },
): JsonValue {
  const dumps = build(src, opts.includeEds);
  if (!opts.resource) {
    const cd = create(ConfigDumpSchema, { configs: dumps.map((m) => pack(m, registry)) });
    return typeFirst(toJson(ConfigDumpSchema, cd, { registry, useProtoFieldName: true }));
  }
  const items: Any[] = [];
  let found = false;
  for (const m of dumps) {
    const schema = registry.getMessage(m.$typeName)!;
    const field = schema.fields.find((f) => f.name === opts.resource);
    if (!field || field.fieldKind !== 'list' || field.listKind !== 'message') continue;
    found = true;
    for (const item of (m as unknown as Record<string, Message[]>)[field.localName] ?? []) {
      if (opts.nameRegex) {
        const n = (item as unknown as { name?: string }).name;
        if (n !== undefined && !opts.nameRegex(n)) continue;
      }
      items.push(anyPack(field.message, item as MessageShape<typeof field.message>));
    }
  }
  if (!found) throw new ConfigDumpError(`${opts.resource} not found in config dump`);
  return typeFirst(toJson(ConfigDumpSchema, create(ConfigDumpSchema, { configs: items }), { registry, useProtoFieldName: true }));
}
