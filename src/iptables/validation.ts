// --run-validation: proves that capture works in the current network namespace, the way Istio's
// validation init container does. We listen where redirected traffic lands (the proxy's outbound
// and inbound ports on loopback) and connect to the probe port on the proxy's passthrough address
// (127.0.0.6 / ::6). Nothing listens there, so the connection can only reach us if iptables
// redirected it. Istio reads SO_ORIGINAL_DST to recognise its probe; Node cannot, so the client
// sends a random token instead and the listener waits for that token.

import { randomBytes } from 'node:crypto';
import net from 'node:net';

export interface ValidationOptions {
  /** Probe the IPv6 path (the pod's address is IPv6). */
  readonly ipv6: boolean;
  /** Where redirected connections land: the proxy port and the inbound capture port. */
  readonly listenPorts: readonly number[];
  /** The original destination port of the probe connection. */
  readonly probePort: number;
  readonly timeoutMs: number;
}

/**
 * Istio's message for a pod whose capture is not in place (renamed), word for word: it is what the
 * validation init container leaves as its termination message, and what
 * --repair-init-container-termination-message can be set to match.
 */
export const VALIDATION_FAILURE_MESSAGE =
  'iptables validation failed; workload is not ready for Mesh.\n' +
  'When using Mesh CNI, this can occur if a pod is scheduled before the node is ready.\n' +
  '\n' +
  "If installed with 'cni.repair.deletePods=true', this pod should automatically be deleted and retry.\n" +
  'Otherwise, this pod will need to be manually removed so that it is scheduled on a node with mesh-cni running, allowing iptables rules to be established.\n';

export class ValidationError extends Error {
  constructor(readonly detail: string) {
    super(VALIDATION_FAILURE_MESSAGE);
    this.name = 'ValidationError';
  }
}

/** Delay between probe attempts; short, since each failed attempt is an immediate refusal. */
const RETRY_MS = 100;

export async function validateCapture(opts: ValidationOptions): Promise<void> {
  const listenHost = opts.ipv6 ? '::1' : '127.0.0.1';
  const target = opts.ipv6 ? '::6' : '127.0.0.6';
  const token = randomBytes(16).toString('hex');
  const servers: net.Server[] = [];
  const sockets = new Set<net.Socket>();
  let done = false;
  let lastError = 'no connection attempt finished';

  const redirected = new Promise<void>((resolve) => {
    const onConnection = (sock: net.Socket) => {
      sockets.add(sock);
      let received = '';
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => {
        received += d;
        if (received.includes(token)) resolve();
      });
      sock.on('error', () => {});
      sock.on('close', () => sockets.delete(sock));
    };
    for (const port of opts.listenPorts) servers.push(net.createServer(onConnection));
  });

  const listening = await Promise.all(
    servers.map(
      (s, i) =>
        new Promise<boolean>((resolve) => {
          s.once('error', () => resolve(false));
          s.listen({ host: listenHost, port: opts.listenPorts[i] }, () => resolve(true));
        }),
    ),
  );
  try {
    if (!listening.some(Boolean)) {
      throw new ValidationError(`cannot listen on ${listenHost} ports ${opts.listenPorts.join(', ')}`);
    }

    const attempt = (): Promise<void> =>
      new Promise((resolve) => {
        const sock = net.connect({ host: target, port: opts.probePort, localAddress: listenHost });
        sockets.add(sock);
        sock.once('connect', () => sock.end(token));
        sock.once('error', (err) => {
          lastError = `${target}:${opts.probePort}: ${err.message}`;
        });
        sock.once('close', () => {
          sockets.delete(sock);
          resolve();
        });
      });

    const probing = (async () => {
      while (!done) {
        await attempt();
        if (!done) await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    })();

    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), opts.timeoutMs);
    });
    const outcome = await Promise.race([redirected.then(() => 'redirected' as const), expired]);
    done = true;
    clearTimeout(timer);
    for (const s of sockets) s.destroy();
    await probing;
    if (outcome === 'expired') {
      throw new ValidationError(
        `a connection to ${target}:${opts.probePort} was not redirected to ${listenHost} ports ` +
          `${opts.listenPorts.join('/')} within ${opts.timeoutMs} ms (last attempt: ${lastError})`,
      );
    }
  } finally {
    done = true;
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((r) => (s.listening ? s.close(() => r()) : r()))));
  }
}
