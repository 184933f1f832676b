// `pilot-discovery discovery`: composes the config sources, registries, push context and ADS server
// into the daemon shell. Config and registry changes rebuild the push context and push to proxies
// (endpoint-only changes push EDS alone); the shell serves it all on the spec's listeners.
import fs from 'node:fs';
import os from 'node:os';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { EnvTable } from '../cli/env';
import type { Config, Kind } from '../config/types';
import type { ConfigStore, ConfigEvent } from '../config/store';
import { AggregateConfigStore } from '../config/aggregate';
import { FileConfigStore } from '../config/file';
import { MESH_KINDS } from '../config/schemas';
import { readMeshConfig } from '../config/meshconfig';
import { ALL_SECRETS_OF } from '../xds/gen/sds';
import { SecretAccessReviews } from './secret-access';
import { validateObject } from '../config/validate/object';
import { loadEnvoyFilterTypes } from '../config/validate';
import { configKey } from '../config/types';
import type { Endpoint, Proxy } from '../discovery/model';
import { buildRegistries, OrchestratorRegistry, type OrchestratorOptions } from '../discovery/registry';
import { initPushContext, type PushContext, type PushContextOptions } from '../discovery/push-context';
import { setLastPushStatus } from '../discovery/push-status';
import { enableQueueMetrics } from '../lib/reconcile-queue';
import { inboundUpdates, pushContextInitTime } from '../xds/server/metrics';
import { proxyFromNode } from '../discovery/proxy';
import { generatorsFor } from '../xds/gen';
import { typesUnchanged } from '../xds/gen/unchanged';
import { controlPlaneIdentifier, debugAccessDenied, debugGenerators, isDebugType, TYPE_DEBUG_SYNCZ } from './xds-debug';
import type { Generator } from '../xds/types';
import { AdsServer, adsSettingsFromEnv, newPushRequest, xdsCacheSettingsFromEnv } from '../xds/server';
import { XdsCache } from '../discovery/push/xds-cache';
import { configDumpJson, type TypedResources } from '../xds/config-dump';
import { registerScope } from '../lib/log';
import { createDaemonSecurity, type DaemonSecurity } from '../security';
import { runDaemon } from './daemon';
import { type Orchestrator, orchestratorAvailable, startOrchestrator } from './orchestrator';
import type { MeshdProviders, ValidationResult, XdsConnectionInfo, XdsServerHandle } from './providers';
import { startIdentity, type DaemonIdentity } from './identity';
import { startWriters, type Writers } from './writers';
import { startAutoRegistration } from './autoregistration';

const log = registerScope('model', 'mesh model');

/**
 * --clusterAliases: a proxy that says it is in cluster `alias` (CLUSTER_ID) is treated as in the cluster
 * the alias names (Istio's DiscoveryServer.ClusterAliases).
 */
function withClusterAlias(proxy: Proxy, aliases: Readonly<Record<string, string>>): Proxy {
  const id = proxy.metadata.clusterId;
  const to = id !== undefined ? aliases[id] : undefined;
  return to === undefined ? proxy : { ...proxy, metadata: { ...proxy.metadata, clusterId: to } };
}

/** Kinds read only through the service registries. */
const REGISTRY_ONLY_KINDS: ReadonlySet<Kind> = new Set<Kind>(['Service', 'EndpointSlice', 'Pod']);

/** An unusable --configDir is a start-up error, not a daemon that is never ready. */
function checkConfigDir(dir: string): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CommandError(`--configDir ${dir}: ${code === 'ENOENT' ? 'no such directory' : (e as Error).message}`);
  }
  if (!st.isDirectory()) throw new CommandError(`--configDir ${dir}: not a directory`);
  try {
    fs.accessSync(dir, fs.constants.R_OK | fs.constants.X_OK);
    fs.readdirSync(dir);
  } catch (e) {
    throw new CommandError(`--configDir ${dir}: cannot read the directory: ${(e as Error).message}`);
  }
}

interface ConfigSources {
  store: ConfigStore;
  /** The orchestrator side (client, this cluster's store, leader elections) when it is used. */
  orchestrator?: Orchestrator;
}

