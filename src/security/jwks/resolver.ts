// The daemon's JWKS resolver (Istio pilot/pkg/model/jwks_resolver.go): key sets of RequestAuthentication
// rules are fetched by the daemon and inlined into jwt_authn (local_jwks). Generation never waits for the
// network: an unknown URI gets Istio's reject-everything key set at once while the fetch runs, and the
// resolver asks for a push when real keys arrive. A timer refreshes every cached key set and pushes when
// one changed; failures back off as Istio's do.
// Differs from Istio on purpose: a key set with no key Envoy can use (`{"keys":[]}`, only unknown key types,
// bad JSON), inline or fetched, is not inlined as is. Envoy refuses such a jwt_authn config, which NACKs the
// whole listener, so one rule would freeze every later listener update of its proxies (a DENY policy added
// afterwards would never apply). The daemon inlines the reject-everything key set instead: that issuer's
// tokens get 401, everything else applies.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { setMaxListeners } from 'node:events';
import type { JwtProviderSchema } from '../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { registerScope } from '../../lib/log';
import { defineCounter } from '../../lib/metrics';
import { EXTRA_CA_BUNDLE_PATH, fetchDocument, loadTrustedRoots } from '../../lib/jwks-fetch';
import { createFakeJwks, keySetChanged, keySetError } from './keyset';
import { jwksFromText } from '../../lib/jwt-verify/jwks';
import { Status, statusString } from '../../lib/jwt-verify/status';

const log = registerScope('model', 'mesh model');

export const networkFetchSuccess = defineCounter({
  name: 'pilot_jwks_resolver_network_fetch_success_total',
  help: 'Total number of successfully network fetch by pilot jwks resolver',
});
export const networkFetchFail = defineCounter({
  name: 'pilot_jwks_resolver_network_fetch_fail_total',
  help: 'Total number of failed network fetch by pilot jwks resolver',
});

/** Istio's constants of the resolver. */
export const JWT_PUB_KEY_EVICTION_MS = 7 * 24 * 3_600_000;
export const JWT_PUB_KEY_REFRESH_INTERVAL_ON_FAILURE_MS = 60_000;
export const JWT_PUB_KEY_RETRY_INTERVAL_MS = 1_000;
export const JWT_PUB_KEY_REFRESH_ON_FAILURE_RESET_THRESHOLD_MS = 3_600_000;
/** Retries of a failed GET when refreshing (the first fetch, made for a push, does not retry). */
export const NETWORK_FETCH_RETRIES_ON_REFRESH = 7;
/** Default jwtRule.timeout. */
export const DEFAULT_JWKS_TIMEOUT_MS = 5_000;
const OPENID_DISCOVERY_SUFFIX = '/.well-known/openid-configuration';

export interface JwksResolverOptions {
  /** PILOT_JWT_PUB_KEY_REFRESH_INTERVAL. */
  refreshIntervalMs: number;
  refreshIntervalOnFailureMs?: number;
  retryIntervalMs?: number;
  retriesOnRefresh?: number;
  evictionMs?: number;
  /** JWKS_RESOLVER_INSECURE_SKIP_VERIFY. */
  insecureSkipVerify?: boolean;
  /** Extra PEM bundles trusted for HTTPS key servers (default: Istio's /cacerts/extra.pem). */
  caBundlePaths?: readonly string[];
  /** Called once per detected key change (first keys of a URI, or a rotation seen by a refresh). */
  onChange?: () => void;
  now?: () => number;
}

export type LocalJwksSource = NonNullable<MessageInitShape<typeof JwtProviderSchema>['jwksSourceSpecifier']>;

interface Entry {
  issuer: string;
  jwksUri: string;
  pubKey: string;
  timeoutMs: number;
  lastRefreshed: number;
  lastUsed: number;
  lastAttempt: number;
  inFlight?: Promise<void>;
}

