// RDS: route configurations by name, shared by every HTTP connection manager naming them, compiled
// once per update. New connections and requests on existing ones use the latest table (Envoy swaps
// route tables in place). A config that does not compile rejects the response; the previous table
// keeps serving. A route configuration that names a `vhds` source gets its virtual hosts over VHDS
// (VirtualHost resources `<route config>/<virtual host>` on the ADS stream, added and removed one by
// one); it is ready once VHDS has answered, and each VHDS update recompiles the configurations it touches.
// "Compiled" is the lookup table with each virtual host kept encoded until a request selects it (compile.ts).
import { create, fromBinary } from '@bufbuild/protobuf';
import type { RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { VirtualHostSchema, type VirtualHost } from '../../gen/envoy/config/route/v3/route_components_pb';
import { splitVhdsName } from '../../lib/xds/vhds';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { Logger } from '../log';
import type { StatsStore } from '../stats/store';
import type { GrpcMux } from '../xds/grpc-mux';
import type { DecodedResource, SubscriptionHandle } from '../xds/subscription';
import { compileRouteConfiguration, type RouteCompileOptions } from './compile';
import { EncodedVirtualHost, encodedVirtualHosts } from './encoded';
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
  /**
   * The RouteConfiguration as received (the bytes the xDS client holds, not a copy), decoded for config_dump and
   * to merge VHDS virtual hosts: the compiled table keeps views of its virtual hosts in it.
   */
  encoded: Uint8Array | undefined;
  /** Its virtual hosts come from VHDS. */
  viaVhds: boolean;
  version: string;
  lastUpdated: number;
  refs: number;
  ready: Promise<void>;
  resolveReady: () => void;
}

function decodeRoutes(encoded: Uint8Array): RouteConfiguration {
  return fromBinary(RouteConfigurationSchema, encoded);
}

/** A route configuration's proto with its VHDS virtual hosts in place of the vhds source (config_dump). */
function withVirtualHosts(rc: RouteConfiguration, vhosts: ReadonlyMap<string, EncodedVirtualHost> | undefined): RouteConfiguration {
  const merged = create(RouteConfigurationSchema, {
    ...rc,
    virtualHosts: [...rc.virtualHosts, ...[...(vhosts ?? new Map()).values()].map((v) => v.message())],
  });
  merged.vhds = undefined;
  return merged;
}

