// Pushes of the ADS server (Istio's DiscoveryServer push path, pilot/pkg/xds/discovery.go and pushqueue.go):
// requests debounced per PILOT_DEBOUNCE_*, each dispatched push given its push context by the owner's
// preparer (Istio's Push → initPushContext), versioned and queued for every connection
// (merged with what a connection already waits for), drained at most PILOT_PUSH_THROTTLE at a time, and each
// connection sent what changed for it in Istio's push order.
import { registerScope } from '../../lib/log/index';
import type { PushRequest } from '../types';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { XdsConnection } from './connection';
import { Debouncer, type DebouncedPush } from './debounce';
import { deltaPushDiff } from './delta';
import type { Responder } from './generate';
import { debounceTime, proxiesConvergeDelay, proxiesQueueTime, recordPushTriggers } from './metrics';
import { partialEdsHosts, typeNeedsFullPush } from './needs-push';
import type { PushAllOptions } from './options';
import { PushQueue, type QueuedPush } from './push-queue';
import { reasonsOrUnknown } from './push-request';
import type { AdsSettings } from './settings';
import { sotwPushSelection } from './sotw';
import { orderTypes } from '../../lib/xds/type-urls';
import type { WatchState } from './watch';

const log = registerScope('ads', 'ads debugging');

export interface PusherOptions<P extends { version: string }> {
  settings: Readonly<AdsSettings>;
  pushThrottle: number;
  now: () => number;
  /** The current push context. */
  pushContext: () => P;
  versionFor?: (push: P, seq: number) => string;
  /** Host of an EDS resource name. */
  endpointHostname: (resourceName: string) => string;
  /** The initialized connections a dispatched push goes to. */
  connections: () => ReadonlyMap<string, XdsConnection<P>>;
  responder: Responder<P>;
}

export class Pusher<P extends { version: string }> {
  private readonly queue = new PushQueue<XdsConnection<P>, P>();
  private readonly debouncer: Debouncer<P>;
  private pushSeq = 0;
  private dispatched = 0;
  private current: { push: P; version: string } | undefined;
  private inFlight = 0;
  private pumpScheduled = false;
  private stopped = false;
  private prepare: ((req: PushRequest<P>) => PushRequest<P>) | undefined;

  constructor(private readonly o: PusherOptions<P>) {
    const s = o.settings;
    this.debouncer = new Debouncer<P>(
      { afterMs: s.debounceAfterMs, maxMs: s.debounceMaxMs, enableEds: s.enableEdsDebounce },
      (req, info) => this.dispatch(req, info),
      o.now,
    );
  }

  /** `prepare` is called on each push as it is dispatched, before it is versioned and queued. */
  onDispatch(prepare: (req: PushRequest<P>) => PushRequest<P>): void {
    this.prepare = prepare;
  }

  /** Debounced unless `immediate`; dropped once stopped. */
  submit(req: PushRequest<P>, options: PushAllOptions): void {
    if (this.stopped) return;
    if (options.immediate) this.dispatch(req, { events: 1, waitedMs: 0, debounced: false });
    else this.debouncer.submit(req);
  }

  private nextVersion(push: P): string {
    const seq = ++this.pushSeq;
    return this.o.versionFor ? this.o.versionFor(push, seq) : `${push.version}/${seq}`;
  }

  /** The push context and version new connections start from. */
  currentPush(): { push: P; version: string } {
    const push = this.o.pushContext();
    if (!this.current || this.current.push !== push) this.current = { push, version: this.nextVersion(push) };
    return this.current;
  }

  /** A connection that ended waits in the queue no more. */
  forget(con: XdsConnection<P>): void {
    this.queue.remove(con);
  }

  /** Drops what is debouncing and queued; pushes already running finish. */
  stop(): void {
    this.debouncer.stop();
    this.queue.clear();
    this.stopped = true;
  }

  stats(): { pendingPushes: number; inFlightPushes: number; pushesDispatched: number; debouncing: number } {
    return {
      pendingPushes: this.queue.pending(),
      inFlightPushes: this.inFlight,
      pushesDispatched: this.dispatched,
      debouncing: this.debouncer.pendingEvents(),
    };
  }

  private dispatch(merged: PushRequest<P>, info: DebouncedPush): void {
    if (this.stopped) return;
    const req = this.prepare ? this.prepare(merged) : merged;
    this.dispatched++;
    if (info.debounced) {
      debounceTime.observe(info.waitedMs / 1000);
      log.info(
        `Push debounce stable[${this.dispatched}] ${info.events} for config ${[...req.configsUpdated].join(', ') || '(all)'}: ${info.waitedMs}ms since first change, full=${req.full}`,
      );
    }
    const version = this.nextVersion(req.push);
    this.current = { push: req.push, version };
    const enqueuedAt = this.o.now();
    const connections = this.o.connections();
    log.info(`XDS: ${req.full ? 'Pushing' : 'Incremental Pushing'} ConnectedEndpoints:${connections.size} Version:${version}`);
    for (const con of connections.values()) this.queue.enqueue(con, { req, version, enqueuedAt });
    this.pump();
  }

