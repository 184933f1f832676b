// Secrets by name: static ones from the bootstrap, dynamic ones over SDS (envoy.extensions.transport_
// sockets.tls.v3.Secret) from the config source each SdsSecretConfig names: the ADS stream (`ads: {}`)
// or a gRPC SecretDiscoveryService behind a static cluster (Istio's `sds-grpc`, the agent's socket).
// A watch resolves `ready` when its secret arrives or its initial_fetch_timeout (default 15 s) passes,
// so TLS listeners and clusters warm the way Envoy's do.
import type { ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import type { ContextCerts } from './certificate';
import { SecretSchema, type Secret, type SdsSecretConfig } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { Logger } from '../log';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import type { StatsStore } from '../stats/store';
import { checkTlsCertificate } from './certificate';
import type { GrpcMux } from '../xds/grpc-mux';
import type { SubscriptionHandle } from '../xds/subscription';

export interface SecretWatch {
  current(): Secret | undefined;
  /** Resolves when the secret is there or the initial fetch timed out. */
  readonly ready: Promise<void>;
  onChange(cb: () => void): () => void;
  release(): void;
}

/** Resolves a ConfigSource to the gRPC stream that serves it (engine-provided). */
export type MuxResolver = (source: ConfigSource, where: string) => { key: string; mux: GrpcMux };

interface Entry {
  name: string;
  secret: Secret | undefined;
  refs: number;
  listeners: Set<() => void>;
  ready: Promise<void>;
  resolveReady: () => void;
  timer: NodeJS.Timeout | undefined;
}

interface Source {
  mux: GrpcMux;
  entries: Map<string, Entry>;
  handle: SubscriptionHandle | undefined;
}

export class SecretManager {
  /** The TLS contexts alive in this engine (they add and remove themselves), for the admin's /certs. */
  readonly contexts = new Set<{ certsInUse(): ContextCerts }>();
  private readonly staticSecrets = new Map<string, Secret>();
  private readonly sources = new Map<string, Source>();

  constructor(
    private readonly resolve: MuxResolver,
    private readonly log: Logger,
    private readonly stats: StatsStore,
    statics: readonly Secret[] = [],
  ) {
    for (const s of statics) this.staticSecrets.set(s.name, s);
  }

  watch(cfg: SdsSecretConfig, where: string): SecretWatch {
    if (!cfg.name) throw new ConfigError(`${where}.name: must not be empty`);
    if (!cfg.sdsConfig) {
      const s = this.staticSecrets.get(cfg.name);
      if (!s) throw new ConfigError(`${where}: Unknown static secret: ${cfg.name}`);
      return { current: () => s, ready: Promise.resolve(), onChange: () => () => {}, release: () => {} };
    }
    const { key, mux } = this.resolve(cfg.sdsConfig, `${where}.sds_config`);
    let src = this.sources.get(key);
    if (!src) {
      src = { mux, entries: new Map(), handle: undefined };
      this.sources.set(key, src);
    }
    let e = src.entries.get(cfg.name);
    if (!e) {
      let resolveReady!: () => void;
      const ready = new Promise<void>((r) => (resolveReady = r));
      e = { name: cfg.name, secret: undefined, refs: 0, listeners: new Set(), ready, resolveReady, timer: undefined };
      const timeoutMs = durationToMs(cfg.sdsConfig.initialFetchTimeout) ?? 15_000;
      if (timeoutMs > 0) {
        const entry = e;
        e.timer = setTimeout(() => {
          if (!entry.secret) this.log.warn(`secret '${cfg.name}': initial fetch timed out after ${timeoutMs}ms; TLS using it fails until it arrives`);
          entry.resolveReady();
        }, timeoutMs);
        e.timer.unref();
      }
      src.entries.set(cfg.name, e);
      this.resubscribe(key, src);
    }
    const entry = e;
    const source = src;
    entry.refs++;
    let released = false;
    const mine = new Set<() => void>();
    return {
      current: () => entry.secret,
      ready: entry.ready,
      onChange: (cb) => {
        entry.listeners.add(cb);
        mine.add(cb);
        return () => {
          entry.listeners.delete(cb);
          mine.delete(cb);
        };
      },
      release: () => {
        if (released) return;
        released = true;
        for (const cb of mine) entry.listeners.delete(cb);
        if (--entry.refs > 0) return;
        if (entry.timer) clearTimeout(entry.timer);
        source.entries.delete(entry.name);
        this.resubscribe(key, source);
      },
    };
  }

  private resubscribe(key: string, src: Source): void {
    const names = [...src.entries.keys()];
    if (!src.handle) {
      src.handle = src.mux.subscribe<Secret>(
        TYPE_URL.secret,
        SecretSchema,
        names,
        {
          onUpdate: (resources) => {
            const errors: string[] = [];
            for (const r of resources) {
              const e = src.entries.get(r.name);
              if (!e) continue;
              if (r.message.type.case === 'tlsCertificate') {
                try {
                  checkTlsCertificate(r.message.type.value, `secret '${r.name}'`);
                } catch (err) {
                  errors.push((err as Error).message);
                  continue;
                }
              }
              e.secret = r.message;
              if (e.timer) clearTimeout(e.timer);
              e.resolveReady();
              for (const cb of e.listeners) cb();
            }
            // NACKed; the secrets named keep their last good material (or keep waiting for a first one)
            if (errors.length > 0) throw new Error(errors.join('\n'));
          },
        },
        this.stats.scope(`sds.${key}.`),
      );
      src.mux.start();
    } else {
      src.handle.setNames(names);
    }
  }

  /** Secrets for /config_dump (SecretsConfigDump). */
  dump(): { statics: Secret[]; dynamic: Array<{ name: string; secret: Secret | undefined }> } {
    const dynamic: Array<{ name: string; secret: Secret | undefined }> = [];
    for (const s of this.sources.values()) for (const e of s.entries.values()) dynamic.push({ name: e.name, secret: e.secret });
    return { statics: [...this.staticSecrets.values()], dynamic };
  }
}