async function configStores(ctx: RunContext, env: EnvTable): Promise<ConfigSources> {
  const stores: ConfigStore[] = [];
  const configDir = ctx.flags['configDir'] as string;
  const registries = ctx.flags['registries'] as readonly string[];
  if (configDir) {
    checkConfigDir(configDir);
    stores.push(new FileConfigStore({ dir: configDir }));
  }
  let orchestrator: Orchestrator | undefined;
  if (registries.includes('Orchestrator')) {
    if (orchestratorAvailable(ctx)) {
      orchestrator = await startOrchestrator(ctx, env);
      stores.push(orchestrator.store);
    } else if (configDir) {
      // Istio would fail without a cluster; mesh runs from files alone, and Service/EndpointSlice YAML in
      // the folder still feeds the Orchestrator registry.
      log.info('no orchestrator configuration (--orchconfig or in-cluster): reading Orchestrator objects from --configDir only');
    } else {
      throw new CommandError(
        'no orchestrator configuration: give --orchconfig, run inside a cluster, or serve from files with --configDir',
      );
    }
  } else if (!configDir) {
    log.info('no --configDir and no Orchestrator registry: serving an empty configuration');
  }
  const store = stores.length === 1 ? stores[0]! : new AggregateConfigStore(stores);
  return { store, ...(orchestrator ? { orchestrator } : {}) };
}

