// Envoy's listener manager: static listeners from the bootstrap and dynamic ones from LDS (state of the
// world). A new or changed listener binds its address right away (a bind failure rejects the update,
// as in Envoy), warms until its routes (RDS) and secrets (SDS) are there, then replaces the previous
// version on the same socket; removed listeners stop accepting and drain. Nothing serves before the
// server has initialised (CDS and LDS applied), like Envoy's workers.
// Engine workers (src/proxy/engine/worker/): the main thread binds every socket (with its options, such as
// IP_TRANSPARENT) and hands each worker thread its own descriptor of it (`shareSocket`); a worker's
// manager listens on that descriptor (`sharedSocket`) instead of binding. Each thread closes only its
// own descriptor, so the socket stops accepting when the last one lets go.
import { toBinary } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import { ListenerSchema, type Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { Logger } from '../log';
import type { Counter, Gauge, StatsStore } from '../stats/store';
import type { GrpcMux } from '../xds/grpc-mux';
import type { DecodedResource } from '../xds/subscription';
import { ListenerRuntime, listenerAddress, type ListenerDeps } from './listener';
import { ipFamily } from '../../lib/ip';
import { OriginalAddressNotices } from './original-address';
import { addressKey, attachTarget, ListenerSockets, type BoundSocket } from './sockets';

interface Slot {
  name: string;
  runtime: ListenerRuntime;
  socket: BoundSocket | undefined;
  hash: string;
  lastUpdated: number;
}

export interface ListenerErrorState {
  any: Any | undefined;
  details: string;
  when: number;
}

/** One version of a dynamic listener in /config_dump (active or warming). */
interface ListenerVersionDump {
  proto: Listener;
  version: string;
  lastUpdated: number;
}

interface DynamicListenerDump {
  name: string;
  active?: ListenerVersionDump;
  warming?: ListenerVersionDump;
  error?: ListenerErrorState;
}

/** The listeners as Envoy's ListenersConfigDump holds them. */
export interface ListenersDump {
  statics: Array<{ proto: Listener; lastUpdated: number }>;
  dynamic: DynamicListenerDump[];
  version: string;
}

export class ListenerManager {
  private readonly active = new Map<string, Slot>();
  private readonly warming = new Map<string, Slot>();
  private readonly statics = new Map<string, Slot>();
  private readonly draining = new Set<ListenerRuntime>();
  private readonly sockets: ListenerSockets;
  private readonly notices: OriginalAddressNotices;
  readonly errors = new Map<string, ListenerErrorState>();
  private initialized = false;
  private ldsVersion = '';
  private readonly warmWaiters = new Set<() => void>();
  /**
   * During an LDS update: removed listeners' runtimes, released only once the update's listeners have
   * taken their route and secret providers, so a provider both use (a listener renamed with the same RDS
   * name) stays subscribed and ready instead of being dropped and asked for again, which a server that
   * sees no change in the subscription never answers (Envoy keeps a removed listener's providers while it
   * drains).
   */
  private releaseAfterUpdate: ListenerRuntime[] | undefined;
  private readonly s: {
    added: Counter;
    modified: Counter;
    removed: Counter;
    createSuccess: Counter;
    createFailure: Counter;
    totalActive: Gauge;
    totalWarming: Gauge;
    totalDraining: Gauge;
    workersStarted: Gauge;
  };

  constructor(
    private readonly deps: Omit<ListenerDeps, 'findListenerFor' | 'sourceBinder'> & {
      originalDstMissing?: string;
      /** Engine worker: a descriptor of the main thread's socket for an address key (`host:port`, `pipe:path`). */
      sharedSocket?: (key: string, listener: string) => Promise<number>;
    },
    private readonly store: StatsStore,
    private readonly log: Logger,
    /** --drain-time-s: how long removed listeners' connections may finish. */
    private readonly drainTimeMs: number,
    /** This proxy's node as an operator knows it (id and labels), for the no-listener warning. */
    private readonly nodeText = 'this proxy',
  ) {
    const s = store.scope('listener_manager.');
    this.s = {
      added: s.counter('listener_added'),
      modified: s.counter('listener_modified'),
      removed: s.counter('listener_removed'),
      createSuccess: s.counter('listener_create_success'),
      createFailure: s.counter('listener_create_failure'),
      totalActive: s.gauge('total_listeners_active'),
      totalWarming: s.gauge('total_listeners_warming'),
      totalDraining: s.gauge('total_listeners_draining'),
      workersStarted: s.gauge('workers_started'),
    };
    this.sockets = new ListenerSockets({
      log,
      originalDst: deps.originalDst,
      originalDstMissing: deps.originalDstMissing,
      sharedSocket: deps.sharedSocket,
    });
    this.notices = new OriginalAddressNotices(deps.originalDst, deps.originalDstMissing, log, deps.log.get('upstream'));
    this.s.workersStarted.set(0);
    this.updateGauges();
  }

  private fullDeps(): ListenerDeps {
    return { ...this.deps, sourceBinder: this.notices.sourceBinder, findListenerFor: (a, p) => this.findListenerFor(a, p) };
  }

  /** Bootstrap listeners: any failure is fatal (thrown). */
  async addStatic(l: Listener): Promise<void> {
    const rt = new ListenerRuntime(l, '', true, this.fullDeps());
    this.notices.check(rt);
    const slot: Slot = { name: l.name, runtime: rt, socket: undefined, hash: '', lastUpdated: Date.now() };
    try {
      slot.socket = await this.sockets.bind(rt, l.name);
    } catch (e) {
      rt.release();
      throw new Error(`listener '${l.name}': ${(e as Error).message}`);
    }
    this.statics.set(l.name, slot);
    if (slot.socket) attachTarget(slot.socket, rt);
    this.s.added.inc();
    this.s.createSuccess.inc();
    void rt.ready.then(() => {
      if (this.initialized) rt.activate();
    });
    this.updateGauges();
  }

  subscribeLds(mux: GrpcMux): void {
    mux.subscribe<Listener>(
      TYPE_URL.listener,
      ListenerSchema,
      undefined,
      { onUpdate: (r, v) => this.onLds(r, v) },
      this.store.scope('listener_manager.lds.'),
    );
  }

  /** Server initialised: start serving (Envoy starts its workers). */
  startWorkers(): void {
    this.initialized = true;
    this.s.workersStarted.set(1);
    for (const slot of [...this.statics.values(), ...this.active.values()]) {
      void slot.runtime.ready.then(() => {
        if (this.current(slot.name) === slot) slot.runtime.activate();
      });
    }
  }

  whenWarm(): Promise<void> {
    if (this.warming.size === 0) return Promise.resolve();
    return new Promise((r) => this.warmWaiters.add(r));
  }

  private current(name: string): Slot | undefined {
    return this.active.get(name) ?? this.statics.get(name);
  }

  /**
   * Main thread: a new descriptor of the socket bound to an address key, for an engine worker, once this
   * thread has bound it (ListenerSockets.share).
   */
  shareSocket(key: string, dup: (fd: number) => number, waitMs: number): Promise<number> {
    return this.sockets.share(key, dup, waitMs);
  }

  /** Called once after the first LDS response was handled (accepted or not). */
  onFirstLds: (() => void) | undefined;

  private async onLds(resources: Array<DecodedResource<Listener>>, version: string): Promise<void> {
    try {
      await this.applyLds(resources, version);
    } finally {
      const f = this.onFirstLds;
      this.onFirstLds = undefined;
      f?.();
    }
  }

  private async applyLds(resources: Array<DecodedResource<Listener>>, version: string): Promise<void> {
    // A proxy with no listener still reports ready: say so, once per change into that state.
    if (resources.length === 0 && (this.active.size > 0 || this.ldsVersion === '')) {
      this.log.warn(
        `lds: the discovery daemon sent no listeners for ${this.nodeText}: it serves no traffic (the daemon's log names the selectors its labels did not match)`,
      );
    }
    const errors: string[] = [];
    // removals first, so a new listener may take over a removed one's address (Envoy's order)
    const named = new Set(resources.map((r) => r.message.name));
    this.sockets.beginUpdate();
    this.releaseAfterUpdate = [];
    for (const name of new Set([...this.active.keys(), ...this.warming.keys()])) if (!named.has(name)) this.remove(name);
    try {
      await this.addAll(resources, errors, version);
    } finally {
      this.sockets.endUpdate();
      for (const rt of this.releaseAfterUpdate) rt.release();
      this.releaseAfterUpdate = undefined;
    }
    this.ldsVersion = version;
    this.updateGauges();
    this.notifyWarm();
    if (errors.length > 0) throw new Error(`Error adding/updating listener(s) ${errors.join('\n')}\n`);
  }

  private async addAll(resources: Array<DecodedResource<Listener>>, errors: string[], version: string): Promise<void> {
    const seen = new Set<string>();
    for (const r of resources) {
      const l = r.message;
      if (seen.has(l.name)) {
        errors.push(`${l.name}: duplicate listener ${l.name} found`);
        continue;
      }
      seen.add(l.name);
      if (this.statics.has(l.name)) {
        errors.push(`${l.name}: listener '${l.name}' can not be updated because it is a static listener`);
        continue;
      }
      const hash = Buffer.from(toBinary(ListenerSchema, l)).toString('base64');
      const cur = this.warming.get(l.name) ?? this.active.get(l.name);
      if (cur && cur.hash === hash) continue;
      const err = await this.addOrUpdate(l, version, hash, r.any);
      if (err) {
        errors.push(`${l.name}: ${err}`);
        this.errors.set(l.name, { any: r.any, details: err, when: Date.now() });
        this.s.createFailure.inc();
      } else {
        this.errors.delete(l.name);
        this.s.createSuccess.inc();
      }
    }
  }

  private async addOrUpdate(l: Listener, version: string, hash: string, _any: Any): Promise<string | undefined> {
    let rt: ListenerRuntime;
    try {
      rt = new ListenerRuntime(l, version, false, this.fullDeps());
    } catch (e) {
      return (e as Error).message;
    }
    this.notices.check(rt);
    const prev = this.warming.get(l.name) ?? this.active.get(l.name);
    const prevSocket = prev?.socket;
    let socket: BoundSocket | undefined;
    try {
      // a same-address update keeps the socket; another listener on the address is a conflict
      if (prevSocket && prevSocket.key === addressKey(rt.address)) {
        socket = prevSocket;
        this.sockets.makeTransparent(socket, rt);
      } else socket = await this.sockets.bind(rt, l.name);
    } catch (e) {
      rt.release();
      return (e as Error).message;
    }
    const oldWarming = this.warming.get(l.name);
    if (oldWarming) {
      oldWarming.runtime.release();
      if (oldWarming.socket && oldWarming.socket !== socket && oldWarming.socket !== this.active.get(l.name)?.socket)
        this.sockets.close(oldWarming.socket);
    }
    const slot: Slot = { name: l.name, runtime: rt, socket, hash, lastUpdated: Date.now() };
    this.warming.set(l.name, slot);
    this.log.info(`lds: add/update listener '${l.name}'`);
    void rt.ready.then(() => this.promote(slot));
    return undefined;
  }

  private promote(slot: Slot): void {
    if (this.warming.get(slot.name) !== slot) return;
    this.warming.delete(slot.name);
    const prev = this.active.get(slot.name);
    this.active.set(slot.name, slot);
    if (slot.socket) attachTarget(slot.socket, slot.runtime);
    if (this.initialized) slot.runtime.activate();
    if (prev) {
      this.s.modified.inc();
      if (prev.socket && prev.socket !== slot.socket) this.sockets.close(prev.socket);
      this.retire(prev.runtime);
    } else this.s.added.inc();
    this.updateGauges();
    this.notifyWarm();
  }

  private notifyWarm(): void {
    if (this.warming.size > 0) return;
    for (const w of this.warmWaiters) w();
    this.warmWaiters.clear();
  }

  private releaseRuntime(rt: ListenerRuntime): void {
    if (this.releaseAfterUpdate) this.releaseAfterUpdate.push(rt);
    else rt.release();
  }

  /** Old listener versions: existing connections drain, then are closed after the drain time. */
  private retire(rt: ListenerRuntime): void {
    rt.draining = true;
    rt.active = false;
    if (rt.connections.size === 0) {
      this.releaseRuntime(rt);
      return;
    }
    this.draining.add(rt);
    const t = setTimeout(() => {
      for (const c of rt.connections) c.destroy();
    }, this.drainTimeMs);
    t.unref();
    const check = setInterval(() => {
      if (rt.connections.size > 0) return;
      clearInterval(check);
      clearTimeout(t);
      this.draining.delete(rt);
      rt.release();
      this.updateGauges();
    }, 1000);
    check.unref();
  }

  private remove(name: string): void {
    const w = this.warming.get(name);
    const a = this.active.get(name);
    this.warming.delete(name);
    this.active.delete(name);
    if (w) {
      if (w.socket !== a?.socket) this.sockets.close(w.socket);
      this.releaseRuntime(w.runtime);
    }
    if (a) {
      this.sockets.close(a.socket);
      this.retire(a.runtime);
    }
    this.errors.delete(name);
    this.s.removed.inc();
    this.log.info(`lds: remove listener '${name}'`);
  }

  /**
   * Envoy getBalancedHandlerByAddress: the listener bound (or not, bind_to_port false) to exactly the
   * address, else the wildcard listener of the port in the address's family.
   */
  findListenerFor(address: string, port: number): ListenerRuntime | undefined {
    let wildcard: ListenerRuntime | undefined;
    const v6 = ipFamily(address) === 6;
    for (const s of [...this.active.values(), ...this.statics.values()]) {
      const rt = s.runtime;
      if (rt.useOriginalDst || rt.address.port !== port || !rt.active) continue;
      if (rt.address.host === address) return rt;
      if (rt.address.host === (v6 ? '::' : '0.0.0.0')) wildcard ??= rt;
    }
    return wildcard;
  }

  /** POST /drain_listeners: graceful → drain then stop listening after the drain time. */
  drainListeners(opts: { inboundOnly: boolean; graceful: boolean; drainTimeMs: number }): void {
    for (const s of [...this.statics.values(), ...this.active.values()]) {
      if (opts.inboundOnly && !s.runtime.inbound) continue;
      const stop = () => {
        if (s.socket) {
          s.socket.target = undefined;
          this.sockets.close(s.socket);
        }
      };
      if (opts.graceful) {
        s.runtime.draining = true;
        const t = setTimeout(stop, opts.drainTimeMs);
        t.unref();
      } else stop();
    }
    this.updateGauges();
  }

  private updateGauges(): void {
    this.s.totalActive.set(this.active.size + this.statics.size);
    this.s.totalWarming.set(this.warming.size);
    this.s.totalDraining.set(this.draining.size + [...this.active.values(), ...this.statics.values()].filter((s) => s.runtime.draining).length);
  }

  /** Listeners with their bound addresses (for /listeners): static then dynamic active. */
  list(): Array<{ name: string; runtime: ListenerRuntime; boundPort: number | undefined; listening: boolean }> {
    return [...this.statics.values(), ...this.active.values()].map((s) => ({
      name: s.name,
      runtime: s.runtime,
      boundPort: s.socket?.port,
      listening: !!s.socket && this.sockets.isBound(s.socket),
    }));
  }

  /** Total active downstream connections (EXIT_ON_ZERO_ACTIVE_CONNECTIONS). */
  activeConnections(): number {
    let n = 0;
    for (const s of [...this.statics.values(), ...this.active.values()]) n += s.runtime.connections.size;
    for (const rt of this.draining) n += rt.connections.size;
    return n;
  }

  dump(): ListenersDump {
    const names = new Set([...this.active.keys(), ...this.warming.keys(), ...this.errors.keys()]);
    const st = (s: Slot | undefined): ListenerVersionDump | undefined =>
      s ? { proto: s.runtime.proto, version: s.runtime.versionInfo, lastUpdated: s.lastUpdated } : undefined;
    return {
      statics: [...this.statics.values()].map((s) => ({ proto: s.runtime.proto, lastUpdated: s.lastUpdated })),
      dynamic: [...names].sort().map((name) => {
        const e: DynamicListenerDump = { name };
        const a = st(this.active.get(name));
        const w = st(this.warming.get(name));
        if (a) e.active = a;
        if (w) e.warming = w;
        const err = this.errors.get(name);
        if (err) e.error = err;
        return e;
      }),
      version: this.ldsVersion,
    };
  }

  close(): void {
    this.sockets.closeAll();
    for (const m of [this.statics, this.active, this.warming]) {
      for (const s of m.values()) {
        for (const c of s.runtime.connections) c.destroy();
        s.runtime.release();
      }
    }
    for (const rt of this.draining) for (const c of rt.connections) c.destroy();
  }
}

export { listenerAddress };
