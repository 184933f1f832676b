// The daemon's controllers that write to the orchestrator, each started as Istio starts it:
//
// - the namespace controller (root certificate ConfigMaps) under the NamespaceController election, when
//   the daemon runs a CA (Istio's distributeCACert);
// - the node untainter under the NodeUntaintController election (PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS);
// - the in-cluster analysis controller under the AnalyzeController election (PILOT_ENABLE_ANALYSIS):
//   analyzer messages into each mesh resource's status.validationMessages;
// - the webhook configuration controllers on every replica (Istio gives them no election: each revision
//   patches its own configurations): the validation controller when VALIDATION_WEBHOOK_CONFIG_NAME is
//   set, the injection patcher when INJECTION_WEBHOOK_CONFIG_NAME is set and the injector runs;
// - the injection webhook itself (INJECT_ENABLED), served on the HTTPS listener.
import { CommandError, type RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { type LabelSelector, readMeshConfig } from '../config/meshconfig';
import { ELECTIONS, type RunFunction } from '../leader';
import { Closers } from '../lib/closers';
import { registerScope } from '../lib/log';
import type { DaemonIdentity } from './identity';
import { InjectionWebhook } from './inject-webhook';
import { NamespaceController } from './namespace-controller';
import type { OrchConfigStore } from '../config/orch/source';
import type { GatewayApiConfigStore } from '../config/gateway-api';
import type { ProxyNack } from '../config/gateway-api/status-merge';
import { gatewayControllers, startGatewayClassController } from './gateway-controllers';
import { daemonLeadership, daemonOrchClient, type Orchestrator, orchestratorAvailable } from './orchestrator';
import { NodeUntainter } from './untaint';
import { InjectionWebhookPatcher, ValidationWebhookController } from './webhook-patch';

const log = registerScope('default');

export interface Writers {
  /** The injection webhook handler, when injection is on. */
  inject?: InjectionWebhook;
  stop(): Promise<void>;
}

interface Stoppable {
  stop(): Promise<void>;
}

/** Resolves when any of the signals aborts. */
function aborted(...signals: AbortSignal[]): Promise<void> {
  return new Promise<void>((resolve) => {
    for (const s of signals) {
      if (s.aborted) resolve();
      else s.addEventListener('abort', () => resolve(), { once: true });
    }
  });
}

/** A run function that keeps `make()`'s controller running until leadership ends or the daemon stops. */
function whileLeading(running: Set<Promise<void>>, shutdown: AbortSignal, make: () => Stoppable & { start(): unknown }): RunFunction {
  return (signal) => {
    if (shutdown.aborted) return;
    const run = (async () => {
      const c = make();
      const ended = aborted(signal, shutdown);
      await c.start();
      await ended;
      await c.stop();
    })();
    running.add(run);
    return run.finally(() => running.delete(run));
  };
}

/** What the writers need of the orchestrator side. */
type WriterContext = Pick<Orchestrator, 'client' | 'leadership' | 'discoverySelectors' | 'subscribeDiscoverySelectors'>;

/**
 * Without the Orchestrator registry the daemon still writes when it has a cluster (Istio's kube client
 * exists whenever there is a kubeconfig): its own client and elections, selectors read once.
 */
async function ownContext(ctx: RunContext, env: EnvTable): Promise<WriterContext & { close(): Promise<void> }> {
  let selectors: readonly LabelSelector[];
  try {
    selectors = readMeshConfig(ctx.flags['meshConfig'] as string).discoverySelectors;
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  const client = await daemonOrchClient(ctx, env);
  const leadership = daemonLeadership(ctx, env, client);
  return {
    client,
    leadership,
    discoverySelectors: () => selectors,
    subscribeDiscoverySelectors: () => () => undefined,
    close: async () => {
      await leadership.stop();
      client.close();
    },
  };
}

/** Istio's distributeCACert: root ConfigMaps and webhook caBundles only when there is a root to write. */
const hasRoot = (identity: DaemonIdentity): boolean => Boolean(identity.ca) || identity.caBundle() !== undefined;

/** The writers that need the orchestrator, stated as start-up errors when it is missing. */
function checkNeeds(env: EnvTable, writers: WriterContext | undefined, orchestrator: Orchestrator | undefined): void {
  if (env.bool('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS') && !writers) {
    throw new CommandError('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS=true needs the orchestrator API: give --orchconfig or run inside a cluster');
  }
  if (env.bool('PILOT_ENABLE_ANALYSIS') && !orchestrator) {
    throw new CommandError(
      'PILOT_ENABLE_ANALYSIS=true needs the configuration of a cluster: run with the Orchestrator registry (--registries Orchestrator) and --orchconfig or inside a cluster',
    );
  }
}

interface ControllerContext {
  ctx: RunContext;
  env: EnvTable;
  identity: DaemonIdentity;
  writers: WriterContext;
  /** This cluster's config store, for the analysis controller. */
  store: OrchConfigStore | undefined;
  inject: InjectionWebhook | undefined;
  /** The Gateway API translation, whose status and deployments the gateway controllers write. */
  gatewayApi: GatewayApiConfigStore | undefined;
  /** The NACKs of connected gateway proxies (the route status says so). */
  gatewayNacks: (() => readonly ProxyNack[]) | undefined;
  closers: Closers;
}

/** The namespace controller writing root certificate ConfigMaps, resynced when the root or the selectors change. */
function namespaceController(c: ControllerContext): Stoppable & { start(): unknown } {
  const { env, identity, writers } = c;
  log.info(`starting namespace controller for cluster ${String(c.ctx.flags['clusterID'])}`);
  const nc = new NamespaceController({
    client: writers.client,
    configMapName: identity.settings.rootConfigMap,
    caBundle: () => identity.caBundle(),
    ...(env.string('MESH_WATCH_NAMESPACE') ? { watchNamespace: env.string('MESH_WATCH_NAMESPACE') } : {}),
    discoverySelectors: () => writers.discoverySelectors(),
  });
  const offBundle = identity.onCaBundleChange(() => nc.resyncAll());
  const offSelectors = writers.subscribeDiscoverySelectors(() => nc.resyncAll());
  return {
    start: () => nc.start(),
    stop: async () => {
      offBundle();
      offSelectors();
      await nc.stop();
    },
  };
}

/** The analysis controller's maker; loaded only when on: the analyzers are a large part of the program the daemon otherwise never runs. */
async function analysisController(c: ControllerContext, store: OrchConfigStore): Promise<() => Stoppable & { start(): unknown }> {
  const { AnalysisController, analysisInterval, analysisMeshConfig } = await import('./analysis-controller');
  const { ctx, env } = c;
  const intervalMs = analysisInterval(env.duration('PILOT_ANALYSIS_INTERVAL'));
  return () =>
    new AnalysisController({
      client: c.writers.client,
      store,
      meshNamespace: ctx.flags['namespace'] as string,
      mesh: analysisMeshConfig(ctx.flags['meshConfig'] as string),
      ...(env.string('MESH_WATCH_NAMESPACE') ? { watchNamespace: env.string('MESH_WATCH_NAMESPACE') } : {}),
      intervalMs,
      maxWorkers: env.int('PILOT_STATUS_MAX_WORKERS'),
    });
}

/** The webhook configuration controllers, on every replica (Istio gives them no election). */
function startWebhookPatchers(c: ControllerContext): void {
  const { env, identity } = c;
  const webhookOptions = { client: c.writers.client, revision: env.string('REVISION') || 'default', caBundle: () => identity.caBundle() };
  const patchers: Array<InjectionWebhookPatcher | ValidationWebhookController> = [];
  if (env.string('VALIDATION_WEBHOOK_CONFIG_NAME') !== '') {
    log.info('Starting validation controller');
    patchers.push(new ValidationWebhookController(webhookOptions, c.ctx.flags['namespace'] as string).start());
  }
  if (c.inject && env.string('INJECTION_WEBHOOK_CONFIG_NAME') !== '') patchers.push(new InjectionWebhookPatcher(webhookOptions).start());
  c.closers.add(() => Promise.all(patchers.map((p) => p.stop())));
  c.closers.add(identity.onCaBundleChange(() => patchers.forEach((p) => p.caBundleChanged())));
}

/** The controllers under their elections, then the webhook patchers; shutdown ends the elected ones and waits for them. */
async function startControllers(c: ControllerContext): Promise<void> {
  const { ctx, env, identity, writers } = c;
  const running = new Set<Promise<void>>();
  const shutdown = new AbortController();
  c.closers.add(() => Promise.all([...running]));
  const lead = (election: string, name: string, make: () => Stoppable & { start(): unknown }) =>
    writers.leadership.election(election).addRunFunction(name, whileLeading(running, shutdown.signal, make));
  if (hasRoot(identity)) lead(ELECTIONS.NamespaceController, 'namespace controller', () => namespaceController(c));
  if (env.bool('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS')) {
    // Istio: --cniNamespace, else the daemon's own namespace.
    const cniNamespace = (ctx.flags['cniNamespace'] as string) || (ctx.flags['namespace'] as string);
    lead(ELECTIONS.NodeUntaintController, 'node untaint controller', () => new NodeUntainter(writers.client, cniNamespace));
  }
  if (env.bool('PILOT_ENABLE_ANALYSIS') && c.store) lead(ELECTIONS.AnalyzeController, 'analysis controller', await analysisController(c, c.store));
  if (c.gatewayApi) {
    const g = { ctx, env, client: writers.client, store: c.gatewayApi, inject: c.inject, ...(c.gatewayNacks ? { nacks: c.gatewayNacks } : {}) };
    for (const e of gatewayControllers(g))
      writers.leadership
        .election(e.election, e.perRevision ? { perRevision: true } : {})
        .addRunFunction(e.name, whileLeading(running, shutdown.signal, e.make));
    const classes = startGatewayClassController(g);
    if (classes) c.closers.add(() => classes.stop());
  }
  if (hasRoot(identity)) startWebhookPatchers(c);
  c.closers.add(() => shutdown.abort());
}

export async function startWriters(o: {
  ctx: RunContext;
  env: EnvTable;
  orchestrator?: Orchestrator;
  identity: DaemonIdentity;
  gatewayApi?: GatewayApiConfigStore;
  gatewayNacks?: () => readonly ProxyNack[];
}): Promise<Writers> {
  const { ctx, env } = o;
  const closers = new Closers();
  return closers.unwindOnError(async () => {
    const own = !o.orchestrator && orchestratorAvailable(ctx) ? closers.closing(await ownContext(ctx, env)) : undefined;
    const writers: WriterContext | undefined = o.orchestrator ?? own;
    checkNeeds(env, writers, o.orchestrator);
    const inject = await InjectionWebhook.start({
      enabled: env.bool('INJECT_ENABLED'),
      revision: env.string('REVISION'),
      namespace: ctx.flags['namespace'] as string,
      meshConfigFile: ctx.flags['meshConfig'] as string,
      ...(writers ? { client: writers.client } : {}),
      env: ctx.env,
    });
    if (inject) closers.add(() => inject.stop());
    if (writers)
      await startControllers({
        ctx,
        env,
        identity: o.identity,
        writers,
        store: o.orchestrator?.store,
        inject,
        gatewayApi: o.orchestrator ? o.gatewayApi : undefined,
        gatewayNacks: o.gatewayNacks,
        closers,
      });
    return { ...(inject ? { inject } : {}), stop: () => closers.close() };
  });
}
