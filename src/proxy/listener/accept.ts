// How listening sockets take connections in: the listen backlog.
//
// Backlog. Envoy listens with Listener.tcp_backlog_size, or else net.core.somaxconn on Linux and 128 elsewhere; Node's
// own default is 511. When the accept queue is full the kernel drops the SYN (or the handshake's last ACK), and the
// client tries again after 1, 3, 7, 15 s: 1000 connections opened at once through a 511 backlog see connect times of
// seconds, and time-outs, although nothing else is wrong.
import { readFileSync } from 'node:fs';

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
