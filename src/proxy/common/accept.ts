// How listening sockets take connections in: the listen backlog, and accepting a burst of connections promptly.
//
// Backlog. Envoy listens with Listener.tcp_backlog_size, or else net.core.somaxconn on Linux and 128 elsewhere; Node's
// own default is 511. When the accept queue is full the kernel drops the SYN (or the handshake's last ACK), and the
// client tries again after 1, 3, 7, 15 s: 1000 connections opened at once through a 511 backlog see connect times of
// seconds, and time-outs, although nothing else is wrong.
//
// Bursts. libuv 1.45 and later (Node 20) accept one connection per listening socket per turn of the event loop (libuv
// #3696), and a turn first serves every connection that has bytes ready. With hundreds of busy keep-alive connections a
// turn costs tens of milliseconds, more on a contended core, so connections arriving in a burst wait in the accept queue
// for seconds — 1000 connections opened at once while the first ones are already busy: the last waited 7 s on a quiet
// 2-core machine and more than 10 s on a busy one (issue 16, item 7). Envoy accepts every pending connection per socket
// event (max_connections_to_accept_per_socket_event unset). The engine comes close: once connections were accepted in
// PARK_AFTER_TURNS consecutive turns (so the accept queue was not empty), the HTTP/1 codec parks what it reads instead
// of handling it, until a turn passes without an accept (the queue is empty), PARK_MAX_ACCEPTS were accepted or
// PARK_MAX_MS passed. The turns in between cost microseconds, so the queue empties at thousands of connections a
// second; then the parked bytes are handled, in the order they arrived. An isolated new connection, the usual case,
// never parks anything. The limits keep connections arriving without end from starving the established ones; they
// are counted in accepts first, as Envoy's per-event batch, because on a contended core wall time says little: a
// gateway given a seventh of a core took its 250 ms of parking in two or three turns and accepted a few connections a
// second.
import { readFileSync } from 'node:fs';

/** Consecutive turns with an accept before the codec parks its work. */
export const PARK_AFTER_TURNS = 2;
/** Parked work waits at most for this many accepts, or this long, even while connections keep arriving. */
export const PARK_MAX_ACCEPTS = 1024;
export const PARK_MAX_MS = 1000;

let somaxconn: number | undefined;

/** The kernel's limit on accept queues (net.core.somaxconn) on Linux, 128 elsewhere or when it cannot be read. */
export function kernelSomaxconn(): number {
  if (somaxconn === undefined) {
    somaxconn = 128;
    if (process.platform === 'linux') {
      try {
        const n = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim());
        if (Number.isInteger(n) && n > 0) somaxconn = n;
      } catch {
        // no procfs: Envoy's fallback
      }
    }
  }
  return somaxconn;
}

/** The listen backlog for a listener: its tcp_backlog_size, else the kernel's somaxconn (Envoy's default). */
export function listenBacklog(tcpBacklogSize: number | undefined): number {
  if (tcpBacklogSize !== undefined && tcpBacklogSize > 0) return Math.min(tcpBacklogSize, 0x7fffffff);
  return kernelSomaxconn();
}

/** Work parked during an accept burst: unpark() handles it. */
export interface Parked {
  unpark(): void;
}

function endOfTurn(p: AcceptPacer): void {
  p.endOfTurn();
}

/** Watches accepts turn by turn and says when downstream work should be parked (see the header). */
export class AcceptPacer {
  /** Downstream bytes should be parked now. */
  parking = false;
  private acceptsThisTurn = 0;
  private turnsWithAccepts = 0;
  private watching = false;
  private parkedSince = 0;
  private parkedAccepts = 0;
  private queue: Parked[] = [];

  constructor(
    /** Consecutive turns with an accept before parking (Infinity: never park, as Node alone would). */
    public afterTurns = PARK_AFTER_TURNS,
    public maxMs = PARK_MAX_MS,
    public maxAccepts = PARK_MAX_ACCEPTS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A listener accepted a connection (called from the 'connection' event, in the poll phase of a turn). */
  accepted(): void {
    this.acceptsThisTurn++;
    if (!this.watching) {
      this.watching = true;
      // the check phase of this turn, after its poll phase; the next one runs in the next turn
      setImmediate(endOfTurn, this);
    }
  }

  /** Queues work until parking ends (each Parked once, by its owner). */
  park(p: Parked): void {
    this.queue.push(p);
  }

  /** Parked work waiting. */
  get parked(): number {
    return this.queue.length;
  }

  endOfTurn(): void {
    const n = this.acceptsThisTurn;
    this.acceptsThisTurn = 0;
    if (n === 0) {
      // the listener had nothing to accept this turn: the queue is empty
      this.watching = false;
      this.turnsWithAccepts = 0;
      if (this.parking) this.release();
      return;
    }
    this.turnsWithAccepts++;
    if (!this.parking) {
      if (this.turnsWithAccepts >= this.afterTurns) {
        this.parking = true;
        this.parkedSince = this.now();
        this.parkedAccepts = 0;
      }
    } else if ((this.parkedAccepts += n) >= this.maxAccepts || this.now() - this.parkedSince >= this.maxMs) {
      // parked long enough: serve it, and park again at the next turn with an accept
      this.release();
    }
    setImmediate(endOfTurn, this);
  }

  private release(): void {
    this.parking = false;
    const q = this.queue;
    this.queue = [];
    for (const p of q) p.unpark();
  }
}

/** The engine's pacer: every listener reports its accepts, every HTTP/1 connection asks it whether to park. */
export const acceptPacer = new AcceptPacer();
