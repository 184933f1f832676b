// One ADS stream: the proxy it serves, its watches, and a serial task chain so requests and pushes for the
// same stream never interleave (Istio handles both on one goroutine per stream).
import * as grpc from '@grpc/grpc-js';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import type { Proxy } from '../../discovery/model';
import { orderTypes } from '../../lib/xds/type-urls';
import { watchInfo, type WatchInfo, type WatchState } from './watch';

export type StreamKind = 'sotw' | 'delta';
export type ListenerKind = 'plaintext' | 'tls';
export type SendResult = 'ok' | 'closed' | 'timeout' | 'error';

/** Debug view of a connection (adsz, syncz, connections). */
export interface ConnectionInfo {
  /** Istio's connection ID: `<proxy id>-<counter>`. */
  conId: string;
  /** Same as conId (the daemon's XdsConnectionInfo name). */
  id: string;
  peer: string;
  /** Same as peer (the daemon's XdsConnectionInfo name). */
  peerAddress: string;
  kind: StreamKind;
  listener: ListenerKind;
  proxy: Proxy;
  /** ms since epoch. */
  connectedAt: number;
  /** Verified identities of the peer (TLS client certificate URI SANs), when authenticated. */
  identities?: string[];
  /** Version of the last push (or initial state) this connection was served from. */
  pushVersion: string;
  /** Watched types in push order. */
  watches: WatchInfo[];
  /** Same as watches (the daemon's XdsConnectionInfo name). */
  watched: WatchInfo[];
}

type AnyDuplex = grpc.ServerDuplexStream<unknown, unknown>;

/**
 * Bytes of responses being written, across every stream of a server. When a thousand proxies connect at once
 * each is owed megabytes of initial config; encoding all of it before the transport has taken any holds it
 * all in memory at once (gigabytes), though the proxies can only read so fast. A response is encoded only
 * once its size fits in the budget beside the writes in progress (first come, first served; one larger than
 * the whole budget waits until nothing else is being written). A write that takes longer than `holdMs` (a
 * proxy that stopped reading) gives its share back, so a few stuck proxies cannot stall everyone.
 */
/**
 * Default SendBudget of a server: about a dozen initial responses of a large mesh at a time. Each written
 * response lives twice in malloc'd memory (our encoding until the next GC, grpc-js's framed copy until the
 * socket took it), and freed malloc memory is not given back while the storm lasts: at 64 MB the daemon's RSS
 * peaked ~300 MB higher at 200 connecting proxies (870 vs 567 MB) and they got their config no sooner, as
 * proxies read no faster than that.
 */
export const SEND_BUDGET_BYTES = 16 * 1024 * 1024;

/** Bytes of slow writes that may stop counting against a SendBudget, in budgets. */
const STALLED_BUDGETS = 4;

export class SendBudget {
  private used = 0;
  /** Bytes of writes past holdMs that gave their share back. */
  private stalled = 0;
  private readonly waiting: Array<{ bytes: number; grant: () => void }> = [];

  constructor(
    readonly capacity: number,
    private readonly holdMs = 5_000,
  ) {}

  /** Resolves with a release function once `bytes` may be written. */
  async acquire(bytes: number): Promise<() => void> {
    // A waiter's bytes are counted by grant() when it is let through.
    if (this.waiting.length > 0 || !this.fits(bytes)) await new Promise<void>((grant) => this.waiting.push({ bytes, grant }));
    else this.used += bytes;
    let state: 'held' | 'stalled' | 'done' = 'held';
    const release = (): void => {
      if (state === 'done') return;
      clearTimeout(timer);
      if (state === 'held') {
        this.used -= bytes;
        this.grant();
      } else {
        this.stalled -= bytes;
      }
      state = 'done';
    };
    // Slow writes give their share back, as long as what they hold stays within a few budgets: when every
    // proxy stops reading, nothing more is encoded.
    const timer = setTimeout(() => {
      if (state !== 'held' || this.stalled + bytes > STALLED_BUDGETS * this.capacity) return;
      state = 'stalled';
      this.used -= bytes;
      this.stalled += bytes;
      this.grant();
    }, this.holdMs);
    timer.unref();
    return release;
  }

