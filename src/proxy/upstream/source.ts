// Envoy's original_src listener filter, upstream half. The filter gives an accepted connection socket options
// that every upstream connection made for it inherits: bind to the downstream's IP with port 0 (the kernel picks
// the port), IP_TRANSPARENT (binding to an address that is not local) and SO_MARK = mark, so the workload sees
// its real caller and its replies (marked again by the CONNMARK rules of mesh-iptables' TPROXY mode and routed
// by `ip rule fwmark 1337 lookup 133`) come back to the proxy. Node cannot set these before bind(): the native
// addon makes the socket and libuv connects it. Options make a different connection, so upstream pools are kept
// per source address (Envoy hashes socket options into the pool key).
import net from 'node:net';
import { ipFamily } from '../../lib/ip';
import type { Logger } from '../log';

/** Where an upstream connection made for one downstream connection leaves from. */
export interface UpstreamSource {
  /** The downstream's IP (port 0 is bound). */
  readonly address: string;
  /** SO_MARK; 0 sets none. */
  readonly mark: number;
  readonly binder: SourceBinder;
}

/** The pool key part for a source: connections from different downstream addresses are never shared. */
export function sourcePoolKey(src: UpstreamSource | undefined): string {
  return src ? `${src.address}/${src.mark}` : '';
}

/** Makes transparent sockets through the native addon (one per engine thread). */
export class SourceBinder {
  private warned = false;

  constructor(
    /** The addon's transparentSocket (a descriptor, or throws); undefined where it is not available. */
    private readonly make: ((source: string, mark: number) => number) | undefined,
    /** Why it is not available (for the listener's warning). */
    readonly unavailable: string | undefined,
    private readonly log: Logger,
  ) {}

  get available(): boolean {
    return this.make !== undefined;
  }

  /**
   * A socket connecting to `host:port` from the source. When the socket cannot be made (no CAP_NET_ADMIN, the
   * families differ, no free port) the connection fails, as Envoy fails a connection whose socket options cannot
   * be applied: the error comes asynchronously, like any connect error, and the first one is logged as a warning.
   */
  connect(src: UpstreamSource, host: string, port: number): net.Socket {
    let fd: number;
    try {
      if (!this.make) throw new Error(this.unavailable ?? 'transparent sockets are not available');
      const family = ipFamily(src.address);
      if (family !== ipFamily(host)) {
        throw Object.assign(new Error(`the downstream address ${src.address} and the upstream ${host} are of different IP families`), {
          code: 'EAFNOSUPPORT',
        });
      }
      fd = this.make(src.address, src.mark);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      const text = `original_src: cannot make an upstream socket from ${src.address} (mark ${src.mark}) to ${host}:${port}: ${err.message}`;
      if (!this.warned) {
        this.warned = true;
        this.log.warn(`${text}; such upstream connections fail (as Envoy's do when socket options cannot be applied)`);
      } else this.log.debug(text);
      const failed = new net.Socket();
      process.nextTick(() => failed.destroy(Object.assign(new Error(text), { code: err.code ?? 'EINVAL' })));
      return failed;
    }
    // manualStart: no read before the connection is up (libuv would poll an unconnected socket); connect() starts it
    const socket = new net.Socket({ fd, manualStart: true } as net.SocketConstructorOpts);
    socket.setNoDelay(true);
    socket.connect({ host, port });
    return socket;
  }
}