function pushOptions(ctx: RunContext, env: EnvTable): PushContextOptions {
  let mesh;
  try {
    mesh = readMeshConfig(ctx.flags['meshConfig'] as string);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  return {
    pathNormalization: mesh.pathNormalization,
    domain: ctx.flags['domain'] as string,
    clusterId: ctx.flags['clusterID'] as string,
    rootNamespace: ctx.flags['namespace'] as string,
    scopeGatewayToNamespace: env.bool('PILOT_SCOPE_GATEWAY_TO_NAMESPACE'),
    sendUnhealthyEndpoints: env.bool('PILOT_SEND_UNHEALTHY_ENDPOINTS'),
    drainingLabel: env.string('PILOT_DRAINING_LABEL'),
    http10: env.bool('PILOT_HTTP10'),
    enable100Continue: env.bool('ENABLE_100_CONTINUE_HEADERS'),
    routeCollapse: env.bool('PILOT_ENABLE_ROUTE_COLLAPSE_OPTIMIZATION'),
    dnsJitterMs: env.duration('PILOT_DNS_JITTER_DURATION'),
    metadataExchange: env.bool('PILOT_ENABLE_METADATA_EXCHANGE'),
    disableMxAlpn: env.bool('PILOT_DISABLE_MX_ALPN'),
    alpnFilter: env.bool('PILOT_ENABLE_ALPN_FILTER'),
    ipAutoallocate: env.bool('PILOT_ENABLE_IP_AUTOALLOCATE'),
  };
}

/** Validation for the webhook: the object as Kubernetes sends it, through the config model's one check. */
function validateAdmission(obj: Readonly<Record<string, unknown>>): ValidationResult {
  const v = validateObject(obj, { origin: { source: 'admission review' } });
  return v.unknownType ? { errors: [], unknownType: true } : { errors: v.messages, warnings: v.warnings };
}

const HTTP_PROTOCOLS = new Set(['HTTP', 'HTTP2', 'GRPC']);

/** `DNSName/ns/host` (HTTP-only) or `ServiceEntry/ns/host` keys of the orchestrator headless services among `hostnames`. */
function headlessUpdates(push: PushContext, hostnames: ReadonlySet<string>): string[] {
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

export const run: Handler = async (ctx) => {
  // Config sources validate EnvoyFilters as they load them.
  await loadEnvoyFilterTypes();
  const env = new EnvTable(ctx.program.env, ctx.env);
  const { store, orchestrator } = await configStores(ctx, env);
  const registries = ctx.flags['registries'] as readonly string[];
  const registryOptions: OrchestratorOptions = {
    domain: ctx.flags['domain'] as string,
    clusterId: ctx.flags['clusterID'] as string,
    selectWorkloadEntries: env.bool('PILOT_ENABLE_ORCH_SELECT_WORKLOAD_ENTRIES'),
    persistentSessionLabels: [env.string('PILOT_PERSISTENT_SESSION_LABEL'), env.string('PILOT_PERSISTENT_SESSION_HEADER_LABEL')],
  };
  let registry;
  try {
    registry = buildRegistries(store, registries, {
      ...registryOptions,
      ...(orchestrator ? { nodeLocality: (n: string) => orchestrator.nodeLocality(n) } : {}),
    });
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  // Remote clusters joined by secrets add their registries beside this cluster's.
  if (orchestrator && registries.includes('Orchestrator')) orchestrator.startMulticluster(registry, registryOptions);
  // Locality comes from Nodes, which are not configs: their label changes reach the endpoints on them.
  const orchRegistry = registry.getRegistries().find((r): r is OrchestratorRegistry => r instanceof OrchestratorRegistry);
  const unsubscribeNodes = orchRegistry && orchestrator ? orchestrator.subscribeNodes((n) => orchRegistry.nodeChanged(n)) : () => {};
  const opts = pushOptions(ctx, env);
  const clusterAliases = (ctx.flags['clusterAliases'] ?? {}) as Readonly<Record<string, string>>;
  let security: DaemonSecurity;
  try {
    security = createDaemonSecurity(env);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  let identity: DaemonIdentity;
  try {
    identity = await startIdentity({ ctx, env, orchestrator: orchestratorAvailable(ctx) });
  } catch (e) {
    security.close();
    registry.close();
    await store.close();
    throw e;
  }
  // Inbound mTLS accepts SPIFFE identities of the mesh's trust domain (Istio TrustDomainsForValidation).
  opts.trustDomain = identity.trustDomain;
  // The controllers that write (root ConfigMaps, webhook configurations, untainting) and the injector.
  enableQueueMetrics(env.bool('MESH_ENABLE_CONTROLLER_QUEUE_METRICS'));
  let writers: Writers;
  try {
    writers = await startWriters({ ctx, env, ...(orchestrator ? { orchestrator } : {}), identity });
  } catch (e) {
    await identity.close();
    security.close();
    registry.close();
    await store.close();
    throw e;
  }
  // Istio initPushContext: a full snapshot, its build time, and the status its generation records
  // The xDS cache lives across push contexts: unchanged clusters and virtual hosts are reused by content.
  const xdsCache = new XdsCache(xdsCacheSettingsFromEnv(env));
  const initPush = (): PushContext => {
    const started = performance.now();
    const next = initPushContext(store, registry, opts, xdsCache);
    pushContextInitTime.observe((performance.now() - started) / 1000);
    setLastPushStatus(next.status);
    return next;
  };
  let push: PushContext = initPush();
  security.prefetch(store.list('RequestAuthentication'), push);

  // Credentials: with a cluster, reading a key pair needs the right to list Secrets (SubjectAccessReview);
  // from files alone there is no such right to ask about, and a proxy reads its own namespace's.
  const reviews = orchestrator ? new SecretAccessReviews(orchestrator.client, (ns) => server.pushAll(newPushRequest(push, { full: true, configsUpdated: [ALL_SECRETS_OF(ns)], reasons: { secret: 1 } }))) : undefined;
  const generatorOptions = {
    ...security.generatorOptions,
    nameTable: { multiclusterHeadless: env.bool('ENABLE_MULTICLUSTER_HEADLESS'), dualStack: env.bool('MESH_DUAL_STACK') },
    secrets: { secrets: { get: (ns: string, name: string) => store.get('Secret', ns, name) }, authorize: reviews ? reviews.authorize : () => true },
  };
  // A proxy's generator table depends only on the proxy, so it is made once per proxy.
  const tables = new WeakMap<Proxy, Record<string, Generator<PushContext>>>();
  let debugPage: ((name: string) => { status: number; body: string } | undefined) | undefined;
  const debugGens: Record<string, Generator<PushContext>> = debugGenerators<PushContext>({
    connections: (): readonly XdsConnectionInfo[] => server.connections(),
    configDump: (id: string): unknown => xds.configDump(id, { includeEds: true, types: [] }),
    debugPage: (name) => debugPage?.(name),
  });
  // WorkloadEntry auto-registration and health of workloads outside the cluster (every replica, its own proxies).
  const wle = startAutoRegistration({ ctx, env, store, client: orchestrator?.client });
  const server: AdsServer<PushContext> = new AdsServer<PushContext>({
    ...(wle.hooks ? { connectionHooks: wle.hooks } : {}),
    controlPlaneIdentifier: controlPlaneIdentifier(ctx.env['POD_NAME'] || os.hostname()),
    controlPlaneTypes: new Set([TYPE_DEBUG_SYNCZ]),
    generators: (proxy, typeUrl): Generator<PushContext> | undefined => {
      if (isDebugType(typeUrl)) return debugGens[typeUrl];
      let t = tables.get(proxy);
      if (!t) tables.set(proxy, (t = generatorsFor(proxy, generatorOptions) as Record<string, Generator<PushContext>>));
      return t[typeUrl];
    },
    parseNode: (node) => withClusterAlias(proxyFromNode(node), clusterAliases),
    pushContext: () => push,
    settings: adsSettingsFromEnv(env),
    // Istio: with XDS_AUTH the xDS server uses the CA's authenticators.
    authenticate: identity.authenticateXds,
    authorizeRequest: (c, typeUrl) => debugAccessDenied(c, typeUrl, ctx.flags['namespace'] as string),
  });
  // New or rotated keys at a key server: a full push, as Istio's JwksResolver.PushFunc triggers.
  security.onKeysChanged(() => {
    push = initPush();
    server.pushAll(newPushRequest(push, { full: true, reasons: { unknown: 1 } }));
  });

  const unsubscribeConfig = store.subscribe((all: readonly ConfigEvent[]) => {
    // Services, EndpointSlices and Pods reach proxies through the registry's events (endpoint-only
    // changes as incremental EDS); only the rest is configuration that needs a full push here.
    const events = all.filter((e) => !REGISTRY_ONLY_KINDS.has(e.config.kind));
    if (events.length === 0) return;
    inboundUpdates.inc({ type: 'config' }, events.length);
    // Secrets are read live by the credentials generator: they change no push context.
    if (events.every((e) => e.config.kind === 'Secret')) {
      server.pushAll(newPushRequest(push, { full: true, configsUpdated: events.map((e) => configKey(e.config)), reasons: { secret: events.length } }));
      return;
    }
    const prev = push;
    push = initPush();
    security.prefetch(store.list('RequestAuthentication'), push);
    const configsUpdated = new Set(events.map((e) => configKey(e.config)));
    server.pushAll(newPushRequest(push, { full: true, configsUpdated, reasons: { config: events.length }, unchangedTypes: typesUnchanged(prev, push, configsUpdated) }));
  });
  const unsubscribeRegistry = registry.subscribe((ev) => {
    if (ev.endpointsOnly) {
      inboundUpdates.inc({ type: 'eds' }, ev.hostnames.size);
      push = push.withRegistryUpdates(registry, ev.hostnames);
      server.pushAll(newPushRequest(push, { full: false, edsUpdates: ev.hostnames, reasons: { endpoint: ev.hostnames.size } }));
      // Istio's HeadlessEndpointUpdate: a headless service's endpoints are its DNS answers (and, unless every
      // port is HTTP, its listeners), so they need a full push naming it.
      const headless = headlessUpdates(push, ev.hostnames);
      if (headless.length > 0) server.pushAll(newPushRequest(push, { full: true, configsUpdated: headless, reasons: { headlessendpoint: headless.length } }));
    } else {
      push = initPush();
      for (const h of ev.hostnames) inboundUpdates.inc({ type: push.servicesByHostname(h).length > 0 ? 'svc' : 'svcdelete' });
      server.pushAll(newPushRequest(push, { full: true, reasons: { service: ev.hostnames.size } }));
    }
  });
  store.whenSynced().then(
    () => {
      push = initPush();
      security.prefetch(store.list('RequestAuthentication'), push);
      server.pushAll(newPushRequest(push, { full: true, reasons: { global: 1 } }));
    },
    (e: unknown) => log.error(`config source failed to sync: ${(e as Error).message}`),
  );

  const xds: XdsServerHandle = {
    attach: (grpcServer, o) => server.attach(grpcServer, { secure: o.secure }),
    connections: () => server.connections(),
    forceDisconnect: (id) => server.forceDisconnect(id),
    stop: (graceMs) => server.stop(graceMs),
    pushAll: () => server.pushAll(newPushRequest(push, { full: true, reasons: { debug: 1 } }), { immediate: true }),
    setDebugPages: (page) => {
      debugPage = page;
    },
    configDump: (id, o) => {
      const con = server.connection(id);
      if (!con) return undefined;
      const byType = new Map<string, TypedResources>();
      for (const w of con.watches) {
        const got = server.resourcesFor(id, w.typeUrl);
        if (got) byType.set(w.typeUrl, { version: got.version, resources: got.resources, lastUpdated: w.lastSendTime });
      }
      return configDumpJson(byType, { includeEds: o.includeEds });
    },
  };

  const providers: MeshdProviders = {
    synced: () => {
      if (!store.hasSynced()) return { ready: false, reason: 'config not synced' };
      if (orchestrator && !orchestrator.hasSynced()) return { ready: false, reason: 'remote clusters not synced' };
      if (!registry.hasSynced()) return { ready: false, reason: 'service registries not synced' };
      return { ready: true };
    },
    configs: () => MESH_KINDS.flatMap((k) => store.list(k) as readonly Config[]),
    services: () => push.allServices(),
    endpoints: () => push.allServices().flatMap((s) => registry.endpoints(s.hostname, s.namespace) as readonly Endpoint[]),
    pushStatus: () => push.status.toJSON(),
    xds,
    validate: validateAdmission,
    ...(writers.inject ? { inject: writers.inject.handler() } : {}),
    identity,
    authenticateDebug: (req) => identity.authenticateDebug(req),
    close: async () => {
      setLastPushStatus(undefined);
      unsubscribeConfig();
      unsubscribeRegistry();
      unsubscribeNodes();
      await wle.stop();
      await identity.close();
      security.close();
      registry.close();
      await writers.stop();
      await store.close();
      await orchestrator?.close();
    },
  };
  return runDaemon(ctx, providers);
};
