// RDS: route configurations by name, shared by every HTTP connection manager naming them, compiled
// once per update. New connections and requests on existing ones use the latest table (Envoy swaps
// route tables in place). A config that does not compile rejects the response; the previous table
// keeps serving.
import type { RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { TYPE_URL } from '../../xds/types';
import type { Logger } from '../log';
import type { StatsStore } from '../stats/store';
import type { DecodedResource, GrpcMux, SubscriptionHandle } from '../xds/grpc-mux';
import { compileRouteConfiguration, type RouteCompileOptions } from './compile';
import type { CompiledRouteConfig } from './types';

export interface RouteConfigProvider {
  current(): CompiledRouteConfig | undefined;
  readonly ready: Promise<void>;
  readonly name: string;
  release(): void;
}

interface RdsEntry {
  name: string;
  compiled: CompiledRouteConfig | undefined;
  proto: RouteConfiguration | undefined;
  version: string;
  lastUpdated: number;
  refs: number;
  ready: Promise<void>;
  resolveReady: () => void;
}

export class StaticRouteProvider implements RouteConfigProvider {
  readonly ready = Promise.resolve();
  readonly name: string;
  constructor(
    private readonly compiled: CompiledRouteConfig,
    readonly proto: RouteConfiguration,
    private readonly onRelease: () => void = () => {},
  ) {
    this.name = compiled.name;
  }
  current(): CompiledRouteConfig {
    return this.compiled;
  }
  release(): void {
    this.onRelease();
  }
}

export class RouteManager {
  private readonly entries = new Map<string, RdsEntry>();
  private handle: SubscriptionHandle | undefined;
  private mux: GrpcMux | undefined;
  /** Inline route configs of static and dynamic listeners (for config_dump). */
  readonly inline = new Set<StaticRouteProvider>();

  constructor(
    private readonly compileOptions: () => RouteCompileOptions,
    private readonly log: Logger,
    private readonly stats: StatsStore,
  ) {}

  setMux(mux: GrpcMux): void {
    this.mux = mux;
    if (this.entries.size > 0) this.resubscribe();
  }

  compileInline(rc: RouteConfiguration, isStatic: boolean): StaticRouteProvider {
    const p: StaticRouteProvider = new StaticRouteProvider(compileRouteConfiguration(rc, { ...this.compileOptions(), isStatic }), rc, () => this.inline.delete(p));
    this.inline.add(p);
    return p;
  }

  /** A provider for an RDS name; `statPrefix` scopes Envoy's http.<prefix>.rds.<name>.* stats. */
  provider(name: string): RouteConfigProvider {
    let e = this.entries.get(name);
    if (!e) {
      let resolveReady!: () => void;
      const ready = new Promise<void>((r) => (resolveReady = r));
      e = { name, compiled: undefined, proto: undefined, version: '', lastUpdated: 0, refs: 0, ready, resolveReady };
      this.entries.set(name, e);
      this.resubscribe();
    }
    const entry = e;
    entry.refs++;
    let released = false;
    return {
      name,
      current: () => entry.compiled,
      ready: entry.ready,
      release: () => {
        if (released) return;
        released = true;
        if (--entry.refs > 0) return;
        this.entries.delete(name);
        this.resubscribe();
      },
    };
  }

  private resubscribe(): void {
    if (!this.mux) return;
    const names = [...this.entries.keys()];
    if (!this.handle) {
      this.handle = this.mux.subscribe<RouteConfiguration>(TYPE_URL.route, RouteConfigurationSchema, names, { onUpdate: (r, v) => this.onRds(r, v) });
    } else this.handle.setNames(names);
  }

  private onRds(resources: Array<DecodedResource<RouteConfiguration>>, version: string): void {
    const errors: string[] = [];
    const opts = this.compileOptions();
    for (const r of resources) {
      const e = this.entries.get(r.message.name);
      if (!e) continue;
      const scope = this.stats.scope(`http.rds.${r.message.name}.`);
      scope.counter('config_reload').inc();
      try {
        e.compiled = compileRouteConfiguration(r.message, { ...opts, isStatic: false });
        e.proto = r.message;
        e.version = version;
        e.lastUpdated = Date.now();
        e.resolveReady();
        this.log.debug(`rds: loaded route config '${r.message.name}' version ${version}`);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
  }

  dump(): { statics: Array<{ proto: RouteConfiguration }>; dynamic: Array<{ proto: RouteConfiguration; version: string; lastUpdated: number }> } {
    const dynamic: Array<{ proto: RouteConfiguration; version: string; lastUpdated: number }> = [];
    for (const e of this.entries.values()) if (e.proto) dynamic.push({ proto: e.proto, version: e.version, lastUpdated: e.lastUpdated });
    return { statics: [...this.inline].map((p) => ({ proto: p.proto })), dynamic };
  }
}
