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
import { registerScope } from '../lib/log';
import type { DaemonIdentity } from './identity';
import { InjectionWebhook } from './inject-webhook';
import { NamespaceController } from './namespace-controller';
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

export async function startWriters(o: { ctx: RunContext; env: EnvTable; orchestrator?: Orchestrator; identity: DaemonIdentity }): Promise<Writers> {
  const { ctx, env, identity } = o;
  const namespace = ctx.flags['namespace'] as string;
  const revision = env.string('REVISION');
  const untaint = env.bool('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS');
  const own = !o.orchestrator && orchestratorAvailable(ctx) ? await ownContext(ctx, env) : undefined;
  const orchestrator: WriterContext | undefined = o.orchestrator ?? own;
  if (untaint && !orchestrator) {
    throw new CommandError('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS=true needs the orchestrator API: give --orchconfig or run inside a cluster');
  }
  const analysis = env.bool('PILOT_ENABLE_ANALYSIS');
  if (analysis && !o.orchestrator) {
    throw new CommandError(
      'PILOT_ENABLE_ANALYSIS=true needs the configuration of a cluster: run with the Orchestrator registry (--registries Orchestrator) and --orchconfig or inside a cluster',
    );
  }
  const inject = await InjectionWebhook.start({
    enabled: env.bool('INJECT_ENABLED'),
    revision,
    namespace,
    meshConfigFile: ctx.flags['meshConfig'] as string,
    ...(orchestrator ? { client: orchestrator.client } : {}),
    env: ctx.env,
  });
  if (!orchestrator) return { ...(inject ? { inject } : {}), stop: async () => inject?.stop() };

  const client = orchestrator.client;
  const running = new Set<Promise<void>>();
  const shutdown = new AbortController();
  const stoppers: Array<() => Promise<void> | void> = [];

  if (identity.ca || identity.caBundle() !== undefined) {
    const election = orchestrator.leadership.election(ELECTIONS.NamespaceController);
    election.addRunFunction(
      'namespace controller',
      whileLeading(running, shutdown.signal, () => {
        log.info(`starting namespace controller for cluster ${String(ctx.flags['clusterID'])}`);
        const nc = new NamespaceController({
          client,
          configMapName: identity.settings.rootConfigMap,
          caBundle: () => identity.caBundle(),
          ...(env.string('MESH_WATCH_NAMESPACE') ? { watchNamespace: env.string('MESH_WATCH_NAMESPACE') } : {}),
          discoverySelectors: () => orchestrator.discoverySelectors(),
        });
        const offBundle = identity.onCaBundleChange(() => nc.resyncAll());
        const offSelectors = orchestrator.subscribeDiscoverySelectors(() => nc.resyncAll());
        return {
          start: () => nc.start(),
          stop: async () => {
            offBundle();
            offSelectors();
            await nc.stop();
          },
        };
      }),
    );
  }

  if (untaint) {
    orchestrator.leadership.election(ELECTIONS.NodeUntaintController).addRunFunction(
      'node untaint controller',
      // Istio: --cniNamespace, else the daemon's own namespace.
      whileLeading(running, shutdown.signal, () => new NodeUntainter(client, (ctx.flags['cniNamespace'] as string) || namespace)),
    );
  }

  if (analysis && o.orchestrator) {
    // Loaded only when on: the analyzers are a large part of the program the daemon otherwise never runs.
    const { AnalysisController, analysisInterval, analysisMeshConfig } = await import('./analysis-controller');
    const store = o.orchestrator.store;
    const intervalMs = analysisInterval(env.duration('PILOT_ANALYSIS_INTERVAL'));
    orchestrator.leadership.election(ELECTIONS.AnalyzeController).addRunFunction(
      'analysis controller',
      whileLeading(
        running,
        shutdown.signal,
        () =>
          new AnalysisController({
            client,
            store,
            meshNamespace: namespace,
            mesh: analysisMeshConfig(ctx.flags['meshConfig'] as string),
            ...(env.string('MESH_WATCH_NAMESPACE') ? { watchNamespace: env.string('MESH_WATCH_NAMESPACE') } : {}),
            intervalMs,
            maxWorkers: env.int('PILOT_STATUS_MAX_WORKERS'),
          }),
      ),
    );
  }

  if (identity.ca || identity.caBundle() !== undefined) {
    const webhookOptions = { client, revision: revision || 'default', caBundle: () => identity.caBundle() };
    const patchers: Array<InjectionWebhookPatcher | ValidationWebhookController> = [];
    if (env.string('VALIDATION_WEBHOOK_CONFIG_NAME') !== '') {
      log.info('Starting validation controller');
      patchers.push(new ValidationWebhookController(webhookOptions, namespace).start());
    }
    if (inject && env.string('INJECTION_WEBHOOK_CONFIG_NAME') !== '') patchers.push(new InjectionWebhookPatcher(webhookOptions).start());
    const off = identity.onCaBundleChange(() => patchers.forEach((p) => p.caBundleChanged()));
    stoppers.push(off, () => Promise.all(patchers.map((p) => p.stop())).then(() => undefined));
  }

  return {
    ...(inject ? { inject } : {}),
    stop: async () => {
      shutdown.abort();
      for (const s of stoppers) await s();
      await inject?.stop();
      await Promise.all([...running]);
      await own?.close();
    },
  };
}