  /** Bytes granted and not yet released. */
  inUse(): number {
    return this.used;
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.capacity;
  }

  private grant(): void {
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.bytes)) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.grant();
    }
  }
}

export class XdsConnection<P> {
  conId = '';
  proxy: Proxy | undefined;
  node: Node | undefined;
  identities: readonly string[] | undefined;
  readonly watches = new Map<string, WatchState>();
  /** Push context and response version this connection currently answers from. */
  lastPush: { push: P; version: string } | undefined;
  closed = false;
  /** Settles with whether the connection hook accepted the proxy (set once it ran). */
  hooked: Promise<boolean> | undefined;
  /** Cleanup ran (removed from the server's tables). */
  released = false;

  private chain: Promise<void> = Promise.resolve();
  private readonly pendingSends = new Set<(r: SendResult) => void>();

  constructor(
    readonly kind: StreamKind,
    readonly call: AnyDuplex,
    readonly peer: string,
    readonly listener: ListenerKind,
    readonly connectedAt: number,
    private readonly onTaskError: (err: unknown) => void,
    private readonly budget?: SendBudget,
  ) {}

  get initialized(): boolean {
    return this.proxy !== undefined;
  }

  /** Runs `task` after every task queued before it. */
  run(task: () => Promise<void> | void): Promise<void> {
    const next = this.chain.then(async () => {
      if (this.closed) return;
      try {
        await task();
      } catch (err) {
        this.onTaskError(err);
      }
    });
    this.chain = next;
    return next;
  }

  /** Resolves once every task queued so far has finished. */
  idle(): Promise<void> {
    return this.chain;
  }

  /**
   * Writes one response and waits until grpc-js has handed it to the transport (flow control applies), the
   * stream closes, or `timeoutMs` (0: none) passes.
   */
  send(message: unknown, timeoutMs: number): Promise<SendResult> {
    if (this.closed) return Promise.resolve('closed');
    return new Promise<SendResult>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (r: SendResult): void => {
        if (!this.pendingSends.delete(finish)) return;
        if (timer) clearTimeout(timer);
        resolve(r);
      };
      this.pendingSends.add(finish);
      if (timeoutMs > 0) timer = setTimeout(() => finish('timeout'), timeoutMs);
      try {
        // grpc-js never calls back for a write on a cancelled call; markClosed() settles those.
        this.call.write(message, (err: unknown) => finish(err ? 'error' : 'ok'));
      } catch {
        finish('error');
      }
    });
  }

  /**
   * send() for a response of about `bytes` that `encode` builds: encoded only once the server's send budget
   * has room for it, and counted against the budget until the transport has taken it.
   */
  async sendWithin(bytes: number, encode: () => unknown, timeoutMs: number): Promise<SendResult> {
    if (!this.budget) return this.send(encode(), timeoutMs);
    const release = await this.budget.acquire(bytes);
    try {
      if (this.closed) return 'closed';
      return await this.send(encode(), timeoutMs);
    } finally {
      release();
    }
  }

  /** The stream is gone (cancelled, errored, finished): settle pending writes. */
  markClosed(): void {
    this.closed = true;
    for (const finish of [...this.pendingSends]) finish('closed');
  }

  /** Ends the stream from the server side with a status. */
  end(code: grpc.status, details: string): void {
    if (this.closed) return;
    this.markClosed();
    try {
      if (code === grpc.status.OK) this.call.end();
      else this.call.emit('error', { code, details, metadata: new grpc.Metadata() });
    } catch {
      // Already torn down by the transport.
    }
  }

  info(): ConnectionInfo | undefined {
    if (!this.proxy) return undefined;
    const watches = orderTypes(this.watches.keys()).map((t) => watchInfo(this.watches.get(t) as WatchState));
    return {
      conId: this.conId,
      id: this.conId,
      peer: this.peer,
      peerAddress: this.peer,
      kind: this.kind,
      listener: this.listener,
      proxy: this.proxy,
      connectedAt: this.connectedAt,
      identities: this.identities ? [...this.identities] : undefined,
      pushVersion: this.lastPush?.version ?? '',
      watches,
      watched: watches,
    };
  }
}