function entryKey(issuer: string, jwksUri: string): string {
  return `${jwksUri}\u0000${issuer}`;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

export class JwksResolver {
  private readonly entries = new Map<string, Entry>();
  /** Key-set texts already warned about (generation runs at every push). */
  private readonly unusable = new Set<string>();
  private readonly o: Required<Omit<JwksResolverOptions, 'onChange' | 'caBundlePaths'>>;
  private readonly ca: string[] | undefined;
  private onChange: (() => void) | undefined;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private refreshIntervalMs: number;
  private lastRefreshHadError = false;
  private refreshing: Promise<void> | undefined;
  private changeVersion = 0;
  /** Times a refresh or first fetch found new keys, and refresh fetches that failed (Istio's test counters). */
  keyChangedCount = 0;
  refreshFailedCount = 0;

  constructor(opts: JwksResolverOptions) {
    if (!(opts.refreshIntervalMs > 0)) throw new Error(`PILOT_JWT_PUB_KEY_REFRESH_INTERVAL must be positive, got ${opts.refreshIntervalMs}ms`);
    this.o = {
      refreshIntervalMs: opts.refreshIntervalMs,
      refreshIntervalOnFailureMs: opts.refreshIntervalOnFailureMs ?? JWT_PUB_KEY_REFRESH_INTERVAL_ON_FAILURE_MS,
      retryIntervalMs: opts.retryIntervalMs ?? JWT_PUB_KEY_RETRY_INTERVAL_MS,
      retriesOnRefresh: opts.retriesOnRefresh ?? NETWORK_FETCH_RETRIES_ON_REFRESH,
      evictionMs: opts.evictionMs ?? JWT_PUB_KEY_EVICTION_MS,
      insecureSkipVerify: opts.insecureSkipVerify ?? false,
      now: opts.now ?? Date.now,
    };
    this.ca = loadTrustedRoots(opts.caBundlePaths ?? [EXTRA_CA_BUNDLE_PATH]);
    this.onChange = opts.onChange;
    // Every running fetch listens on the one abort signal.
    setMaxListeners(0, this.abort.signal);
    this.refreshIntervalMs = this.o.refreshIntervalMs;
    this.schedule();
  }

  /** Where key changes are reported (the daemon's push trigger). */
  setOnChange(fn: (() => void) | undefined): void {
    this.onChange = fn;
  }

  /** The interval the refresh timer is armed with now (it backs off after failures). */
  get refreshIntervalNowMs(): number {
    return this.refreshIntervalMs;
  }

  /** Whether the refresh timer is armed (false once closed). */
  get refreshScheduled(): boolean {
    return this.timer !== undefined;
  }

  /** Grows with every key change: part of what generated listeners depend on. */
  get version(): number {
    return this.changeVersion;
  }

  /**
   * The cached key set for an issuer and URI, or undefined while there is none. The first request for a
   * pair starts its fetch; a pair whose fetches failed is fetched again on later requests (at most once
   * per retry interval), as Istio retries a URI it had to forget.
   */
  getPublicKey(issuer: string, jwksUri: string, timeoutMs = DEFAULT_JWKS_TIMEOUT_MS): string | undefined {
    const now = this.o.now();
    const k = entryKey(issuer, jwksUri);
    let e = this.entries.get(k);
    if (!e) {
      e = { issuer, jwksUri, pubKey: '', timeoutMs, lastRefreshed: now, lastUsed: now, lastAttempt: 0 };
      this.entries.set(k, e);
    }
    e.lastUsed = now;
    e.timeoutMs = timeoutMs;
    if (e.pubKey !== '') return e.pubKey;
    if (!e.inFlight && !this.abort.signal.aborted && now - e.lastAttempt >= this.o.retryIntervalMs) this.startFirstFetch(e);
    return undefined;
  }

  /**
   * Istio's BuildLocalJwks: the rule's inline `jwks` as written, else the fetched key set, else the fake
   * key set that rejects every token until real keys are known.
   */
  buildLocalJwks(jwksUri: string, issuer: string, inlineJwks: string | undefined, timeoutMs = DEFAULT_JWKS_TIMEOUT_MS): LocalJwksSource {
    let keys = inlineJwks ?? '';
    if (keys === '') {
      const got = this.getPublicKey(issuer, jwksUri, timeoutMs);
      if (got === undefined) {
        log.info(`The JWKS key is not yet fetched for issuer ${issuer} (${jwksUri}), using a fake JWKS for now`);
        keys = createFakeJwks(jwksUri);
      } else {
        keys = got;
      }
    }
    const usable = jwksFromText(keys).status;
    if (usable !== Status.Ok) {
      if (!this.unusable.has(keys)) {
        if (this.unusable.size >= 256) this.unusable.clear();
        this.unusable.add(keys);
        log.warn(
          `The JWKS for issuer ${issuer}${jwksUri ? ` (${jwksUri})` : ' (inline jwks)'} has no usable key: ${statusString(usable)}; its tokens are rejected (a fake JWKS is sent in its place)`,
        );
      }
      keys = createFakeJwks(jwksUri || issuer);
    }
    return { case: 'localJwks', value: { specifier: { case: 'inlineString', value: keys } } };
  }

  /** Resolves once no fetch is running (tests, and shutdown). */
  async idle(): Promise<void> {
    for (;;) {
      const pending = [...this.entries.values()].map((e) => e.inFlight).filter((p): p is Promise<void> => p !== undefined);
      if (this.refreshing) pending.push(this.refreshing);
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Runs a refresh now (what the timer does), resolving when it is done. */
  refreshNow(): Promise<void> {
    return this.runRefresh();
  }

  /** Stops the timer and abandons running fetches. */
  close(): void {
    this.abort.abort();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  // ---- fetching -------------------------------------------------------------------------------------

  private async getWithRetry(uri: string, retries: number, timeoutMs: number): Promise<string> {
    for (let i = 0; ; i++) {
      try {
        const body = await fetchDocument(uri, {
          timeoutMs,
          insecureSkipVerify: this.o.insecureSkipVerify,
          ...(this.ca ? { ca: this.ca } : {}),
          signal: this.abort.signal,
        });
        networkFetchSuccess.inc();
        return body;
      } catch (err) {
        networkFetchFail.inc();
        if (i >= retries || this.abort.signal.aborted) throw err;
        log.warn(`Failed to GET from ${JSON.stringify(uri)}: ${(err as Error).message}. Retry in ${this.o.retryIntervalMs}ms`);
        await sleep(this.o.retryIntervalMs, this.abort.signal);
      }
    }
  }

  /** The key-set URI of a pair: as configured, or from the issuer's OpenID discovery document. */
  private async resolveUri(e: Entry, retries: number): Promise<string> {
    if (e.jwksUri !== '') return e.jwksUri;
    const doc = await this.getWithRetry(e.issuer + OPENID_DISCOVERY_SUFFIX, retries, e.timeoutMs);
    let uri: unknown;
    try {
      uri = (JSON.parse(doc) as { jwks_uri?: unknown }).jwks_uri;
    } catch (err) {
      throw new Error(`invalid openID discovery configuration from ${e.issuer}${OPENID_DISCOVERY_SUFFIX}: ${(err as Error).message}`);
    }
    if (typeof uri !== 'string' || uri === '') throw new Error(`invalid jwks_uri ${JSON.stringify(uri)} in openID discovery configuration`);
    return uri;
  }

  /** A fetched key set, validated so that a broken document is never inlined (the proxy would reject it). */
  private async fetchKeys(e: Entry, retries: number): Promise<string> {
    const uri = await this.resolveUri(e, retries);
    const body = await this.getWithRetry(uri, retries, e.timeoutMs);
    const bad = keySetError(body);
    if (bad) throw new Error(`the key set from ${JSON.stringify(uri)} is unusable: ${bad}`);
    return body;
  }

  /** The first fetch of a pair: one attempt, then Istio's background retries; a push when keys arrive. */
  private startFirstFetch(e: Entry): void {
    e.lastAttempt = this.o.now();
    const run = async () => {
      try {
        e.pubKey = await this.fetchKeys(e, 0);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        log.error(`Failed to fetch public key from ${JSON.stringify(e.jwksUri || e.issuer)}: ${(err as Error).message}`);
        // Istio hands a failed first fetch to its refresher, which retries and then re-arms its timer.
        try {
          e.pubKey = await this.fetchKeys(e, this.o.retriesOnRefresh);
          this.afterRefresh(false);
        } catch (err2) {
          if (this.abort.signal.aborted) return;
          this.refreshFailedCount++;
          log.error(`Failed to refresh JWT public key from ${JSON.stringify(e.jwksUri || e.issuer)}: ${(err2 as Error).message}`);
          e.lastAttempt = this.o.now();
          this.afterRefresh(true);
          return;
        }
      }
      if (this.abort.signal.aborted) return;
      e.lastRefreshed = this.o.now();
      this.changed();
    };
    e.inFlight = run().finally(() => {
      e.inFlight = undefined;
    });
  }

  private changed(): void {
    this.changeVersion++;
    this.keyChangedCount++;
    try {
      this.onChange?.();
    } catch (err) {
      log.error(`JWKS change callback failed: ${(err as Error).message}`);
    }
  }

  // ---- refreshing -----------------------------------------------------------------------------------

  private schedule(): void {
    if (this.abort.signal.aborted) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.runRefresh(), this.refreshIntervalMs);
    this.timer.unref?.();
  }

  private runRefresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    this.refreshing = this.refresh()
      .then(
        (hadError) => this.afterRefresh(hadError),
        () => this.afterRefresh(true),
      )
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  /**
   * Istio's refreshCache: a first failure moves the timer to the failure interval, repeated failures
   * double it up to an hour, a success restores the configured interval; the timer restarts.
   */
  private afterRefresh(hadError: boolean): void {
    if (hadError) {
      this.refreshIntervalMs = this.lastRefreshHadError
        ? Math.min(this.refreshIntervalMs * 2, JWT_PUB_KEY_REFRESH_ON_FAILURE_RESET_THRESHOLD_MS)
        : this.o.refreshIntervalOnFailureMs;
    } else {
      this.refreshIntervalMs = this.o.refreshIntervalMs;
    }
    this.lastRefreshHadError = hadError;
    this.schedule();
  }

  /** Refetches every cached pair; returns whether any fetch failed. Pushes once if any key set changed. */
  private async refresh(): Promise<boolean> {
    const now = this.o.now();
    let changed = false;
    let hadError = false;
    const work: Promise<void>[] = [];
    for (const [k, e] of this.entries) {
      // Unused or long-unrefreshable keys go, so the cache does not grow forever nor serve stale keys.
      if (now - e.lastUsed >= this.o.evictionMs || (e.pubKey !== '' && now - e.lastRefreshed >= this.o.evictionMs)) {
        log.info(
          `Removed cached JWT public key (lastRefreshed: ${new Date(e.lastRefreshed).toISOString()}, lastUsed: ${new Date(e.lastUsed).toISOString()}) from ${JSON.stringify(e.issuer)}`,
        );
        this.entries.delete(k);
        continue;
      }
      if (e.inFlight) continue;
      const old = e.pubKey;
      const job = (async () => {
        try {
          const fresh = await this.fetchKeys(e, this.o.retriesOnRefresh);
          if (this.abort.signal.aborted) return;
          e.lastRefreshed = this.o.now();
          if (keySetChanged(old, fresh)) {
            e.pubKey = fresh;
            changed = true;
            log.info(`Updated cached JWT public key from ${JSON.stringify(e.jwksUri || e.issuer)}`);
          }
        } catch (err) {
          if (this.abort.signal.aborted) return;
          hadError = true;
          this.refreshFailedCount++;
          // The last good keys stay in use: a key server outage must not turn into accepting tokens,
          // nor into rejecting tokens that the known keys still verify.
          log.error(`Failed to refresh JWT public key from ${JSON.stringify(e.jwksUri || e.issuer)}: ${(err as Error).message}`);
        }
      })();
      e.inFlight = job.finally(() => {
        e.inFlight = undefined;
      });
      work.push(e.inFlight);
    }
    await Promise.all(work);
    if (changed && !this.abort.signal.aborted) this.changed();
    return hadError;
  }
}