/** A received route configuration's table: its own virtual hosts, then (vhds) those VHDS delivered, kept encoded. */
function compileReceived(
  rc: RouteConfiguration,
  encoded: Uint8Array,
  vhds: ReadonlyMap<string, EncodedVirtualHost> | undefined,
  opts: RouteCompileOptions,
): CompiledRouteConfig {
  const own = encodedVirtualHosts(encoded, rc.virtualHosts);
  if (!rc.vhds) return compileRouteConfiguration(rc, { ...opts, isStatic: false }, own);
  return compileRouteConfiguration({ ...rc, vhds: undefined }, { ...opts, isStatic: false }, [...own, ...(vhds?.values() ?? [])]);
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
  /** VHDS: virtual hosts by route configuration name, then resource name. */
  /**
   * VHDS virtual hosts by route configuration, then by resource name, as received: decoded when a route
   * configuration is compiled or dumped (a sidecar with 1000 services in scope held ~7 MB of decoded ones).
   */
  private readonly vhds = new Map<string, Map<string, EncodedVirtualHost>>();
  private vhdsHandle: SubscriptionHandle | undefined;
  /** VHDS answered at least once: route configurations waiting for their virtual hosts can serve. */
  private vhdsAnswered = false;

  constructor(
    private readonly compileOptions: () => RouteCompileOptions,
    private readonly log: Logger,
    private readonly stats: StatsStore,
  ) {}

  setMux(mux: GrpcMux): void {
    this.mux = mux;
    if (this.entries.size > 0) this.resubscribe();
  }

  /** Subscribes to VirtualHost (wildcard, as Envoy's VHDS does) the first time a route configuration names vhds. */
  private ensureVhds(): void {
    if (this.vhdsHandle || !this.mux) return;
    this.vhdsHandle = this.mux.subscribe<VirtualHost>(TYPE_URL.virtualHost, VirtualHostSchema, undefined, {
      onUpdate: (r) => this.onVhds(r, [], true),
      onDelta: (added, removed) => this.onVhds(added, removed, false),
    });
  }

  /**
   * Applies VirtualHost additions and removals (or, `complete`, a full set) and recompiles the route
   * configurations they belong to; nothing changes if one of them does not compile.
   */
  private onVhds(added: Array<DecodedResource<VirtualHost>>, removed: string[], complete: boolean): void {
    const next = new Map<string, Map<string, EncodedVirtualHost>>();
    const copy = (rc: string): Map<string, EncodedVirtualHost> => {
      let m = next.get(rc);
      if (!m) next.set(rc, (m = complete ? new Map() : new Map(this.vhds.get(rc) ?? [])));
      return m;
    };
    if (complete) for (const rc of this.vhds.keys()) copy(rc);
    for (const name of removed) {
      const parts = splitVhdsName(name);
      if (parts) copy(parts.routeConfig).delete(name);
    }
    const errors: string[] = [];
    for (const r of added) {
      const parts = splitVhdsName(r.name);
      if (!parts) {
        errors.push(`virtual host '${r.name}': a VHDS resource is named <route config name>/<virtual host name>`);
        continue;
      }
      copy(parts.routeConfig).set(r.name, new EncodedVirtualHost(r.message.domains, r.any.value));
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
    const opts = this.compileOptions();
    const compiled = new Map<RdsEntry, CompiledRouteConfig>();
    for (const [rc, vhosts] of next) {
      const e = this.entries.get(rc);
      if (!e?.encoded || !e.viaVhds) continue;
      try {
        compiled.set(e, compileReceived(decodeRoutes(e.encoded), e.encoded, vhosts, opts));
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
    for (const [rc, vhosts] of next) {
      if (vhosts.size === 0) this.vhds.delete(rc);
      else this.vhds.set(rc, vhosts);
    }
    for (const [e, c] of compiled) {
      e.compiled = c;
      e.lastUpdated = Date.now();
    }
    this.vhdsAnswered = true;
    // route configurations that were waiting for their first virtual hosts
    for (const e of this.entries.values()) if (e.viaVhds && e.compiled) e.resolveReady();
  }

  compileInline(rc: RouteConfiguration, isStatic: boolean): StaticRouteProvider {
    const p: StaticRouteProvider = new StaticRouteProvider(compileRouteConfiguration(rc, { ...this.compileOptions(), isStatic }), rc, () =>
      this.inline.delete(p),
    );
    this.inline.add(p);
    return p;
  }

  /** A provider for an RDS name; `statPrefix` scopes Envoy's http.<prefix>.rds.<name>.* stats. */
  provider(name: string): RouteConfigProvider {
    let e = this.entries.get(name);
    if (!e) {
      let resolveReady!: () => void;
      const ready = new Promise<void>((r) => (resolveReady = r));
      e = { name, compiled: undefined, encoded: undefined, viaVhds: false, version: '', lastUpdated: 0, refs: 0, ready, resolveReady };
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
        const viaVhds = r.message.vhds !== undefined;
        e.compiled = compileReceived(r.message, r.any.value, this.vhds.get(r.message.name), opts);
        e.encoded = r.any.value;
        e.viaVhds = viaVhds;
        e.version = version;
        e.lastUpdated = Date.now();
        if (viaVhds) {
          this.ensureVhds();
          if (this.vhdsAnswered) e.resolveReady();
        } else e.resolveReady();
        this.log.debug(`rds: loaded route config '${r.message.name}' version ${version}`);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
  }

  dump(): { statics: Array<{ proto: RouteConfiguration }>; dynamic: Array<{ proto: RouteConfiguration; version: string; lastUpdated: number }> } {
    const dynamic: Array<{ proto: RouteConfiguration; version: string; lastUpdated: number }> = [];
    for (const e of this.entries.values()) {
      if (!e.encoded) continue;
      const rc = decodeRoutes(e.encoded);
      // as Envoy dumps it: the virtual hosts VHDS delivered in place, the vhds source kept
      const proto = rc.vhds ? create(RouteConfigurationSchema, { ...withVirtualHosts(rc, this.vhds.get(e.name)), vhds: rc.vhds }) : rc;
      dynamic.push({ proto, version: e.version, lastUpdated: e.lastUpdated });
    }
    return { statics: [...this.inline].map((p) => ({ proto: p.proto })), dynamic };
  }
}
