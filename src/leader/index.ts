// The daemon's leader elections: one LeaderElection per controller that writes to the orchestrator,
// created on demand and stopped (lease released) at shutdown, all sharing the daemon's identity,
// namespace, revision and the default-revision watcher that makes the default revision win.
import { hostname } from 'node:os';
import type { OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { registerScope } from '../lib/log';
import { type DefaultRevision, LeaderElection, type LeaderElectionOptions } from './election';

export {
  DEFAULT_TTL_MS,
  ELECTIONS,
  HOLDER_KEY_ANNOTATION,
  LeaderElection,
  type LeaderElectionOptions,
  type LeaseTiming,
  type RunFunction,
  timingFor,
} from './election';

const log = registerScope('default');

/** Istio's istio-revision-tag-default, renamed: its revision label names the default revision. */
export const DEFAULT_TAG_WEBHOOK = 'mesh-revision-tag-default';
/** Revision labels, ours then Istio's. */
export const REVISION_LABELS = ['mesh.io/rev', 'istio.io/rev'] as const;

/** The default revision, from the revision-tag webhook configuration (Istio's revisions.DefaultWatcher). */
export class DefaultRevisionWatcher implements DefaultRevision {
  private value = '';
  private readonly informer: ResourceInformer;

  constructor(client: OrchClient) {
    const set = (o: RawObject, gone: boolean) => {
      const labels = (o.metadata.labels ?? {}) as Record<string, string>;
      const next = gone ? '' : (REVISION_LABELS.map((l) => labels[l]).find(Boolean) ?? '');
      if (next !== this.value) log.info(`default revision: ${next || '(none)'}`);
      this.value = next;
    };
    this.informer = new ResourceInformer(
      client,
      { path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', fieldSelector: `metadata.name=${DEFAULT_TAG_WEBHOOK}`, log },
      { add: (o) => set(o, false), update: (o) => set(o, false), delete: (o) => set(o, true) },
    );
    this.informer.start();
  }

  get(): string {
    return this.value;
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }
}

export interface LeadershipOptions {
  client: OrchClient;
  /** The daemon's namespace (--namespace / POD_NAMESPACE): where the Leases live. */
  namespace: string;
  /** POD_NAME; empty = `unknown-<hostname>` (Istio). */
  podName?: string;
  /** REVISION. */
  revision?: string;
  /** ENABLE_LEADER_ELECTION. */
  enabled: boolean;
  /** This daemon manages the cluster from outside it (remote cluster of a multicluster mesh). */
  remote?: boolean;
  timing?: LeaderElectionOptions['timing'];
}

export class Leadership {
  private readonly elections = new Map<string, LeaderElection>();
  private readonly defaults: DefaultRevisionWatcher | undefined;
  readonly identity: string;

  constructor(private readonly o: LeadershipOptions) {
    this.identity = o.podName || `unknown-${hostname()}`;
    this.defaults = o.enabled ? new DefaultRevisionWatcher(o.client) : undefined;
  }

  /** The election `id` (started on first use); per-revision ones are named `<id>-<revision>`. */
  election(id: string, opts: { perRevision?: boolean } = {}): LeaderElection {
    const key = `${id}|${opts.perRevision ? 'rev' : ''}`;
    let e = this.elections.get(key);
    if (!e) {
      e = new LeaderElection({
        client: this.o.client,
        namespace: this.o.namespace,
        electionId: id,
        identity: this.identity,
        ...(this.o.revision ? { revision: this.o.revision } : {}),
        ...(opts.perRevision ? { perRevision: true } : {}),
        ...(this.o.remote ? { remote: true } : {}),
        enabled: this.o.enabled,
        ...(this.defaults ? { defaultRevision: this.defaults } : {}),
        ...(this.o.timing ? { timing: this.o.timing } : {}),
      }).start();
      this.elections.set(key, e);
    }
    return e;
  }

  /** Elections this daemon currently leads. */
  leading(): string[] {
    return [...this.elections.values()].filter((e) => e.isLeader()).map((e) => e.name);
  }

  all(): readonly LeaderElection[] {
    return [...this.elections.values()];
  }

  /** Stops every election, releasing the leases held. */
  async stop(): Promise<void> {
    await Promise.all([...this.elections.values()].map((e) => e.stop()));
    await this.defaults?.stop();
  }
}