  private pump(): void {
    if (this.pumpScheduled || this.stopped) return;
    this.pumpScheduled = true;
    // Deferred so that a burst of enqueues is drained together and requests get processed in between.
    setImmediate(() => {
      this.pumpScheduled = false;
      while (!this.stopped && this.inFlight < this.o.pushThrottle) {
        const item = this.queue.dequeue();
        if (!item) break;
        this.inFlight++;
        void this.runQueuedPush(item.con, item.push).finally(() => {
          this.queue.markDone(item.con);
          this.inFlight--;
          this.pump();
        });
      }
    });
  }

  private async runQueuedPush(con: XdsConnection<P>, item: QueuedPush<P>): Promise<void> {
    if (con.closed) return;
    proxiesQueueTime.observe(Math.max(0, this.o.now() - item.enqueuedAt) / 1000);
    recordPushTriggers(reasonsOrUnknown(item.req));
    await con.run(() => this.pushConnection(con, item));
  }

  /** Sends what changed for one connection, in Istio's push order. */
  private async pushConnection(con: XdsConnection<P>, item: QueuedPush<P>): Promise<void> {
    const proxy = con.proxy;
    if (!proxy) return;
    const { req, version } = item;
    const responder = this.o.responder;
    con.lastPush = { push: req.push, version };
    // Clusters sent in this push: Envoy re-warms them and waits for their endpoints.
    let clustersSent: ReadonlySet<string> | undefined;
    for (const typeUrl of orderTypes(con.watches.keys())) {
      if (!req.full && typeUrl !== TYPE_URL.endpoint) continue;
      // Clusters just sent are re-warmed by Envoy and wait for their endpoints: EDS then always follows.
      const forcedEds = typeUrl === TYPE_URL.endpoint && clustersSent !== undefined;
      if (req.full && !forcedEds && (req.unchangedTypes?.has(typeUrl) || !typeNeedsFullPush(typeUrl, proxy.type, req.configsUpdated))) continue;
      const w = con.watches.get(typeUrl);
      if (!w) continue;
      const gen = responder.generatorFor(proxy, typeUrl);
      if (!gen) continue;
      const only = w.wildcard
        ? undefined
        : req.full
          ? this.partialEdsNames(typeUrl, w, req, clustersSent)
          : this.namesForEndpointUpdate(w, req.edsUpdates);
      if (only && only.size === 0) continue;
      const generated = responder.generate(con, gen, w, req, only);
      if (!generated) continue;
      const reason = req.full ? '' : ' (incremental)';
      if (con.kind === 'sotw') {
        const forceAll = typeUrl === TYPE_URL.endpoint && clustersSent !== undefined;
        const selection = sotwPushSelection(w, generated, forceAll);
        if (!selection) continue;
        const ok = await responder.sendSotw(con, w, selection, generated, version, only === undefined, `PUSH${reason}`);
        if (!ok) return;
        if (typeUrl === TYPE_URL.cluster) clustersSent = new Set(selection.map((r) => r.name));
      } else {
        let force: ReadonlySet<string> = new Set();
        if (typeUrl === TYPE_URL.endpoint && clustersSent) {
          force = new Set([...clustersSent].filter((n) => w.wildcard || w.names.has(n)));
        }
        const diff = deltaPushDiff(w, generated, force, only);
        if (diff.send.length === 0 && diff.removed.length === 0) continue;
        const ok = await responder.sendDelta(con, w, diff, version, `PUSH${reason}`);
        if (!ok) return;
        if (typeUrl === TYPE_URL.cluster) clustersSent = new Set(diff.send.map((r) => r.name));
      }
    }
    proxiesConvergeDelay.observe(Math.max(0, this.o.now() - req.start) / 1000);
  }

  /**
   * The load assignments a full push regenerates when it names only services (Istio's partial full push):
   * those of the named hostnames, and those of the clusters this push just sent (re-warmed by Envoy);
   * undefined: every watched name.
   */
  private partialEdsNames(
    typeUrl: string,
    w: WatchState,
    req: PushRequest<P>,
    clustersSent: ReadonlySet<string> | undefined,
  ): ReadonlySet<string> | undefined {
    if (typeUrl !== TYPE_URL.endpoint) return undefined;
    const hosts = partialEdsHosts(req.configsUpdated);
    if (!hosts) return undefined;
    const out = new Set<string>();
    for (const n of w.names) if (hosts.has(this.o.endpointHostname(n)) || clustersSent?.has(n)) out.add(n);
    return out;
  }

  /** Watched endpoint names whose service host changed (all when the request lists none). */
  private namesForEndpointUpdate(w: WatchState, hosts: ReadonlySet<string>): ReadonlySet<string> {
    if (hosts.size === 0) return new Set(w.names);
    return new Set([...w.names].filter((n) => hosts.has(this.o.endpointHostname(n))));
  }
}
