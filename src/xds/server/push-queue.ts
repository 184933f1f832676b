// Istio's PushQueue: one entry per connection. Enqueueing a connection that is already waiting merges the
// requests; enqueueing one that is being pushed parks the request and re-queues the connection when the
// current push is marked done. So a connection is never pushed twice at once and bursts collapse.
import type { PushRequest } from '../types';
import { mergePushRequests } from './push-request';

/** A push for one connection: the request and the response version assigned at dispatch. */
export interface QueuedPush<P> {
  req: PushRequest<P>;
  version: string;
  /** When the connection first entered the queue for this (merged) push, ms since epoch. */
  enqueuedAt: number;
}

function mergeQueued<P>(a: QueuedPush<P>, b: QueuedPush<P>): QueuedPush<P> {
  return { req: mergePushRequests(a.req, b.req), version: b.version, enqueuedAt: Math.min(a.enqueuedAt, b.enqueuedAt) };
}

export class PushQueue<C, P> {
  private readonly pendingByCon = new Map<C, QueuedPush<P>>();
  private readonly order: C[] = [];
  private head = 0;
  /** Dequeued but not done; the value is a push that arrived meanwhile. */
  private readonly inProgress = new Map<C, QueuedPush<P> | undefined>();

  enqueue(con: C, push: QueuedPush<P>): void {
    const waiting = this.pendingByCon.get(con);
    if (waiting) {
      this.pendingByCon.set(con, mergeQueued(waiting, push));
      return;
    }
    if (this.inProgress.has(con)) {
      const parked = this.inProgress.get(con);
      this.inProgress.set(con, parked ? mergeQueued(parked, push) : push);
      return;
    }
    this.pendingByCon.set(con, push);
    this.order.push(con);
  }

  dequeue(): { con: C; push: QueuedPush<P> } | undefined {
    while (this.head < this.order.length) {
      const con = this.order[this.head++] as C;
      const push = this.pendingByCon.get(con);
      if (!push) continue; // removed while waiting
      this.pendingByCon.delete(con);
      this.inProgress.set(con, undefined);
      this.compact();
      return { con, push };
    }
    this.compact();
    return undefined;
  }

  markDone(con: C): void {
    if (!this.inProgress.has(con)) return;
    const parked = this.inProgress.get(con);
    this.inProgress.delete(con);
    if (parked) this.enqueue(con, parked);
  }

  /** Forgets a connection (closed): its waiting push is dropped. */
  remove(con: C): void {
    this.pendingByCon.delete(con);
    if (this.inProgress.has(con)) this.inProgress.set(con, undefined);
  }

  /** Drops every waiting push (shutdown). Pushes in progress are unaffected. */
  clear(): void {
    this.pendingByCon.clear();
    this.order.length = 0;
    this.head = 0;
    for (const con of this.inProgress.keys()) this.inProgress.set(con, undefined);
  }

  /** Connections waiting to be pushed. */
  pending(): number {
    return this.pendingByCon.size;
  }

  /** Connections being pushed now. */
  processing(): number {
    return this.inProgress.size;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order.splice(0, this.head);
      this.head = 0;
    }
  }
}
