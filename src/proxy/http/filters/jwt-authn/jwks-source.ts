// Where a provider's keys come from. local_jwks: parsed once when the config is applied. remote_jwks:
// fetched through a cluster of the engine on the first request that needs keys (the request waits),
// cached for cache_duration, fetched again after that; concurrent requests share one fetch. With
// async_fetch the keys are fetched as soon as the config is applied and refreshed in the background
// (every cache_duration after a success, every failed_refetch_duration after a failure), so requests
// never wait once the first fetch completed.
import type { Logger } from '../../../log';
import type { ClusterCall } from '../../../common/cluster-call';
import { jwksFromText, type Jwks } from '../../../../lib/jwt-verify/jwks';
import { Status, statusString } from '../../../../lib/jwt-verify/status';
import type { JwtAuthnStats } from './stats';

export interface KeySource {
  /** Usable keys now; undefined when there are none or the cached remote set expired. */
  current(): Jwks | undefined;
  readonly remote: boolean;
  /** Remote only: fetch (or join the fetch in flight); undefined when the fetch failed. */
  fetch(): Promise<Jwks | undefined>;
  /** Called once the whole filter config is valid: async_fetch starts here. */
  start(): void;
}

export class LocalKeySource implements KeySource {
  readonly remote = false;
  constructor(private readonly jwks: Jwks | undefined) {}
  current(): Jwks | undefined {
    return this.jwks;
  }
  fetch(): Promise<Jwks | undefined> {
    return Promise.resolve(undefined);
  }
  start(): void {}
}

export interface RemoteJwksSettings {
  provider: string;
  cluster: string;
  authority: string;
  path: string;
  timeoutMs: number;
  cacheMs: number;
  /** async_fetch: refetch delay after a failure. */
  asyncFetch?: { failedRefetchMs: number };
  /** retry_policy: retries on 5xx and connection failures with jittered exponential backoff. */
  retry?: { numRetries: number; baseMs: number; maxMs: number };
}

// The refresh timer must not keep a replaced filter config (and its key source) alive: it holds the
// source weakly and stops once the source is gone.
function scheduleRefresh(ref: WeakRef<RemoteKeySource>, ms: number): void {
  const t = setTimeout(() => ref.deref()?.backgroundFetch(), Math.min(ms, 2 ** 31 - 1));
  t.unref();
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class RemoteKeySource implements KeySource {
  readonly remote = true;
  private jwks: Jwks | undefined;
  private expiresAt = 0;
  private inflight: Promise<Jwks | undefined> | undefined;

  constructor(
    private readonly s: RemoteJwksSettings,
    private readonly upstream: ClusterCall,
    private readonly stats: JwtAuthnStats,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.s.asyncFetch) this.backgroundFetch();
  }

  current(): Jwks | undefined {
    return this.jwks && performance.now() < this.expiresAt ? this.jwks : undefined;
  }

  fetch(): Promise<Jwks | undefined> {
    if (!this.inflight) {
      this.inflight = this.fetchWithRetries()
        .catch((e: Error) => {
          this.stats.jwksFetchFailed.inc();
          this.log.warn(`jwt_authn: provider ${this.s.provider}: JWKS fetch failed: ${e.message}`);
          return undefined;
        })
        .then((j) => {
          this.inflight = undefined;
          if (j) {
            this.jwks = j;
            this.expiresAt = performance.now() + this.s.cacheMs;
          }
          return j;
        });
    }
    return this.inflight;
  }

  /** @internal async_fetch refresh */
  backgroundFetch(): void {
    const ref = new WeakRef(this);
    const { cacheMs, asyncFetch } = this.s;
    void this.fetch().then((j) => {
      const self = ref.deref();
      // keys fetched in the background stay valid until the next background fetch replaces them
      if (self && j && self.jwks === j) self.expiresAt = Number.POSITIVE_INFINITY;
      scheduleRefresh(ref, j ? cacheMs : asyncFetch!.failedRefetchMs);
    });
  }

  private async fetchWithRetries(): Promise<Jwks | undefined> {
    const { cluster, authority, path, timeoutMs, provider } = this.s;
    const retries = this.s.retry?.numRetries ?? 0;
    for (let attempt = 0; ; attempt++) {
      let retryable: boolean;
      let why: string;
      try {
        const r = await this.upstream(cluster, { method: 'GET', path, authority, timeoutMs });
        if (r.status === 200) {
          const j = jwksFromText(r.body.toString('utf8'));
          if (j.status === Status.Ok) {
            this.stats.jwksFetchSuccess.inc();
            return j;
          }
          this.stats.jwksFetchFailed.inc();
          this.log.warn(`jwt_authn: provider ${provider}: invalid JWKS from ${authority}${path}: ${statusString(j.status)}`);
          return undefined;
        }
        retryable = r.status >= 500;
        why = `status ${r.status}`;
      } catch (e) {
        retryable = true;
        why = (e as Error).message;
      }
      if (!retryable || attempt >= retries) {
        this.stats.jwksFetchFailed.inc();
        this.log.debug(`jwt_authn: provider ${provider}: JWKS fetch from cluster ${cluster} ${authority}${path} failed: ${why}`);
        return undefined;
      }
      const r = this.s.retry!;
      await sleep(Math.random() * Math.min(r.baseMs * 2 ** attempt, r.maxMs));
    }
  }
}
